"""Box-World and Bridge BoxWorld as Gymnasium environments (optional extra `[gymnasium]`).

The dm_env classes (`BoxWorld`, `BridgeBoxWorld`, `BatchedBoxWorld`, `BatchedBridgeBoxWorld`)
play underneath: same levels for the same seed, same rules, same observations and rewards. What
changes is Gymnasium's interface:

* `BoxWorldEnv` / `BridgeBoxWorldEnv` (`gymnasium.Env`): `reset(seed=s)` starts the level that
  `BoxWorld(seed=s)` starts, `step(a)` returns `(observation, reward, terminated, truncated,
  info)`: `terminated` when the gem is taken or a distractor box opened (dm_env's LAST with
  discount 0), `truncated` after `max_steps` actions (dm_env's truncation). Call `reset()` after
  either; `render_mode="rgb_array"` renders the RGB frame whatever the observation type.
* `BoxWorldVectorEnv` / `BridgeBoxWorldVectorEnv` (`gymnasium.vector.VectorEnv`): N levels
  stepped together in NumPy by the batched dm_env classes, with Gymnasium's next-step autoreset
  (`metadata["autoreset_mode"]`): the step after a sub-environment terminated or truncated
  resets it, ignores its action and returns its first observation with reward 0 and
  `terminated = truncated = False`. `reset(seed=s)` seeds sub-environment i with `s + i`, as
  `gymnasium.vector.SyncVectorEnv` does, so it plays exactly like a `SyncVectorEnv` of
  `BoxWorldEnv`s.

The ids `keras_relational/BoxWorld-v0` and `keras_relational/BridgeBoxWorld-v0` are registered
when this module is imported (as ale-py and gymnasium-robotics register theirs; Gymnasium 1.0
dropped the entry-point plugins), so `import keras_relational.environments` stays free of
Gymnasium. Keyword arguments of `gymnasium.make` / `make_vec` are the dm_env classes' (`preset`
names one of `boxworld.PRESETS`, Zambaldi et al. 2019's settings); `make_vec` uses the native
vector environment.

Example:

```python
import gymnasium as gym
import keras_relational.environments.gymnasium_boxworld as gym_boxworld

gym.register_envs(gym_boxworld)  # a no-op that keeps the import visible to linters
env = gym.make("keras_relational/BoxWorld-v0", preset="test_length_6", render_mode="rgb_array")
observation, info = env.reset(seed=0)                # uint8 [14, 14, 3]
observation, reward, terminated, truncated, info = env.step(3)   # move right
envs = gym.make_vec("keras_relational/BoxWorld-v0", num_envs=8, observation_type="one_hot")
observations, infos = envs.reset(seed=0)             # float32 [8, 14, 14, 44]
```
"""

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

from keras_relational.validation import invalid_value

from .base import NUM_ACTIONS
from .boxworld import PRESETS, BatchedBoxWorld, BoxWorld
from .bridge_boxworld import BatchedBridgeBoxWorld, BridgeBoxWorld

BOXWORLD_ID = "keras_relational/BoxWorld-v0"
BRIDGE_BOXWORLD_ID = "keras_relational/BridgeBoxWorld-v0"
RENDER_MODES = ("rgb_array",)
_FPS = 8


def _space(spec):
    """The `gymnasium.spaces.Box` of a dm_env `BoundedArray` observation spec."""
    return spaces.Box(low=np.asarray(spec.minimum, spec.dtype).item(),
                      high=np.asarray(spec.maximum, spec.dtype).item(), shape=spec.shape,
                      dtype=spec.dtype)


def _level_kwargs(env_class, preset, kwargs):
    """The dm_env arguments: a preset's updated by `kwargs`, without the ones Gymnasium owns."""
    for name in ("seed", "seeds", "time_limit_discount"):
        if name in kwargs:
            raise invalid_value(
                name, "no such argument: Gymnasium seeds through reset(seed=...) and marks time "
                "limits with truncated=True", kwargs[name])
    if preset is None:
        return dict(kwargs)
    if env_class is not BoxWorld:
        raise invalid_value("preset", f"None ({env_class.__name__} has no presets)", preset)
    if preset not in PRESETS:
        raise invalid_value("preset", f"one of {sorted(PRESETS)}", preset)
    return {**PRESETS[preset], **kwargs}


