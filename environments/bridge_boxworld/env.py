"""`BridgeBoxWorld` (Clift et al. 2020, Sec. 3), a `dm_env.Environment` over one level at a time."""

from typing import NamedTuple

import numpy as np

from keras_relational.validation import check_grid_cell, invalid_value

from ..base import LevelEnvironment, coerce_action
from .config import (
    BRIDGE_PROBABILITY,
    COLS,
    FLOOR_RGB,
    GEM,
    NUM_COLORS,
    PLAYER_RGB,
    REWARD_BRIDGE,
    REWARD_GEM,
    REWARD_KEY,
    ROWS,
    SOLUTION_LENGTHS,
    BridgeConfig,
)
from .generator import BridgeLevel, generate_level
from .rendering import render_one_hot, render_rgb
from .rules import apply_move

_ZERO = np.float32(0.0)
_R_KEY = np.float32(REWARD_KEY)
_R_BRIDGE = np.float32(REWARD_BRIDGE)
_R_GEM = np.float32(REWARD_GEM)


class BridgeState(NamedTuple):
    """A snapshot of a `BridgeBoxWorld` episode (`get_state` / `set_state`)."""

    level: BridgeLevel
    grid: tuple  # flat abstract tile codes, rows * cols
    agent: tuple  # (row, col)
    inventory: tuple  # held abstract colours in acquisition order
    num_steps: int
    solved: bool
    opened_bridge: bool
    needs_reset: bool


class BridgeBoxWorld(LevelEnvironment):
    """Bridge BoxWorld (Clift et al. 2020) as a `dm_env.Environment`.

    Observations are uint8 RGB `[7, 10, 3]` (board plus inventory column) or float32 one-hot
    `[7, 10, 44]`. Actions are `DiscreteArray(4)`: 0 up, 1 down, 2 left, 3 right (see
    `CLIFT_ACTIONS` for the authors' order). After a LAST step, `step()` starts a new level.

    Example:

    ```python
    env = BridgeBoxWorld(seed=0)
    timestep = env.reset()
    while not timestep.last():
        timestep = env.step(np.random.randint(4))
    env.level.puzzle_type, env.solved, env.opened_bridge
    ```

    Args:
      solution_length: L for both chains, an int or a sequence sampled uniformly ({1, 2, 3} [P]).
      bridge_probability: probability of a bridge box (1/2 [P, C]).
      puzzle_type: force one type `(a, b, c)` (or `(a, 0, 0)`: no bridge), e.g. to evaluate per
        puzzle type as in Figs. 14-15; overrides `solution_length` and `bridge_probability`.
      rows, cols: board size (7 x 9 [P]).
      num_colors: palette size (20 [P]); colours are re-shuffled every episode [P, C].
      max_steps: optional step limit (truncation); None, the paper's setting, for no limit [P].
      time_limit_discount: discount of the truncation step.
      observation_type: "rgb" or "one_hot".
      seed: seed of the env's own `np.random.RandomState`.
    """

    def __init__(self, solution_length=SOLUTION_LENGTHS, bridge_probability=BRIDGE_PROBABILITY,
                 puzzle_type=None, rows=ROWS, cols=COLS, num_colors=NUM_COLORS, max_steps=None,
                 time_limit_discount=1.0, observation_type="rgb", seed=None):
        super().__init__(BridgeConfig(
            solution_length=solution_length, bridge_probability=bridge_probability,
            puzzle_type=puzzle_type, rows=rows, cols=cols, num_colors=num_colors,
            max_steps=max_steps, time_limit_discount=time_limit_discount,
            observation_type=observation_type), seed)

    def _generate(self):
        return generate_level(self._config, self._draws)

    def _check_level(self, level):
        shape = (self._config.rows, self._config.cols)
        if not isinstance(level, BridgeLevel) or level.grid.shape != shape:
            raise invalid_value("level", f"a BridgeLevel with a {shape[0]} x {shape[1]} grid",
                                type(level).__name__)

    def _load(self, level):
        self._level = level
        self._grid = level.grid.reshape(-1).tolist()
        self._pos = 0  # [C] the player always starts at the top-left corner
        self._inventory = []
        self._bridge = (-1 if level.bridge_cell is None
                        else level.bridge_cell[0] * self._config.cols + level.bridge_cell[1])
        self._steps = 0
        self._solved = False
        self._opened_bridge = False
        self._reset_next_step = False
        self._repaint()

    def _repaint(self):
        self._frame = render_rgb(self._config, self._level, self._grid, self._pos,
                                 self._inventory)

    def step(self, action):
        if self._reset_next_step:
            return self.reset()
        action = coerce_action(action)
        before, pos = list(self._inventory), self._pos
        self._pos = apply_move(self._grid, self._inventory, pos, action,
                               self._config.rows, self._config.cols)
        self._steps += 1
        # The RGB frame is kept up to date incrementally: a plain move repaints two cells (the
        # player only ever stands on empty tiles); anything that changes the board also changes
        # the inventory and repaints the whole frame.
        if self._inventory != before:
            self._repaint()
        elif self._pos != pos:
            cols = self._config.cols
            self._frame[pos // cols, pos % cols] = FLOOR_RGB
            self._frame[self._pos // cols, self._pos % cols] = PLAYER_RGB
        observation = self._observation()
        # [C] Rewards after the move, in this order: gem, bridge, any inventory change.
        if GEM in self._inventory:
            self._solved = True
            return self._end_step(_R_GEM, True, observation)
        if self._pos == self._bridge:
            self._opened_bridge = True
            return self._end_step(_R_BRIDGE, True, observation)
        return self._end_step(_R_KEY if self._inventory != before else _ZERO, False,
                              observation)

    def _observation(self):
        if self._config.observation_type == "rgb":
            return self._frame.copy()
        return render_one_hot(self._config, self._level, self._grid, self._pos, self._inventory)

    # Side channel (never part of the observation); `level`, `solved`, `num_steps` in the base.

    @property
    def puzzle_type(self):
        return self._level.puzzle_type

    @property
    def agent_position(self):
        return divmod(self._pos, self._config.cols)

    @property
    def inventory(self):
        """Held abstract colours in acquisition order (0 is the gem)."""
        return tuple(self._inventory)

    @property
    def grid(self):
        """Current abstract tile codes, int8 `[rows, cols]`."""
        return np.array(self._grid, np.int8).reshape(self._config.rows, self._config.cols)

    @property
    def opened_bridge(self):
        return self._opened_bridge

    def get_state(self):
        """A `BridgeState` snapshot of the current episode (for `set_state`)."""
        return BridgeState(self._level, tuple(self._grid), self.agent_position,
                           tuple(self._inventory), self._steps, self._solved,
                           self._opened_bridge, self._reset_next_step)

    def set_state(self, state):
        """Restores a `BridgeState` (possibly edited with `_replace`); the RNG is untouched."""
        state = BridgeState(*state)
        if state.level is not self._level:
            self._load(state.level)
        rows, cols = self._config.rows, self._config.cols
        if len(state.grid) != rows * cols:
            raise invalid_value("state.grid", f"{rows * cols} tile codes",
                                f"{len(state.grid)} codes")
        row, col = check_grid_cell("state.agent", state.agent, rows, cols)
        self._grid = [int(c) for c in state.grid]
        self._pos = row * cols + col
        self._inventory = [int(c) for c in state.inventory]
        self._steps, self._solved = state.num_steps, state.solved
        self._opened_bridge, self._reset_next_step = state.opened_bridge, state.needs_reset
        self._repaint()
