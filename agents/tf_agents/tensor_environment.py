"""An in-graph TF-Agents ``TFEnvironment`` over the tensor BoxWorlds, and its unroll actor.

:class:`TensorBoxWorldEnvironment` wraps ``keras_relational.environments.TensorBoxWorld`` (or
``TensorBridgeBoxWorld``) for TF-Agents: its state lives in ``tf.Variable`` s and ``step`` is an
XLA-compiled TensorFlow function, so the environment steps inside the TensorFlow graph, next to
the policy. The levels come from banks drawn ahead by a background thread
(``TensorLevelEnvironment.bank_stream``); :meth:`TensorBoxWorldEnvironment.next_bank` installs the
next one (the actor does, before each unroll).

:func:`in_graph_actor` is what ``train_eval(env_backend="tensor")`` acts with instead of
TF-Agents' ``Actor`` (which takes Python environments only): one ``tf.function`` runs the policy
and the environment for ``T`` steps, and the steps go to the same :class:`UnrollQueue`, one
trajectory step at a time, exactly as TF-Agents' driver feeds it. It records every finished
episode in ``env.finished_episodes`` as ``BatchedBoxWorldEnvironment`` does.

Needs the TensorFlow Keras backend (the default).

Example::

    from keras_relational import environments
    from keras_relational.agents.tf_agents.tensor_environment import TensorBoxWorldEnvironment

    env = TensorBoxWorldEnvironment(environments.BoxWorldConfig(goal_length=1), num_envs=8)
    time_step = env.reset()                     # observation: uint8 [8, 14, 14, 3]
    time_step = env.step(tf.fill([8], 3))       # everyone moves right
"""

import numpy as np
import tensorflow as tf
from tf_agents.environments import tf_environment
from tf_agents.environments.dm_control_wrapper import convert_spec
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import time_step as ts
from tf_agents.trajectories import trajectory

from keras_relational import environments
from keras_relational.agents.config import TrainConfig, environment_name
from keras_relational.agents.tf_agents.boxworld_environment import EpisodeResult
from keras_relational.environments.level_banks import default_bank_size, max_levels_started
from keras_relational.validation import check_positive_int

TENSOR_ENVIRONMENTS = {"original": "TensorBoxWorld", "bridge": "TensorBridgeBoxWorld"}


