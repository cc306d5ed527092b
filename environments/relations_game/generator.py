"""`RelationsGame`: the seeded NumPy generator of Relations Game examples (Shanahan et al. 2020).

Every binary task is balanced 50/50; negatives are "tricky": a differing object is a variant of
the object it is compared with, uniformly ``DIFF_COLOUR``, ``DIFF_SHAPE`` or ``DIFF_BOTH``
(stripes only vary in colour).
"""

import numpy as np

from keras_relational.validation import (
    check_int_at_least,
    check_int_in_range,
    check_one_of,
    invalid_value,
)

from .. import polyominoes
from .rendering import IMAGE_SIZE, GameObject, render
from .tasks import (
    CELLS,
    DIFF_BOTH,
    DIFF_COLOUR,
    DIFF_KINDS,
    DIFF_SHAPE,
    LINES,
    PATTERNS,
    between_holds,
    check_task,
    num_classes,
    num_task_ids,
)

# The generator's options that change one task each: {option: (task, choices)}, the first
# choice the default (the spec's reading; RelationsGame documents each).
TASK_OPTIONS = {"xoccurs_negatives": ("xoccurs", ("exclusive", "both_readings")),
                "colour_shape_layout": ("colour_and_or_shape", ("random", "column_pair")),
                "occurs_distractors": ("occurs", ("variants", "one_variant"))}


