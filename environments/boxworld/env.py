"""`BoxWorld` (Zambaldi et al. 2019, Sec. 3.1), a `dm_env.Environment` over one level at a time."""

from typing import NamedTuple

import numpy as np

from keras_relational.validation import check_grid_cell, invalid_value

from ..base import LevelEnvironment, coerce_action
from .config import (
    AGENT_RGB,
    DEFAULT_HELDOUT_COLORS,
    DEFAULT_HELDOUT_PAIRS,
    FLOOR_RGB,
    MAX_STEPS,
    BoxWorldConfig,
)
from .generator import BoxWorldLevel, generate_level
from .presets import PRESETS
from .rendering import render_one_hot, render_rgb
from .rules import (
    BLOCKED,
    GEM_TAKEN,
    OUTCOME_REWARDS,
    PATH_BOX,
    TERMINAL_OUTCOMES,
    apply_move,
)


class BoxWorldState(NamedTuple):
    """A snapshot of a `BoxWorld` episode (`BoxWorld.get_state` / `set_state`)."""

    level: BoxWorldLevel
    grid: tuple  # flat cell codes, F * F
    agent: tuple  # (row, col)
    held_key: int  # palette colour, -1 for none
    num_steps: int
    solved: bool
    boxes_opened: int
    needs_reset: bool


