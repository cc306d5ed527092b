"""The bridge BoxWorld level generator (Clift et al. 2020, Sec. 3; the authors' code [C])."""

import dataclasses

import numpy as np

from ..base import GridLevel
from .config import EMPTY, GEM


@dataclasses.dataclass(frozen=True, eq=False)
class BridgeLevel(GridLevel):
    """One generated bridge level; the side channel of `BridgeBoxWorld.level`.

    Attributes:
      grid: read-only int8 `[rows, cols]` abstract tile codes: -1 empty, 0 gem, 1..2L colours.
      colors: the episode's colour permutation: abstract colour k is palette colour colors[k-1].
      solution_length: L, the length of each chain (a loose key, L-1 boxes, a gem lock).
      bridge: (b, c), the bridge's lock and key colours, or None.
      bridge_cell: (row, col) of the bridge's lock, or None.
      gem_cells: the two gem tiles (row, col), top first.
      gem_lock_cells: the two gem locks (row, col): colour 1 (top) and L+1 (bottom).
      loose_keys: (row, col, colour) of the top (colour L) and bottom (colour 2L) loose keys.
      boxes: (row, col, key, lock) of every ordinary box, lock at (row, col + 1), the bridge last.
      puzzle_type: (a, b, c); (L, 0, 0) without a bridge.
      puzzle_type_id: index of `puzzle_type` in `puzzle_types(solution_lengths)`.
    """

    grid: np.ndarray
    colors: tuple
    solution_length: int
    bridge: tuple | None
    bridge_cell: tuple | None
    gem_cells: tuple
    gem_lock_cells: tuple
    loose_keys: tuple
    boxes: tuple
    puzzle_type: tuple
    puzzle_type_id: int

    @property
    def has_bridge(self):
        return self.bridge is not None


def generate_level(config, draws):
    """Samples one bridge level exactly as Clift et al.'s generator [P, C].

    Box anchors (a box's key tile; its lock is one to the right) are columns 1, 4, 7 and rows 1, 3,
    5. The shuffled anchors are re-shuffled until the first (the gem's top row) is not in the last
    anchor column or row; the anchor two rows below the gem is dropped. The top chain uses colours
    1..L (1 = top gem lock, L = loose key), the bottom chain L+1..2L. With probability 1/2 a bridge
    box (lock b ~ U{1..L}, key c ~ U{L+1..2L}) takes the next anchor.
    """
    rows, cols = config.rows, config.cols
    if config.puzzle_type is not None:
        L = config.puzzle_type[0]
    else:
        L = config.solution_length[draws.randint(len(config.solution_length))]
    all_anchors = [(y, x) for x in range(1, cols - 1, 3) for y in range(1, rows, 2)]
    while True:
        anchors = draws.shuffle(list(all_anchors))
        if anchors[0][1] <= cols - 3 and anchors[0][0] <= rows - 3:
            break
    gy, gx = anchors[0]
    anchors.remove((gy + 2, gx))
    colors = draws.shuffle(list(range(config.num_colors)))
    if config.puzzle_type is not None:
        bridge = config.puzzle_type[1:] if config.puzzle_type[1] > 0 else None
    elif draws.random() < config.bridge_probability:
        b = 1 + draws.randint(L)
        bridge = (b, L + 1 + draws.randint(L))
    else:
        bridge = None

    grid = np.full((rows, cols), EMPTY, np.int8)
    boxes = []

    def box(anchor, key, lock):
        y, x = anchor
        grid[y, x], grid[y, x + 1] = key, lock
        if key != GEM:
            boxes.append((y, x, key, lock))

    for n in range(L):  # top chain; n = 0 is the gem's top row (key 0 = gem, lock 1)
        box(anchors[n], n, n + 1)
    grid[anchors[L]] = L
    grid[gy + 1, gx], grid[gy + 1, gx + 1] = GEM, L + 1
    for n in range(L + 1, 2 * L):  # bottom chain
        box(anchors[n], n, n + 1)
    grid[anchors[2 * L]] = 2 * L
    bridge_cell = None
    if bridge is not None:
        box(anchors[2 * L + 1], bridge[1], bridge[0])
        bridge_cell = (anchors[2 * L + 1][0], anchors[2 * L + 1][1] + 1)
    grid.flags.writeable = False
    kind = (L,) + (bridge if bridge is not None else (0, 0))
    return BridgeLevel(
        grid=grid, colors=tuple(colors), solution_length=L, bridge=bridge,
        bridge_cell=bridge_cell, gem_cells=((gy, gx), (gy + 1, gx)),
        gem_lock_cells=((gy, gx + 1), (gy + 1, gx + 1)),
        loose_keys=(anchors[L] + (L,), anchors[2 * L] + (2 * L,)), boxes=tuple(boxes),
        puzzle_type=kind, puzzle_type_id=config.puzzle_types.index(kind))
