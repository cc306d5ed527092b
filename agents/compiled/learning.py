"""Learning: the V-trace actor-critic loss and one optimiser step, through Keras' stateless API.

The loss is the TF-Agents agent's
(:class:`keras_relational.agents.tf_agents.vtrace_agent.VTraceAgent`), summed over time and batch as
in IMPALA (Espeholt et al. 2018, Sec. 4.2)::

    -sum rho_s A_s log pi(a_s|x_s) + baseline_cost * 0.5 sum (v_s - V(x_s))^2
    - entropy_cost * sum H(pi(.|x_s))

with ``v_s`` and ``A_s`` from :func:`~keras_relational.agents.vtrace.vtrace_returns`;
a transition out of a LAST step (into the next episode) is masked out, and a truncated episode
(discount 1 at the step limit) bootstraps from the value of its last observation. The gradients
are clipped to a global norm and applied with ``optimizer.stateless_apply`` (under TensorFlow
its equivalent, :func:`~keras_relational.agents.compiled.backend.apply_gradients`).
"""

import collections

import keras

from keras_relational.agents.compiled import acting, backend
from keras_relational.agents.vtrace import vtrace_returns

# dm_env.StepType.LAST (the environments' step types are dm_env's).
LAST = 2

Unroll = collections.namedtuple(
    "Unroll", ["observation", "step_type", "action", "behaviour_logits", "reward", "discount"])
Unroll.__doc__ = """A time-major unroll: ``T`` transitions of ``B`` environments.

``observation`` and ``step_type`` are ``[T+1, B, ...]`` (the last one is the bootstrap step);
``action``, ``behaviour_logits`` (``[T, B, A]``), ``reward`` and ``discount`` are ``[T, B]``,
the reward and discount being those of the step the action led to (TF-Agents' trajectories).
"""

LossInfo = collections.namedtuple("LossInfo", [
    "loss", "policy_gradient_loss", "value_loss", "entropy", "gradient_norm",
    "clipped_gradient_norm", "value_error", "value_mean", "reward_sum", "reward_max",
    "transitions", "finite_parameters"])
LossInfo.__doc__ = """Scalars of one learner step (float32, computed inside the compiled update).

``loss`` and its terms ``policy_gradient_loss``, ``value_loss`` (before ``baseline_cost``) and
``entropy`` (before ``entropy_cost``) are sums over the unroll's ``transitions`` (time x batch,
as IMPALA's); ``gradient_norm`` is the global norm before the clip, ``clipped_gradient_norm``
after it; ``value_error`` the root mean square of ``v_s - V(x_s)`` and ``value_mean`` the mean
``V(x_s)`` over the real transitions; ``reward_sum`` and ``reward_max`` the sum and the largest
absolute reward after ``reward_scale``; ``finite_parameters`` 1 when every updated weight is
finite, else 0."""

LossTerms = collections.namedtuple("LossTerms", [
    "loss", "policy_gradient_loss", "value_loss", "entropy", "value_error", "value_mean",
    "reward_sum", "reward_max", "transitions"])
LossTerms.__doc__ = """The loss of one unroll, its terms and diagnostics (see :class:`LossInfo`)."""


def log_softmax_and_entropy(logits):
    """``log pi`` ``[..., A]`` and the entropy ``[...]`` of categorical ``logits`` (float32)."""
    log_probs = keras.ops.log_softmax(keras.ops.cast(logits, "float32"), axis=-1)
    entropy = -keras.ops.sum(keras.ops.exp(log_probs) * log_probs, axis=-1)
    return log_probs, entropy


def action_log_prob(log_probs, actions):
    """``log_probs[..., actions]``: the log-probability of each action."""
    picked = keras.ops.take_along_axis(
        log_probs, keras.ops.expand_dims(keras.ops.cast(actions, "int32"), -1), axis=-1)
    return picked[..., 0]


def vtrace_loss(costs, unroll, target_log_probs, log_rhos, entropy, values):
    """The V-trace actor-critic loss of one time-major unroll (Espeholt et al. 2018, Sec. 4)::

        -sum rho_s A_s log pi(a_s|x_s) + baseline_cost * 0.5 sum (v_s - V(x_s))^2
        - entropy_cost * sum H(pi(.|x_s))

    Args:
        costs: has ``discount``, ``reward_scale``, ``vtrace_lambda``, ``baseline_cost`` and
            ``entropy_cost`` (a :class:`CompiledConfig`, or the SC2 learner).
        unroll: has ``step_type`` ``[T + 1, B]``, ``reward`` and ``discount`` ``[T, B]``.
        target_log_probs, log_rhos, entropy: ``[T, B]``: log pi of the actions taken, log pi/mu
            and the policy's entropy.
        values: ``V(x_t)``, ``[T + 1, B]`` (the last one bootstraps).

    Returns:
        ``(loss, (pg_loss, value_loss, entropy))``; :func:`vtrace_loss_terms` has the
        diagnostics too.
    """
    terms = vtrace_loss_terms(costs, unroll, target_log_probs, log_rhos, entropy, values)
    return terms.loss, (terms.policy_gradient_loss, terms.value_loss, terms.entropy)