class RelationsGame:
    """Seeded generator of one Relations Game task on one object set.

    Args:
        task: one of ``TASKS`` (see the module docstring for labels).
        object_set: ``"pentominoes"`` (training), ``"hexominoes"`` or ``"stripes"`` (held out).
        seed: seed of the generator's own ``np.random.Generator``; equal seeds give equal data.
        middle_row_weight: ``between`` picks its line with the middle row this many times as likely
            as each other line (2 matches the authors' released data; 1 is uniform).
        between_line_fraction: fraction of ``between`` negatives laid out in a line with a
            variant at one end (0.75, measured on the released data); the rest are 3 random
            objects anywhere.
        xoccurs_negatives: ``"exclusive"`` (default, our reading [A]): half the negatives have no
            copy of the top object and half have two (a third, with probability 0.1), so the
            label means "occurs exactly once". ``"both_readings"``: half none, half three copies,
            so that the reading "the other two differ from each other" gives the same labels.
        colour_shape_layout: ``"random"`` (default, the paper: "randomly placed") or
            ``"column_pair"`` (rows 0 and 2 of one column, as in two released samples).
        occurs_distractors: the bottom objects of ``occurs`` that are not copies of the top one.
            ``"variants"`` (default): each an independent variant of it, of a uniformly random
            kind, in both classes. ``"one_variant"``: a negative has one variant (uniform kind)
            and the other bottom objects, in both classes, are random objects other than the
            top one, as the middle object of ``between`` in the released data.
        num_objects: number of objects in ``same`` images (default 2); extra objects are
            distinct from each other and, in negatives, from the pair.
    """

    def __init__(self, task, object_set="pentominoes", seed=None, middle_row_weight=2,
                 between_line_fraction=0.75, xoccurs_negatives="exclusive",
                 colour_shape_layout="random", num_objects=2, occurs_distractors="variants"):
        self.task = check_task(task)
        check_one_of("object_set", object_set, polyominoes.OBJECT_SETS)
        if task == "colour_and_or_shape" and object_set == "stripes":
            raise invalid_value("object_set", "pentominoes or hexominoes for "
                                "'colour_and_or_shape' (stripes never vary in shape)", object_set)
        check_one_of("middle_row_weight", middle_row_weight, (1, 2))
        if not 0.0 <= between_line_fraction <= 1.0:
            raise invalid_value("between_line_fraction", "a value in [0, 1]",
                                between_line_fraction)
        check_one_of("xoccurs_negatives", xoccurs_negatives, TASK_OPTIONS["xoccurs_negatives"][1])
        check_one_of("colour_shape_layout", colour_shape_layout,
                     TASK_OPTIONS["colour_shape_layout"][1])
        check_one_of("occurs_distractors", occurs_distractors,
                     TASK_OPTIONS["occurs_distractors"][1])
        if isinstance(num_objects, bool) or not isinstance(num_objects, int):
            raise invalid_value("num_objects", "an integer in [2, 9]", num_objects)
        check_int_in_range("num_objects", num_objects, 2, 9)
        self.object_set = object_set
        self.seed = seed
        self.middle_row_weight = middle_row_weight
        self.between_line_fraction = between_line_fraction
        self.xoccurs_negatives = xoccurs_negatives
        self.colour_shape_layout = colour_shape_layout
        self.occurs_distractors = occurs_distractors
        self.num_objects = num_objects
        self._rng = np.random.default_rng(seed)
        self._bases = polyominoes.bases(object_set)
        self._colours = [tuple(int(v) for v in c) for c in polyominoes.colours(object_set)]
        self._striped = object_set == "stripes"
        weights = np.ones(len(LINES))
        weights[1] = middle_row_weight
        self._line_probabilities = weights / weights.sum()

    @property
    def num_classes(self):
        return num_classes(self.task)

    @property
    def num_task_ids(self):
        return num_task_ids(self.task)

    # Objects ------------------------------------------------------------------------------

    def _colour(self):
        return self._colours[self._rng.integers(len(self._colours))]

    def _mask(self):
        base = self._bases[self._rng.integers(len(self._bases))]
        return polyominoes.dihedral(base, int(self._rng.integers(8)))

    def random_object(self):
        """A uniformly random free shape, a random dihedral transform, a random colour."""
        if self._striped:
            return GameObject(polyominoes.SQUARE, self._colour(), self._colour())
        colour = self._colour()
        return GameObject(self._mask(), colour, colour)

    def variant(self, obj, kind=None):
        """An object that differs from ``obj`` in the way ``kind`` says (random kind if None)."""
        kind = DIFF_KINDS[self._rng.integers(3)] if kind is None else kind
        if self._striped:  # only the colour pair can differ
            while True:
                new = GameObject(obj.mask, self._colour(), self._colour())
                if new.key() != obj.key():
                    return new
        mask, colour = obj.mask, obj.outer
        if kind in (DIFF_SHAPE, DIFF_BOTH):
            while True:
                mask = self._mask()
                if not np.array_equal(mask, obj.mask):
                    break
        if kind in (DIFF_COLOUR, DIFF_BOTH):
            while True:
                colour = self._colour()
                if colour != obj.outer:
                    break
        return GameObject(mask, colour, colour)

    def _distinct_variant(self, reference, others):
        """A variant of ``reference`` different from every object in ``others``."""
        while True:
            new = self.variant(reference)
            if all(new.key() != o.key() for o in others):
                return new

    def _cells(self, count):
        chosen = self._rng.choice(len(CELLS), size=count, replace=False)
        return [CELLS[i] for i in chosen]

    def _line(self):
        line = LINES[self._rng.choice(len(LINES), p=self._line_probabilities)]
        return line if self._rng.integers(2) else line[::-1]

    def _pattern_objects(self, pattern):
        """Three objects whose equality structure is ``pattern`` (e.g. "ABA")."""
        first = self.random_object()
        by_letter = {"A": first}
        for letter in pattern:
            if letter not in by_letter:
                by_letter[letter] = self._distinct_variant(first, list(by_letter.values()))
        return [by_letter[letter] for letter in pattern]

    # Tasks --------------------------------------------------------------------------------

    def _same(self, positive):
        cells = self._cells(self.num_objects)
        a = self.random_object()
        b = GameObject(a.mask, a.outer, a.middle) if positive else self.variant(a)
        objects = [a, b]
        while len(objects) < self.num_objects:
            objects.append(self._distinct_variant(a, objects))
        return dict(zip(cells, objects, strict=True)), int(positive), 0

    def _between(self, positive):
        if positive or self._rng.random() < self.between_line_fraction:
            line = self._line()
            a = self.random_object()
            end = a if positive else self.variant(a)
            return dict(zip(line, [a, self.random_object(), end], strict=True)), int(positive), 0
        while True:
            objects = dict(zip(self._cells(3), [self.random_object() for _ in range(3)],
                               strict=True))
            if not between_holds({cell: o.key() for cell, o in objects.items()}):
                return objects, 0, 0

    def _other_object(self, obj):
        """A random object that is not a copy of ``obj``."""
        while True:
            other = self.random_object()
            if other.key() != obj.key():
                return other

    def _occurs(self, positive, exclusive):
        top = self.random_object()
        if not exclusive and self.occurs_distractors == "one_variant":
            bottom = [self._other_object(top) for _ in range(3)]
            bottom[self._rng.integers(3)] = top if positive else self.variant(top)
        else:
            bottom = self._variant_bottom_row(top, positive, exclusive)
        objects = {(0, 1): top}
        objects.update({(2, col): obj for col, obj in enumerate(bottom)})
        return objects, int(positive), 0

    def _variant_bottom_row(self, top, positive, exclusive):
        """``occurs`` / ``xoccurs`` bottom objects: copies of ``top`` as the label needs, the
        others its variants."""
        bottom = [self.variant(top) for _ in range(3)]
        if exclusive and positive:
            bottom = [self._distinct_variant(top, [])]
            bottom.append(self._distinct_variant(top, bottom))
            bottom.append(top)
            self._rng.shuffle(bottom)
        elif positive:
            bottom[self._rng.integers(3)] = top
        elif exclusive and self._rng.random() < 0.5:
            if self.xoccurs_negatives == "both_readings":
                copies = 3
            else:
                copies = 3 if self._rng.random() < 0.1 else 2
            for i in self._rng.choice(3, size=copies, replace=False):
                bottom[i] = top
        return bottom

    def _colour_and_or_shape(self):
        label = int(self._rng.integers(4))
        a = self.random_object()
        kind = {1: DIFF_SHAPE, 2: DIFF_COLOUR, 3: DIFF_BOTH}.get(label)
        b = a if kind is None else self.variant(a, kind)
        if self.colour_shape_layout == "column_pair":
            col = int(self._rng.integers(3))
            cells = [(0, col), (2, col)]
            if self._rng.integers(2):
                cells = cells[::-1]
        else:
            cells = self._cells(2)
        return dict(zip(cells, [a, b], strict=True)), label, 0

    def _patterns(self, positive):
        task_id = int(self._rng.integers(self.num_task_ids))
        target = PATTERNS[task_id]
        pattern = target if positive else [p for p in PATTERNS if p != target][
            self._rng.integers(len(PATTERNS) - 1)]
        index = int(self._rng.integers(3))
        if self.task.startswith("row"):
            cells = [(index, c) for c in range(3)]
        else:
            cells = [(r, index) for r in range(3)]
        return dict(zip(cells, self._pattern_objects(pattern), strict=True)), int(positive), \
            task_id

    def _match_rows(self, positive):
        first = int(self._rng.integers(len(PATTERNS)))
        second = first if positive else (first + 1 + int(self._rng.integers(4))) % 5
        objects = {}
        for row, pattern in ((0, PATTERNS[first]), (2, PATTERNS[second])):
            objects.update({(row, c): o for c, o in enumerate(self._pattern_objects(pattern))})
        return objects, int(positive), 0

    def sample_objects(self):
        """One example as ``({(row, col): object}, label, task_id)``."""
        if self.task == "colour_and_or_shape":
            return self._colour_and_or_shape()
        positive = bool(self._rng.integers(2))
        if self.task == "same":
            return self._same(positive)
        if self.task == "between":
            return self._between(positive)
        if self.task in ("occurs", "xoccurs"):
            return self._occurs(positive, exclusive=self.task == "xoccurs")
        if self.task == "match_rows":
            return self._match_rows(positive)
        return self._patterns(positive)

    def sample(self, num_examples):
        """``num_examples`` examples as ``{"images": uint8 [n, 36, 36, 3], "labels": int64 [n],
        "tasks": int64 [n]}``; ``num_examples`` is an integer >= 1."""
        num_examples = check_int_at_least("num_examples", num_examples, 1)
        images = np.zeros((num_examples, IMAGE_SIZE, IMAGE_SIZE, 3), dtype=np.uint8)
        labels = np.zeros(num_examples, dtype=np.int64)
        tasks = np.zeros(num_examples, dtype=np.int64)
        for i in range(num_examples):
            objects, labels[i], tasks[i] = self.sample_objects()
            images[i] = render(objects)
        return {"images": images, "labels": labels, "tasks": tasks}


def generate(task, object_set="pentominoes", num_examples=1000, seed=None, **kwargs):
    """``RelationsGame(task, object_set, seed, **kwargs).sample(num_examples)``; ``num_examples``
    is an integer >= 1, checked before the generator is set up."""
    check_int_at_least("num_examples", num_examples, 1)
    return RelationsGame(task, object_set, seed=seed, **kwargs).sample(num_examples)
