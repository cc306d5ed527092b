"""Learning: the agent a config asks for (V-trace or PPO), its optimiser, and its Learner.

The V-trace loss is :mod:`keras_relational.agents.vtrace` and the agent
:class:`keras_relational.agents.tf_agents.vtrace_agent.VTraceAgent`; PPO is TF-Agents' own
(:mod:`keras_relational.agents.tf_agents.ppo`). The learner is TF-Agents' ``Learner`` reading
``[B, T+1]`` unrolls from an :class:`UnrollQueue`; it never knows where they came from (the
in-process actor or the Ray fleet).
"""

import contextlib
import math
import os

import tensorflow as tf
from absl import logging as absl_logging
from tf_agents.train import interval_trigger, learner, triggers

from keras_relational.agents.optimizers import make_optimizer
from keras_relational.agents.tf_agents import checkpoints
from keras_relational.agents.tf_agents.ppo import make_ppo_agent
from keras_relational.agents.tf_agents.vtrace_agent import VTraceAgent


def make_agent(config, time_step_spec, action_spec, network, model_fn, train_step):
    """The initialised TF-Agents agent of ``config.algorithm`` over ``network``.

    Args:
        config: a :class:`~keras_relational.agents.config.TFAgentsConfig`.
        time_step_spec, action_spec: the environment's TensorFlow specs.
        network: the :class:`Keras3Network` V-trace trains (and the actors act with).
        model_fn: the builder of that network's Keras 3 model (PPO builds its own two copies).
        train_step: the train-step counter.
    """
    if config.algorithm == "vtrace":
        agent = VTraceAgent(
            time_step_spec, action_spec, network,
            make_optimizer(config.optimizer_name(), config.learning_rate, config.dtype_policy,
                           keras_module=tf.keras),
            discount=config.discount, entropy_cost=config.entropy_cost,
            baseline_cost=config.baseline_cost, gradient_clip_norm=config.gradient_clip_norm,
            reward_scale=config.reward_scale, lambda_=config.vtrace_lambda,
            jit_compile=config.jit_compile, train_step_counter=train_step)
    else:
        agent = make_ppo_agent(time_step_spec, action_spec, model_fn, config.learning_rate,
                               discount=config.discount, entropy_cost=config.entropy_cost,
                               gradient_clip_norm=config.gradient_clip_norm,
                               num_epochs=config.ppo_epochs, train_step=train_step)
    agent.initialize()
    return agent


# What TF-Agents' Learner logs when it leaves the optimizer's variables to its agent.
_DEPRECATED_INIT_LINE = "run_optimizer_variable_init = False is Deprecated"


@contextlib.contextmanager
def _without_log_line(message):
    """Drops absl log records whose message is ``message`` while the block runs."""
    def keep(record):
        return record.getMessage() != message

    logger = absl_logging.get_absl_logger()
    logger.addFilter(keep)
    try:
        yield
    finally:
        logger.removeFilter(keep)


class NonFiniteLossError(FloatingPointError):
    """The loss of a train step was NaN or infinite; training stopped before checkpointing it."""


class GuardedLearner(learner.Learner):
    """TF-Agents' ``Learner`` that stops at a non-finite loss before any checkpoint of it.

    ``Learner.run`` runs the train step, then its triggers (the interval checkpoint, the policy
    export): a NaN loss raises :class:`NonFiniteLossError` between the two, so the last
    checkpoint on disk stays the last good state. The interval checkpoints pass through the
    ``checkpoint_write`` fault point (:mod:`keras_relational.faults`); with ``actor_state`` (an
    :class:`~keras_relational.agents.tf_agents.actor_state.ActorState`) each one is preceded by the
    actor's state of the same step.
    """

    def __init__(self, root_dir, train_step, agent, *args, actor_state=None, strategy=None,
                 **kwargs):
        self._actor_state = actor_state  # before super(): its __init__ makes the trigger
        if isinstance(agent, VTraceAgent):
            # Its optimizer's variables without the Learner's trace of a whole train step on the
            # batch spec (a tiny run's graph building, twice); before super(), which restores
            # the checkpoint.
            with (strategy or tf.distribute.get_strategy()).scope():
                agent.create_optimizer_variables()
            kwargs["run_optimizer_variable_init"] = False
        with _without_log_line(_DEPRECATED_INIT_LINE):
            super().__init__(root_dir, train_step, agent, *args, strategy=strategy, **kwargs)

    def _save_checkpoint(self):
        if self._actor_state is not None:
            self._actor_state.save(int(self.train_step.numpy()))
        self._checkpointer.save(self.train_step, options=checkpoints.fault_point_options())
        if self._actor_state is not None:
            self._actor_state.prune()

    def _get_checkpoint_trigger(self, checkpoint_interval):
        if checkpoint_interval <= 0:
            return super()._get_checkpoint_trigger(checkpoint_interval)
        return interval_trigger.IntervalTrigger(checkpoint_interval, self._save_checkpoint,
                                                start=self.train_step.numpy())

    def _train(self, iterations, iterator, parallel_iterations):
        loss_info = super()._train(iterations, iterator, parallel_iterations)
        loss = float(loss_info.loss)
        if not math.isfinite(loss):
            step = int(self.train_step.numpy())
            directory = os.path.join(self._train_dir, learner.POLICY_CHECKPOINT_DIR)
            latest = tf.train.latest_checkpoint(directory)
            kept = (f"the last good checkpoint {latest} is kept (re-running the same command "
                    f"resumes from it; a lower learning_rate or a smaller reward_scale may "
                    f"help)") if latest else "no checkpoint had been written yet"
            raise NonFiniteLossError(
                f"The training loss became {loss} at train step {step}; training stopped and "
                f"this state was not checkpointed: {kept}.")
        return loss_info


def make_learner(root_dir, config, agent, unrolls, train_step, actor_state=None):
    """TF-Agents' ``Learner`` on the unrolls of ``unrolls``.

    Summaries and checkpoints go under ``root_dir/train`` (restored from there when present:
    re-running resumes), each checkpoint with ``actor_state`` 's file when given; TF-Agents'
    ``PolicySavedModelTrigger`` writes policy checkpoints under ``root_dir/policies`` every
    ``config.policy_save_interval`` steps (none when it is 0: the trigger's SavedModels, traced
    when it is created, cost most of a tiny run, and ``export.export_policies`` replaces them).
    """
    learner_triggers = []
    if config.policy_save_interval > 0:
        policies_dir = os.path.join(root_dir, learner.POLICY_SAVED_MODEL_DIR)
        learner_triggers.append(triggers.PolicySavedModelTrigger(
            policies_dir, agent, train_step, interval=config.policy_save_interval))
    return GuardedLearner(
        root_dir, train_step, agent, experience_dataset_fn=unrolls.as_dataset,
        checkpoint_interval=config.checkpoint_interval, summary_interval=config.log_interval,
        triggers=learner_triggers, actor_state=actor_state)


def save_checkpoint(root_dir, agent, train_step, actor_state=None):
    """Writes the training checkpoint of the current step where the ``Learner`` writes its own.

    The Learner checkpoints every ``checkpoint_interval`` steps; this saves the final state
    whatever the interval, with the same objects and directory (and restores nothing first),
    after ``actor_state`` 's file of the same step when given.
    """
    if actor_state is not None:
        actor_state.save(int(train_step.numpy()))
    checkpoints.CheckpointSaver(root_dir, max_to_keep=3, agent=agent,
                                train_step=train_step).save(train_step)
    if actor_state is not None:
        actor_state.prune()
