"""`BatchedBridgeBoxWorld`: N bridge BoxWorld levels stepped together with vectorised NumPy.

Same interface and auto-reset convention as `BatchedBoxWorld` (see
`base.BatchedLevelEnvironment`); level i of `BatchedBridgeBoxWorld(seeds=[s_0, ...])` plays
exactly like `BridgeBoxWorld(seed=s_i)` given the same actions.
"""

import numpy as np

from ..base import BatchedLevelEnvironment, check_actions
from .config import EMPTY, REWARD_BRIDGE, REWARD_GEM, REWARD_KEY, BridgeConfig
from .generator import generate_level
from .rendering import colour_tables, one_hot_frames, rgb_frames
from .rules import apply_moves


class BatchedBridgeBoxWorld(BatchedLevelEnvironment):
    """`batch_size` `BridgeBoxWorld` levels stepped together in NumPy.

    Args:
      batch_size: number N of levels stepped together.
      seed: seeds a `RandomState` that draws one seed per level (ignored if `seeds` is given).
      seeds: optional explicit per-level seeds.
      **kwargs: every other `BridgeBoxWorld` argument (solution_length, puzzle_type, ...).
    """

    def __init__(self, batch_size=256, seed=None, seeds=None, **kwargs):
        super().__init__(BridgeConfig(**kwargs), batch_size, seed, seeds)
        config, n = self._config, self._batch_size
        self._shape = (config.rows, config.cols)
        self._grid = np.full((n, config.rows * config.cols), EMPTY, np.int64)
        self._pos = np.zeros(n, np.int64)
        self._inventory = np.full((n, config.rows), EMPTY, np.int64)
        self._inventory_size = np.zeros(n, np.int64)
        self._bridge = np.full(n, -1, np.int64)
        # Per-level colour table: 0 floor, 1 gem, 1 + k abstract colour k, last the empty slot.
        self._table = np.zeros((n, config.num_colors + 3, 3), np.uint8)
        self._opened_bridge = np.zeros(n, bool)

    def _load(self, rows):
        config = self._config
        levels = [generate_level(config, self._draws[i]) for i in rows]
        for i, level in zip(rows, levels, strict=True):
            self._levels[i] = level
        self._grid[rows] = np.stack([level.grid.reshape(-1) for level in levels])
        self._pos[rows] = 0  # [C] the player starts at the top-left corner
        self._inventory[rows] = EMPTY
        self._inventory_size[rows] = 0
        self._bridge[rows] = [-1 if level.bridge_cell is None else
                              level.bridge_cell[0] * config.cols + level.bridge_cell[1]
                              for level in levels]
        self._table[rows] = colour_tables(config, [level.colors for level in levels])
        self._steps[rows] = 0
        self._solved[rows] = False
        self._opened_bridge[rows] = False
        self._needs_reset[rows] = False

    def step(self, actions):
        """Steps every level with `actions` (int `[N]`: 0 up, 1 down, 2 left, 3 right)."""
        actions = check_actions(actions, self._batch_size)
        restart = self._needs_reset
        active = ~restart
        self._pos, gem, box, key = apply_moves(
            self._grid, self._inventory, self._inventory_size, self._pos, actions, active,
            *self._shape)
        # [C] Rewards after the move: gem +10, bridge -1, any other inventory change +1.
        opened_bridge = box & (self._pos == self._bridge)
        terminal = gem | opened_bridge
        reward = np.where(gem, REWARD_GEM, np.where(
            opened_bridge, REWARD_BRIDGE, np.where(box | key, REWARD_KEY, 0.0))).astype(
                np.float32)
        self._solved |= gem
        self._opened_bridge |= opened_bridge
        return self._end_step(restart, active, reward, terminal)

    def _observation(self):
        if self._config.observation_type == "rgb":
            return self._frames()
        colors = np.array([level.colors for level in self._levels])
        return one_hot_frames(self._config, colors, self._grid, self._pos, self._inventory)

    def _frames(self):
        return rgb_frames(self._config, self._table, self._grid, self._pos, self._inventory)

    def render(self):
        """The current RGB frames, uint8 `[N, 7, 10, 3]`."""
        return self._frames()

    # Side channel (never part of the observation); `levels`, `solved`, `num_steps` in the base.

    @property
    def puzzle_types(self):
        """The `(a, b, c)` puzzle type of every slot."""
        return [level.puzzle_type for level in self._levels]

    @property
    def opened_bridge(self):
        return self._opened_bridge.copy()

    def state(self, index):
        """Arguments of `boxworld_solver.solve_bridge` for slot `index`."""
        size = int(self._inventory_size[index])
        return (self._config, self._levels[index], self._grid[index].reshape(self._shape),
                tuple(int(v) for v in divmod(int(self._pos[index]), self._shape[1])),
                tuple(int(v) for v in self._inventory[index, :size]))
