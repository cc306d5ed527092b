"""TF-Agents ``PyEnvironment`` adapters for the NumPy BoxWorld environments."""

import collections

import numpy as np
from tf_agents.environments import py_environment
from tf_agents.environments.dm_control_wrapper import convert_spec
from tf_agents.specs import array_spec
from tf_agents.trajectories import time_step as ts

from keras_relational import environments
from keras_relational.agents.config import (
    TrainConfig,
    environment_config,
    environment_kwargs,
    environment_name,
)

EpisodeResult = collections.namedtuple("EpisodeResult", ["solved", "episode_return", "length",
                                                         "puzzle_type"])


class BatchedBoxWorldEnvironment(py_environment.PyEnvironment):
    """A batched BoxWorld (``BatchedBoxWorld`` or ``BatchedBridgeBoxWorld``) as a TF-Agents env.

    The NumPy environment resets finished levels itself on the following step, exactly like
    TF-Agents' auto-reset, so this adapter only converts specs and time steps. It also records
    every finished episode (solved?, return, length, puzzle type) in :attr:`finished_episodes`,
    from which training loops compute solve rates.

    Args:
        env: a ``BatchedBoxWorld`` / ``BatchedBridgeBoxWorld`` instance.
    """

    def __init__(self, env):
        if not getattr(env, "batched", False):
            raise ValueError(
                "`env` must be a batched BoxWorld (BatchedBoxWorld or BatchedBridgeBoxWorld), "
                f"received {type(env).__name__}.")
        super().__init__(handle_auto_reset=False)
        self._env = env
        self._observation_spec = convert_spec(env.observation_spec())
        self._action_spec = convert_spec(env.action_spec())
        self._returns = np.zeros(env.batch_size, np.float64)
        self._lengths = np.zeros(env.batch_size, np.int64)
        self.finished_episodes = []

    @property
    def batched(self):
        return True

    @property
    def batch_size(self):
        return self._env.batch_size

    @property
    def env(self):
        return self._env

    def observation_spec(self):
        return self._observation_spec

    def action_spec(self):
        return self._action_spec

    def reward_spec(self):
        return array_spec.ArraySpec((), np.float32, name="reward")

    def _convert(self, timestep):
        return ts.TimeStep(np.asarray(timestep.step_type, np.int32),
                           np.asarray(timestep.reward, np.float32),
                           np.asarray(timestep.discount, np.float32),
                           timestep.observation)

    def _reset(self):
        self._returns[:] = 0.0
        self._lengths[:] = 0
        return self._convert(self._env.reset())

    def _step(self, action):
        timestep = self._env.step(np.asarray(action, np.int32).reshape(-1))
        first = timestep.step_type == int(ts.StepType.FIRST)
        self._returns[first] = 0.0
        self._lengths[first] = 0
        active = ~first
        self._returns[active] += timestep.reward[active]
        self._lengths[active] += 1
        last = np.flatnonzero(timestep.step_type == int(ts.StepType.LAST))
        if len(last):
            solved = self._env.solved
            levels = self._env.levels
            for i in last:
                self.finished_episodes.append(EpisodeResult(
                    bool(solved[i]), float(self._returns[i]), int(self._lengths[i]),
                    getattr(levels[i], "puzzle_type", None)))
        return self._convert(timestep)

    def get_state(self):
        """Everything the next steps depend on (a picklable dict): the NumPy environment whole
        (each slot's level generator ``RandomState`` and draw buffer, the levels in flight,
        positions, held keys, step counters) and the running returns and lengths."""
        return dict(env=self._env, returns=self._returns.copy(), lengths=self._lengths.copy())

    def set_state(self, state):
        """Restores :meth:`get_state`'s state (from the same environment config and size)."""
        env = state["env"]
        if type(env) is not type(self._env) or env.config != self._env.config \
                or env.batch_size != self._env.batch_size:
            raise ValueError(
                f"The saved environment state is a {type(env).__name__} of {env.batch_size} "
                f"levels of {env.config}, this run's environment a "
                f"{type(self._env).__name__} of {self._env.batch_size} levels of "
                f"{self._env.config}.")
        self._env = env
        self._returns[:] = state["returns"]
        self._lengths[:] = state["lengths"]

    def render(self, mode="rgb_array"):
        return self._env.render()


def make_boxworld_environment(environment="original", num_envs=TrainConfig.num_envs, seed=0,
                              **env_kwargs):
    """A :class:`BatchedBoxWorldEnvironment` over ``num_envs`` levels.

    Args:
        environment: an environment config (``keras_relational.environments.BoxWorldConfig``
            or ``BridgeConfig``), or the name ``"original"`` (Zambaldi et al.'s
            BoxWorld) or ``"bridge"`` (Clift et al.) with its level parameters in ``env_kwargs``.
        num_envs: levels stepped together.
        seed: seed of the per-level seeds.
        **env_kwargs: with a name only: level parameters (e.g. ``goal_length``).
    """
    if isinstance(environment, str):
        environment = environment_config(environment, **env_kwargs)
    elif env_kwargs:
        raise ValueError(f"`env_kwargs` go with an environment name, received an environment "
                         f"config and {sorted(env_kwargs)}.")
    batched_class = {"original": environments.BatchedBoxWorld,
                     "bridge": environments.BatchedBridgeBoxWorld}[environment_name(environment)]
    return BatchedBoxWorldEnvironment(
        batched_class(batch_size=num_envs, seed=seed, **environment_kwargs(environment)))