class TensorBoxWorldEnvironment(tf_environment.TFEnvironment):
    """A tensor BoxWorld as an in-graph TF-Agents ``TFEnvironment`` of ``num_envs`` levels.

    Same specs, time steps and auto-reset as ``BatchedBoxWorldEnvironment`` over the NumPy
    environment (a slot restarts on the step after LAST, with reward 0 and discount 1).

    Args:
        environment: a ``keras_relational.environments.BoxWorldConfig`` or ``BridgeConfig``.
        num_envs: levels stepped together.
        seed: seed of the level banks.
        bank_size: levels per bank (default: enough for 8 unrolls, the rule of the compiled
            trainer's banks: ``keras_relational.environments.level_banks.default_bank_size``).
            The levels of a bank are fresh while at most ``bank_size`` episodes start from it;
            :meth:`fresh_levels_for` installs the next bank of the stream before that.
        unroll_length: steps the actor takes between two bank checks (default: the config's).
    """

    def __init__(self, environment, num_envs, seed=0, bank_size=None,
                 unroll_length=TrainConfig.unroll_length):
        import keras

        if keras.backend.backend() != "tensorflow":
            raise ValueError(f"TensorBoxWorldEnvironment needs the TensorFlow Keras backend, "
                             f"received KERAS_BACKEND={keras.backend.backend()!r}.")
        check_positive_int("TensorBoxWorldEnvironment", "num_envs", num_envs)
        check_positive_int("TensorBoxWorldEnvironment", "unroll_length", unroll_length)
        if bank_size is None:
            bank_size = default_bank_size(max_levels_started(num_envs, unroll_length))
        check_positive_int("TensorBoxWorldEnvironment", "bank_size", bank_size)
        env = getattr(environments, TENSOR_ENVIRONMENTS[environment_name(environment)])(
            config=environment)
        self._env = env
        self._bank_size = bank_size
        self._levels_used = num_envs  # the reset below plays bank levels 0..N-1
        self._stream = env.bank_stream(bank_size, seed)
        bank = next(self._stream)
        self._bank = {k: tf.Variable(v, trainable=False) for k, v in bank.items()}
        state, time_step = env.reset(self._bank_values(), num_envs)
        self._state = {k: tf.Variable(v, trainable=False) for k, v in state.items()}
        self._time_step = tf.nest.map_structure(lambda x: tf.Variable(x, trainable=False),
                                                tuple(time_step))
        self._compiled_step = tf.function(env.step, jit_compile=True, autograph=False)
        spec = ts.time_step_spec(tensor_spec.from_spec(convert_spec(env.observation_spec())),
                                 tf.TensorSpec((), tf.float32, name="reward"))
        action_spec = tensor_spec.from_spec(convert_spec(env.action_spec()))
        super().__init__(spec, action_spec, batch_size=num_envs)
        self.finished_episodes = []
        self._returns = np.zeros(num_envs, np.float64)
        self._lengths = np.zeros(num_envs, np.int64)

    @property
    def env(self):
        """The wrapped tensor environment."""
        return self._env

    @property
    def solved(self):
        """bool ``[N]`` tensor: whether each slot's current episode took the gem."""
        return self._state["solved"].read_value()

    def next_bank(self):
        """Installs the next bank of the stream (host side, between graph calls)."""
        for key, value in next(self._stream).items():
            self._bank[key].assign(value)
        self._levels_used = 0

    def fresh_levels_for(self, episodes):
        """Installs the next bank unless the current one has `episodes` unused levels left."""
        if self._levels_used + episodes > self._bank_size:
            self.next_bank()

    def close(self):
        self._stream.close()

    def _bank_values(self):
        return {k: v.read_value() if hasattr(v, "read_value") else v
                for k, v in self._bank.items()}

    def _assign(self, state, time_step):
        for key, value in state.items():
            self._state[key].assign(value)
        for variable, value in zip(self._time_step, time_step, strict=True):
            variable.assign(value)
        return self._current_time_step()

    def _current_time_step(self):
        return ts.TimeStep(*(v.read_value() for v in self._time_step))

    def _reset(self):
        self._levels_used = self.batch_size  # bank levels 0..N-1 (an eager, host-side count)
        state, time_step = self._env.reset(self._bank_values(), self.batch_size)
        return self._assign(state, time_step)

    def _step(self, action):
        action = tf.reshape(tf.cast(action, tf.int32), [self.batch_size])
        state = {k: v.read_value() for k, v in self._state.items()}
        return self._assign(*self._compiled_step(state, action, self._bank_values()))

    def record(self, step_types, rewards, solved):
        """Accounts ``[T, N]`` steps (NumPy): episode returns, lengths, finished episodes."""
        for step_type, reward, done in zip(step_types, rewards, solved, strict=True):
            first = step_type == int(ts.StepType.FIRST)
            self._levels_used += int(first.sum())
            self._returns[first] = 0.0
            self._lengths[first] = 0
            active = ~first
            self._returns[active] += reward[active]
            self._lengths[active] += 1
            for i in np.flatnonzero(step_type == int(ts.StepType.LAST)):
                self.finished_episodes.append(EpisodeResult(
                    bool(done[i]), float(self._returns[i]), int(self._lengths[i]), None))


class InGraphActor:
    """Steps a :class:`TensorBoxWorldEnvironment` with a TF policy, ``T`` steps per graph call.

    Each :meth:`run` installs a fresh level bank when the current one could run out, runs
    ``B * T`` environment steps (one ``tf.function``: policy, environment, trajectory) and hands
    the ``T`` trajectory steps to ``unrolls`` one at a time, as TF-Agents' driver would.
    """

    def __init__(self, env, policy, unrolls):
        self._env = env
        self._policy = policy
        self._unrolls = unrolls
        self._length = unrolls.unroll_length
        self._collect = tf.function(self._collect_steps)
        env.reset()

    def _collect_steps(self):
        time_step = self._env.current_time_step()
        spec = self._policy.trajectory_spec
        arrays = tf.nest.map_structure(
            lambda s: tf.TensorArray(s.dtype, size=self._length), spec)
        solved = tf.TensorArray(tf.bool, size=self._length)
        for t in tf.range(self._length):
            action_step = self._policy.action(time_step)
            next_time_step = self._env.step(action_step.action)
            step = trajectory.from_transition(time_step, action_step, next_time_step)
            arrays = tf.nest.map_structure(lambda a, x, t=t: a.write(t, x), arrays, step)
            solved = solved.write(t, self._env.solved)
            time_step = next_time_step
        return tf.nest.map_structure(lambda a: a.stack(), arrays), solved.stack()

    def run(self):
        self._env.fresh_levels_for(max_levels_started(self._env.batch_size, self._length))
        steps, solved = self._collect()
        steps = tf.nest.map_structure(lambda x: x.numpy(), steps)
        self._env.record(steps.next_step_type, steps.reward, solved.numpy())
        for t in range(self._length):
            self._unrolls(tf.nest.map_structure(lambda x, t=t: x[t], steps))


def in_graph_actor(env, policy, train_step, unrolls, summary_dir=None, summary_interval=None):
    """An :class:`InGraphActor`: ``acting.in_process_actor`` 's signature, for a tensor env.

    ``train_step``, ``summary_dir`` and ``summary_interval`` are accepted for the same call; the
    in-process actor writes no actor metrics either (it is built without metrics).
    """
    del train_step, summary_dir, summary_interval
    return InGraphActor(env, policy, unrolls)
