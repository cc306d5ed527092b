"""The SC2 agent through TF-Agents: the V-trace agent with the composite action distribution.

The TF-Agents route of ``train_sc2 --trainer=tf_agents``: the Box-World agents'
:class:`~keras_relational.agents.tf_agents.vtrace_agent.VTraceAgent` (its loss and its V-trace,
:func:`keras_relational.agents.vtrace.vtrace_returns`) with the composite target of
:func:`composite_target` in place of its one categorical, over an
:class:`~keras_relational.agents.tf_agents.sc2_network.SC2Network` (the ConvLSTM state as network
state), acting with :class:`~keras_relational.agents.tf_agents.sc2_policy.SC2Policy` (two-stage
sampling). :class:`TFAgentsSC2Trainer` steps the adapters with TF-Agents' ``PyDriver`` and
trains on ``[B, T+1]`` unrolls (IMPALA's, Espeholt et al. 2018; Zambaldi et al. 2019, App. B).
Its :meth:`~TFAgentsSC2Trainer.get_state` is the acting half of a ``train_sc2`` checkpoint (the
stateless sampler's counter, the episode returns and, where the environments can be restored,
the driver's time step, the policy state and the unroll in progress); the weights and the
optimizer's variables are the other half (``keras_relational.agents.sc2.checkpointing``).
"""

import functools

import numpy as np
import tensorflow as tf
from tf_agents.drivers import py_driver
from tf_agents.environments import batched_py_environment, dm_control_wrapper
from tf_agents.policies import py_tf_eager_policy
from tf_agents.specs import tensor_spec

from keras_relational.agents.sc2.acting import (
    EpisodeReturns,
    environment_states,
    restore_environments,
)
from keras_relational.agents.sc2.learning import LossInfo, score_actions
from keras_relational.agents.sc2.policy import ARGUMENTS
from keras_relational.agents.tf_agents.sc2_network import SC2Network
from keras_relational.agents.tf_agents.sc2_policy import SC2Policy
from keras_relational.agents.tf_agents.unroll_queue import UnrollQueue
from keras_relational.agents.tf_agents.vtrace_agent import VTraceAgent


def composite_target(network, trajectory, argument_mask):
    """:class:`VTraceAgent`'s ``target_fn`` for the SC2 agent's composite actions.

    Replays the network over the time-major ``trajectory`` ``[T+1, B]`` from the ConvLSTM state
    its first step started from (``policy_info``; reset at every episode start), then scores
    the taken actions: ``log pi(a) = log pi(function) + sum over the arguments it takes of
    log pi(argument | function)`` (Vinyals et al. 2017, Sec. 4.1), as the compiled SC2 learner
    does (:func:`~keras_relational.agents.sc2.learning.score_actions`). Returns
    ``(target_log_probs, behaviour_log_probs, entropy)`` ``[T, B]`` and ``values [T+1, B]``.
    """
    info = trajectory.policy_info
    outputs, _ = network.unroll(trajectory.observation, trajectory.step_type,
                                (info["state_h"][0], info["state_c"][0]), training=True)
    action = {key: value[:-1] for key, value in trajectory.action.items()}
    log_prob, entropy = score_actions(network.keras_model.get_layer("sc2_argument_heads"),
                                      outputs, action, argument_mask, training=True)
    return log_prob, info["log_prob"][:-1], entropy, outputs["value"]


