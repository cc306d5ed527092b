"""N BoxWorld levels stepped together with vectorised NumPy.

`BatchedBoxWorld` has the per-level semantics of `BoxWorld` (same generator, same rules, same
rewards, discounts and auto-reset): level i of `BatchedBoxWorld(seeds=[s_0, ...])` plays exactly
like `BoxWorld(seed=s_i)` given the same actions. Only the array layout differs.

Interface (TF-Agents' batched-environment convention, without importing TensorFlow):

* `batched` is True and `batch_size` is N; `observation_spec()`, `action_spec()`, `reward_spec()`
  and `discount_spec()` describe *one* level (no batch dimension).
* `reset()` and `step(actions)` return a `dm_env.TimeStep` of arrays: `step_type` int32 `[N]`
  (0 FIRST, 1 MID, 2 LAST), `reward` float32 `[N]`, `discount` float32 `[N]`, `observation`
  `[N, ...]`. A level whose previous step was LAST starts a new level on the next `step` (its
  action is ignored) and returns FIRST with reward 0 and discount 1, the values TF-Agents' dm_env
  conversion gives a FIRST step.

A TF-Agents `PyEnvironment` adapter only has to convert the specs and wrap the arrays in
`tf_agents.trajectories.TimeStep` (see `tests/environments/test_boxworld_tf_agents.py`).

Example:

```python
import numpy as np
from keras_relational.environments import BatchedBoxWorld

env = BatchedBoxWorld(batch_size=256, seed=0)
timestep = env.reset()                           # observation: uint8 [256, 14, 14, 3]
actions = np.random.randint(4, size=256)
timestep = env.step(actions)
env.levels[0].goal_length, env.solved[0]         # per-level side channel
```
"""

import dm_env
import numpy as np

from . import bridge_boxworld as bridge
from .boxworld import (
    AGENT_RGB,
    CHANNEL_AGENT,
    CHANNEL_KEY0,
    FLOOR,
    FLOOR_RGB,
    GEM,
    KEY0,
    NUM_ACTIONS,
    REWARD_DISTRACTOR_BOX,
    REWARD_GEM,
    REWARD_PATH_BOX,
    WALL_RGB,
    BoxWorldConfig,
    _BoxWorldSpecs,
    _Draws,
    _error,
    generate_level,
)

FIRST, MID, LAST = (int(t) for t in dm_env.StepType)


def _per_level_seeds(batch_size, seed, seeds):
    if seeds is None:
        return np.random.RandomState(seed).randint(0, 2**31 - 1, size=batch_size).tolist()
    seeds = [int(s) for s in seeds]
    if len(seeds) != batch_size:
        raise _error("seeds", f"{batch_size} seeds (one per level)", f"{len(seeds)} seeds")
    return seeds


def _check_actions(actions, batch_size):
    actions = np.asarray(actions)
    if (actions.shape != (batch_size,) or not np.issubdtype(actions.dtype, np.integer)
            or actions.min() < 0 or actions.max() >= NUM_ACTIONS):
        raise _error("actions", f"integers in [0, {NUM_ACTIONS}) of shape ({batch_size},)",
                     actions if actions.size <= 8 else f"array {actions.dtype}{actions.shape}")
    return actions


