"""What every BoxWorld in tensor ops shares: the pure batched `reset` / `step` contract.

`TensorBoxWorld` and `TensorBridgeBoxWorld` play exactly the rules of `BatchedBoxWorld` /
`BatchedBridgeBoxWorld` (and so of `BoxWorld` / `BridgeBoxWorld`), written with `keras.ops` only:
the same code runs under TensorFlow, JAX and PyTorch, eagerly or compiled (`jax.jit`,
`tf.function(jit_compile=True)`), so an actor-learner loop can step the environment on the
accelerator inside its own compiled function (the Podracer "Anakin" layout; Hessel et al. 2021).

The contract (what a compiled loop relies on; these names stay):

* `env = TensorBoxWorld(**level_kwargs)` (or `TensorBoxWorld(config=BoxWorldConfig(...))`):
  the level parameters of the NumPy environment, validated at construction.
* `bank = env.level_bank(num_levels, seed)`: `num_levels` levels as a dict of arrays with a
  leading `[M]` axis (a pytree of fixed shapes, see the variant's `bank_from_levels`), drawn
  from the distribution of the NumPy generator (the reference) by the environment's
  `level_source`: "numpy" (the default) runs the NumPy generator on the host (NumPy arrays);
  "device" runs the same distribution written in `keras.ops` (`tensor_random` and the variant's
  `tensor_levels`; backend tensors), also as the pure `env.sample_levels(seed_state,
  num_levels)`, which a compiled loop calls inside its own compiled function. A host thread
  drawing the next NumPy bank while the device steps keeps the loop fed (`env.bank_stream`,
  below).
* `state, timestep = env.reset(bank, num_envs)`: `num_envs` (a Python int, static) slots play
  bank levels 0..N-1; every step type is FIRST (reward 0, discount 1).
* `state, timestep = env.step(state, actions, bank)`: pure; `actions` int `[N]` (0 up, 1 down,
  2 left, 3 right). A slot whose previous step was LAST starts the next bank level now (its action
  ignored) and returns FIRST with reward 0 and discount 1, as `BatchedBoxWorld` does. Slots that
  restart in the same step take consecutive bank levels in slot order.
* `timestep` is a `dm_env.TimeStep` (a named tuple, so a pytree) of backend tensors:
  `step_type` int32 `[N]`, `reward` float32 `[N]`, `discount` float32 `[N]` (0 on a terminal
  step, `time_limit_discount` on the truncation step after `max_steps` actions, else 1) and
  `observation` (`observation_spec()` with a leading `[N]`: uint8 RGB or float32 one-hot).
* `state` is a dict of tensors, every entry `[N, ...]` but `"cursor"` (int32 scalar: the next
  bank level, modulo the bank size). Always present: `"steps"` (actions in the current episode),
  `"needs_reset"`, `"solved"` (the gem was taken), `"level"` (the bank index of each slot's
  level; side channel, never part of the observation); the variant adds its own entries.
* `observation_spec()`, `action_spec()`, `reward_spec()`, `discount_spec()`: the `dm_env` specs
  of one slot, those of the NumPy environment.

Banks and fresh levels. The bank is an argument of the compiled function, not a constant baked
into it: a loop draws a new bank per compiled call (`stream = env.bank_stream(M, seed)`, then
`bank = next(stream)` per update; a background thread draws the next banks while the device
runs, so the host never stalls the loop as long as it draws levels faster than the loop consumes
them). The cursor wraps around: within one call, every level is fresh as long as that call
starts at most M episodes (M >= num_envs * ceil(steps_per_call / 2) is always enough: a slot
starts at most one episode every two steps, one action and the restart); with a new bank per
call, every episode gets a fresh level. A bank's arrays may be NumPy arrays or backend tensors.
With `level_source="device"` the compiled call can draw its bank itself instead:
`bank, _, seed = env.sample_levels(seed, M)` inside the function, the seed state carried along.

Bad input raises a `ValueError` naming the argument when the function is traced: actions of a
non-integer dtype or of the wrong shape (the batch of `state`), a bank of other shapes. Action
values are checked where they are concrete (NumPy arrays, eager tensors); inside a compiled
function they are not known, and values outside [0, 4) are outside the contract.
"""

import dm_env
import numpy as np
from keras import ops

from keras_relational.validation import check_int_at_least, check_one_of, invalid_value