def sc2_vtrace_agent(time_step_spec, action_spec, network, argument_mask, optimizer,
                     argument_names=ARGUMENTS, sampling_seed=None, **kwargs):
    """A :class:`VTraceAgent` on the SC2 agent's composite actions (initialised).

    Args:
        time_step_spec, action_spec: TensorFlow specs of the adapter.
        network: an :class:`SC2Network`.
        argument_mask: ``[num_functions, num_argument_types]`` (``argument_mask()`` of the
            adapter), columns in the order of ``argument_names``.
        optimizer: a tf-keras optimizer (Zambaldi et al. 2019, Table 2: Adam 0.9 / 0.999 /
            1e-8).
        argument_names: the argument types in ``argument_mask`` 's order (pysc2's).
        sampling_seed: the collect policy's (:class:`SC2Policy`; None: TensorFlow's stateful
            sampling).
        **kwargs: :class:`VTraceAgent` 's costs and options (``discount``, ``entropy_cost``,
            ``baseline_cost``, ``gradient_clip_norm``, ``jit_compile``, ``use_tf_function``,
            ...).

    Its ``collect_policy`` samples (:class:`SC2Policy`), its ``policy`` is the greedy one.
    """
    argument_mask = np.asarray(argument_mask, np.float32)
    agent = VTraceAgent(
        time_step_spec, action_spec, network, optimizer,
        target_fn=functools.partial(composite_target, argument_mask=argument_mask),
        collect_policy=SC2Policy(time_step_spec, action_spec, network, argument_mask,
                                 argument_names, sampling_seed=sampling_seed),
        policy=SC2Policy(time_step_spec, action_spec, network, argument_mask, argument_names,
                         greedy=True),
        **kwargs)
    agent.initialize()
    return agent


