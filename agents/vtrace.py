"""V-trace targets and policy-gradient advantages (Espeholt et al. 2018, IMPALA, Sec. 4)."""

import collections

import tensorflow as tf

VTraceReturns = collections.namedtuple("VTraceReturns", ["vs", "pg_advantages"])


def vtrace_returns(log_rhos, discounts, rewards, values, bootstrap_value, mask=None,
                   clip_rho_threshold=1.0, clip_c_threshold=1.0, clip_pg_rho_threshold=1.0,
                   lambda_=1.0):
    """V-trace value targets ``v_s`` and advantages, time-major ``[T, B]``.

    With ``rho_t = min(rho_bar, pi/mu)`` and ``c_t = lambda * min(c_bar, pi/mu)``::

        delta_t = rho_t (r_t + gamma_t V(x_{t+1}) - V(x_t))
        v_s     = V(x_s) + delta_s + gamma_s c_s (v_{s+1} - V(x_{s+1})),   v_T = V(x_T)
        A_s     = min(pg_rho_bar, pi/mu) (r_s + gamma_s v_{s+1} - V(x_s))

    On-policy (``log_rhos = 0``) with all clip thresholds >= 1 this is the n-step return
    (``lambda = 1``) or the TD(lambda) return (Espeholt et al. 2018, Remark 2).

    Args:
        log_rhos: ``log(pi(a_t|x_t) / mu(a_t|x_t))``, ``[T, B]``.
        discounts: ``gamma_t`` (0 where the episode terminated after step t), ``[T, B]``.
        rewards: ``r_t``, ``[T, B]``.
        values: ``V(x_t)``, ``[T, B]``.
        bootstrap_value: ``V(x_T)``, ``[B]``.
        mask: optional ``[T, B]``; where False the transition is not a real one (an episode
            boundary in TF-Agents trajectories): its ``rho`` and ``c`` are set to 0, so ``v_t``
            equals ``V(x_t)`` there and nothing flows across the boundary.
        clip_rho_threshold, clip_c_threshold, clip_pg_rho_threshold: rho_bar, c_bar and the
            policy-gradient rho_bar (IMPALA default 1); None disables a clip.
        lambda_: IMPALA's lambda in [0, 1] (default 1, the V-trace of the papers); smaller
            values trade the variance of long returns for the bias of bootstrapping.

    Returns:
        ``VTraceReturns(vs, pg_advantages)``, both ``[T, B]`` with gradients stopped.
    """
    if not 0.0 <= lambda_ <= 1.0:
        raise ValueError(f"`lambda_` must be in [0, 1], received {lambda_!r}.")
    log_rhos = tf.convert_to_tensor(log_rhos, tf.float32)
    rhos = tf.exp(log_rhos)

    def clip(threshold):
        return rhos if threshold is None else tf.minimum(tf.cast(threshold, tf.float32), rhos)

    clipped_rhos, cs, clipped_pg_rhos = (clip(t) for t in (
        clip_rho_threshold, clip_c_threshold, clip_pg_rho_threshold))
    cs = lambda_ * cs
    if mask is not None:
        mask = tf.cast(mask, tf.float32)
        clipped_rhos, cs = clipped_rhos * mask, cs * mask
    values_t_plus_1 = tf.concat([values[1:], bootstrap_value[None]], axis=0)
    deltas = clipped_rhos * (rewards + discounts * values_t_plus_1 - values)

    def backward(acc, elems):
        delta, discount, c = elems
        return delta + discount * c * acc

    # Scan from the end: acc_s = v_s - V(x_s).
    vs_minus_v = tf.scan(backward, (deltas, discounts, cs), initializer=tf.zeros_like(
        bootstrap_value), reverse=True)
    vs = vs_minus_v + values
    vs_t_plus_1 = tf.concat([vs[1:], bootstrap_value[None]], axis=0)
    pg_advantages = clipped_pg_rhos * (rewards + discounts * vs_t_plus_1 - values)
    return VTraceReturns(tf.stop_gradient(vs), tf.stop_gradient(pg_advantages))
