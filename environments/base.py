"""The base every BoxWorld variant shares: specs, actions, episode bookkeeping, side channels.

Two base classes, one for a single level (`LevelEnvironment`, a `dm_env.Environment`) and one
for N levels stepped together in NumPy (`BatchedLevelEnvironment`). A variant (`BoxWorld`,
`BridgeBoxWorld` and their batched forms) supplies its config, its level generator, its rules and
its rendering; the base owns what is the same for all of them:

* the specs: the observation spec of the variant's config, `DiscreteArray(4)` actions (0 up,
  1 down, 2 left, 3 right), float32 rewards and discounts in [0, 1]; the spec of one level is also
  the spec of each slot of a batched environment;
* the episode's end: LAST with discount 0 on a terminal step, `dm_env.truncation` with the config's
  `time_limit_discount` after `max_steps` actions, and a new level on the step after LAST (its
  action ignored), as in dm_env's catch example;
* the side channel (never part of the observation): `level` / `levels`, `solved` (the gem was
  collected), `num_steps`, `config`;
* `Draws`, the block-buffered uniform draws every generator samples from.
"""

import dataclasses

import dm_env
import numpy as np
from dm_env import specs

from keras_relational.validation import check_int_at_least, check_seed, invalid_value

# Actions, in the order of DeepMind's pycolab Box-World (Zambaldi et al. 2019): 0 up, 1 down,
# 2 left, 3 right. Bridge BoxWorld uses the same order (see `bridge_boxworld.CLIFT_ACTIONS`).
ACTION_NAMES = ("up", "down", "left", "right")
NUM_ACTIONS = 4

FIRST, MID, LAST = (int(t) for t in dm_env.StepType)

_ZERO = np.float32(0.0)
_ONE = np.float32(1.0)
_ACTIONS = {0: 0, 1: 1, 2: 2, 3: 3}


class GridLevel:
    """Equality of a frozen level dataclass (declared with ``eq=False``) holding a NumPy ``grid``:
    field by field, the grid by value. Levels are unhashable, as mutable-array holders are."""

    def __eq__(self, other):
        if not isinstance(other, type(self)):
            return NotImplemented
        return all(
            np.array_equal(getattr(self, f.name), getattr(other, f.name))
            if f.name == "grid" else getattr(self, f.name) == getattr(other, f.name)
            for f in dataclasses.fields(self))

    __hash__ = None


class Draws:
    """Uniform integers from a `RandomState`, drawn in blocks (cheap per call, deterministic)."""

    __slots__ = ("_rng", "_buffer", "_index")

    def __init__(self, rng):
        self._rng = rng
        self._buffer = []
        self._index = 0

    def random(self):
        """A uniform float in [0, 1)."""
        if self._index == len(self._buffer):
            self._buffer = self._rng.random_sample(256).tolist()
            self._index = 0
        u = self._buffer[self._index]
        self._index += 1
        return u

    def randint(self, n):
        """A uniform integer in [0, n)."""
        if self._index == len(self._buffer):
            self._buffer = self._rng.random_sample(256).tolist()
            self._index = 0
        u = self._buffer[self._index]
        self._index += 1
        return int(u * n)

    def shuffle(self, values):
        """Fisher-Yates shuffle of a list, in place."""
        for i in range(len(values) - 1, 0, -1):
            j = self.randint(i + 1)
            values[i], values[j] = values[j], values[i]
        return values

    def sample(self, values, k):
        """k distinct elements of a list in uniformly random order (partial shuffle)."""
        values = list(values)
        for i in range(k):
            j = i + self.randint(len(values) - i)
            values[i], values[j] = values[j], values[i]
        return values[:k]


def coerce_action(action):
    """`action` as an int in [0, 4); raises a ValueError naming the argument otherwise."""
    # The dict lookup is the fast path for plain ints; `2.0`, `np.float32(3.0)` and `True` hash
    # like ints, so only an exact int (or NumPy integer) may take it.
    if type(action) is int:
        try:
            return _ACTIONS[action]
        except KeyError:
            pass
    value = np.asarray(action)
    if value.shape != () or not np.issubdtype(value.dtype, np.integer) or not (
            0 <= value < NUM_ACTIONS):
        raise invalid_value("action", "an integer in [0, 4) (0 up, 1 down, 2 left, 3 right)",
                            action)
    return int(value)


def check_actions(actions, batch_size):
    """`actions` as an integer array `[batch_size]` of values in [0, 4)."""
    actions = np.asarray(actions)
    if (actions.shape != (batch_size,) or not np.issubdtype(actions.dtype, np.integer)
            or actions.min() < 0 or actions.max() >= NUM_ACTIONS):
        raise invalid_value(
            "actions", f"integers in [0, {NUM_ACTIONS}) of shape ({batch_size},)",
            actions if actions.size <= 8 else f"array {actions.dtype}{actions.shape}")
    return actions


def per_level_seeds(batch_size, seed, seeds):
    """One seed per level: `seeds` checked, or drawn from `RandomState(seed)`."""
    if seeds is None:
        rng = np.random.RandomState(check_seed("seed", seed))
        return rng.randint(0, 2**31 - 1, size=batch_size).tolist()
    seeds = [check_seed("seeds", s, allow_none=False) for s in seeds]
    if len(seeds) != batch_size:
        raise invalid_value("seeds", f"{batch_size} seeds (one per level)", f"{len(seeds)} seeds")
    return seeds