class TFAgentsSC2Trainer:
    """Steps ``environments`` with the agent's collect policy through a ``PyDriver`` and trains
    the :func:`sc2_vtrace_agent` on their ``[B, T+1]`` unrolls, one per :meth:`train_step`.

    Args:
        environments: ``B`` dm_env environments with the adapter's specs
            (:class:`~keras_relational.environments.sc2.SC2Environment`).
        model_fn: zero-argument builder of the Keras 3 agent
            (:func:`~keras_relational.models.sc2_agent.sc2_agent`).
        argument_names, argument_mask: ``SC2Environment.argument_mask()``.
        unroll_length: T.
        learning_rate: Adam's (Zambaldi et al. 2019, Table 2: beta1 0.9, beta2 0.999, epsilon
            1e-8).
        use_tf_function: act and compute the loss in ``tf.function`` s (False: op by op, no
            trace; short CPU runs).
        sampling_seed: the collect policy samples statelessly from this seed (None:
            TensorFlow's stateful sampling, which a checkpoint cannot restore).
        **agent_kwargs: the rest of :func:`sc2_vtrace_agent` 's arguments (costs,
            ``jit_compile``).

    Example::

        trainer = TFAgentsSC2Trainer(environments, lambda: sc2_agent(), *env.argument_mask(),
                                     unroll_length=80, learning_rate=1e-4)
        info = trainer.train_step()   # a LossInfo of floats
    """

    def __init__(self, environments, model_fn, argument_names, argument_mask, unroll_length,
                 learning_rate, use_tf_function=True, sampling_seed=None, **agent_kwargs):
        self.environments = list(environments)
        self.env = batched_py_environment.BatchedPyEnvironment(
            [dm_control_wrapper.DmControlWrapper(env) for env in environments],
            multithreading=False)
        time_step_spec = tensor_spec.from_spec(self.env.time_step_spec())
        action_spec = tensor_spec.from_spec(self.env.action_spec())
        self.network = SC2Network(time_step_spec.observation, model_fn)
        # Zambaldi et al. 2019, Table 2: Adam, beta1 0.9, beta2 0.999, epsilon 1e-8.
        self.optimizer = tf.keras.optimizers.Adam(learning_rate, beta_1=0.9, beta_2=0.999,
                                                  epsilon=1e-8)
        # Its slots now rather than at the first step (as apply_gradients would, on the same
        # variables): a checkpoint restores them before any step.
        self.optimizer.build(self.network.trainable_variables)
        # Its own counter, not TensorFlow's global step (which every agent of a process shares).
        agent_kwargs.setdefault("train_step_counter", tf.Variable(0, dtype=tf.int64,
                                                                  trainable=False))
        self.agent = sc2_vtrace_agent(
            time_step_spec, action_spec, self.network, argument_mask, self.optimizer,
            argument_names=argument_names, use_tf_function=use_tf_function,
            sampling_seed=sampling_seed, **agent_kwargs)
        batch_size = self.env.batch_size
        # Two places: a driver run that starts on boundary steps may finish a second unroll.
        self.unrolls = UnrollQueue(self.agent.collect_data_spec, batch_size, unroll_length,
                                   max_unrolls=2)
        self.returns = _ReturnObserver(batch_size)
        policy = py_tf_eager_policy.PyTFEagerPolicy(self.agent.collect_policy,
                                                    use_tf_function=use_tf_function,
                                                    batch_time_steps=False)  # already batched
        # max_steps=1: one batched step a run (PyDriver counts non-boundary steps).
        self.driver = py_driver.PyDriver(self.env, policy, observers=[self.unrolls, self.returns],
                                         max_steps=1)
        self._time_step = self.env.reset()
        self._policy_state = policy.get_initial_state(batch_size)

    @property
    def keras_model(self):
        return self.network.keras_model

    def collect(self):
        """Steps the environments until an unroll ``[B, T+1]`` is ready; returns it (NumPy)."""
        while not self.unrolls.qsize():
            self._time_step, self._policy_state = self.driver.run(self._time_step,
                                                                  self._policy_state)
        return self.unrolls.get()

    def train_step(self):
        """Collects one unroll and takes one V-trace step: the :class:`LossInfo` as floats."""
        experience = tf.nest.map_structure(tf.convert_to_tensor, self.collect())
        info = self.agent.train(experience)
        return LossInfo(float(info.loss), *(float(x) for x in info.extra))

    @property
    def episode_count(self):
        return self.returns.episodes.count

    def optimizer_variables(self):
        """The Adam's variables (its step count and both moments of every weight)."""
        return list(self.optimizer.variables)

    def mean_return(self):
        """The mean return of the last 100 finished episodes (None before one finished)."""
        return self.returns.episodes.mean()

    def get_state(self):
        """The trainer's acting state for a checkpoint (picklable; the weights and the
        optimizer are saved apart): the sampler's counter, the agent's train step, the episode
        returns and, when every environment can be restored (pysc2's mock, not the game), their
        states, the driver's last time step and policy state, the steps held toward the next
        unroll and the running returns."""
        count = self.agent.collect_policy.sample_count
        state = dict(sample_count=None if count is None else int(count.numpy()),
                     train_step=int(self.agent.train_step_counter.numpy()),
                     episodes=self.returns.episodes.get_state(),
                     environments=environment_states(self.environments))
        if state["environments"] is not None:
            state.update(time_step=tf.nest.map_structure(np.asarray, self._time_step),
                         policy_state=tf.nest.map_structure(np.asarray, self._policy_state),
                         unrolls=self.unrolls.get_state(), running=self.returns.running.copy())
        return state

    def set_state(self, state):
        """Restores :meth:`get_state`'s ``state`` (before any step). Returns whether the
        environments were restored too (False: they continue from fresh episodes)."""
        count = self.agent.collect_policy.sample_count
        if count is not None and state["sample_count"] is not None:
            count.assign(state["sample_count"])
        self.agent.train_step_counter.assign(state["train_step"])
        self.returns.episodes.set_state(state["episodes"])
        if not restore_environments(self.environments, state["environments"]):
            return False
        self._time_step = state["time_step"]
        self._policy_state = state["policy_state"]
        self.unrolls.set_state(state["unrolls"])
        self.returns.running = np.array(state["running"], np.float64)
        return True

    def close(self):
        self.env.close()


class _ReturnObserver:
    """A driver observer that adds each finished episode's return to an
    :class:`~keras_relational.agents.sc2.acting.EpisodeReturns` (``episodes``).

    TF-Agents' ``AverageReturnMetric`` sums: a running sum per environment, zeroed at an
    episode's first step, every transition's reward added, the sum taken at its last; kept here
    rather than in the metric so that a checkpoint saves them.
    """

    def __init__(self, batch_size):
        self.running = np.zeros(batch_size, np.float64)
        self.episodes = EpisodeReturns()

    def __call__(self, trajectory):
        self.running[np.asarray(trajectory.is_first())] = 0.0
        self.running += np.asarray(trajectory.reward, np.float64)
        for i in np.flatnonzero(np.asarray(trajectory.is_last())):
            self.episodes.add(self.running[i])
