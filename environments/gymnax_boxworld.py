"""Box-World and Bridge BoxWorld as gymnax environments (optional extra `[gymnax]`).

`GymnaxBoxWorld` and `GymnaxBridgeBoxWorld` are `gymnax.environments.environment.Environment`s
over the functional forms of `jax_boxworld` (same rules, observations, rewards and on-device
levels), so gymnax's wrappers (`LogWrapper`, `FlattenObservationWrapper`, the Gymnasium and
dm_env adapters) and gymnax-based trainers (PureJaxRL, Stoix) take them as they are. gymnax's own
`step` auto-resets; with gymnax 1.x it returns `(obs, state, reward, terminated, truncated,
info)`, `truncated` True once `max_steps_in_episode` actions were taken (also when the same step
terminated). Needs `KERAS_BACKEND=jax`.

Example (under `KERAS_BACKEND=jax`):

```python
import jax
from gymnax.wrappers.purerl import LogWrapper
from keras_relational.environments.gymnax_boxworld import GymnaxBoxWorld

env = LogWrapper(GymnaxBoxWorld(goal_length=(1, 2), num_distractors=(0, 1)))
params = env.default_params
keys = jax.random.split(jax.random.key(0), 16)
obs, state = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
actions = jax.numpy.zeros(16, "int32")
obs, state, reward, terminated, truncated, info = jax.vmap(
    env.step, in_axes=(0, 0, 0, None))(keys, state, actions, params)
```
"""

import jax.numpy as jnp
from gymnax.environments import environment, spaces

from .jax_boxworld import EnvParams, FunctionalBoxWorld, FunctionalBridgeBoxWorld


class _GymnaxLevelEnvironment(environment.Environment):
    """A `jax_boxworld` functional environment as a gymnax `Environment`."""

    _functional_class = None

    def __init__(self, config=None, **kwargs):
        super().__init__()
        self._functional = self._functional_class(config=config, **kwargs)

    @property
    def functional(self):
        """The `jax_boxworld` form underneath (its `reset` / `step`, `tensor_env`)."""
        return self._functional

    @property
    def default_params(self) -> EnvParams:
        return self._functional.default_params

    def reset_env(self, key, params):
        return self._functional.reset(key, params)

    def step_env(self, key, state, action, params):
        observation, state, reward, terminated, _, discount = self._functional.step_env(
            state, action, params)
        return observation, state, reward, terminated, {"discount": discount,
                                                        "solved": state["solved"]}

    def get_obs(self, state, params=None, key=None):
        batched = {name: value[None] for name, value in state.items()
                   if name not in ("steps", "solved")}
        return self._functional.tensor_env.observe(batched)[0]

    def is_truncated(self, state, params):
        if params.max_steps_in_episode is None:
            return jnp.zeros((), bool)
        return state["steps"] >= params.max_steps_in_episode

    @property
    def num_actions(self) -> int:
        return self._functional.num_actions

    def action_space(self, params=None):
        return spaces.Discrete(self._functional.num_actions)

    def observation_space(self, params=None):
        low, high = self._functional.observation_bounds
        return spaces.Box(low, high, self._functional.observation_shape,
                          self._functional.observation_dtype)


class GymnaxBoxWorld(_GymnaxLevelEnvironment):
    """Box-World (Zambaldi et al. 2019) as a gymnax `Environment`; arguments as
    `jax_boxworld.FunctionalBoxWorld` (a `BoxWorldConfig` or its fields)."""

    _functional_class = FunctionalBoxWorld

    @property
    def name(self) -> str:
        return "BoxWorld-v0"


class GymnaxBridgeBoxWorld(_GymnaxLevelEnvironment):
    """Bridge BoxWorld (Clift et al. 2020) as a gymnax `Environment`; arguments as
    `jax_boxworld.FunctionalBridgeBoxWorld`."""

    _functional_class = FunctionalBridgeBoxWorld

    @property
    def name(self) -> str:
        return "BridgeBoxWorld-v0"
