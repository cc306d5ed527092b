"""The Relations Game tasks (Shanahan et al. 2020, Sec. 3 and App. A): names, labels, layouts.

A task is defined on a 3x3 grid of cells holding objects; the relations it asks about are
equalities of object identities, so `between_holds` and `pattern_of` take hashable identities
and serve both the generator and the pixel oracle.
"""

GRID = 3
DIFF_COLOUR, DIFF_SHAPE, DIFF_BOTH = "diff_colour", "diff_shape", "diff_both"
DIFF_KINDS = (DIFF_COLOUR, DIFF_SHAPE, DIFF_BOTH)
# Task-id order: 0 ABA, 1 AAB, 2 ABB verified on the released 3-task data; 3 AAA, 4 ABC chosen so
# that the 3-task ids are a prefix [A].
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
    return TASKS[check_task(task)][0]


def num_task_ids(task):
    """Number of distinct task ids in ``task``'s examples (patterns sets: 3 or 5, else 1)."""
    return TASKS[check_task(task)][1]

def check_task(task):
    if task not in TASKS:
        raise ValueError(f"`task`: expected one of {tuple(TASKS)}, received {task!r}.")
    return task


def pattern_of(keys):
    """The equality pattern of 3 hashables, e.g. ``"ABA"``."""
    letters = {}
    for key in keys:
        letters.setdefault(key, "ABC"[len(letters)])
    return "".join(letters[key] for key in keys)


def between_holds(keys_by_cell):
    for line in LINES:
        if all(cell in keys_by_cell for cell in line) and \
                keys_by_cell[line[0]] == keys_by_cell[line[2]]:
            return True
    return False