class BoxWorld(LevelEnvironment):
    """Box-World (Zambaldi et al. 2019) as a `dm_env.Environment`.

    Observations are uint8 RGB `[14, 14, 3]` frames (one pixel per cell, `observation_type="rgb"`)
    or float32 one-hot `[14, 14, 44]` cells (`"one_hot"`: separate channels for key k and lock k).
    Actions are `DiscreteArray(4)`: 0 up, 1 down, 2 left, 3 right. After a LAST step, `step()`
    starts a new level (the action is ignored), as in dm_env's catch example.

    Example:

    ```python
    env = BoxWorld(goal_length=4, num_distractors=(0, 1, 2), seed=1)
    timestep = env.reset()
    while not timestep.last():
        timestep = env.step(np.random.randint(4))
    env.level.goal_length, env.solved
    ```

    Args:
      goal_length: solution length L (boxes on the path, the gem's box included), an int or a
        sequence sampled uniformly per level.
      num_distractors: number D of distractor branches, an int or a sequence sampled uniformly.
      distractor_length: boxes per forward distractor branch (1 or 3 in the paper).
      branching: "forward" (branches start at a path key colour, the paper's default) or
        "backward" (boxes holding a path key behind a lock nobody can open; greedy is optimal).
      room_size: side of the square room (12); the frame adds a one-cell wall.
      num_colors: key/lock colours (20); abstract colours 1..num_colors-1 are mapped to palette
        colours through a fresh permutation every level [R].
      max_steps: step limit (120 [R]); reaching it truncates the episode. None for no limit.
      time_limit_discount: discount of the truncation step (1.0; 0.0 reproduces [R]'s
        termination at the limit).
      observation_type: "rgb" or "one_hot".
      holdout: None, "colors" (a set of palette colours never on the training path) or "pairs"
        ((lock colour, content colour) boxes never on the training path) [A: two readings of the
        paper's withheld key-lock combinations].
      split: "train" (held-out colours/pairs only on distractors) or "test" (at least one on the
        path). Ignored without `holdout`.
      heldout_colors: palette colours held out by `holdout="colors"`.
      heldout_pairs: (lock colour, content colour) pairs held out by `holdout="pairs"`.
      strict: raise `LevelGenerationError` instead of resampling L and D when items do not fit.
      seed: seed of the env's own `np.random.RandomState`; equal seeds give equal levels.
    """

    def __init__(self, goal_length=(1, 2, 3, 4), num_distractors=(0, 1, 2, 3, 4),
                 distractor_length=1, branching="forward", room_size=12, num_colors=20,
                 max_steps=MAX_STEPS, time_limit_discount=1.0, observation_type="rgb",
                 holdout=None, split="train", heldout_colors=DEFAULT_HELDOUT_COLORS,
                 heldout_pairs=DEFAULT_HELDOUT_PAIRS, strict=False, seed=None):
        # Defaults: the paper's training distribution, L ~ U{1..4}, D ~ U{0..4}, branch length 1,
        # 12 x 12 room, 20 colours (Zambaldi et al. 2019, Sec. 3.1 and App. A); 120 steps [R].
        super().__init__(BoxWorldConfig(
            goal_length=goal_length, num_distractors=num_distractors,
            distractor_length=distractor_length, branching=branching, room_size=room_size,
            num_colors=num_colors, max_steps=max_steps, time_limit_discount=time_limit_discount,
            observation_type=observation_type, holdout=holdout, split=split,
            heldout_colors=heldout_colors, heldout_pairs=heldout_pairs, strict=strict), seed)
        config = self._config
        self._size = config.frame_size
        self._lock0 = config.lock0
        self._deltas = config.deltas
        self._rgb = config.observation_type == "rgb"
        self._held_rows = list(config.held_rgb_table)  # the (0, 0) pixel for held key h at h + 1
        self._floor_row = np.array(FLOOR_RGB, np.uint8)
        self._agent_row = np.array(AGENT_RGB, np.uint8)
        self._levels_generated = 0
        self._levels_discarded = 0

    @classmethod
    def from_preset(cls, name, **overrides):
        """A BoxWorld with the parameters of `PRESETS[name]`, updated by `overrides`."""
        if name not in PRESETS:
            raise invalid_value("name", f"one of {sorted(PRESETS)}", name)
        return cls(**{**PRESETS[name], **overrides})

    def _generate(self):
        level = generate_level(self._config, self._draws)
        self._levels_generated += 1
        self._levels_discarded += level.attempts - 1
        return level

    def _check_level(self, level):
        if not isinstance(level, BoxWorldLevel) or level.grid.shape != (self._size,) * 2:
            raise invalid_value("level", f"a BoxWorldLevel with a {self._size} x {self._size} "
                                "grid", type(level).__name__)

    def _load(self, level):
        self._level = level
        self._grid = level.grid.reshape(-1).tolist()
        self._pos = level.agent[0] * self._size + level.agent[1]
        self._held = -1
        self._steps = 0
        self._solved = False
        self._boxes_opened = 0
        self._distractor_locks = {
            box.row * self._size + box.col + 1 for b in level.distractors for box in b}
        self._frame = render_rgb(self._config, level.grid, level.agent, -1)
        self._frame_rows = self._frame.reshape(-1, 3)
        self._reset_next_step = False

    def step(self, action):
        if self._reset_next_step:
            return self.reset()
        target = self._pos + self._deltas[coerce_action(action)]
        outcome, held = apply_move(self._grid, target, self._held, self._lock0,
                                   self._distractor_locks)
        if outcome != BLOCKED:
            # The frame is kept up to date incrementally: the agent's two cells and the held key.
            if held != self._held:
                self._frame_rows[0] = self._held_rows[held + 1]
                self._held = held
            self._frame_rows[self._pos] = self._floor_row
            self._frame_rows[target] = self._agent_row
            self._pos = target
            if outcome == PATH_BOX:
                self._boxes_opened += 1
            elif outcome == GEM_TAKEN:
                self._solved = True
        self._steps += 1
        return self._end_step(OUTCOME_REWARDS[outcome], outcome in TERMINAL_OUTCOMES,
                              self._observation())

    def _observation(self):
        if self._rgb:
            return self._frame.copy()
        return render_one_hot(self._config, self._grid, self.agent_position, self._held)

    # Side channel (never part of the observation); `level`, `solved`, `num_steps` in the base.

    @property
    def agent_position(self):
        """The agent's cell (row, col) in frame coordinates."""
        return divmod(self._pos, self._size)

    @property
    def held_key(self):
        """Palette colour of the held key, or None."""
        return None if self._held < 0 else self._held

    @property
    def boxes_opened(self):
        """Solution-path boxes opened in the current episode."""
        return self._boxes_opened

    @property
    def grid(self):
        """The current cell codes, uint8 `[F, F]` (opened boxes and taken keys removed)."""
        return np.array(self._grid, np.uint8).reshape(self._size, self._size)

    @property
    def generation_stats(self):
        """Levels generated and levels discarded because their items did not fit [R]."""
        return {"levels": self._levels_generated, "discarded": self._levels_discarded}

    def get_state(self):
        """A `BoxWorldState` snapshot of the current episode (for `set_state`, tree search)."""
        return BoxWorldState(self._level, tuple(self._grid), self.agent_position, self._held,
                             self._steps, self._solved, self._boxes_opened,
                             self._reset_next_step)

    def set_state(self, state):
        """Restores a `BoxWorldState` (possibly edited with `_replace`); the RNG is untouched."""
        state = BoxWorldState(*state)
        if state.level is not self._level:
            self._load(state.level)
        if len(state.grid) != self._size * self._size:
            raise invalid_value("state.grid", f"{self._size * self._size} cell codes",
                                f"{len(state.grid)} codes")
        row, col = check_grid_cell("state.agent", state.agent, self._size, self._size)
        self._grid = [int(c) for c in state.grid]
        self._pos = row * self._size + col
        self._held = -1 if state.held_key is None else int(state.held_key)
        self._steps, self._solved = state.num_steps, state.solved
        self._boxes_opened, self._reset_next_step = state.boxes_opened, state.needs_reset
        self._frame[...] = render_rgb(self._config, self._grid, (row, col), self._held)
