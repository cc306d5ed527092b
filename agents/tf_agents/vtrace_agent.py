"""An IMPALA-style V-trace actor-critic agent for TF-Agents (which has none)."""

import collections

import tensorflow as tf
import tensorflow_probability as tfp
from tf_agents.agents import tf_agent
from tf_agents.policies import greedy_policy
from tf_agents.trajectories import time_step as ts

from keras_relational.agents.config import TrainConfig
from keras_relational.agents.tf_agents.acting import ActorCriticPolicy
from keras_relational.agents.vtrace import vtrace_returns

VTraceLossInfo = collections.namedtuple(
    "VTraceLossInfo", ["policy_gradient_loss", "value_loss", "entropy", "gradient_norm"])


def categorical_target(network, trajectory):
    """The default target of :class:`VTraceAgent`: one ``Categorical`` over scalar actions.

    ``network`` returns ``((logits, value), state)``; the behaviour policy's logits are
    ``trajectory.policy_info["logits"]`` (:class:`ActorCriticPolicy` records them). Returns
    ``(target_log_probs, behaviour_log_probs, entropy)`` ``[T, B]`` and ``values [T+1, B]`` of
    the time-major ``trajectory`` ``[T+1, B]``.
    """
    (logits, values), _ = network(trajectory.observation, step_type=trajectory.step_type,
                                  training=True)
    actions = trajectory.action[:-1]
    target = tfp.distributions.Categorical(logits=logits[:-1])
    behaviour = tfp.distributions.Categorical(logits=trajectory.policy_info["logits"][:-1])
    return target.log_prob(actions), behaviour.log_prob(actions), target.entropy(), values


