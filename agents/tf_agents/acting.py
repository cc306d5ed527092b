"""Acting, written once: the policy every actor acts with, and one actor's unroll collection.

* :class:`ActorCriticPolicy` samples actions from ``Categorical(logits)`` of a network returning
  ``(logits, value)`` and records the logits for V-trace. It is the V-trace agent's collect
  policy (exported with ``PolicySaver``) and, through :func:`acting_policy`, what the in-process
  actor and every Ray actor act with.
* :class:`UnrollActor` is one actor's loop: a batched environment stepped with that policy, the
  steps cut into ``[B, T+1]`` unrolls by an :class:`UnrollQueue` exactly as TF-Agents' driver
  feeds it in the in-process actor (``trajectory.from_transition`` steps, consecutive unrolls
  sharing one step, auto-reset). The Ray actors
  (:mod:`keras_relational.agents.tf_agents.ray_actors`) run one each; the in-process actor is
  TF-Agents' own ``tf_agents.train.Actor``
  (:func:`in_process_actor`) over the same policy.
"""

import tensorflow as tf
import tensorflow_probability as tfp
from tf_agents.policies import py_tf_eager_policy, tf_policy
from tf_agents.specs import tensor_spec
from tf_agents.train import actor
from tf_agents.trajectories import policy_step, trajectory

from keras_relational.agents.tf_agents.unroll_queue import UnrollQueue


class ActorCriticPolicy(tf_policy.TFPolicy):
    """Samples actions from ``Categorical(logits)`` of a network returning ``(logits, value)``.

    The logits are emitted as ``policy_info["logits"]``, so trajectories carry the behaviour
    policy's log-probabilities that V-trace needs for its off-policy correction.

    Args:
        time_step_spec: the environment's ``TimeStep`` spec.
        action_spec: a scalar ``BoundedTensorSpec`` of integer actions ``[0, A)``.
        network: a ``tf_agents`` network (e.g. :class:`Keras3Network`) returning
            ``((logits [B, A], value [B]), state)``.
        jit_compile: compute the logits with an XLA-compiled function (faster acting on a CPU;
            meant for an actor's own copy of the policy, not for a policy to export).
        seed: sampling seed used when ``action`` is called without one (None: TensorFlow's
            global seed). With a seed, the actions depend only on it and on the logits, not on
            how the logits were computed (plain or XLA-compiled).
        sampling_seed: None, or sample statelessly: the n-th call of ``action`` samples with
            the seed ``(sampling_seed, n)`` (``tf.random.stateless_categorical``), n counted by
            :attr:`sample_count`. The actions then depend only on the logits, the seed and the
            count, which a run saves with its checkpoints, so a resumed run samples exactly as
            the uninterrupted one (TensorFlow's stateful sampling ops keep their state in the
            process, where no checkpoint reaches it).
    """

    def __init__(self, time_step_spec, action_spec, network, jit_compile=False, seed=None,
                 sampling_seed=None, name=None):
        num_actions = int(action_spec.maximum - action_spec.minimum + 1)
        info_spec = {"logits": tf.TensorSpec([num_actions], tf.float32)}
        self._network = network
        self._seed = seed
        self._sampling_seed = sampling_seed
        self._sample_count = None if sampling_seed is None else tf.Variable(
            0, dtype=tf.int64, trainable=False, name="sample_count")
        # autograph off: no tensor-dependent control flow, and converting TF-Agents'
        # Network.__call__ raises a SyntaxWarning (its `state is not ()`).
        self._logits_fn = tf.function(self._logits, jit_compile=True, autograph=False) \
            if jit_compile else self._logits
        super().__init__(time_step_spec, action_spec, policy_state_spec=(), info_spec=info_spec,
                         clip=False, name=name)

    def _variables(self):
        return self._network.variables

    def _logits(self, observation, step_type):
        (logits, _), _ = self._network(observation, step_type=step_type, training=False)
        return logits

    def _distribution(self, time_step, policy_state):
        logits = self._logits_fn(time_step.observation, time_step.step_type)
        distribution = tfp.distributions.Categorical(logits=logits, dtype=self.action_spec.dtype)
        return policy_step.PolicyStep(distribution, policy_state, {"logits": logits})

    @property
    def sample_count(self):
        """The stateless sampler's call counter (an int64 ``tf.Variable``), or None."""
        return self._sample_count

    def _action(self, time_step, policy_state, seed=None):
        if self._sample_count is None:
            return super()._action(time_step, policy_state, self._seed if seed is None else seed)
        logits = self._logits_fn(time_step.observation, time_step.step_type)
        count = self._sample_count.assign_add(1) - 1
        stateless_seed = tf.stack([tf.constant(self._sampling_seed, tf.int64), count])
        flat = tf.reshape(logits, [-1, tf.shape(logits)[-1]])  # any outer dims, e.g. [1, B]
        action = tf.reshape(tf.random.stateless_categorical(
            flat, 1, stateless_seed, dtype=self.action_spec.dtype), tf.shape(logits)[:-1])
        return policy_step.PolicyStep(action, policy_state, {"logits": logits})


