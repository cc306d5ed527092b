import numpy as np
import pytest

from keras_relational.agents.vtrace import vtrace_returns


def vtrace_reference(log_rhos, discounts, rewards, values, bootstrap, mask=None, rho_bar=1.0,
                     c_bar=1.0, pg_rho_bar=1.0):
    """IMPALA eq. (1) as an explicit sum, independent of the recursive implementation."""
    t_len = len(rewards)
    rhos = np.exp(log_rhos)
    clipped = np.minimum(rho_bar, rhos)
    cs = np.minimum(c_bar, rhos)
    if mask is not None:
        clipped, cs = clipped * mask, cs * mask
    next_values = np.concatenate([values[1:], bootstrap[None]])
    deltas = clipped * (rewards + discounts * next_values - values)
    vs = np.zeros_like(values)
    for s in range(t_len):
        total = values[s].copy()
        for t in range(s, t_len):
            weight = np.prod(discounts[s:t], axis=0) * np.prod(cs[s:t], axis=0)
            total += weight * deltas[t]
        vs[s] = total
    next_vs = np.concatenate([vs[1:], bootstrap[None]])
    advantages = np.minimum(pg_rho_bar, rhos) * (rewards + discounts * next_vs - values)
    return vs, advantages


def _random_case(seed, t_len=6, batch=3):
    rng = np.random.RandomState(seed)
    return dict(
        log_rhos=rng.normal(scale=0.8, size=(t_len, batch)).astype("float32"),
        discounts=(0.9 * (rng.uniform(size=(t_len, batch)) > 0.2)).astype("float32"),
        rewards=rng.normal(size=(t_len, batch)).astype("float32"),
        values=rng.normal(size=(t_len, batch)).astype("float32"),
        bootstrap=rng.normal(size=(batch,)).astype("float32"),
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_explicit_sum(seed):
    case = _random_case(seed)
    vs, adv = vtrace_returns(case["log_rhos"], case["discounts"], case["rewards"],
                             case["values"], case["bootstrap"])
    expected_vs, expected_adv = vtrace_reference(**case)
    np.testing.assert_allclose(np.asarray(vs), expected_vs, atol=1e-5)
    np.testing.assert_allclose(np.asarray(adv), expected_adv, atol=1e-5)


def test_hand_computed_case():
    # Two steps, one env, gamma 0.5, rho = [2, 0.5] -> clipped [1, 0.5], c = [1, 0.5].
    log_rhos = np.log([[2.0], [0.5]]).astype("float32")
    discounts = np.full((2, 1), 0.5, "float32")
    rewards = np.array([[1.0], [2.0]], "float32")
    values = np.array([[0.0], [1.0]], "float32")
    bootstrap = np.array([4.0], "float32")
    # delta_1 = 0.5 * (2 + 0.5*4 - 1) = 1.5 ; v_1 = 1 + 1.5 = 2.5
    # delta_0 = 1 * (1 + 0.5*1 - 0) = 1.5 ; v_0 = 0 + 1.5 + 0.5*1*(2.5 - 1) = 2.25
    # A_0 = 1 * (1 + 0.5*2.5 - 0) = 2.25 ; A_1 = 0.5 * (2 + 0.5*4 - 1) = 1.5
    vs, adv = vtrace_returns(log_rhos, discounts, rewards, values, bootstrap)
    np.testing.assert_allclose(np.asarray(vs), [[2.25], [2.5]], atol=1e-6)
    np.testing.assert_allclose(np.asarray(adv), [[2.25], [1.5]], atol=1e-6)


def test_on_policy_reduces_to_n_step_returns():
    case = _random_case(7)
    case["log_rhos"][:] = 0.0
    vs, _ = vtrace_returns(case["log_rhos"], case["discounts"], case["rewards"], case["values"],
                           case["bootstrap"])
    returns = np.zeros_like(case["values"])
    acc = case["bootstrap"]
    for t in reversed(range(len(returns))):
        acc = case["rewards"][t] + case["discounts"][t] * acc
        returns[t] = acc
    np.testing.assert_allclose(np.asarray(vs), returns, atol=1e-5)


@pytest.mark.parametrize("lambda_", [0.0, 0.5, 0.95])
def test_on_policy_lambda_gives_td_lambda_returns(lambda_):
    case = _random_case(11)
    case["log_rhos"][:] = 0.0
    vs, adv = vtrace_returns(case["log_rhos"], case["discounts"], case["rewards"],
                             case["values"], case["bootstrap"], lambda_=lambda_)
    # TD(lambda): G_t = r_t + gamma_t ((1 - lambda) V(x_{t+1}) + lambda G_{t+1}), G_T = V(x_T).
    next_values = np.concatenate([case["values"][1:], case["bootstrap"][None]])
    returns = np.zeros_like(case["values"])
    acc = case["bootstrap"]
    for t in reversed(range(len(returns))):
        acc = case["rewards"][t] + case["discounts"][t] * (
            (1 - lambda_) * next_values[t] + lambda_ * acc)
        returns[t] = acc
    np.testing.assert_allclose(np.asarray(vs), returns, atol=1e-5)
    if lambda_ == 0.0:  # one-step TD targets and advantages
        np.testing.assert_allclose(
            np.asarray(vs), case["rewards"] + case["discounts"] * next_values, atol=1e-5)


def test_lambda_out_of_range_is_a_clear_error():
    case = _random_case(0)
    with pytest.raises(ValueError, match=r"`lambda_`: expected a float in \[0, 1\], received 1.5"):
        vtrace_returns(case["log_rhos"], case["discounts"], case["rewards"], case["values"],
                       case["bootstrap"], lambda_=1.5)


@pytest.mark.parametrize("seed", [0, 1])
def test_matches_explicit_sum_with_a_random_mask(seed):
    case = _random_case(seed)
    case["mask"] = (np.random.RandomState(seed + 100).uniform(size=case["rewards"].shape)
                    > 0.2).astype("float32")
    vs, adv = vtrace_returns(case["log_rhos"], case["discounts"], case["rewards"],
                             case["values"], case["bootstrap"], mask=case["mask"])
    expected_vs, expected_adv = vtrace_reference(**case)
    np.testing.assert_allclose(np.asarray(vs), expected_vs, atol=1e-5)
    np.testing.assert_allclose(np.asarray(adv), expected_adv, atol=1e-5)


def test_mask_stops_flow_across_boundaries():
    case = _random_case(3)
    mask = np.ones_like(case["values"])
    mask[2] = 0.0
    vs, _ = vtrace_returns(case["log_rhos"], case["discounts"], case["rewards"], case["values"],
                           case["bootstrap"], mask=mask)
    expected_vs, _ = vtrace_reference(**case, mask=mask)
    np.testing.assert_allclose(np.asarray(vs), expected_vs, atol=1e-5)
    np.testing.assert_allclose(np.asarray(vs)[2], case["values"][2], atol=1e-6)
