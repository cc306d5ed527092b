"""The Relations Game (Shanahan et al. 2020, Sec. 3; spec Sec. 5): a seeded NumPy generator.

Images are ``[36, 36, 3]`` uint8 on a black background: a 3x3 grid of 12x12-pixel cells, at most
one object per cell. An object is a 3x3 array of 3x3-pixel blocks drawn at offset +1 inside its
cell (pixels 1..9), so each cell keeps a 1-pixel margin top/left and 2 pixels bottom/right.
Objects come from one of three sets (see ``polyominoes``): ``"pentominoes"`` (training),
``"hexominoes"`` and ``"stripes"`` (held out: no shape or colour in common with training).

Two objects are *identical* iff their 3x3 arrays (shape, orientation and placement inside the box)
and colours (for stripes the pair (A, B)) are equal.

Tasks (``TASKS``) and label meanings (``labels`` are ints; ``tasks`` is the task id of each
example, 0 for the single-task sets):

* ``same``: 2 objects; 1 iff they are identical.
* ``between``: 3 objects; 1 iff three objects lie in a line (row, column or diagonal) whose two
  outer objects are identical.
* ``occurs``: one object in the top-centre cell, three in the bottom row; 1 iff some bottom object
  is identical to the top one.
* ``xoccurs``: the same layout; 1 iff the top object occurs in the bottom row *exactly once* (the
  other two differ from it; in positives they also differ from each other). See
  ``xoccurs_negatives`` for the ambiguity.
* ``colour_and_or_shape`` (4 classes, pentominoes/hexominoes only): 2 objects;
  label = 1 * [shapes differ] + 2 * [colours differ], i.e. 0 identical, 1 same colour and
  different shape, 2 same shape and different colour, 3 both differ.
* ``row_patterns_3`` / ``column_patterns_3`` / ``row_patterns_5`` / ``column_patterns_5``: one
  line of 3 objects in a random row (column); task id t names a pattern (``PATTERNS[t]``:
  0 ABA, 1 AAB, 2 ABB, 3 AAA, 4 ABC, read left to right / top to bottom); 1 iff the line has it.
* ``match_rows``: 3 objects in each of rows 0 and 2; 1 iff both rows have the same pattern.

Every binary task is balanced 50/50; negatives are "tricky": a differing object is a variant of
the object it is compared with, uniformly ``DIFF_COLOUR``, ``DIFF_SHAPE`` or ``DIFF_BOTH`` (stripes
only vary in colour). :func:`parse_image` and :func:`oracle_label` decode images and compute
labels from pixels alone, independently of the generator.

Example:

```python
from keras_relational.environments import relations_game

data = relations_game.generate("between", "pentominoes", num_examples=1000, seed=0)
data["images"].shape, data["labels"][:5], data["tasks"][:5]   # (1000, 36, 36, 3), ...
```
"""

import numpy as np

from keras_relational.environments import polyominoes

IMAGE_SIZE = 36
CELL = 12  # pixels per grid cell
BLOCK = 3  # pixels per block of an object
OFFSET = 1  # object drawn at pixel +1 inside its cell
GRID = 3
DIFF_COLOUR, DIFF_SHAPE, DIFF_BOTH = "diff_colour", "diff_shape", "diff_both"
DIFF_KINDS = (DIFF_COLOUR, DIFF_SHAPE, DIFF_BOTH)
# Task-id order: 0 ABA, 1 AAB, 2 ABB verified on the released 3-task data; 3 AAA, 4 ABC chosen so
# that the 3-task ids are a prefix (spec Sec. 5.3).
PATTERNS = ("ABA", "AAB", "ABB", "AAA", "ABC")
TASKS = {
    # name: (number of classes, number of task ids)
    "same": (2, 1),
    "between": (2, 1),
    "occurs": (2, 1),
    "xoccurs": (2, 1),
    "colour_and_or_shape": (4, 1),
    "row_patterns_3": (2, 3),
    "column_patterns_3": (2, 3),
    "row_patterns_5": (2, 5),
    "column_patterns_5": (2, 5),
    "match_rows": (2, 1),
}
LINES = (  # rows, columns, diagonals; each a tuple of 3 (row, col) cells in reading order
    ((0, 0), (0, 1), (0, 2)), ((1, 0), (1, 1), (1, 2)), ((2, 0), (2, 1), (2, 2)),
    ((0, 0), (1, 0), (2, 0)), ((0, 1), (1, 1), (2, 1)), ((0, 2), (1, 2), (2, 2)),
    ((0, 0), (1, 1), (2, 2)), ((0, 2), (1, 1), (2, 0)),
)
CELLS = tuple((r, c) for r in range(GRID) for c in range(GRID))


def num_classes(task):
    """Number of labels of ``task`` (4 for ``colour_and_or_shape``, else 2)."""
    return TASKS[_check_task(task)][0]


def num_task_ids(task):
    """Number of distinct task ids in ``task``'s examples (patterns sets: 3 or 5, else 1)."""
    return TASKS[_check_task(task)][1]


