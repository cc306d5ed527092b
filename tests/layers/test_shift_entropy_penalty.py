import os

import keras
import numpy as np
import pytest
from layer_contract import (
    check_config_round_trip,
    check_fresh_process,
    check_jit_fit_step,
    check_keras_file_round_trip,
)

import keras_relational
from keras_relational.layers.shift_entropy_penalty import ShiftEntropyPenalty


def _data(seed=0, batch=3, steps=5, stacks=4):
    rng = np.random.RandomState(seed)
    h = rng.normal(size=(batch, steps, stacks)).astype("float32")
    logits = rng.normal(size=(batch, steps, stacks, 3))
    filters = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    tokens = rng.randint(1, 7, size=(batch, steps)).astype("int32")
    tokens[0, 3:] = 0  # padding
    return h, filters.reshape(batch, steps, 3 * stacks).astype("float32"), tokens


def reference(filters, tokens, cost, padding_id=0):
    """``cost`` times the mean entropy of each stack's (push, stay, pop) filter over the
    non-padding steps and the stacks."""
    taps = filters.astype("float64").reshape(*tokens.shape, -1, 3)
    entropy = -(taps * np.log(taps)).sum(-1)  # [B, T, N]
    return cost * entropy[tokens != padding_id].mean()


def test_penalty_matches_numpy_reference_and_passes_h_through():
    h, filters, tokens = _data()
    layer = ShiftEntropyPenalty(0.3)
    outputs = layer(h, filters, tokens)
    np.testing.assert_array_equal(np.asarray(outputs), h)
    (loss,) = layer.losses
    np.testing.assert_allclose(float(loss), reference(filters, tokens, 0.3), rtol=1e-5)
    assert tuple(layer.compute_output_shape(h.shape, filters.shape, tokens.shape)) == h.shape


def test_hard_filters_cost_nothing_and_uniform_ones_cost_ln_3():
    h, _, tokens = _data(1)
    hard = np.zeros((3, 5, 4, 3), "float32")
    hard[..., 1] = 1.0
    layer = ShiftEntropyPenalty(1.0, padding_id=-1)
    layer(h, hard.reshape(3, 5, 12), tokens)
    assert float(layer.losses[0]) == pytest.approx(0.0, abs=1e-6)
    uniform = np.full((3, 5, 12), 1.0 / 3.0, "float32")
    layer(h, uniform, tokens)
    assert float(layer.losses[0]) == pytest.approx(np.log(3.0), rel=1e-5)


def test_all_padding_gives_zero():
    h, filters, tokens = _data(2)
    layer = ShiftEntropyPenalty(1.0)
    layer(h, filters, np.zeros_like(tokens))
    assert float(layer.losses[0]) == 0.0


def test_top_level_name_and_errors():
    assert keras_relational.ShiftEntropyPenalty is ShiftEntropyPenalty
    with pytest.raises(ValueError, match=r"cost.*received cost=-1.0"):
        ShiftEntropyPenalty(-1.0)
    with pytest.raises(ValueError, match=r"cost.*received cost=nan"):
        ShiftEntropyPenalty(float("nan"))


def _model(h, filters, tokens):
    """Dense -> penalty: three inputs, and a trainable weight for the fit step."""
    inputs = [keras.Input(x.shape[1:], dtype=str(x.dtype)) for x in (h, filters, tokens)]
    hidden = keras.layers.Dense(h.shape[-1])(inputs[0])
    outputs = ShiftEntropyPenalty(0.5)(hidden, inputs[1], inputs[2])
    return keras.Model(inputs, outputs)


@pytest.mark.subprocess
def test_layer_contract(tmp_path):
    # The layer takes three call arguments, so the contract's steps run on a model built here.
    h, filters, tokens = _data(3)
    layer = ShiftEntropyPenalty(0.5, padding_id=2)
    check_config_round_trip(layer, h, call_kwargs={"filters": filters, "tokens": tokens})
    data = [h, filters, tokens]
    model = _model(*data)
    model(data)
    expected_loss = float(model.losses[0])
    reloaded = check_keras_file_round_trip(model, data, os.path.join(tmp_path, "model.keras"))
    reloaded(data)
    np.testing.assert_allclose(float(reloaded.losses[0]), expected_loss, rtol=1e-6)
    check_fresh_process(model, data, tmp_path)
    check_jit_fit_step(model, data)