class _Specs:
    """The dm_env specs of one level; the observation spec comes from `self._config`."""

    def observation_spec(self):
        return self._config.observation_spec()

    def action_spec(self):
        return specs.DiscreteArray(NUM_ACTIONS, dtype=np.int32, name="action")

    def reward_spec(self):
        return specs.Array((), np.float32, name="reward")

    def discount_spec(self):
        return specs.BoundedArray((), np.float32, 0.0, 1.0, name="discount")


class LevelEnvironment(_Specs, dm_env.Environment):
    """A `dm_env.Environment` playing one generated level at a time.

    Subclasses implement `_generate()` (a new level from `self._draws`), `_check_level(level)`,
    `_load(level)` (which sets `self._level`, resets `self._steps`, `self._solved` and
    `self._reset_next_step`), `step(action)` (ending with `self._end_step`), `_observation()`
    and keep `self._frame`, the current uint8 RGB frame.
    """

    def __init__(self, config, seed):
        self._config = config
        self._rng = np.random.RandomState(check_seed("seed", seed))
        self._draws = Draws(self._rng)
        self._max_steps = config.max_steps if config.max_steps is not None else np.inf
        self._truncation_discount = np.float32(config.time_limit_discount)
        self._level = None
        self._steps = 0
        self._solved = False
        self._reset_next_step = True

    @property
    def config(self):
        return self._config

    def reset(self):
        return self.load(self._generate())

    def load(self, level):
        """Starts an episode on a given level (e.g. a fixed evaluation set); returns FIRST."""
        self._check_level(level)
        self._load(level)
        return dm_env.restart(self._observation())

    def _end_step(self, reward, terminal, observation):
        """The timestep after `self._steps` actions: LAST, truncated or MID."""
        if terminal:
            self._reset_next_step = True
            return dm_env.TimeStep(dm_env.StepType.LAST, reward, _ZERO, observation)
        if self._steps >= self._max_steps:
            self._reset_next_step = True
            return dm_env.truncation(reward, observation, self._truncation_discount)
        return dm_env.transition(reward, observation, _ONE)

    def render(self):
        """The current RGB frame, uint8 `[H, W, 3]` (whatever the observation type)."""
        if self._level is None:
            raise RuntimeError("render() called before reset().")
        return self._frame.copy()

    # Side channel (never part of the observation).

    @property
    def level(self):
        """The level being played (solution, distractors or bridge, effective sizes)."""
        return self._level

    @property
    def solved(self):
        """Whether the gem was collected in the current episode."""
        return self._solved

    @property
    def num_steps(self):
        """Actions taken in the current episode."""
        return self._steps


class BatchedLevelEnvironment(_Specs):
    """N levels stepped together with vectorised NumPy (TF-Agents' batched convention).

    `reset()` and `step(actions)` return a `dm_env.TimeStep` of arrays: `step_type` int32 `[N]`,
    `reward` and `discount` float32 `[N]`, `observation` `[N, ...]`. A slot whose previous step was
    LAST starts a new level on the next `step` (its action ignored) and returns FIRST with reward
    0 and discount 1, the values TF-Agents' dm_env conversion gives a FIRST step.

    Subclasses implement `_load(rows)` (new levels into the slots `rows`, from `self._draws[i]`;
    it resets `self._steps`, `self._solved` and `self._needs_reset` there), `step(actions)` (ending
    with `self._end_step`) and `_observation()`.
    """

    def __init__(self, config, batch_size, seed, seeds):
        n = check_int_at_least("batch_size", batch_size, 1)
        self._config = config
        self._batch_size = n
        self._draws = [Draws(np.random.RandomState(s))
                       for s in per_level_seeds(n, seed, seeds)]
        self._rows = np.arange(n)
        self._max_steps = config.max_steps if config.max_steps is not None else np.iinfo(
            np.int64).max
        self._truncation_discount = np.float32(config.time_limit_discount)
        self._steps = np.zeros(n, np.int64)
        self._solved = np.zeros(n, bool)
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

    def reset(self):
        """Starts a new level in every slot; all step types are FIRST."""
        self._load(self._rows)
        n = self._batch_size
        return dm_env.TimeStep(np.full(n, FIRST, np.int32), np.zeros(n, np.float32),
                               np.ones(n, np.float32), self._observation())

    def _end_step(self, restart, active, reward, terminal):
        """The batched timestep after a step: counts steps, truncates, restarts finished slots.

        `restart` marks the slots that were LAST before this step (they start a new level now),
        `active` the others; `reward` float32 `[N]` and `terminal` bool `[N]` are this step's.
        """
        self._steps += active
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

    def close(self):
        pass

    # Side channel (never part of the observation).

    @property
    def levels(self):
        """The current level of every slot."""
        return list(self._levels)

    @property
    def solved(self):
        """bool `[N]`: whether the gem was collected in each slot's current episode."""
        return self._solved.copy()

    @property
    def num_steps(self):
        """int `[N]`: actions taken in each slot's current episode."""
        return self._steps.copy()