class BatchedBoxWorld(_BoxWorldSpecs):
    """`batch_size` `BoxWorld` levels stepped together in NumPy.

    Args:
      batch_size: number N of levels stepped together.
      seed: seeds a `RandomState` that draws one seed per level (ignored if `seeds` is given).
      seeds: optional explicit per-level seeds; level i then equals `BoxWorld(seed=seeds[i])`.
      **kwargs: every other `BoxWorld` argument (goal_length, num_distractors, ...).
    """

    def __init__(self, batch_size=256, seed=None, seeds=None, **kwargs):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int | np.integer) or (
                batch_size < 1):
            raise _error("batch_size", "an integer >= 1", batch_size)
        self._config = config = BoxWorldConfig(**kwargs)
        self._batch_size = n = int(batch_size)
        self._draws = [_Draws(np.random.RandomState(s))
                       for s in _per_level_seeds(n, seed, seeds)]
        size = config.frame_size
        self._size = size
        self._cells = size * size
        self._rows = np.arange(n)
        self._deltas = np.array(config.deltas, np.int64)
        self._lock0 = config.lock0
        self._max_steps = config.max_steps if config.max_steps is not None else np.iinfo(
            np.int64).max
        self._truncation_discount = np.float32(config.time_limit_discount)
        self._held_rgb = np.concatenate([np.array([WALL_RGB], np.uint8), config.palette])
        self._floor_rgb = np.array(FLOOR_RGB, np.uint8)
        self._agent_rgb = np.array(AGENT_RGB, np.uint8)
        self._grid = np.zeros((n, self._cells), np.int64)
        self._distractor = np.zeros((n, self._cells), bool)
        self._pos = np.zeros(n, np.int64)
        self._held = np.full(n, -1, np.int64)
        self._steps = np.zeros(n, np.int64)
        self._solved = np.zeros(n, bool)
        self._opened = np.zeros(n, np.int64)
        self._frames = np.zeros((n, self._cells, 3), np.uint8)
        self._needs_reset = np.ones(n, bool)
        self._levels = [None] * n
        self._levels_generated = 0
        self._levels_discarded = 0

    @property
    def config(self):
        return self._config

    @property
    def batched(self):
        return True

    @property
    def batch_size(self):
        return self._batch_size

    def _load(self, rows):
        """Generates and loads new levels into `rows` (an index array)."""
        levels = [generate_level(self._config, self._draws[i]) for i in rows]
        for i, level in zip(rows, levels, strict=True):
            self._levels[i] = level
            self._levels_discarded += level.attempts - 1
        self._levels_generated += len(levels)
        size = self._size
        grids = np.stack([level.grid.reshape(-1) for level in levels]).astype(np.int64)
        pos = np.array([level.agent[0] * size + level.agent[1] for level in levels])
        self._grid[rows] = grids
        self._distractor[rows] = False
        locks = [(j, box.row * size + box.col + 1) for j, level in enumerate(levels)
                 for branch in level.distractors for box in branch]
        if locks:
            j, cells = np.array(locks).T
            self._distractor[rows[j], cells] = True
        self._pos[rows] = pos
        self._held[rows] = -1
        self._steps[rows] = 0
        self._solved[rows] = False
        self._opened[rows] = 0
        frames = self._config.rgb_table[grids]
        frames[np.arange(len(rows)), pos] = self._agent_rgb
        self._frames[rows] = frames
        self._needs_reset[rows] = False

    def reset(self):
        """Starts a new level in every slot; all step types are FIRST."""
        self._load(self._rows)
        n = self._batch_size
        return dm_env.TimeStep(np.full(n, FIRST, np.int32), np.zeros(n, np.float32),
                               np.ones(n, np.float32), self._observation())

    def step(self, actions):
        """Steps every level with `actions` (int `[N]`: 0 up, 1 down, 2 left, 3 right)."""
        actions = _check_actions(actions, self._batch_size)
        restart = self._needs_reset
        active = ~restart
        rows, grid, pos, held = self._rows, self._grid, self._pos, self._held
        target = pos + self._deltas[actions]
        code = grid[rows, target]
        is_lock = code >= self._lock0
        opens = active & is_lock & (code - self._lock0 == held)
        # Keys and the gem are free unless a lock is still to their right.
        free = active & ~is_lock & (code >= GEM) & (grid[rows, target + 1] < self._lock0)
        gem = free & (code == GEM)
        key = free & ~gem
        moved = (active & (code == FLOOR)) | opens | free
        distractor = opens & self._distractor[rows, target]
        terminal = gem | distractor
        reward = (opens * np.where(distractor, REWARD_DISTRACTOR_BOX, REWARD_PATH_BOX)
                  + gem * REWARD_GEM).astype(np.float32)

        taken = np.flatnonzero(opens | free)
        grid[taken, target[taken]] = FLOOR
        held[opens] = -1
        held[key] = code[key] - KEY0
        movers = np.flatnonzero(moved)
        self._frames[movers, pos[movers]] = self._floor_rgb
        self._frames[movers, target[movers]] = self._agent_rgb
        self._frames[:, 0] = self._held_rgb[held + 1]
        pos[movers] = target[movers]
        self._steps += active
        self._solved |= gem
        self._opened += opens & ~distractor
        truncated = active & ~terminal & (self._steps >= self._max_steps)
        last = terminal | truncated

        step_type = np.where(last, LAST, MID).astype(np.int32)
        step_type[restart] = FIRST
        discount = np.where(terminal, np.float32(0.0),
                            np.where(truncated, self._truncation_discount, np.float32(1.0)))
        if restart.any():
            self._load(np.flatnonzero(restart))
        self._needs_reset = last
        return dm_env.TimeStep(step_type, reward, discount.astype(np.float32),
                               self._observation())

    def _observation(self):
        n, size = self._batch_size, self._size
        if self._config.observation_type == "rgb":
            return self._frames.reshape(n, size, size, 3).copy()
        frames = self._config.one_hot_table[self._grid]
        frames[self._rows, self._pos] = 0.0
        frames[self._rows, self._pos, CHANNEL_AGENT] = 1.0
        holding = np.flatnonzero(self._held >= 0)
        frames[holding, 0] = 0.0
        frames[holding, 0, CHANNEL_KEY0 + self._held[holding]] = 1.0
        return frames.reshape(n, size, size, -1)

    def render(self):
        """The current RGB frames, uint8 `[N, 14, 14, 3]`."""
        return self._frames.reshape(self._batch_size, self._size, self._size, 3).copy()

    def close(self):
        pass

    # Side channel (never part of the observation).

    @property
    def levels(self):
        """The current `BoxWorldLevel` of every slot."""
        return list(self._levels)

    @property
    def solved(self):
        """bool `[N]`: whether the gem was collected in each slot's current episode."""
        return self._solved.copy()

    @property
    def boxes_opened(self):
        """int `[N]`: solution-path boxes opened in each slot's current episode."""
        return self._opened.copy()

    @property
    def num_steps(self):
        """int `[N]`: actions taken in each slot's current episode."""
        return self._steps.copy()

    @property
    def agent_positions(self):
        """int `[N, 2]`: every agent's cell (row, col)."""
        return np.stack(np.divmod(self._pos, self._size), axis=-1)

    @property
    def held_keys(self):
        """int `[N]`: palette colour of each held key, -1 for none."""
        return self._held.copy()

    @property
    def generation_stats(self):
        return {"levels": self._levels_generated, "discarded": self._levels_discarded}

    def state(self, index):
        """Arguments of `boxworld_solver.solve_boxworld` for slot `index`."""
        return (self._config, self._levels[index],
                self._grid[index].reshape(self._size, self._size),
                tuple(int(v) for v in divmod(int(self._pos[index]), self._size)),
                int(self._held[index]))


