"""Box-World and Bridge BoxWorld as pure single-environment functions under JAX (gymnax style).

`TensorBoxWorld` / `TensorBridgeBoxWorld` step N levels at once from a level bank; JAX users
compose single environments instead (gymnax, PureJaxRL, Stoix): pure functions over an explicit
state, batched by `jax.vmap`, compiled by `jax.jit`, a fresh level drawn from a PRNG key at every
reset. This module is that form, built on the tensor environments' rules (`move`, `observe`) and
on-device level sampler (`sample_levels`), so the dynamics are theirs:

* `obs, state = env.reset(key, params)`: a level drawn on the device from `key` (the NumPy
  generator's distribution, `tensor_levels`).
* `obs, state, reward, done, info = env.step(key, state, action, params)`: one action (0 up,
  1 down, 2 left, 3 right). `done` is True when the episode ended on this step (the gem taken or
  a distractor box opened: `info["terminated"]`; `max_steps_in_episode` actions:
  `info["truncated"]`), and then `obs` and `state` already belong to a new level drawn from
  `key` (auto-reset inside `step`, gymnax's convention); `info["discount"]` is the dm_env
  discount (0 on termination, `time_limit_discount` on truncation, else 1),
  `info["final_observation"]` the observation the step reached before the reset, and
  `info["solved"]` whether that episode took the gem.
* `params` (optional, `env.default_params` when None) is an `EnvParams`: a frozen dataclass of
  static settings (a pytree without leaves: changing it recompiles).
* `state` is a dict of arrays without a batch axis: the tensor environment's entries
  (`"grid"`, `"pos"`...), `"steps"` and `"solved"`.

Observations and rewards equal the batched tensor environment's slot for slot (a test compares
`jax.vmap(env.step)` with `TensorBoxWorld.step` on the same levels and actions). Needs
`KERAS_BACKEND=jax`; `keras_relational.environments.gymnax_boxworld` wraps these classes as
gymnax `Environment`s.

Example (under `KERAS_BACKEND=jax`):

```python
import jax
from keras_relational.environments.jax_boxworld import FunctionalBoxWorld

env = FunctionalBoxWorld(goal_length=(1, 2), num_distractors=(0, 1))
params = env.default_params
keys = jax.random.split(jax.random.key(0), 64)
obs, state = jax.vmap(env.reset, in_axes=(0, None))(keys, params)   # uint8 [64, 14, 14, 3]
step = jax.jit(jax.vmap(env.step, in_axes=(0, 0, 0, None)))
actions = jax.numpy.zeros(64, "int32")
obs, state, reward, done, info = step(keys, state, actions, params)
```
"""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from keras_relational.validation import check_int_at_least, invalid_value

from .base import NUM_ACTIONS

# The state entries that the functional form adds to the tensor environment's.
_EPISODE_KEYS = ("steps", "solved")
# Entries of the batched tensor state that a single environment does not carry.
_BATCH_ONLY_KEYS = ("needs_reset", "level", "cursor")


@dataclasses.dataclass(frozen=True)
class EnvParams:
    """Static settings of a functional Box-World (hashable; a pytree without leaves).

    Attributes:
      max_steps_in_episode: actions before the episode is truncated, or None for no limit
        (gymnax's name; the default is the environment's `max_steps`, 120 for Box-World [R]).
      time_limit_discount: `info["discount"]` of the truncation step.
    """

    max_steps_in_episode: int | None = None
    time_limit_discount: float = 1.0

    def __post_init__(self):
        if self.max_steps_in_episode is not None:
            check_int_at_least("max_steps_in_episode", self.max_steps_in_episode, 1)
        if not 0.0 <= self.time_limit_discount <= 1.0:
            raise invalid_value("time_limit_discount", "a float in [0, 1]",
                                self.time_limit_discount)


jax.tree_util.register_dataclass(
    EnvParams, data_fields=[], meta_fields=["max_steps_in_episode", "time_limit_discount"])


def _seed_state(key, dtype):
    """The keras seed state int `[2]` of a JAX PRNG key (typed or raw uint32 `[2]`)."""
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        key = jax.random.key_data(key)
    key = jnp.asarray(key)
    if key.shape != (2,):
        raise invalid_value("key", "one PRNG key (jax.random.key or jax.random.PRNGKey; vmap "
                            "the function over a batch of keys)", f"shape {key.shape}")
    return key.astype(dtype)


