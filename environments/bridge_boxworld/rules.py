"""The rules of a bridge BoxWorld move (Clift et al. 2020, Sec. 3; the authors' code [C]).

The player moves one tile up, down, left or right; moves off the board are no-ops. Stepping on a
loose key picks it up; stepping on a lock whose colour is held opens the box (the key is used up,
the box's key goes to the inventory); stepping on either gem lock with both lock colours held
opens the gem. Key tiles of locked boxes and gem tiles block.

Two forms of the same rules: `apply_move` for one level (plain Python) and `apply_moves` for N
levels at once (vectorised NumPy, the batched environment). Tests check that both play
identically.
"""

import numpy as np

from .config import EMPTY, GEM

# Our action index of the authors' actions 0 left, 1 up, 2 right, 3 down [C].
CLIFT_ACTIONS = (2, 0, 3, 1)
MOVES = ((-1, 0), (1, 0), (0, -1), (0, 1))  # (d_row, d_col) of 0 up, 1 down, 2 left, 3 right


def apply_move(grid, inventory, pos, action, rows, cols):
    """The movement rules of Clift et al.'s code [C] on a flat grid; mutates grid and inventory.

    Returns the player's new flat position (unchanged when the move does nothing).
    """
    y, x = divmod(pos, cols)
    dy, dx = MOVES[action]
    y = min(max(y + dy, 0), rows - 1)  # moves off the board are clamped (no-ops)
    x = min(max(x + dx, 0), cols - 1)
    target = y * cols + x
    code = grid[target]
    if code == EMPTY:
        return target
    left = grid[target - 1] if x > 0 else EMPTY
    if left == GEM:  # a gem lock: the other lock is below if the cell above is blank, else above
        above = grid[target - cols] if y > 0 else EMPTY
        other = target + cols if above == EMPTY else target - cols
        other_code = grid[other]
        if code not in inventory or other_code not in inventory:
            return pos
        inventory.remove(code)
        inventory.remove(other_code)
        inventory.append(GEM)
        for cell in (target, other, target - 1, other - 1):
            grid[cell] = EMPTY
        return target
    if left != EMPTY:  # an ordinary lock
        if code not in inventory:
            return pos
        inventory.remove(code)
        inventory.append(left)
        grid[target] = grid[target - 1] = EMPTY
        return target
    right = grid[target + 1] if x < cols - 1 else EMPTY
    if right == EMPTY:  # a loose key
        inventory.append(code)
        grid[target] = EMPTY
        return target
    return pos  # the key tile of a box, or a gem tile: blocked


def _cell(grid, index, valid):
    """grid[i, index[i]] where `valid`, EMPTY elsewhere (index clipped into range)."""
    values = grid[np.arange(len(grid)), np.clip(index, 0, grid.shape[1] - 1)]
    return np.where(valid, values, EMPTY)


def _remove(inventory, size, rows, colours):
    """Removes the first occurrence of `colours[j]` from the inventory of `rows[j]`."""
    held = inventory[rows]
    first = np.argmax(held == colours[:, None], axis=1)
    keep = np.ones(held.shape, bool)
    keep[np.arange(len(rows)), first] = False
    order = np.argsort(~keep, axis=1, kind="stable")
    held = np.take_along_axis(held, order, axis=1)
    held[:, -1] = EMPTY
    inventory[rows] = held
    size[rows] -= 1


def _append(inventory, size, rows, colours):
    inventory[rows, size[rows]] = colours
    size[rows] += 1


def apply_moves(grid, inventory, size, pos, actions, active, rows, cols):
    """The same rules for N levels at once; mutates `grid`, `inventory` and `size`.

    Args:
      grid: int `[N, rows * cols]` abstract tile codes.
      inventory: int `[N, rows]` held abstract colours in acquisition order, padded with EMPTY;
        `size` int `[N]` how many each level holds.
      pos: int `[N]` flat index of each player; actions: int `[N]` (0 up, 1 down, 2 left,
        3 right); active: bool `[N]`, the levels that move.
      rows, cols: the board size.

    Returns:
      `(pos, gem, box, key)`: the new flat positions, and bool `[N]` masks of the levels that
      opened the gem, that opened an ordinary box (the bridge included), that picked up a key.
    """
    y, x = np.divmod(pos, cols)
    move = np.array(MOVES, np.int64)[actions]
    y = np.clip(y + move[:, 0], 0, rows - 1)  # moves off the board are clamped (no-ops)
    x = np.clip(x + move[:, 1], 0, cols - 1)
    target = y * cols + x
    code = _cell(grid, target, True)
    left = _cell(grid, target - 1, x > 0)
    right = _cell(grid, target + 1, x < cols - 1)
    above = _cell(grid, target - cols, y > 0)
    blank = code == EMPTY
    # A gem lock: the other lock is below if the cell above is blank, else above.
    other = np.where(above == EMPTY, target + cols, target - cols)
    other_code = _cell(grid, other, True)

    def has(colours):
        return (inventory == colours[:, None]).any(axis=1)

    gem_open = active & ~blank & (left == GEM) & has(code) & has(other_code)
    lock_open = active & ~blank & (left != EMPTY) & (left != GEM) & has(code)
    pick = active & ~blank & (left == EMPTY) & (right == EMPTY)
    moved = (active & blank) | gem_open | lock_open | pick

    levels = np.flatnonzero(gem_open | lock_open)
    if len(levels):
        _remove(inventory, size, levels, code[levels])
    levels = np.flatnonzero(gem_open)
    if len(levels):
        _remove(inventory, size, levels, other_code[levels])
        _append(inventory, size, levels, np.full(len(levels), GEM))
        for cell in (target, other, target - 1, other - 1):
            grid[levels, cell[levels]] = EMPTY
    levels = np.flatnonzero(lock_open)
    if len(levels):
        _append(inventory, size, levels, left[levels])
        grid[levels, target[levels]] = EMPTY
        grid[levels, target[levels] - 1] = EMPTY
    levels = np.flatnonzero(pick)
    if len(levels):
        _append(inventory, size, levels, code[levels])
        grid[levels, target[levels]] = EMPTY
    return np.where(moved, target, pos), gem_open, lock_open, pick
