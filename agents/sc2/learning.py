"""V-trace learning for the StarCraft II agent, with the composite action distribution.

The loss is the compiled loop's (:class:`keras_relational.agents.compiled.learning.VTraceLearner`;
IMPALA, Espeholt et al. 2018, Sec. 4.2), summed over time and batch::

    -sum rho_s A_s log pi(a_s|x_s) + baseline_cost * 0.5 sum (v_s - V(x_s))^2
    - entropy_cost * sum H(pi(.|x_s))

with ``log pi(a|x) = log pi(function) + sum over the arguments that function takes of
log pi(argument | function)`` (Vinyals et al. 2017, Sec. 4.1;
:func:`~keras_relational.models.sc2_agent.composite_log_prob_and_entropy`), the function's
logits masked by the available actions. The importance weights use the behaviour policy's
composite log-probability recorded by the actor. The agent is recurrent (a ConvLSTM core;
Zambaldi et al. 2019, App. C), so the learner replays the trunk over the unroll from the state
the actor had at its start, zeroing the state at every episode start, then scores the arguments
of the taken functions for all ``T x B`` steps at once. The V-trace targets are the ``keras.ops``
ones of the compiled loop, the update one Keras optimizer step; under TensorFlow and JAX alike.
"""

import collections

import keras
import numpy as np

from keras_relational import validation
from keras_relational.agents.compiled import backend
from keras_relational.agents.compiled.learning import vtrace_loss
from keras_relational.agents.sc2.config import COMPILE_MODES
from keras_relational.models.sc2_agent import composite_log_prob_and_entropy

# dm_env.StepType.FIRST and LAST.
FIRST, LAST = 0, 2

SC2Unroll = collections.namedtuple("SC2Unroll", [
    "observation", "step_type", "state", "action", "behaviour_log_prob", "reward", "discount"])
SC2Unroll.__doc__ = """A time-major unroll of ``B`` SC2 environments over ``T`` transitions.

``observation`` (a dict of the adapter's observations) and ``step_type`` are ``[T+1, B, ...]``
(the last step is the bootstrap step); ``state`` is the ConvLSTM ``(h, c)`` before step 0;
``action`` is a dict of int32 ``[T, B]`` (``function`` and one entry per argument type);
``behaviour_log_prob``, ``reward`` and ``discount`` are ``[T, B]``, the reward and discount
those of the step the action led to.
"""

LossInfo = collections.namedtuple(
    "LossInfo", ["loss", "policy_gradient_loss", "value_loss", "entropy", "gradient_norm"])


def replay(model, unroll, training=False, return_state=False):
    """The trunk's outputs along ``unroll`` with the current values of ``model``'s variables.

    ``unroll`` needs only ``observation``, ``step_type`` and ``state`` (time-major). Returns a
    dict of ``[T+1, B, ...]`` tensors: ``function_logits`` (masked), ``value``, and the
    ``shared`` and ``spatial`` features the argument heads take; with ``return_state`` also
    the ConvLSTM state ``(h, c)`` after the last step. Call it inside a
    ``keras.StatelessScope`` to evaluate other weights (the learner does). The loop over time is
    unrolled in the traced graph (``T`` is static), so the graph grows with the unroll length.
    """
    trunk = model.get_layer("sc2_trunk")
    steps = unroll.step_type.shape[0]
    h, c = unroll.state
    outputs = collections.defaultdict(list)
    # One trunk call a step: the ConvLSTM state must restart at every episode start inside the
    # unroll (Zambaldi et al. 2019, App. C; reset at episode start).
    for t in range(steps):
        keep = keras.ops.cast(unroll.step_type[t] != FIRST, "float32")[:, None, None, None]
        inputs = {key: unroll.observation[key][t] for key in trunk.input if key in
                  unroll.observation}
        out = trunk(dict(inputs, state_h=h * keep, state_c=c * keep), training=training)
        h, c = out["state_h"], out["state_c"]
        for key in ("function_logits", "value", "shared", "spatial"):
            outputs[key].append(out[key])
    outputs = {key: keras.ops.stack(values) for key, values in outputs.items()}
    return (outputs, (h, c)) if return_state else outputs


def score_actions(heads, replayed, action, argument_mask, training=False):
    """``(log_prob, entropy)`` ``[T, B]`` of the composite actions taken along an unroll.

    The argument heads (``model.get_layer("sc2_argument_heads")``, or any callable taking their
    input dict) score the arguments of the taken functions for all ``T x B`` steps at once, from
    :func:`replay` 's ``shared`` and ``spatial`` features ``[T+1, B, ...]`` (the bootstrap step
    is left out); ``action`` is a dict of ``[T, B]`` ints;
    :func:`~keras_relational.models.sc2_agent.composite_log_prob_and_entropy` does the rest.
    The SC2 learner and the TF-Agents route both score actions here.
    """
    steps, batch = action["function"].shape[0], action["function"].shape[1]

    def flat(x):
        return keras.ops.reshape(x[:-1], (steps * batch, *x.shape[2:]))

    action = {key: keras.ops.reshape(value, (steps * batch,)) for key, value in action.items()}
    args = dict(heads({"shared": flat(replayed["shared"]), "spatial": flat(replayed["spatial"]),
                       "function_id": action["function"]}, training=training))
    args["function_logits"] = flat(replayed["function_logits"])
    log_prob, entropy = composite_log_prob_and_entropy(args, action, argument_mask)
    return (keras.ops.reshape(log_prob, (steps, batch)),
            keras.ops.reshape(entropy, (steps, batch)))


