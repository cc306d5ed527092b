"""V-trace targets and policy-gradient advantages in ``keras.ops`` (Espeholt et al. 2018, Sec. 4).

The same equations as :func:`keras_relational.agents.vtrace.vtrace_returns` (the TF-Agents
agent's), written with ``keras.ops`` only, so they run inside a compiled update under any Keras
backend (``jax.lax.scan`` under JAX, a ``tf.while_loop`` under TensorFlow).
"""

import collections

import keras

from keras_relational import validation

VTraceReturns = collections.namedtuple("VTraceReturns", ["vs", "pg_advantages"])


def vtrace_returns(log_rhos, discounts, rewards, values, bootstrap_value, mask=None,
                   clip_rho_threshold=1.0, clip_c_threshold=1.0, clip_pg_rho_threshold=1.0,
                   lambda_=1.0):
    """V-trace value targets ``v_s`` and advantages, time-major ``[T, B]``.

    With ``rho_t = min(rho_bar, pi/mu)`` and ``c_t = lambda * min(c_bar, pi/mu)``
    (Espeholt et al. 2018, eq. 1 and Sec. 4.2)::

        delta_t = rho_t (r_t + gamma_t V(x_{t+1}) - V(x_t))
        v_s     = V(x_s) + delta_s + gamma_s c_s (v_{s+1} - V(x_{s+1})),   v_T = V(x_T)
        A_s     = min(pg_rho_bar, pi/mu) (r_s + gamma_s v_{s+1} - V(x_s))

    Args:
        log_rhos: ``log(pi(a_t|x_t) / mu(a_t|x_t))``, ``[T, B]``.
        discounts: ``gamma_t`` (0 where the episode terminated after step t), ``[T, B]``.
        rewards: ``r_t``, ``[T, B]``.
        values: ``V(x_t)``, ``[T, B]``.
        bootstrap_value: ``V(x_T)``, ``[B]``.
        mask: optional ``[T, B]``; where 0 the transition is not a real one (it crosses an
            episode boundary): its ``rho`` and ``c`` are 0, so nothing flows across it.
        clip_rho_threshold, clip_c_threshold, clip_pg_rho_threshold: rho_bar, c_bar and the
            policy-gradient rho_bar (IMPALA: 1); None disables a clip.
        lambda_: IMPALA's lambda in [0, 1] (1: the papers' V-trace).

    Returns:
        ``VTraceReturns(vs, pg_advantages)``, both float32 ``[T, B]`` with gradients stopped.

    Example::

        import numpy as np
        from keras_relational.agents.vtrace import vtrace_returns

        zeros = np.zeros((5, 2), "float32")
        returns = vtrace_returns(zeros, zeros + 0.9, zeros + 1.0, zeros, np.zeros(2, "float32"))
        returns.vs  # the 5-step discounted returns, [5, 2]
    """
    lambda_ = validation.check_fraction("lambda_", lambda_)
    ops = keras.ops
    as_float = lambda x: ops.cast(ops.convert_to_tensor(x), "float32")  # noqa: E731
    log_rhos, discounts, rewards, values, bootstrap_value = (as_float(x) for x in (
        log_rhos, discounts, rewards, values, bootstrap_value))
    rhos = ops.exp(log_rhos)

    def clip(threshold):
        return rhos if threshold is None else ops.minimum(float(threshold), rhos)

    clipped_rhos, cs, clipped_pg_rhos = (clip(t) for t in (
        clip_rho_threshold, clip_c_threshold, clip_pg_rho_threshold))
    cs = lambda_ * cs
    if mask is not None:
        mask = as_float(mask)
        clipped_rhos, cs = clipped_rhos * mask, cs * mask
    values_t_plus_1 = ops.concatenate([values[1:], bootstrap_value[None]], axis=0)
    deltas = clipped_rhos * (rewards + discounts * values_t_plus_1 - values)

    def backward(acc, elems):
        delta, discount, c = elems
        acc = delta + discount * c * acc
        return acc, acc

    # Scan from the end: acc_s = v_s - V(x_s).
    _, vs_minus_v = ops.scan(backward, ops.zeros_like(bootstrap_value),
                             (deltas, discounts, cs), reverse=True)
    vs = vs_minus_v + values
    vs_t_plus_1 = ops.concatenate([vs[1:], bootstrap_value[None]], axis=0)
    pg_advantages = clipped_pg_rhos * (rewards + discounts * vs_t_plus_1 - values)
    return VTraceReturns(ops.stop_gradient(vs), ops.stop_gradient(pg_advantages))