class _Functional:
    """A tensor Box-World variant as single-environment pure functions (module docstring)."""

    _tensor_module = None
    _tensor_class = None

    def __init__(self, config=None, **kwargs):
        import importlib

        from .tensor_ops import keras_backend
        from .tensor_random import seed_state

        if keras_backend() != "jax":
            raise invalid_value("KERAS_BACKEND", f"'jax' for {type(self).__name__} (set it "
                                "before Keras is imported)", keras_backend())
        module = importlib.import_module(self._tensor_module, __package__)
        tensor_class = getattr(module, self._tensor_class)
        self._tensor = tensor_class(config=config, level_source="device", **kwargs)
        self._seed_dtype = seed_state(0).dtype
        spec = self._tensor.observation_spec()
        self._observation_shape = tuple(spec.shape)
        self._observation_dtype = np.dtype(spec.dtype)
        self._observation_bounds = (np.asarray(spec.minimum).item(),
                                    np.asarray(spec.maximum).item())

    @property
    def tensor_env(self):
        """The batched tensor environment whose rules and levels these functions play."""
        return self._tensor

    @property
    def config(self):
        return self._tensor.config

    @property
    def default_params(self):
        config = self._tensor.config
        return EnvParams(max_steps_in_episode=config.max_steps,
                         time_limit_discount=float(config.time_limit_discount))

    @property
    def num_actions(self):
        return NUM_ACTIONS

    @property
    def observation_shape(self):
        return self._observation_shape

    @property
    def observation_dtype(self):
        return self._observation_dtype

    @property
    def observation_bounds(self):
        """(low, high) of every observation entry."""
        return self._observation_bounds

    def _check_params(self, params):
        if params is None:
            return self.default_params
        if not isinstance(params, EnvParams):
            raise invalid_value("params", "an EnvParams (or None for default_params)",
                                type(params).__name__)
        return params

    # Compiled as gymnax compiles its `Environment.reset` / `step` (the instance static): an
    # un-jitted `jax.vmap(env.reset)` then builds one program instead of dispatching every
    # operation of the level sampler on its own (several times the compile time).
    @functools.partial(jax.jit, static_argnames=("self",))
    def reset(self, key, params=None):
        """`(obs, state)`: a new level drawn from the PRNG `key`."""
        self._check_params(params)
        bank, _, _ = self._tensor.sample_levels(_seed_state(key, self._seed_dtype), 1)
        batched, timestep = self._tensor.reset(bank, 1)
        state = {name: value[0] for name, value in batched.items()
                 if name not in _BATCH_ONLY_KEYS}
        return timestep.observation[0], state

    def step_env(self, state, action, params=None):
        """One action without the auto-reset: `(obs, state, reward, terminated, truncated,
        discount)`; `state["solved"]` tells whether the gem was taken."""
        params = self._check_params(params)
        action = jnp.asarray(action)
        if action.shape != () or not jnp.issubdtype(action.dtype, jnp.integer):
            raise invalid_value("action", f"one integer in [0, {NUM_ACTIONS}) (vmap the "
                                "function over a batch of actions)",
                                f"shape {action.shape} dtype {action.dtype}")
        batched = {name: value[None] for name, value in state.items()
                   if name not in _EPISODE_KEYS}
        moved, reward, terminated, gem = self._tensor.move(batched, action.astype("int32")[None])
        observation = self._tensor.observe(moved)[0]
        new = {name: value[0] for name, value in moved.items()}
        new["steps"] = state["steps"] + 1
        new["solved"] = state["solved"] | gem[0]
        terminated = terminated[0]
        if params.max_steps_in_episode is None:
            truncated = jnp.zeros_like(terminated)
        else:
            truncated = ~terminated & (new["steps"] >= params.max_steps_in_episode)
        discount = jnp.where(terminated, 0.0, jnp.where(truncated, params.time_limit_discount,
                                                        1.0)).astype("float32")
        return observation, new, reward[0], terminated, truncated, discount

    @functools.partial(jax.jit, static_argnames=("self",))
    def step(self, key, state, action, params=None):
        """`(obs, state, reward, done, info)`; after `done`, `obs` and `state` are those of a
        new level drawn from `key` (see the module docstring)."""
        observation, new, reward, terminated, truncated, discount = self.step_env(
            state, action, params)
        done = terminated | truncated
        reset_observation, reset_state = self.reset(key, params)
        state = jax.tree.map(lambda r, s: jnp.where(done, r, s), reset_state, new)
        info = {"terminated": terminated, "truncated": truncated, "discount": discount,
                "solved": new["solved"], "final_observation": observation}
        return (jnp.where(done, reset_observation, observation), state, reward, done, info)


class FunctionalBoxWorld(_Functional):
    """Box-World (Zambaldi et al. 2019, Sec. 3.1) as single-environment pure JAX functions.

    Args:
      config: a `BoxWorldConfig`, or None and its fields as keyword arguments (`goal_length`,
        `num_distractors`, ..., `max_steps`, `observation_type`: the arguments of `BoxWorld` but
        `seed`; `holdout` is not drawn on the device).
    """

    _tensor_module = ".boxworld.tensor"
    _tensor_class = "TensorBoxWorld"

    @classmethod
    def from_preset(cls, name, **overrides):
        """The environment of `boxworld.PRESETS[name]`, updated by `overrides`."""
        from .boxworld import PRESETS

        if name not in PRESETS:
            raise invalid_value("name", f"one of {sorted(PRESETS)}", name)
        return cls(**{**PRESETS[name], **overrides})


class FunctionalBridgeBoxWorld(_Functional):
    """Bridge BoxWorld (Clift et al. 2020) as single-environment pure JAX functions.

    Args:
      config: a `BridgeConfig`, or None and its fields as keyword arguments (the arguments of
        `BridgeBoxWorld` but `seed`).
    """

    _tensor_module = ".bridge_boxworld.tensor"
    _tensor_class = "TensorBridgeBoxWorld"