class VTraceAgent(tf_agent.TFAgent):
    """Off-policy actor-critic with V-trace targets (Espeholt et al. 2018), as a ``TFAgent``.

    Trains on batches of trajectories ``[B, T+1]`` (consecutive unrolls overlapping by one step)
    collected by :attr:`collect_policy`, whose ``policy_info`` records the behaviour policy. The
    policy's distribution is a hook, ``target_fn``: by default one ``Categorical`` over scalar
    actions (:func:`categorical_target`, :class:`ActorCriticPolicy`); another action
    distribution brings its own ``target_fn`` and policies (the StarCraft II agent's composite
    one: :mod:`keras_relational.agents.tf_agents.sc2_agent`). The loss, summed over time and
    batch as in IMPALA, is

    ``-sum rho_s A_s log pi(a_s|x_s) + baseline_cost * 0.5 sum (v_s - V(x_s))^2
    - entropy_cost * sum H(pi(.|x_s))``

    with ``v_s`` and ``A_s`` from :func:`vtrace_returns`; transitions across an episode boundary
    are masked out, and a truncated episode (discount 1 at the time limit) bootstraps from the
    value of its last observation.

    Args:
        time_step_spec, action_spec: the environment's specs (scalar discrete actions unless
            ``target_fn`` is given).
        network: a TF-Agents network returning ``((logits, value), state)``, e.g.
            :class:`Keras3Network` around a model from ``keras_relational.models`` (or what
            ``target_fn`` reads).
        optimizer: a tf-keras optimizer; ``make_optimizer("rmsprop", lr, keras_module=tf.keras)``
            (:mod:`keras_relational.agents.optimizers`) gives the papers' settings. A
            ``tf.keras.mixed_precision.LossScaleOptimizer`` (for float16 networks) scales the
            loss and unscales the gradients before they are clipped.
        discount, entropy_cost, baseline_cost, gradient_clip_norm: gamma, the entropy weight,
            the value-loss weight and the global-norm gradient clip (None disables it); their
            defaults are :class:`TrainConfig`'s, which cites the papers they come from.
        reward_scale: rewards are multiplied by this before the loss (1: the environment's
            rewards; IMPALA-style agents often shrink large rewards, e.g. 0.1 turns BoxWorld's
            +10 gem into 1, so the value loss does not swamp the policy gradient).
        clip_rho_threshold, clip_c_threshold, clip_pg_rho_threshold: V-trace's rho_bar, c_bar
            and the policy-gradient rho_bar (1, IMPALA).
        lambda_: IMPALA's lambda (1: the papers' V-trace; see :func:`vtrace_returns`).
        jit_compile: compile the loss and gradient computation with XLA.
        train_step_counter: optional ``tf.Variable`` counting train steps.
        target_fn: ``target_fn(network, trajectory)`` -> ``(target_log_probs,
            behaviour_log_probs, entropy)`` ``[T, B]`` and ``values [T+1, B]`` of a time-major
            trajectory ``[T+1, B]``, under the network's current weights (called inside the
            gradient tape). None: :func:`categorical_target`.
        collect_policy, policy: the policies of a ``target_fn`` (both required with one; the
            collect policy's ``policy_info`` must hold what ``target_fn`` reads). None:
            :class:`ActorCriticPolicy` and its greedy version.
        use_tf_function: run the loss in a ``tf.function`` (False: op by op, which skips the
            trace; short CPU runs of large graphs).
    """

    def __init__(self, time_step_spec, action_spec, network, optimizer,
                 discount=TrainConfig.discount, entropy_cost=TrainConfig.entropy_cost,
                 baseline_cost=TrainConfig.baseline_cost,
                 gradient_clip_norm=TrainConfig.gradient_clip_norm,
                 reward_scale=TrainConfig.reward_scale, clip_rho_threshold=1.0,
                 clip_c_threshold=1.0, clip_pg_rho_threshold=1.0,
                 lambda_=TrainConfig.vtrace_lambda, jit_compile=True, train_step_counter=None,
                 target_fn=None, collect_policy=None, policy=None, use_tf_function=True,
                 name=None):
        tf.Module.__init__(self, name=name)
        if target_fn is None:
            if collect_policy is not None or policy is not None:
                raise ValueError("VTraceAgent: `collect_policy` and `policy` go with a "
                                 "`target_fn` (the default target makes its own policies); "
                                 "received target_fn=None.")
            if action_spec.shape.rank != 0 or not action_spec.dtype.is_integer:
                raise ValueError(
                    f"VTraceAgent needs a scalar integer `action_spec`, received {action_spec}.")
        elif collect_policy is None or policy is None:
            raise ValueError("VTraceAgent: a `target_fn` needs its `collect_policy` and `policy`"
                             f"; received collect_policy={collect_policy!r}, policy={policy!r}.")
        self._target_fn = categorical_target if target_fn is None else target_fn
        network.create_variables(time_step_spec.observation)
        self._network = network
        self._optimizer = optimizer
        self._loss_scaled = isinstance(optimizer, tf.keras.mixed_precision.LossScaleOptimizer)
        self._discount = discount
        self._entropy_cost = entropy_cost
        self._baseline_cost = baseline_cost
        self._gradient_clip_norm = gradient_clip_norm
        self._reward_scale = reward_scale
        self._clip_thresholds = dict(clip_rho_threshold=clip_rho_threshold,
                                     clip_c_threshold=clip_c_threshold,
                                     clip_pg_rho_threshold=clip_pg_rho_threshold,
                                     lambda_=lambda_)
        if target_fn is None:
            collect_policy = ActorCriticPolicy(time_step_spec, action_spec, network)
            policy = greedy_policy.GreedyPolicy(collect_policy)
        super().__init__(time_step_spec, action_spec, policy, collect_policy,
                         train_sequence_length=None, train_step_counter=train_step_counter)
        # No tensor-dependent Python control flow here: autograph would only re-compile the
        # source of what it calls (TF-Agents' Network.__call__, whose `state is not ()` then
        # raises a SyntaxWarning).
        self._loss_and_gradients = tf.function(
            self._loss_and_gradients_impl, jit_compile=jit_compile, autograph=False,
        ) if use_tf_function else self._loss_and_gradients_impl

    @property
    def network(self):
        return self._network

    def _initialize(self):
        return tf.no_op()

    def create_optimizer_variables(self):
        """Creates the optimizer's slot variables as its first update would: same ones, same order.

        TF-Agents' ``Learner`` otherwise creates them by tracing a whole train step on the batch
        spec (its ``run_optimizer_variable_init``): a second graph of the network and the loss
        beside the one training runs. The optimizer builds on the variables ``_train`` passes to
        ``apply_gradients``, in that order, so checkpoints written either way name the same slots.
        """
        variables = self._network.trainable_variables
        if self._loss_scaled:  # its apply_gradients builds the inner optimizer outside any scope
            self._optimizer.build(variables)
            return
        with tf.name_scope(self._optimizer.name or "optimizer"):  # as apply_gradients names them
            self._optimizer.build(variables)

    def _loss_and_gradients_impl(self, experience):
        variables = self._network.trainable_variables
        # Time-major [T+1, B].
        to_time_major = lambda t: tf.nest.map_structure(  # noqa: E731
            lambda x: tf.transpose(x, [1, 0, *range(2, x.shape.rank)]), t)
        traj = to_time_major(experience)
        with tf.GradientTape() as tape:
            target_log_probs, behaviour_log_probs, target_entropy, values = self._target_fn(
                self._network, traj)
            log_rhos = target_log_probs - behaviour_log_probs
            # Transition t -> t+1 is real unless step t is LAST (then t+1 is a new episode).
            mask = tf.cast(~tf.equal(traj.step_type[:-1], ts.StepType.LAST), tf.float32)
            discounts = self._discount * traj.discount[:-1] * mask
            rewards = self._reward_scale * traj.reward[:-1]
            returns = vtrace_returns(tf.stop_gradient(log_rhos), discounts, rewards,
                                     tf.stop_gradient(values[:-1]),
                                     tf.stop_gradient(values[-1]), mask=mask,
                                     **self._clip_thresholds)
            pg_loss = -tf.reduce_sum(mask * returns.pg_advantages * target_log_probs)
            value_loss = 0.5 * tf.reduce_sum(mask * tf.square(returns.vs - values[:-1]))
            entropy = tf.reduce_sum(mask * target_entropy)
            loss = pg_loss + self._baseline_cost * value_loss - self._entropy_cost * entropy
            if self._loss_scaled:
                scaled_loss = self._optimizer.get_scaled_loss(loss)
        gradients = tape.gradient(scaled_loss if self._loss_scaled else loss, variables)
        if self._loss_scaled:  # non-finite ones make the optimizer skip the step, lower the scale
            gradients = self._optimizer.get_unscaled_gradients(gradients)
        gradient_norm = tf.linalg.global_norm(gradients)
        if self._gradient_clip_norm is not None:
            gradients, _ = tf.clip_by_global_norm(gradients, self._gradient_clip_norm,
                                                  use_norm=gradient_norm)
        return loss, gradients, VTraceLossInfo(pg_loss, value_loss, entropy, gradient_norm)

    def _train(self, experience, weights=None):
        del weights
        loss, gradients, extra = self._loss_and_gradients(experience)
        variables = self._network.trainable_variables
        self._optimizer.apply_gradients(zip(gradients, variables, strict=True))
        self.train_step_counter.assign_add(1)
        if self.summaries_enabled:
            with tf.name_scope("Losses/"):
                for name, value in extra._asdict().items():
                    tf.compat.v2.summary.scalar(name, value, step=self.train_step_counter)
        return tf_agent.LossInfo(loss, extra)

    def _loss(self, experience, weights=None, training=False):
        loss, _, extra = self._loss_and_gradients(experience)
        return tf_agent.LossInfo(loss, extra)
