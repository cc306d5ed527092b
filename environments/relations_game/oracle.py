"""The Relations Game labels computed from an image's pixels only (a check of the generator)."""

from .parsing import colour_of, identity, parse_image, shape_of
from .tasks import LINES, PATTERNS, TASKS, between_holds, pattern_of


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
        return int(between_holds(keys))
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
