"""`BatchedBoxWorld`: N BoxWorld levels stepped together with vectorised NumPy.

Level i of `BatchedBoxWorld(seeds=[s_0, ...])` plays exactly like `BoxWorld(seed=s_i)` given the
same actions (same generator, rules, rewards, discounts and auto-reset); only the array layout
differs. The interface is TF-Agents' batched-environment convention without TensorFlow (see
`base.BatchedLevelEnvironment`); `keras_relational.agents.BatchedBoxWorldEnvironment` adapts it to
TF-Agents.

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

import numpy as np

from ..base import BatchedLevelEnvironment, check_actions
from . import rules
from .config import AGENT_RGB, FLOOR_RGB, BoxWorldConfig
from .generator import generate_level
from .rendering import one_hot_frames, rgb_frames


class BatchedBoxWorld(BatchedLevelEnvironment):
    """`batch_size` `BoxWorld` levels stepped together in NumPy.

    Args:
      batch_size: number N of levels stepped together.
      seed: seeds a `RandomState` that draws one seed per level (ignored if `seeds` is given).
      seeds: optional explicit per-level seeds; level i then equals `BoxWorld(seed=seeds[i])`.
      **kwargs: every other `BoxWorld` argument (goal_length, num_distractors, ...).
    """

    def __init__(self, batch_size=256, seed=None, seeds=None, **kwargs):
        super().__init__(BoxWorldConfig(**kwargs), batch_size, seed, seeds)
        config, n = self._config, self._batch_size
        self._size = config.frame_size
        self._cells = self._size * self._size
        self._deltas = np.array(config.deltas, np.int64)
        self._lock0 = config.lock0
        self._held_rgb = config.held_rgb_table
        self._floor_rgb = np.array(FLOOR_RGB, np.uint8)
        self._agent_rgb = np.array(AGENT_RGB, np.uint8)
        self._grid = np.zeros((n, self._cells), np.int64)
        self._distractor = np.zeros((n, self._cells), bool)
        self._pos = np.zeros(n, np.int64)
        self._held = np.full(n, -1, np.int64)
        self._opened = np.zeros(n, np.int64)
        self._frames = np.zeros((n, self._cells, 3), np.uint8)
        self._levels_generated = 0
        self._levels_discarded = 0

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
        self._frames[rows] = rgb_frames(self._config, grids, pos, self._held[rows])
        self._needs_reset[rows] = False

    def step(self, actions):
        """Steps every level with `actions` (int `[N]`: 0 up, 1 down, 2 left, 3 right)."""
        actions = check_actions(actions, self._batch_size)
        restart = self._needs_reset
        active = ~restart
        pos = self._pos
        target = pos + self._deltas[actions]
        moved, path_box, gem, terminal, reward = rules.apply_moves(
            self._grid, self._held, target, self._lock0, self._distractor, active)
        movers = np.flatnonzero(moved)
        self._frames[movers, pos[movers]] = self._floor_rgb
        self._frames[movers, target[movers]] = self._agent_rgb
        self._frames[:, 0] = self._held_rgb[self._held + 1]
        pos[movers] = target[movers]
        self._solved |= gem
        self._opened += path_box
        return self._end_step(restart, active, reward, terminal)

    def _observation(self):
        n, size = self._batch_size, self._size
        if self._config.observation_type == "rgb":
            return self._frames.reshape(n, size, size, 3).copy()
        return one_hot_frames(self._config, self._grid, self._pos, self._held)

    def render(self):
        """The current RGB frames, uint8 `[N, 14, 14, 3]`."""
        return self._frames.reshape(self._batch_size, self._size, self._size, 3).copy()

    # Side channel (never part of the observation); `levels`, `solved`, `num_steps` in the base.

    @property
    def boxes_opened(self):
        """int `[N]`: solution-path boxes opened in each slot's current episode."""
        return self._opened.copy()

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