from .base import FIRST, LAST, MID, Draws, _Specs
from .boxworld.config import MAX_LEVEL_ATTEMPTS
from .boxworld.generator import LevelGenerationError
from .level_banks import DEFAULT_LEVEL_SOURCE, LEVEL_SOURCES, BankStream
from .tensor_ops import check_actions, row_select
from .tensor_random import seed_state

# The entries of `state` that the base owns; a variant's `_load` returns the others.
BASE_KEYS = ("steps", "needs_reset", "solved", "level", "cursor")


class TensorLevelEnvironment(_Specs):
    """N levels stepped together with `keras.ops`: the base of the tensor BoxWorlds.

    A variant sets `self._config` and implements `_generate(draws)` (one NumPy level),
    `bank_from_levels(levels)`, `_bank_shapes()` (the trailing shape of each bank entry),
    `_load(bank, index)` (its state entries for bank levels `index` `[N]`),
    `_move(state, actions, active)` (returns `(state, reward, terminal, gem)`) and
    `_observe(state)`. See the module docstring for the contract.
    """

    _max_attempts = MAX_LEVEL_ATTEMPTS

    def __init__(self, config, level_source=DEFAULT_LEVEL_SOURCE):
        self._config = config
        self._level_source = check_one_of("level_source", level_source, LEVEL_SOURCES)
        self._sampler = self._level_sampler() if level_source == "device" else None
        self._max_steps = config.max_steps
        self._truncation_discount = float(config.time_limit_discount)

    @property
    def config(self):
        return self._config

    @property
    def level_source(self):
        """Where `level_bank` draws levels: "numpy" (host) or "device" (`keras.ops`)."""
        return self._level_source

    # Levels.

    def generate_levels(self, num_levels, seed):
        """`num_levels` NumPy levels from the reference generator, seeded by `seed`."""
        num_levels = check_int_at_least("num_levels", num_levels, 1)
        draws = Draws(np.random.RandomState(seed))
        return [self._generate(draws) for _ in range(num_levels)]

    def level_bank(self, num_levels, seed):
        """A bank of `num_levels` levels seeded by the int `seed`, from the `level_source`.

        "numpy": a dict of NumPy arrays `[M, ...]` drawn by the NumPy generator. "device": a
        dict of backend tensors from `sample_levels` (run eagerly; compile `sample_levels`
        yourself to draw banks inside a compiled function). Raises `LevelGenerationError` where
        the NumPy generator would (no level fitted, or a discarded level with `strict=True`).
        """
        num_levels = check_int_at_least("num_levels", num_levels, 1)
        if self._sampler is None:
            return self.bank_from_levels(self.generate_levels(num_levels, seed))

        bank, info, _ = self.sample_levels(seed_state(seed), num_levels)
        self.check_sample(info)
        return bank

    def sample_levels(self, seed, num_levels):
        """`(bank, info, seed)`: `num_levels` levels drawn in `keras.ops` (pure, compilable).

        `seed` is a seed state (int `[2]`, e.g. `tensor_random.seed_state(0)` or the state of a
        `keras.random.SeedGenerator`); the advanced state comes back, so consecutive calls draw
        fresh levels. `bank` is what `reset` / `step` take; `info` is the variant's level
        metadata (see its sampler). Needs `level_source="device"`.
        """
        if self._sampler is None:
            raise invalid_value("level_source", "'device' for sample_levels",
                                self._level_source)
        return self._sampler.sample(seed, check_int_at_least("num_levels", num_levels, 1))

    def check_sample(self, info):
        """Raises `LevelGenerationError` where `sample_levels`' `info` shows levels the NumPy
        generator would have refused (none fitted, or one was discarded with `strict=True`)."""
        if "attempts" not in info:
            return
        attempts = np.asarray(ops.convert_to_numpy(info["attempts"]))
        limit = 1 if getattr(self._config, "strict", False) else self._max_attempts
        if attempts.max() > limit:
            raise LevelGenerationError(
                f"{int((attempts > limit).sum())} of {attempts.size} levels did not fit in "
                f"{limit} attempt(s) ({self._config}); use fewer or shorter distractor branches "
                "or a larger room.")

    def bank_stream(self, num_levels, seed, prefetch=2, start=0):
        """A `BankStream`: banks `start`, `start` + 1, ... of `num_levels` levels, drawn ahead in a
        background thread."""
        return BankStream(self, num_levels, seed, prefetch, start)

    def _check_bank(self, bank):
        shapes = self._bank_shapes()
        if not hasattr(bank, "keys") or set(bank.keys()) != set(shapes):
            raise invalid_value("bank", f"a dict with the entries {sorted(shapes)} (from "
                                "`level_bank`)", type(bank).__name__ if not hasattr(
                                    bank, "keys") else sorted(bank.keys()))
        size = None
        for name, trailing in shapes.items():
            shape = tuple(bank[name].shape)
            if shape[1:] != trailing or not shape[0] or size not in (None, shape[0]):
                raise invalid_value(f"bank[{name!r}]", f"shape (M,) + {trailing} with the same "
                                    "M >= 1 for every entry", f"shape {shape}")
            size = shape[0]
        return size

    # The pure functions.

    def reset(self, bank, num_envs):
        """Starts bank levels 0..N-1 in `num_envs` slots: `(state, timestep)`, all FIRST."""
        n = check_int_at_least("num_envs", num_envs, 1)
        size = self._check_bank(bank)
        index = ops.mod(ops.arange(n, dtype="int32"), size)
        state = dict(self._load(bank, index))
        state.update(
            steps=ops.zeros((n,), "int32"), needs_reset=ops.zeros((n,), "bool"),
            solved=ops.zeros((n,), "bool"), level=index,
            cursor=ops.convert_to_tensor(n % size, "int32"))
        timestep = dm_env.TimeStep(ops.full((n,), FIRST, "int32"), ops.zeros((n,), "float32"),
                                   ops.ones((n,), "float32"), self._observe(state))
        return state, timestep

    def step(self, state, actions, bank):
        """One step of every slot: `(state, timestep)`; see the module docstring."""
        if not hasattr(state, "keys") or "needs_reset" not in state:
            raise invalid_value("state", "the state dict of `reset` / `step`",
                                type(state).__name__)
        n = state["needs_reset"].shape[0]
        actions = check_actions(actions, n)
        size = self._check_bank(bank)
        restart = state["needs_reset"]
        active = ops.logical_not(restart)
        moved, reward, terminal, gem = self._move(state, actions, active)
        steps = state["steps"] + ops.cast(active, "int32")
        if self._max_steps is None:
            truncated = ops.zeros_like(terminal)
        else:
            truncated = active & ~terminal & (steps >= self._max_steps)
        last = terminal | truncated
        step_type = ops.where(restart, FIRST, ops.where(last, LAST, MID))
        discount = ops.where(terminal, 0.0, ops.where(truncated, self._truncation_discount, 1.0))
        # Auto-reset: the slots that were LAST take the next bank levels, in slot order.
        offsets = ops.cumsum(ops.cast(restart, "int32")) - 1
        index = ops.mod(state["cursor"] + offsets, size)
        loaded = self._load(bank, index)
        new = {key: row_select(restart, loaded[key], moved[key]) for key in loaded}
        new.update(
            steps=ops.where(restart, 0, steps), needs_reset=last,
            solved=(state["solved"] | gem) & active,
            level=ops.where(restart, index, state["level"]),
            cursor=ops.mod(state["cursor"] + ops.sum(ops.cast(restart, "int32")), size))
        new["steps"] = ops.cast(new["steps"], "int32")
        new["level"] = ops.cast(new["level"], "int32")
        new["cursor"] = ops.cast(new["cursor"], "int32")
        timestep = dm_env.TimeStep(ops.cast(step_type, "int32"), ops.cast(reward, "float32"),
                                   ops.cast(discount, "float32"), self._observe(new))
        return new, timestep

    def observe(self, state):
        """The observation `[N, ...]` of a state (what `reset` / `step` return)."""
        return self._observe(state)

    def move(self, state, actions):
        """The rules alone: `(state, reward, terminal, gem)` after every slot of `state` moves.

        `state` needs only the variant's entries (`"grid"`, `"pos"`...); the result holds them
        moved, `reward` float32 `[N]`, `terminal` and `gem` bool `[N]`. `step` is this plus the
        episode's bookkeeping (step counts, truncation, restarts); the single-environment
        functional forms (`jax_boxworld`) add their own.
        """
        actions = check_actions(actions, tuple(actions.shape)[0] if hasattr(actions, "shape")
                                else len(actions))
        return self._move(state, actions, ops.ones(tuple(actions.shape), "bool"))