def acting_policy(time_step_spec, action_spec, network, jit_compile=False, seed=None):
    """The NumPy-in, NumPy-out acting policy over ``network`` (a ``PyTFEagerPolicy``).

    Args: those of :class:`ActorCriticPolicy` (TensorFlow specs).
    """
    policy = ActorCriticPolicy(time_step_spec, action_spec, network, jit_compile=jit_compile,
                               seed=seed)
    return py_tf_eager_policy.PyTFEagerPolicy(policy, use_tf_function=True)


def in_process_actor(env, policy, train_step, unrolls, summary_dir, summary_interval,
                     metrics=None):
    """TF-Agents' ``Actor`` stepping ``env`` with ``policy`` (a TF policy) into ``unrolls``.

    Each ``run()`` steps ``B * T`` environment steps; the :class:`UnrollQueue` observer cuts
    them into unrolls. ``summary_dir`` (None: none) gets the summaries of the actor's
    ``metrics`` (default: none; ``train_eval`` writes the collect metrics itself, from the
    episodes of either kind of actor, see :mod:`keras_relational.agents.tf_agents.progress`).
    """
    py_policy = py_tf_eager_policy.PyTFEagerPolicy(policy, use_tf_function=True)
    return ResumableActor(env, py_policy, train_step,
                       steps_per_run=unrolls.batch_size * unrolls.unroll_length,
                       observers=[unrolls], metrics=metrics, summary_dir=summary_dir,
                       summary_interval=summary_interval)


class ResumableActor(actor.Actor):
    """TF-Agents' ``Actor`` whose position in the environments can be saved and restored.

    Between two ``run()`` calls the actor holds the last time step and policy state, from which
    the next ``run()`` continues; :meth:`get_state` / :meth:`set_state` (NumPy nests) carry them
    across the pieces of a resumed run (:mod:`keras_relational.agents.tf_agents.actor_state`).
    """

    def get_state(self):
        return dict(time_step=self._time_step, policy_state=self._policy_state)

    def set_state(self, state):
        self._time_step = state["time_step"]
        self._policy_state = state["policy_state"]


class UnrollActor:
    """One actor: steps a batched environment with :func:`acting_policy` and returns unrolls.

    Args:
        env: a batched TF-Agents ``PyEnvironment`` (e.g. from ``make_boxworld_environment``).
        network: the TF-Agents network of the local policy (e.g. a :class:`Keras3Network`).
        unroll_length: T; every unroll has T+1 steps, the first shared with the previous one.
        jit_compile: act through an XLA-compiled forward pass.
        seed: the sampling seed.

    Example::

        unroll_actor = UnrollActor(make_boxworld_environment("original", num_envs=4), network, 5)
        unroll_actor.collect().observation.shape   # (4, 6, H, W, C)
    """

    def __init__(self, env, network, unroll_length, jit_compile=False, seed=None):
        self._env = env
        time_step_spec = tensor_spec.from_spec(env.time_step_spec())
        action_spec = tensor_spec.from_spec(env.action_spec())
        self._policy = acting_policy(time_step_spec, action_spec, network,
                                     jit_compile=jit_compile, seed=seed)
        self._unrolls = UnrollQueue(self._policy.trajectory_spec, env.batch_size, unroll_length,
                                    max_unrolls=1)
        self._time_step = None

    @property
    def env(self):
        return self._env

    def collect(self):
        """Steps the environments until one ``[B, T+1]`` unroll is complete; returns it."""
        if self._time_step is None:
            self._time_step = self._env.reset()
        while not self._unrolls.qsize():
            time_step = self._time_step
            action_step = self._policy.action(time_step)
            next_time_step = self._env.step(action_step.action)
            # Exactly what TF-Agents' driver hands the in-process UnrollQueue.
            self._unrolls(trajectory.from_transition(time_step, action_step, next_time_step))
            self._time_step = next_time_step
        return self._unrolls.get()