def vtrace_loss_terms(costs, unroll, target_log_probs, log_rhos, entropy, values):
    """:func:`vtrace_loss` as :class:`LossTerms`: the loss, its terms and the value error,
    mean value, reward sum and largest reward of the unroll (arguments as :func:`vtrace_loss`).
    """
    # Transition t -> t+1 is real unless step t is LAST (then t+1 is a new episode).
    mask = keras.ops.cast(unroll.step_type[:-1] != LAST, "float32")
    discounts = costs.discount * unroll.discount * mask
    rewards = costs.reward_scale * unroll.reward
    returns = vtrace_returns(keras.ops.stop_gradient(log_rhos), discounts, rewards,
                             keras.ops.stop_gradient(values[:-1]),
                             keras.ops.stop_gradient(values[-1]), mask=mask,
                             lambda_=costs.vtrace_lambda)
    pg_loss = -keras.ops.sum(mask * returns.pg_advantages * target_log_probs)
    value_loss = 0.5 * keras.ops.sum(mask * keras.ops.square(returns.vs - values[:-1]))
    entropy = keras.ops.sum(mask * entropy)
    loss = pg_loss + costs.baseline_cost * value_loss - costs.entropy_cost * entropy
    transitions = keras.ops.sum(mask)
    per_transition = 1.0 / keras.ops.maximum(transitions, 1.0)
    value_error = keras.ops.sqrt(2.0 * keras.ops.stop_gradient(value_loss) * per_transition)
    value_mean = keras.ops.sum(mask * keras.ops.stop_gradient(values[:-1])) * per_transition
    return LossTerms(loss, pg_loss, value_loss, entropy, value_error, value_mean,
                     keras.ops.sum(mask * rewards), keras.ops.max(keras.ops.abs(rewards)),
                     transitions)


class VTraceLearner:
    """The loss and the update of the compiled loop, as pure functions of value lists.

    Args:
        model: the Keras 3 agent network (outputs ``(logits, value)``).
        optimizer: a built Keras 3 optimizer (``optimizer.build(model.trainable_variables)``).
        config: a :class:`~keras_relational.agents.compiled.config.CompiledConfig` (discount,
            costs, clip norm, reward scale, lambda).
    """

    def __init__(self, model, optimizer, config):
        self.model = model
        self.optimizer = optimizer
        self.config = config
        # A LossScaleOptimizer's current scale is one of its variables: its index in the
        # optimizer values of the loop state (None: no loss scaling).
        self._scale_index = None
        if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
            self._scale_index = next(i for i, v in enumerate(optimizer.variables)
                                     if v is optimizer.dynamic_scale)
        self._loss_and_grads = backend.value_and_grad(self._scaled_loss)

    def _scaled_loss(self, trainable, non_trainable, unroll, scale):
        loss, aux = self.loss(trainable, non_trainable, unroll)
        return loss * scale, (loss, aux)

    def loss(self, trainable, non_trainable, unroll):
        """``(loss, (non_trainable, loss terms))`` of a time-major :class:`Unroll`."""
        config = self.config
        steps, batch = unroll.step_type.shape[0], unroll.step_type.shape[1]
        observation = keras.ops.reshape(unroll.observation,
                                        (steps * batch, *unroll.observation.shape[2:]))
        logits, values, non_trainable = acting.forward(
            self.model, (trainable, non_trainable), observation, training=True)
        logits = keras.ops.reshape(logits, (steps, batch, logits.shape[-1]))
        values = keras.ops.reshape(values, (steps, batch))
        log_probs, entropy = log_softmax_and_entropy(logits[:-1])
        behaviour_log_probs, _ = log_softmax_and_entropy(unroll.behaviour_logits)
        target_log_probs = action_log_prob(log_probs, unroll.action)
        log_rhos = target_log_probs - action_log_prob(behaviour_log_probs, unroll.action)
        terms = vtrace_loss_terms(config, unroll, target_log_probs, log_rhos, entropy, values)
        return terms.loss, (non_trainable, terms)

    def update(self, params, optimizer_variables, unroll):
        """One gradient step: ``(params, optimizer_variables, LossInfo)``."""
        trainable, non_trainable = params
        scale = (keras.ops.ones((), "float32") if self._scale_index is None
                 else optimizer_variables[self._scale_index])
        (_, (loss, (non_trainable, terms))), grads = self._loss_and_grads(
            trainable, non_trainable, unroll, scale)
        # The gradients are scaled by `scale`; the LossScaleOptimizer divides them by it (and
        # skips a step with non-finite ones). The norm and the clip are the unscaled ones'.
        norm = keras.ops.sqrt(sum(keras.ops.sum(keras.ops.square(g)) for g in grads)) / scale
        clipped_norm = norm
        if self.config.gradient_clip_norm is not None:
            # tf.clip_by_global_norm: g * clip / max(norm, clip).
            clip = self.config.gradient_clip_norm / keras.ops.maximum(
                norm, self.config.gradient_clip_norm)
            grads = [g * clip for g in grads]
            clipped_norm = norm * clip
        trainable, optimizer_variables = backend.apply_gradients(
            self.optimizer, optimizer_variables, grads, trainable,
            self.model.trainable_variables)
        # One reduction a weight: cheap beside the forward pass over T x B observations.
        finite = keras.ops.all(keras.ops.stack(
            [keras.ops.all(keras.ops.isfinite(w)) for w in trainable]))
        return (trainable, non_trainable), optimizer_variables, LossInfo(
            loss, terms.policy_gradient_loss, terms.value_loss, terms.entropy, norm,
            clipped_norm, terms.value_error, terms.value_mean, terms.reward_sum,
            terms.reward_max, terms.transitions, keras.ops.cast(finite, "float32"))