def _check_task(task):
    if task not in TASKS:
        raise ValueError(f"`task`: expected one of {tuple(TASKS)}, received {task!r}.")
    return task


class _Object:
    """A 3x3 boolean ``mask`` with an ``outer`` colour and a ``middle``-column colour (equal for
    uniformly coloured objects; the stripe colours A and B for stripes)."""

    __slots__ = ("mask", "outer", "middle")

    def __init__(self, mask, outer, middle):
        self.mask, self.outer, self.middle = mask, outer, middle

    def key(self):
        return (self.mask.tobytes(), self.outer, self.middle)

    def blocks(self):
        """The ``[3, 3, 3]`` uint8 colour of every block (black where the mask is empty)."""
        colours = np.array([self.outer, self.middle, self.outer], dtype=np.uint8)  # per column
        return np.where(self.mask[:, :, None], colours[None, :, :], 0).astype(np.uint8)


def render(objects):
    """Draws ``{(row, col): _Object}`` onto a black ``[36, 36, 3]`` uint8 image."""
    image = np.zeros((IMAGE_SIZE, IMAGE_SIZE, 3), dtype=np.uint8)
    for (row, col), obj in objects.items():
        pixels = np.repeat(np.repeat(obj.blocks(), BLOCK, axis=0), BLOCK, axis=1)
        top, left = CELL * row + OFFSET, CELL * col + OFFSET
        image[top:top + 3 * BLOCK, left:left + 3 * BLOCK] = pixels
    return image