def _check_render_mode(render_mode):
    if render_mode is not None and render_mode not in RENDER_MODES:
        raise invalid_value("render_mode", f"None or one of {list(RENDER_MODES)}", render_mode)
    return render_mode


def _draw_seed(np_random):
    return int(np_random.integers(2**31 - 1))


class _LevelEnv(gymnasium.Env):
    """A dm_env level environment behind `gymnasium.Env` (see the module docstring)."""

    metadata = {"render_modes": list(RENDER_MODES), "render_fps": _FPS}
    _dm_env_class = None

    def __init__(self, preset=None, render_mode=None, **kwargs):
        self.render_mode = _check_render_mode(render_mode)
        # Truncation after max_steps is dm_env's with discount 1; Gymnasium reads it as truncated.
        self._kwargs = dict(_level_kwargs(self._dm_env_class, preset, kwargs),
                            time_limit_discount=1.0)
        self._env = self._dm_env_class(seed=0, **self._kwargs)  # validates the arguments now
        self._started = False
        self._done = True
        self.observation_space = _space(self._env.observation_spec())
        self.action_space = spaces.Discrete(NUM_ACTIONS)

    @property
    def dm_env(self):
        """The dm_env environment playing underneath (its side channel: `level`, `solved`...)."""
        return self._env

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if options:
            raise invalid_value("options", "None (no reset options)", options)
        if seed is not None or not self._started:
            # Equal seeds give the levels of the dm_env class with that seed.
            self._env = self._dm_env_class(
                seed=seed if seed is not None else _draw_seed(self.np_random), **self._kwargs)
            self._started = True
        timestep = self._env.reset()
        self._done = False
        return timestep.observation, self._info()

    def step(self, action):
        if self._done:
            raise RuntimeError("step() called before reset() or after the episode ended "
                               "(terminated or truncated): call reset() first.")
        timestep = self._env.step(action)
        terminated = bool(timestep.last() and timestep.discount == 0.0)
        truncated = bool(timestep.last() and not terminated)
        self._done = terminated or truncated
        return (timestep.observation, float(timestep.reward), terminated, truncated,
                self._info())

    def _info(self):
        return {"solved": self._env.solved, "num_steps": self._env.num_steps}

    def render(self):
        if self.render_mode is None:
            gymnasium.logger.warn("render() called without a render_mode: make the environment "
                                  "with render_mode='rgb_array'.")
            return None
        return self._env.render()


class BoxWorldEnv(_LevelEnv):
    """Box-World (Zambaldi et al. 2019, Sec. 3.1) as a `gymnasium.Env`.

    Example:

    ```python
    env = BoxWorldEnv(preset="train", observation_type="one_hot")
    observation, info = env.reset(seed=0)      # float32 [14, 14, 44]
    observation, reward, terminated, truncated, info = env.step(env.action_space.sample())
    ```

    Args:
      preset: None or the name of one of `boxworld.PRESETS` (the paper's settings); the other
        keyword arguments update it.
      render_mode: None or "rgb_array" (`render()` returns the uint8 RGB frame `[14, 14, 3]`).
      **kwargs: the arguments of `BoxWorld` (goal_length, num_distractors, max_steps,
        observation_type, ...) but `seed` (use `reset(seed=...)`) and `time_limit_discount`.
    """

    _dm_env_class = BoxWorld


class BridgeBoxWorldEnv(_LevelEnv):
    """Bridge BoxWorld (Clift et al. 2020) as a `gymnasium.Env`.

    Args:
      render_mode: None or "rgb_array".
      **kwargs: the arguments of `BridgeBoxWorld` (solution_length, puzzle_type, max_steps,
        observation_type, ...) but `seed` and `time_limit_discount`.
    """

    _dm_env_class = BridgeBoxWorld

    def __init__(self, render_mode=None, **kwargs):
        super().__init__(render_mode=render_mode, **kwargs)