class SC2VTraceLearner:
    """The SC2 agent's V-trace loss and update, as pure functions of value lists.

    Args:
        model: the agent, :func:`keras_relational.models.sc2_agent.sc2_agent`.
        optimizer: a Keras 3 optimizer (Zambaldi et al. 2019, Table 2: Adam, beta1 0.9,
            beta2 0.999, epsilon 1e-8).
        argument_mask: ``[num_functions, num_argument_types]`` 0/1, which function takes which
            argument (``SC2Environment.argument_mask()``).
        discount, entropy_cost, baseline_cost, gradient_clip_norm, reward_scale, vtrace_lambda:
            as the compiled loop's (Table 2: discount 0.99, baseline cost 0.1, clip 100).
        compile_mode: ``"xla"`` compiles the update whole (``jax.jit`` /
            ``tf.function(jit_compile=True)``); ``"graph"`` a TensorFlow graph without XLA (JAX:
            ``jax.jit``); ``"eager"`` runs it op by op (no tracing: a few steps on the CPU, tests).

    Example::

        learner = SC2VTraceLearner(model, keras.optimizers.Adam(1e-4), mask)
        info = learner.train_step(unroll)   # one V-trace step on the model's variables
    """

    def __init__(self, model, optimizer, argument_mask, discount=0.99, entropy_cost=1e-2,
                 baseline_cost=0.1, gradient_clip_norm=100.0, reward_scale=1.0,
                 vtrace_lambda=1.0, compile_mode="xla"):
        backend.current_backend()
        validation.check_choice("SC2VTraceLearner", "compile_mode", compile_mode, COMPILE_MODES)
        self.model = model
        self.optimizer = optimizer
        self.argument_mask = np.asarray(argument_mask, np.float32)
        self.discount = discount
        self.entropy_cost = entropy_cost
        self.baseline_cost = baseline_cost
        self.gradient_clip_norm = gradient_clip_norm
        self.reward_scale = reward_scale
        self.vtrace_lambda = vtrace_lambda
        optimizer.build(model.trainable_variables)
        self._loss_and_grads = backend.value_and_grad(self.loss)
        self._update = self.update if compile_mode == "eager" else backend.compile_function(
            self.update, donate_state=False, jit_compile=compile_mode == "xla")

    def target(self, trainable, unroll):
        """``(log_prob [T, B], entropy [T, B], value [T+1, B])`` under the weights
        ``trainable`` (a list in ``model.trainable_variables`` order)."""
        mapping = list(zip(self.model.trainable_variables, trainable, strict=True))
        with keras.StatelessScope(state_mapping=mapping):
            out = replay(self.model, unroll, training=True)
            log_prob, entropy = score_actions(
                self.model.get_layer("sc2_argument_heads"), out, unroll.action,
                self.argument_mask, training=True)
        return log_prob, entropy, out["value"]

    def loss(self, trainable, unroll):
        """``(loss, (pg_loss, value_loss, entropy))`` of an :class:`SC2Unroll`."""
        log_probs, entropy, values = self.target(trainable, unroll)
        log_rhos = log_probs - unroll.behaviour_log_prob
        return vtrace_loss(self, unroll, log_probs, log_rhos, entropy, values)

    def update(self, trainable, optimizer_variables, unroll):
        """One gradient step: ``(trainable, optimizer_variables, LossInfo)``."""
        (loss, parts), grads = self._loss_and_grads(trainable, unroll)
        norm = keras.ops.sqrt(sum(keras.ops.sum(keras.ops.square(g)) for g in grads))
        if self.gradient_clip_norm is not None:
            # tf.clip_by_global_norm: g * clip / max(norm, clip).
            scale = self.gradient_clip_norm / keras.ops.maximum(norm, self.gradient_clip_norm)
            grads = [g * scale for g in grads]
        trainable, optimizer_variables = backend.apply_gradients(
            self.optimizer, optimizer_variables, grads, trainable,
            self.model.trainable_variables)
        return trainable, optimizer_variables, LossInfo(loss, *parts, norm)

    def train_step(self, unroll):
        """One compiled update of the model's and optimizer's variables; returns the
        :class:`LossInfo` as floats."""
        unroll = as_tensors(unroll)
        trainable, optimizer_variables, info = self._update(
            [keras.ops.copy(v.value) for v in self.model.trainable_variables],
            [keras.ops.copy(v.value) for v in self.optimizer.variables], unroll)
        for variables, values in ((self.model.trainable_variables, trainable),
                                  (self.optimizer.variables, optimizer_variables)):
            for variable, value in zip(variables, values, strict=True):
                variable.assign(value)
        return LossInfo(*(float(keras.ops.convert_to_numpy(x)) for x in info))


def as_tensors(unroll):
    """``unroll`` with every array a backend tensor (one trace for every unroll alike)."""
    def convert(x):
        return keras.ops.convert_to_tensor(x)

    return SC2Unroll(
        {key: convert(value) for key, value in unroll.observation.items()},
        convert(unroll.step_type), tuple(convert(s) for s in unroll.state),
        {key: convert(value) for key, value in unroll.action.items()},
        *(convert(x) for x in (unroll.behaviour_log_prob, unroll.reward, unroll.discount)))
