"""The rules of a BoxWorld move (Zambaldi et al. 2019, Sec. 3.1 and App. A), on flat cell grids.

The agent moves one cell up, down, left or right. Walls block. A lock blocks unless the agent
holds the key of its colour: then the agent steps onto it, the box opens (+1 on the solution path;
-1 and the end of the episode on a distractor branch) and the key is used up. A box's content (a
key or the gem) blocks while its lock is still to its right; once free, stepping onto it takes it:
a key replaces any held key [R: the inventory is one pixel], the gem gives +10 and ends the episode.

Two forms of the same rules: `apply_move` for one level (plain Python, the single environment's
hot path) and `apply_moves` for N levels at once (vectorised NumPy, the batched environment).
Tests check that both play identically.
"""

import numpy as np

from .config import FLOOR, GEM, KEY0, REWARD_DISTRACTOR_BOX, REWARD_GEM, REWARD_PATH_BOX, WALL

# Outcomes of one move.
MOVED, BLOCKED, KEY_TAKEN, PATH_BOX, DISTRACTOR_BOX, GEM_TAKEN = range(6)
# Reward of each outcome (float32, as the environments return them).
OUTCOME_REWARDS = tuple(np.float32(r) for r in (
    0.0, 0.0, 0.0, REWARD_PATH_BOX, REWARD_DISTRACTOR_BOX, REWARD_GEM))
TERMINAL_OUTCOMES = (DISTRACTOR_BOX, GEM_TAKEN)


def apply_move(grid, target, held, lock0, distractor_locks):
    """Moves the agent of one level onto the flat cell `target`, mutating `grid`.

    Args:
      grid: the level's flat cell codes (a list), updated in place (opened locks and taken items
        become FLOOR).
      target: the flat index of the cell the action leads to.
      held: palette colour of the held key, -1 for none.
      lock0: the cell code of the lock of colour 0 (`BoxWorldConfig.lock0`).
      distractor_locks: the flat indices of the distractor boxes' locks.

    Returns:
      `(outcome, held)`: one of MOVED, BLOCKED, KEY_TAKEN, PATH_BOX, DISTRACTOR_BOX, GEM_TAKEN
      (the agent stands on `target` unless BLOCKED), and the held key after the move.
    """
    code = grid[target]
    if code == FLOOR:
        return MOVED, held
    if code == WALL:
        return BLOCKED, held
    if code >= lock0:  # a lock: opens with the matching key
        if code - lock0 != held:
            return BLOCKED, held
        grid[target] = FLOOR
        return (DISTRACTOR_BOX if target in distractor_locks else PATH_BOX), -1
    if grid[target + 1] >= lock0:  # the content of a box still locked
        return BLOCKED, held
    grid[target] = FLOOR
    if code == GEM:
        return GEM_TAKEN, held
    return KEY_TAKEN, code - KEY0  # a loose key replaces any held key [R]


def apply_moves(grid, held, target, lock0, distractor, active):
    """The same rules for N levels at once; mutates `grid` and `held`.

    Args:
      grid: int `[N, cells]` flat cell codes.
      held: int `[N]` palette colour of each held key, -1 for none.
      target: int `[N]` flat index of the cell each action leads to.
      lock0: the cell code of the lock of colour 0.
      distractor: bool `[N, cells]`, True at the distractor boxes' locks.
      active: bool `[N]`, the levels that move (the others are left as they are).

    Returns:
      `(moved, path_box, gem, terminal, reward)`: bool `[N]` masks of the levels whose agent
      stands on `target` now, that opened a solution-path box, that took the gem, that ended
      (gem or distractor box); and float32 `[N]` rewards.
    """
    rows = np.arange(len(target))
    code = grid[rows, target]
    is_lock = code >= lock0
    opens = active & is_lock & (code - lock0 == held)
    # Keys and the gem are free unless a lock is still to their right.
    free = active & ~is_lock & (code >= GEM) & (grid[rows, target + 1] < lock0)
    gem = free & (code == GEM)
    key = free & ~gem
    moved = (active & (code == FLOOR)) | opens | free
    distractor_box = opens & distractor[rows, target]
    reward = (opens * np.where(distractor_box, REWARD_DISTRACTOR_BOX, REWARD_PATH_BOX)
              + gem * REWARD_GEM).astype(np.float32)
    taken = np.flatnonzero(opens | free)
    grid[taken, target[taken]] = FLOOR
    held[opens] = -1
    held[key] = code[key] - KEY0
    return moved, opens & ~distractor_box, gem, gem | distractor_box, reward