class BatchedBridgeBoxWorld(_BoxWorldSpecs):
    """`batch_size` `BridgeBoxWorld` levels stepped together in NumPy.

    Same interface and auto-reset convention as `BatchedBoxWorld`; level i of
    `BatchedBridgeBoxWorld(seeds=[s_0, ...])` plays exactly like `BridgeBoxWorld(seed=s_i)`.

    Args:
      batch_size: number N of levels stepped together.
      seed: seeds a `RandomState` that draws one seed per level (ignored if `seeds` is given).
      seeds: optional explicit per-level seeds.
      **kwargs: every other `BridgeBoxWorld` argument (solution_length, puzzle_type, ...).
    """

    def __init__(self, batch_size=256, seed=None, seeds=None, **kwargs):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int | np.integer) or (
                batch_size < 1):
            raise _error("batch_size", "an integer >= 1", batch_size)
        self._config = config = bridge.BridgeConfig(**kwargs)
        self._batch_size = n = int(batch_size)
        self._draws = [_Draws(np.random.RandomState(s))
                       for s in _per_level_seeds(n, seed, seeds)]
        self._shape = (config.rows, config.cols)
        cells = config.rows * config.cols
        self._rows = np.arange(n)
        self._moves = np.array(bridge._MOVES, np.int64)
        self._max_steps = config.max_steps if config.max_steps is not None else np.iinfo(
            np.int64).max
        self._truncation_discount = np.float32(config.time_limit_discount)
        self._grid = np.full((n, cells), bridge.EMPTY, np.int64)
        self._pos = np.zeros(n, np.int64)
        self._inventory = np.full((n, config.rows), bridge.EMPTY, np.int64)
        self._inventory_size = np.zeros(n, np.int64)
        self._bridge = np.full(n, -1, np.int64)
        # Per-level colour table: 0 floor, 1 gem, 1 + k abstract colour k, last the empty slot.
        self._table = np.zeros((n, config.num_colors + 3, 3), np.uint8)
        self._steps = np.zeros(n, np.int64)
        self._won = np.zeros(n, bool)
        self._opened_bridge = np.zeros(n, bool)
        self._needs_reset = np.ones(n, bool)
        self._levels = [None] * n

    @property
    def config(self):
        return self._config

    @property
    def batched(self):
        return True

    @property
    def batch_size(self):
        return self._batch_size

    def _load(self, rows):
        config = self._config
        levels = [bridge.generate_level(config, self._draws[i]) for i in rows]
        for i, level in zip(rows, levels, strict=True):
            self._levels[i] = level
        self._grid[rows] = np.stack([level.grid.reshape(-1) for level in levels])
        self._pos[rows] = 0  # [C] the player starts at the top-left corner
        self._inventory[rows] = bridge.EMPTY
        self._inventory_size[rows] = 0
        self._bridge[rows] = [-1 if level.bridge_cell is None else
                              level.bridge_cell[0] * config.cols + level.bridge_cell[1]
                              for level in levels]
        table = np.empty((len(rows), config.num_colors + 3, 3), np.uint8)
        table[:, 0], table[:, 1], table[:, -1] = (
            bridge.FLOOR_RGB, bridge.GEM_RGB, bridge.EMPTY_SLOT_RGB)
        table[:, 2:-1] = config.palette[np.array([level.colors for level in levels])]
        self._table[rows] = table
        self._steps[rows] = 0
        self._won[rows] = False
        self._opened_bridge[rows] = False
        self._needs_reset[rows] = False

    def reset(self):
        """Starts a new level in every slot; all step types are FIRST."""
        self._load(self._rows)
        n = self._batch_size
        return dm_env.TimeStep(np.full(n, FIRST, np.int32), np.zeros(n, np.float32),
                               np.ones(n, np.float32), self._observation())

    def _cell(self, index, valid):
        """grid[row, index] where `valid`, EMPTY elsewhere (index clipped into range)."""
        cells = self._grid.shape[1]
        values = self._grid[self._rows, np.clip(index, 0, cells - 1)]
        return np.where(valid, values, bridge.EMPTY)

    def _remove(self, rows, colours):
        """Removes the first occurrence of `colours[j]` from the inventory of `rows[j]`."""
        inventory = self._inventory[rows]
        first = np.argmax(inventory == colours[:, None], axis=1)
        keep = np.ones(inventory.shape, bool)
        keep[np.arange(len(rows)), first] = False
        order = np.argsort(~keep, axis=1, kind="stable")
        inventory = np.take_along_axis(inventory, order, axis=1)
        inventory[:, -1] = bridge.EMPTY
        self._inventory[rows] = inventory
        self._inventory_size[rows] -= 1

    def _append(self, rows, colours):
        self._inventory[rows, self._inventory_size[rows]] = colours
        self._inventory_size[rows] += 1

    def step(self, actions):
        """Steps every level with `actions` (int `[N]`: 0 up, 1 down, 2 left, 3 right)."""
        actions = _check_actions(actions, self._batch_size)
        rows_, cols = self._shape
        restart = self._needs_reset
        active = ~restart
        y, x = np.divmod(self._pos, cols)
        move = self._moves[actions]
        y = np.clip(y + move[:, 0], 0, rows_ - 1)
        x = np.clip(x + move[:, 1], 0, cols - 1)
        target = y * cols + x
        code = self._cell(target, True)
        left = self._cell(target - 1, x > 0)
        right = self._cell(target + 1, x < cols - 1)
        above = self._cell(target - cols, y > 0)
        blank = code == bridge.EMPTY
        other = np.where(above == bridge.EMPTY, target + cols, target - cols)
        other_code = self._cell(other, True)
        held = self._inventory

        def has(colours):
            return (held == colours[:, None]).any(axis=1)

        gem_open = active & ~blank & (left == bridge.GEM) & has(code) & has(other_code)
        lock_open = (active & ~blank & (left != bridge.EMPTY) & (left != bridge.GEM)
                     & has(code))
        pick = active & ~blank & (left == bridge.EMPTY) & (right == bridge.EMPTY)
        moved = (active & blank) | gem_open | lock_open | pick

        rows = np.flatnonzero(gem_open | lock_open)
        if len(rows):
            self._remove(rows, code[rows])
        rows = np.flatnonzero(gem_open)
        if len(rows):
            self._remove(rows, other_code[rows])
            self._append(rows, np.full(len(rows), bridge.GEM))
            for cell in (target, other, target - 1, other - 1):
                self._grid[rows, cell[rows]] = bridge.EMPTY
        rows = np.flatnonzero(lock_open)
        if len(rows):
            self._append(rows, left[rows])
            self._grid[rows, target[rows]] = bridge.EMPTY
            self._grid[rows, target[rows] - 1] = bridge.EMPTY
        rows = np.flatnonzero(pick)
        if len(rows):
            self._append(rows, code[rows])
            self._grid[rows, target[rows]] = bridge.EMPTY
        self._pos = np.where(moved, target, self._pos)

        # [C] Rewards after the move: gem +10, bridge -1, any other inventory change +1.
        opened_bridge = lock_open & (target == self._bridge)
        terminal = gem_open | opened_bridge
        reward = np.where(gem_open, bridge.REWARD_GEM, np.where(
            opened_bridge, bridge.REWARD_BRIDGE, np.where(
                lock_open | pick, bridge.REWARD_KEY, 0.0))).astype(np.float32)
        self._won |= gem_open
        self._opened_bridge |= opened_bridge
        self._steps += active
        truncated = active & ~terminal & (self._steps >= self._max_steps)
        last = terminal | truncated
        step_type = np.where(last, LAST, MID).astype(np.int32)
        step_type[restart] = FIRST
        discount = np.where(terminal, 0.0, np.where(truncated, self._truncation_discount, 1.0))
        if restart.any():
            self._load(np.flatnonzero(restart))
        self._needs_reset = last
        return dm_env.TimeStep(step_type, reward, discount.astype(np.float32),
                               self._observation())

    def _frames(self):
        rows_, cols = self._shape
        n = self._batch_size
        width = self._table.shape[1]
        table = self._table.reshape(-1, 3)
        offset = (self._rows * width)[:, None]
        frames = np.empty((n, rows_, cols + 1, 3), np.uint8)
        board = table.take(self._grid + (offset + 1), axis=0)
        board[self._rows, self._pos] = bridge.PLAYER_RGB
        frames[:, :, :cols] = board.reshape(n, rows_, cols, 3)
        slots = np.where(self._inventory == bridge.EMPTY, width - 1, self._inventory + 1)
        frames[:, :, cols] = table.take(slots + offset, axis=0)
        return frames

    def _observation(self):
        if self._config.observation_type == "rgb":
            return self._frames()
        config = self._config
        n, (rows_, cols) = self._batch_size, self._shape
        colors = np.array([level.colors for level in self._levels])
        codes = self._grid.reshape(n, rows_, cols)
        palette = np.take_along_axis(colors, (np.maximum(codes, 1) - 1).reshape(n, -1),
                                     axis=1).reshape(codes.shape)
        is_lock = np.zeros(codes.shape, bool)
        is_lock[:, :, 1:] = codes[:, :, :-1] != bridge.EMPTY
        channel = np.where(codes == bridge.EMPTY, bridge.CHANNEL_FLOOR, np.where(
            codes == bridge.GEM, bridge.CHANNEL_GEM,
            bridge.CHANNEL_KEY0 + palette + config.num_colors * is_lock))
        py, px = np.divmod(self._pos, cols)
        channel[self._rows, py, px] = bridge.CHANNEL_PLAYER
        inventory = self._inventory
        held = np.take_along_axis(colors, np.maximum(inventory - 1, 0), axis=1)
        slots = np.where(inventory == bridge.EMPTY, bridge.CHANNEL_SLOT, np.where(
            inventory == bridge.GEM, bridge.CHANNEL_GEM, bridge.CHANNEL_KEY0 + held))
        channel = np.concatenate([channel, slots[:, :, None]], axis=2)
        return np.eye(config.num_channels, dtype=np.float32)[channel]

    def render(self):
        """The current RGB frames, uint8 `[N, 7, 10, 3]`."""
        return self._frames()

    def close(self):
        pass

    # Side channel (never part of the observation).

    @property
    def levels(self):
        """The current `BridgeLevel` of every slot."""
        return list(self._levels)

    @property
    def puzzle_types(self):
        """The `(a, b, c)` puzzle type of every slot."""
        return [level.puzzle_type for level in self._levels]

    @property
    def won(self):
        return self._won.copy()

    @property
    def opened_bridge(self):
        return self._opened_bridge.copy()

    @property
    def num_steps(self):
        return self._steps.copy()

    def state(self, index):
        """Arguments of `boxworld_solver.solve_bridge` for slot `index`."""
        size = int(self._inventory_size[index])
        return (self._config, self._levels[index], self._grid[index].reshape(self._shape),
                tuple(int(v) for v in divmod(int(self._pos[index]), self._shape[1])),
                tuple(int(v) for v in self._inventory[index, :size]))
