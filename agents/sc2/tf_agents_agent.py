"""The SC2 agent through TF-Agents: the V-trace agent with the composite action distribution.

The TF-Agents route of ``train_sc2 --trainer=tf_agents``: the Box-World agents'
:class:`~keras_relational.agents.vtrace_agent.VTraceAgent` (its loss and its V-trace,
:func:`keras_relational.agents.vtrace.vtrace_returns`) with the composite target of
:func:`composite_target` in place of its one categorical, over an
:class:`~keras_relational.agents.sc2.network.SC2Network` (the ConvLSTM state as network state),
acting with :class:`~keras_relational.agents.sc2.tf_agents_policy.SC2Policy` (two-stage
sampling). :class:`TFAgentsSC2Trainer` steps the adapters with TF-Agents' ``PyDriver`` and
trains on ``[B, T+1]`` unrolls (IMPALA's, Espeholt et al. 2018; Zambaldi et al. 2019, App. B).
"""

import functools

import numpy as np
import tensorflow as tf
from tf_agents.drivers import py_driver
from tf_agents.environments import batched_py_environment, dm_control_wrapper
from tf_agents.metrics import py_metrics
from tf_agents.policies import py_tf_eager_policy
from tf_agents.specs import tensor_spec

from keras_relational.agents.sc2.learning import LossInfo, score_actions
from keras_relational.agents.sc2.network import SC2Network
from keras_relational.agents.sc2.policy import ARGUMENTS
from keras_relational.agents.sc2.tf_agents_policy import SC2Policy
from keras_relational.agents.unroll_queue import UnrollQueue
from keras_relational.agents.vtrace_agent import VTraceAgent


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
                     argument_names=ARGUMENTS, **kwargs):
    """A :class:`VTraceAgent` on the SC2 agent's composite actions (initialised).

    Args:
        time_step_spec, action_spec: TensorFlow specs of the adapter.
        network: an :class:`SC2Network`.
        argument_mask: ``[num_functions, num_argument_types]`` (``argument_mask()`` of the
            adapter), columns in the order of ``argument_names``.
        optimizer: a tf-keras optimizer (Zambaldi et al. 2019, Table 2: Adam 0.9 / 0.999 /
            1e-8).
        argument_names: the argument types in ``argument_mask`` 's order (pysc2's).
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
                                 argument_names),
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
        **agent_kwargs: the rest of :func:`sc2_vtrace_agent` 's arguments (costs,
            ``jit_compile``).

    Example::

        trainer = TFAgentsSC2Trainer(environments, lambda: sc2_agent(), *env.argument_mask(),
                                     unroll_length=80, learning_rate=1e-4)
        info = trainer.train_step()   # a LossInfo of floats
    """

    def __init__(self, environments, model_fn, argument_names, argument_mask, unroll_length,
                 learning_rate, use_tf_function=True, **agent_kwargs):
        self.env = batched_py_environment.BatchedPyEnvironment(
            [dm_control_wrapper.DmControlWrapper(env) for env in environments],
            multithreading=False)
        time_step_spec = tensor_spec.from_spec(self.env.time_step_spec())
        action_spec = tensor_spec.from_spec(self.env.action_spec())
        self.network = SC2Network(time_step_spec.observation, model_fn)
        self.agent = sc2_vtrace_agent(
            time_step_spec, action_spec, self.network, argument_mask,
            tf.keras.optimizers.Adam(learning_rate, beta_1=0.9, beta_2=0.999, epsilon=1e-8),
            argument_names=argument_names, use_tf_function=use_tf_function, **agent_kwargs)
        batch_size = self.env.batch_size
        # Two places: a driver run that starts on boundary steps may finish a second unroll.
        self.unrolls = UnrollQueue(self.agent.collect_data_spec, batch_size, unroll_length,
                                   max_unrolls=2)
        self.average_return = py_metrics.AverageReturnMetric(batch_size=batch_size,
                                                             buffer_size=100)
        self.episodes = py_metrics.NumberOfEpisodes()
        policy = py_tf_eager_policy.PyTFEagerPolicy(self.agent.collect_policy,
                                                    use_tf_function=use_tf_function,
                                                    batch_time_steps=False)  # already batched
        # max_steps=1: one batched step a run (PyDriver counts non-boundary steps).
        self.driver = py_driver.PyDriver(
            self.env, policy, observers=[self.unrolls, self.average_return, self.episodes],
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
        return int(self.episodes.result())

    def mean_return(self):
        """The mean return of the last 100 finished episodes (None before one finished)."""
        return float(self.average_return.result()) if self.episode_count else None

    def close(self):
        self.env.close()