class RelationsGame:
    """Seeded generator of one Relations Game task on one object set.

    Args:
        task: one of ``TASKS`` (see the module docstring for labels).
        object_set: ``"pentominoes"`` (training), ``"hexominoes"`` or ``"stripes"`` (held out).
        seed: seed of the generator's own ``np.random.Generator``; equal seeds give equal data.
        middle_row_weight: ``between`` picks its line with the middle row this many times as likely
            as each other line (2 matches the released data, spec Sec. 5.3; 1 is uniform).
        between_line_fraction: fraction of ``between`` negatives laid out in a line with a
            variant at one end (0.75, spec Sec. 5.3); the rest are 3 random objects anywhere.
        xoccurs_negatives: ``"exclusive"`` (default, spec Sec. 5.3): half the negatives have no
            copy of the top object and half have two (a third, with probability 0.1), so the
            label means "occurs exactly once". ``"both_readings"``: half none, half three copies,
            so that the reading "the other two differ from each other" gives the same labels.
        colour_shape_layout: ``"random"`` (default, the paper: "randomly placed") or
            ``"column_pair"`` (rows 0 and 2 of one column, as in two released samples).
        num_objects: number of objects in ``same`` images (default 2); extra objects are
            distinct from each other and, in negatives, from the pair.
    """

    def __init__(self, task, object_set="pentominoes", seed=None, middle_row_weight=2,
                 between_line_fraction=0.75, xoccurs_negatives="exclusive",
                 colour_shape_layout="random", num_objects=2):
        self.task = _check_task(task)
        if object_set not in polyominoes.OBJECT_SETS:
            raise ValueError(f"`object_set`: expected one of {polyominoes.OBJECT_SETS}, "
                             f"received {object_set!r}.")
        if task == "colour_and_or_shape" and object_set == "stripes":
            raise ValueError("`object_set`: 'colour_and_or_shape' needs pentominoes or "
                             "hexominoes (stripes never vary in shape), received 'stripes'.")
        if middle_row_weight not in (1, 2):
            raise ValueError(f"`middle_row_weight`: expected 1 or 2, received "
                             f"{middle_row_weight!r}.")
        if not 0.0 <= between_line_fraction <= 1.0:
            raise ValueError(f"`between_line_fraction`: expected a value in [0, 1], received "
                             f"{between_line_fraction!r}.")
        if xoccurs_negatives not in ("exclusive", "both_readings"):
            raise ValueError("`xoccurs_negatives`: expected 'exclusive' or 'both_readings', "
                             f"received {xoccurs_negatives!r}.")
        if colour_shape_layout not in ("random", "column_pair"):
            raise ValueError("`colour_shape_layout`: expected 'random' or 'column_pair', "
                             f"received {colour_shape_layout!r}.")
        if isinstance(num_objects, bool) or not isinstance(num_objects, int) \
                or not 2 <= num_objects <= 9:
            raise ValueError(f"`num_objects`: expected an integer in [2, 9], received "
                             f"{num_objects!r}.")
        self.object_set = object_set
        self.seed = seed
        self.middle_row_weight = middle_row_weight
        self.between_line_fraction = between_line_fraction
        self.xoccurs_negatives = xoccurs_negatives
        self.colour_shape_layout = colour_shape_layout
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
            return _Object(polyominoes.SQUARE, self._colour(), self._colour())
        colour = self._colour()
        return _Object(self._mask(), colour, colour)

    def variant(self, obj, kind=None):
        """An object that differs from ``obj`` in the way ``kind`` says (random kind if None)."""
        kind = DIFF_KINDS[self._rng.integers(3)] if kind is None else kind
        if self._striped:  # only the colour pair can differ
            while True:
                new = _Object(obj.mask, self._colour(), self._colour())
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
        return _Object(mask, colour, colour)

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
        b = _Object(a.mask, a.outer, a.middle) if positive else self.variant(a)
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
            if not _between_holds({cell: o.key() for cell, o in objects.items()}):
                return objects, 0, 0

    def _occurs(self, positive, exclusive):
        top = self.random_object()
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
        objects = {(0, 1): top}
        objects.update({(2, col): obj for col, obj in enumerate(bottom)})
        return objects, int(positive), 0

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
        "tasks": int64 [n]}``."""
        images = np.zeros((num_examples, IMAGE_SIZE, IMAGE_SIZE, 3), dtype=np.uint8)
        labels = np.zeros(num_examples, dtype=np.int64)
        tasks = np.zeros(num_examples, dtype=np.int64)
        for i in range(num_examples):
            objects, labels[i], tasks[i] = self.sample_objects()
            images[i] = render(objects)
        return {"images": images, "labels": labels, "tasks": tasks}


def generate(task, object_set="pentominoes", num_examples=1000, seed=None, **kwargs):
    """``RelationsGame(task, object_set, seed, **kwargs).sample(num_examples)``."""
    return RelationsGame(task, object_set, seed=seed, **kwargs).sample(num_examples)


# Decoding images: independent of the generator's object representation -----------------------


def parse_image(image):
    """Decodes ``image`` into ``{(row, col): blocks}``, ``blocks`` a ``[3, 3, 3]`` uint8 array of
    block colours (black = empty block), reading one pixel per block."""
    image = np.asarray(image)
    objects = {}
    for row, col in CELLS:
        top, left = CELL * row + OFFSET, CELL * col + OFFSET
        blocks = image[top:top + 3 * BLOCK:BLOCK, left:left + 3 * BLOCK:BLOCK]
        if blocks.any():
            objects[(row, col)] = np.ascontiguousarray(blocks)
    return objects


def identity(blocks):
    """Hashable identity: shape, orientation, placement and colours."""
    return blocks.tobytes()


def shape_of(blocks):
    return blocks.any(axis=-1).tobytes()


def colour_of(blocks):
    """The set of colours of an object (``{(A,), (B,)}`` for a stripe pair)."""
    filled = blocks[blocks.any(axis=-1)]
    return frozenset(map(tuple, filled.tolist()))


def pattern_of(keys):
    """The equality pattern of 3 hashables, e.g. ``"ABA"``."""
    letters = {}
    for key in keys:
        letters.setdefault(key, "ABC"[len(letters)])
    return "".join(letters[key] for key in keys)


def _between_holds(keys_by_cell):
    for line in LINES:
        if all(cell in keys_by_cell for cell in line) and \
                keys_by_cell[line[0]] == keys_by_cell[line[2]]:
            return True
    return False


def _the_line(cells):
    """The full row or column that holds the objects (pattern tasks)."""
    for line in LINES[:6]:
        if set(line) == set(cells):
            return line
    raise ValueError(f"expected exactly 3 objects in one row or column, found cells {cells}.")


def oracle_label(task, image, task_id=0, xoccurs_reading="exclusive"):
    """The label of ``image`` for ``task``, computed from its pixels only.

    ``xoccurs_reading``: ``"exclusive"`` (the top object occurs exactly once in the bottom row)
    or ``"pair_differs"`` (it occurs and the other two bottom objects differ from each other).
    """
    objects = parse_image(image)
    keys = {cell: identity(blocks) for cell, blocks in objects.items()}
    if task == "same":
        return int(len(set(keys.values())) < len(keys))
    if task == "between":
        return int(_between_holds(keys))
    if task in ("occurs", "xoccurs"):
        top = keys[(0, 1)]
        bottom = [keys[(2, c)] for c in range(3)]
        copies = bottom.count(top)
        if task == "occurs":
            return int(copies > 0)
        if xoccurs_reading == "exclusive":
            return int(copies == 1)
        for i in range(3):
            others = [b for j, b in enumerate(bottom) if j != i]
            if bottom[i] == top and others[0] != others[1]:
                return 1
        return 0
    if task == "colour_and_or_shape":
        (a, b) = objects.values()
        return int(shape_of(a) != shape_of(b)) + 2 * int(colour_of(a) != colour_of(b))
    if task == "match_rows":
        rows = [pattern_of([keys[(r, c)] for c in range(3)]) for r in (0, 2)]
        return int(rows[0] == rows[1])
    if task in TASKS:
        line = _the_line(sorted(keys))
        return int(pattern_of([keys[cell] for cell in line]) == PATTERNS[task_id])
    raise ValueError(f"`task`: expected one of {tuple(TASKS)}, received {task!r}.")