class _BatchedVectorEnv(gymnasium.vector.VectorEnv):
    """A batched dm_env environment behind `gymnasium.vector.VectorEnv` (next-step autoreset)."""

    metadata = {"render_modes": list(RENDER_MODES), "render_fps": _FPS,
                "autoreset_mode": AutoresetMode.NEXT_STEP}
    _dm_env_class = None
    _single_class = None

    def __init__(self, num_envs=1, preset=None, render_mode=None, **kwargs):
        if "batch_size" in kwargs:
            raise invalid_value("batch_size", "no such argument: use num_envs",
                                kwargs["batch_size"])
        self.render_mode = _check_render_mode(render_mode)
        self._kwargs = dict(_level_kwargs(self._single_class, preset, kwargs),
                            time_limit_discount=1.0)
        self._env = self._dm_env_class(batch_size=num_envs, seed=0, **self._kwargs)
        self._started = False
        self.num_envs = self._env.batch_size
        self.single_observation_space = _space(self._env.observation_spec())
        self.single_action_space = spaces.Discrete(NUM_ACTIONS)
        self.observation_space = gymnasium.vector.utils.batch_space(
            self.single_observation_space, self.num_envs)
        self.action_space = spaces.MultiDiscrete(np.full(self.num_envs, NUM_ACTIONS))

    @property
    def dm_env(self):
        """The batched dm_env environment playing underneath (`levels`, `solved`...)."""
        return self._env

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if options:
            raise invalid_value("options", "None (no reset options)", options)
        if seed is not None or not self._started:
            if seed is None:
                seed = _draw_seed(self.np_random)
            seeds = ([int(seed) + i for i in range(self.num_envs)] if np.ndim(seed) == 0
                     else [int(s) for s in seed])
            self._env = self._dm_env_class(batch_size=self.num_envs, seeds=seeds, **self._kwargs)
            self._started = True
        timestep = self._env.reset()
        return timestep.observation, {}

    def step(self, actions):
        if not self._started:
            raise RuntimeError("step() called before reset(): call reset() first.")
        timestep = self._env.step(np.asarray(actions))
        last = timestep.step_type == 2
        terminated = last & (timestep.discount == 0.0)
        # The dm_env restart step (FIRST: reward 0, discount 1) is Gymnasium's next-step reset.
        return (timestep.observation, timestep.reward.astype(np.float64), terminated,
                last & ~terminated, {})

    def render(self):
        if self.render_mode is None:
            gymnasium.logger.warn("render() called without a render_mode: make the environment "
                                  "with render_mode='rgb_array'.")
            return None
        return tuple(self._env.render())


class BoxWorldVectorEnv(_BatchedVectorEnv):
    """`num_envs` Box-Worlds stepped together in NumPy (`BatchedBoxWorld`): a native
    `gymnasium.vector.VectorEnv` with next-step autoreset.

    Example:

    ```python
    envs = BoxWorldVectorEnv(num_envs=8, preset="train")
    observations, infos = envs.reset(seed=0)   # uint8 [8, 14, 14, 3]
    observations, rewards, terminations, truncations, infos = envs.step(envs.action_space.sample())
    ```

    Args:
      num_envs: number N of levels stepped together.
      preset, render_mode, **kwargs: as `BoxWorldEnv`.
    """

    _dm_env_class = BatchedBoxWorld
    _single_class = BoxWorld


class BridgeBoxWorldVectorEnv(_BatchedVectorEnv):
    """`num_envs` Bridge BoxWorlds stepped together (`BatchedBridgeBoxWorld`), next-step autoreset.

    Args:
      num_envs: number N of levels stepped together.
      render_mode, **kwargs: as `BridgeBoxWorldEnv`.
    """

    _dm_env_class = BatchedBridgeBoxWorld
    _single_class = BridgeBoxWorld

    def __init__(self, num_envs=1, render_mode=None, **kwargs):
        super().__init__(num_envs=num_envs, render_mode=render_mode, **kwargs)


def register_envs():
    """Registers `keras_relational/BoxWorld-v0` and `keras_relational/BridgeBoxWorld-v0` (again
    after `gymnasium.registry` was cleared; importing this module already did)."""
    for env_id, single, vector in ((BOXWORLD_ID, "BoxWorldEnv", "BoxWorldVectorEnv"),
                                   (BRIDGE_BOXWORLD_ID, "BridgeBoxWorldEnv",
                                    "BridgeBoxWorldVectorEnv")):
        if env_id not in gymnasium.registry:
            gymnasium.register(env_id, entry_point=f"{__name__}:{single}",
                               vector_entry_point=f"{__name__}:{vector}")


register_envs()
