"""The Relations Game (Shanahan et al. 2020, Sec. 3): a seeded NumPy generator and its oracle.

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
  is identical to the top one. See ``occurs_distractors`` for what the other bottom objects are.
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

One module a concern: `tasks` (names, labels, layouts, the equality relations), `rendering` (objects
drawn on the image), `generator` (`RelationsGame`, `generate`), `npz` (DeepMind's released
``.npz`` files: `load_npz`, `save_npz`), `parsing` (pixels back to objects) and `oracle`
(`oracle_label`); the object sets are in `keras_relational.environments.polyominoes`.

Example:

```python
from keras_relational.environments import relations_game

data = relations_game.generate("between", "pentominoes", num_examples=1000, seed=0)
data["images"].shape, data["labels"][:5], data["tasks"][:5]   # (1000, 36, 36, 3), ...
```
"""

from .generator import TASK_OPTIONS, RelationsGame, generate
from .npz import load_npz, save_npz
from .oracle import oracle_label
from .parsing import colour_of, identity, parse_image, shape_of
from .rendering import BLOCK, CELL, IMAGE_SIZE, OFFSET, GameObject, render
from .tasks import (
    CELLS,
    DIFF_BOTH,
    DIFF_COLOUR,
    DIFF_KINDS,
    DIFF_SHAPE,
    GRID,
    LINES,
    PATTERNS,
    TASKS,
    between_holds,
    num_classes,
    num_task_ids,
    pattern_of,
)

__all__ = [
    "BLOCK", "CELL", "CELLS", "DIFF_BOTH", "DIFF_COLOUR", "DIFF_KINDS", "DIFF_SHAPE", "GRID",
    "IMAGE_SIZE", "LINES", "OFFSET", "PATTERNS", "TASKS", "TASK_OPTIONS", "GameObject",
    "RelationsGame",
    "between_holds", "colour_of", "generate", "identity", "load_npz", "num_classes",
    "num_task_ids", "oracle_label", "parse_image", "pattern_of", "render", "save_npz", "shape_of",
]
