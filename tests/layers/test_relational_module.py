import keras
import numpy as np
import pytest
import reference_relational as ref
from layer_contract import run_layer_contract

import keras_relational


def _entities(b=2, n=6, f=5, seed=0):
    return np.random.RandomState(seed).normal(size=(b, n, f)).astype("float32")


def _module(**kwargs):
    kwargs = dict(num_heads=2, key_dim=4, mlp_hidden_units=(8,)) | kwargs
    return keras_relational.RelationalModule(**kwargs)


def test_shared_weights_do_not_grow_with_depth():
    x = _entities()
    counts = []
    for num_blocks in (1, 2, 4):
        module = _module(num_blocks=num_blocks)
        module(x)
        counts.append(module.count_params())
    assert counts[0] == counts[1] == counts[2]


def test_unshared_weights_grow_linearly_with_depth():
    x = _entities()
    counts = []
    for num_blocks in (1, 2, 4):
        module = _module(num_blocks=num_blocks, share_weights=False)
        module(x)
        counts.append(module.count_params())
    assert counts[1] == 2 * counts[0] and counts[2] == 4 * counts[0]


@pytest.mark.parametrize("share_weights", [True, False])
def test_equals_blocks_applied_in_sequence(share_weights):
    x = _entities()
    module = _module(num_blocks=3, share_weights=share_weights)
    outputs, scores = module(x, return_attention_scores=True)
    assert tuple(scores.shape) == (2, 3, 2, 6, 6)
    expected = x
    for step in range(3):
        block = module._blocks[0 if share_weights else step]
        expected, expected_scores = ref.relational_block(expected, block)
        np.testing.assert_allclose(np.asarray(scores)[:, step], expected_scores, atol=1e-5)
    np.testing.assert_allclose(np.asarray(outputs), expected, atol=1e-5)


def test_model_dim_projects_once():
    module = _module(model_dim=12)
    outputs = module(_entities())
    assert tuple(outputs.shape) == (2, 6, 12)
    assert module._input_projection is not None
    same_width = _module(model_dim=5)
    same_width(_entities())
    assert same_width._input_projection is None


def test_masked_padding_equals_no_padding():
    """Masking layer -> module -> max-pool: a padded set gives the unpadded set's output."""
    x = _entities()
    x[0, 4:] = 0.0  # example 0 has 4 real entities and 2 padding rows
    inputs = keras.Input((None, 5))
    masked = keras.layers.Masking(mask_value=0.0)(inputs)
    pooled = keras_relational.EntityMaxPool()(_module(num_blocks=2)(masked))
    model = keras.Model(inputs, pooled)
    padded = model.predict(x, verbose=0)
    unpadded = model.predict(x[:1, :4], verbose=0)
    np.testing.assert_allclose(padded[:1], unpadded, atol=1e-5)


def test_clear_errors():
    with pytest.raises(ValueError, match="num_blocks.*received num_blocks=0"):
        _module(num_blocks=0)
    with pytest.raises(ValueError, match="feature width.*known"):
        _module()(keras.Input((6, None)))


@pytest.mark.subprocess
@pytest.mark.parametrize("share_weights", [True, False])
def test_layer_contract(tmp_path, share_weights):
    run_layer_contract(lambda: _module(num_blocks=2, share_weights=share_weights, model_dim=8),
                       _entities(), tmp_path)
