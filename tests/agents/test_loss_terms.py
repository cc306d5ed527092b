"""The compiled learner's per-term scalars (loss terms, gradient norms, value error, rewards) and
the stop on a non-finite update (keras_relational.agents.compiled)."""

import os

import keras
import numpy as np
import pytest

from keras_relational.agents import curves
from keras_relational.agents.compiled import checkpointing, loop
from keras_relational.agents.compiled import train_eval as compiled_train_eval
from keras_relational.agents.compiled.config import CompiledConfig
from keras_relational.agents.compiled.learning import (
    LossInfo,
    Unroll,
    vtrace_loss,
    vtrace_loss_terms,
)
from keras_relational.agents.compiled.progress import LOSS_SCALARS

_LEVELS = dict(goal_length=1, num_distractors=0, room_size=5, observation_type="one_hot")
_TINY = dict(env_kwargs=_LEVELS, num_envs=3, unroll_length=4, log_interval=1,
             model_kwargs=dict(key_dim=8, mlp_hidden_units=(8,), head_units=(8,),
                               conv_filters=(8, 8)))


def _one_gem_unroll(steps=5, batch=2, gem=10.0):
    """Zero values and a uniform policy; environment 0 gets the gem's reward at the last step."""
    reward = np.zeros((steps, batch), "float32")
    reward[-1, 0] = gem
    unroll = Unroll(observation=None, step_type=np.ones((steps + 1, batch), "int32"),
                    action=None, behaviour_logits=None, reward=reward,
                    discount=np.ones((steps, batch), "float32"))
    zeros = np.zeros((steps, batch), "float32")
    log_pi = np.full((steps, batch), np.log(0.25), "float32")
    return unroll, log_pi, zeros, np.full((steps, batch), np.log(4.0), "float32"), \
        np.zeros((steps + 1, batch), "float32")


def test_loss_terms_of_one_gem_reward():
    """A +10 reward makes the summed value loss 0.5 * sum_k (10 gamma^k)^2 over the steps before
    it: the loss of one unroll is ruled by the rewards it happens to hold."""
    config = CompiledConfig(discount=0.9)
    unroll, log_pi, log_rhos, entropy, values = _one_gem_unroll()
    terms = vtrace_loss_terms(config, unroll, log_pi, log_rhos, entropy, values)
    terms = {k: float(keras.ops.convert_to_numpy(v)) for k, v in terms._asdict().items()}
    targets = 10.0 * 0.9 ** np.arange(5)[::-1]  # v_s of environment 0; environment 1: 0
    np.testing.assert_allclose(terms["value_loss"], 0.5 * np.sum(targets ** 2), rtol=1e-5)
    np.testing.assert_allclose(terms["value_error"], np.sqrt(np.sum(targets ** 2) / 10),
                               rtol=1e-5)
    np.testing.assert_allclose(terms["policy_gradient_loss"], np.log(4.0) * targets.sum(),
                               rtol=1e-5)
    assert terms["reward_sum"] == 10.0 and terms["reward_max"] == 10.0
    assert terms["transitions"] == 10.0 and terms["value_mean"] == 0.0
    np.testing.assert_allclose(terms["entropy"], 10 * np.log(4.0), rtol=1e-5)
    # reward_scale scales the rewards the terms see (and reports them scaled).
    scaled = vtrace_loss_terms(CompiledConfig(discount=0.9, reward_scale=0.1), unroll, log_pi,
                               log_rhos, entropy, values)
    assert float(keras.ops.convert_to_numpy(scaled.reward_max)) == pytest.approx(1.0)
    np.testing.assert_allclose(float(keras.ops.convert_to_numpy(scaled.value_loss)),
                               terms["value_loss"] / 100, rtol=1e-5)
    # vtrace_loss (the SC2 learner's) keeps its form.
    loss, (pg, value, ent) = vtrace_loss(config, unroll, log_pi, log_rhos, entropy, values)
    np.testing.assert_allclose(float(keras.ops.convert_to_numpy(value)), terms["value_loss"],
                               rtol=1e-6)
    np.testing.assert_allclose(float(keras.ops.convert_to_numpy(loss)), terms["loss"], rtol=1e-6)


def _patched_update(monkeypatch, bad_update, field="loss"):
    """Makes update number ``bad_update`` report a non-finite ``field``."""
    real = loop.CompiledLoop.update
    calls = []

    def update(self, state, bank):
        state, metrics = real(self, state, bank)
        calls.append(1)
        if len(calls) == bad_update:
            metrics = metrics._replace(**{field: keras.ops.convert_to_tensor(
                np.float32(np.nan if field != "finite_parameters" else 0.0))})
        return state, metrics

    monkeypatch.setattr(loop.CompiledLoop, "update", update)


@pytest.mark.parametrize("field", ["loss", "finite_parameters"])
def test_a_non_finite_update_stops_the_run_and_keeps_the_last_good_checkpoint(
        tmp_path, monkeypatch, field, no_compiled_exports):
    _patched_update(monkeypatch, bad_update=3, field=field)
    root = str(tmp_path / "run")
    with pytest.raises(compiled_train_eval.NonFiniteLossError,
                       match=r"update 3: .*ckpt-2\.npz, is the last good one"):
        compiled_train_eval.train_eval(root, num_iterations=5, checkpoint_interval=1,
                                       eval_episodes=0, print_fn=lambda line: None, **_TINY)
    assert [os.path.basename(p) for p in checkpointing.checkpoints(root)] == [
        "ckpt-1.npz", "ckpt-2.npz"]
    # The curve holds the good updates with every learner scalar.
    rows = curves.read_curve(root)
    assert [row["step"] for row in rows] == [1, 2]
    assert set(rows[0]["losses"]) == {*LOSS_SCALARS, "loss_min", "loss_max"}
    assert all(np.isfinite(v) for v in rows[0]["losses"].values())


def test_the_metrics_of_an_update_hold_the_clipped_norm_and_finite_weights():
    config = compiled_train_eval.make_config(num_iterations=1, gradient_clip_norm=1e-3, **{
        k: v for k, v in _TINY.items() if k != "env_kwargs"}, env_kwargs=_LEVELS)
    from keras_relational.agents.compiled import levels
    from keras_relational.agents.networks import agent_model_fn
    from keras_relational.agents.optimizers import make_optimizer

    environment = compiled_train_eval.tensor_environment(config.environment)
    spec = environment.observation_spec()
    model = agent_model_fn(config.agent, spec.shape, 4, observation_dtype=spec.dtype,
                           **config.model_kwargs)()
    compiled = loop.CompiledLoop(environment, model, make_optimizer("adam", 1e-3), config)
    banks = levels.LevelBanks.for_config(environment, config)
    state = compiled.initial_state(banks.bank)
    _, metrics = compiled.update(state, banks.for_update())
    banks.close()
    values = {k: float(keras.ops.convert_to_numpy(v)) for k, v in metrics._asdict().items()}
    assert set(LossInfo._fields) <= set(values)
    assert values["gradient_norm"] > 1e-3  # so the clip acted
    assert values["clipped_gradient_norm"] == pytest.approx(1e-3, rel=1e-4)
    assert values["finite_parameters"] == 1.0
    assert values["transitions"] > 0 and values["value_error"] >= 0
