import keras
import numpy as np
import pytest
import reference_relational as ref
import tensorflow as tf
from layer_contract import run_layer_contract

import keras_relational


def _entities(b=2, n=6, f=5, seed=0):
    return np.random.RandomState(seed).normal(size=(b, n, f)).astype("float32")


@pytest.mark.parametrize("kwargs", [
    dict(num_heads=2, key_dim=4, mlp_hidden_units=(8,)),
    dict(num_heads=3, key_dim=4, value_dim=2, mlp_hidden_units=(8, 6), qkv_norm="separate"),
    dict(num_heads=1, key_dim=3, mlp_hidden_units=(), qkv_norm="none"),
])
def test_matches_numpy_reference(kwargs):
    x = _entities()
    block = keras_relational.RelationalBlock(**kwargs)
    block(x)
    ref.randomise_layer_norms(block)
    outputs, scores = block(x, return_attention_scores=True)
    expected, expected_scores = ref.relational_block(x, block)
    np.testing.assert_allclose(np.asarray(outputs), expected, atol=1e-5)
    np.testing.assert_allclose(np.asarray(scores), expected_scores, atol=1e-5)


def test_output_is_layer_normalised_at_init():
    outputs = np.asarray(keras_relational.RelationalBlock(2, 4)(_entities(f=26)))
    np.testing.assert_allclose(outputs.mean(-1), 0.0, atol=1e-5)
    np.testing.assert_allclose(outputs.var(-1), 1.0, atol=1e-3)


def test_permutation_equivariance():
    block = keras_relational.RelationalBlock(2, 4, mlp_hidden_units=(8,))
    x = _entities(n=7)
    perm = np.random.RandomState(4).permutation(7)
    outputs, scores = (np.asarray(t) for t in block(x, return_attention_scores=True))
    p_outputs, p_scores = (np.asarray(t) for t in block(x[:, perm], return_attention_scores=True))
    np.testing.assert_allclose(p_outputs, outputs[:, perm], atol=1e-5)
    np.testing.assert_allclose(p_scores, scores[:, :, perm][:, :, :, perm], atol=1e-6)


def test_masked_entities_have_no_influence():
    block = keras_relational.RelationalBlock(2, 4, mlp_hidden_units=(8,))
    x = _entities()
    mask = np.array([[1, 1, 1, 0, 0, 0], [1] * 6], bool)
    outputs = np.asarray(block(x, mask=mask))
    changed = x.copy()
    changed[0, 3:] = -50.0
    np.testing.assert_allclose(np.asarray(block(changed, mask=mask))[0, :3], outputs[0, :3],
                               atol=1e-5)
    expected, _ = ref.relational_block(x, block, mask=mask)
    np.testing.assert_allclose(outputs, expected, atol=1e-5)


def test_gradients_are_finite_and_nonzero_for_every_weight():
    block = keras_relational.RelationalBlock(2, 4, mlp_hidden_units=(8,))
    x = tf.constant(_entities())
    block(x)
    ref.randomise_layer_norms(block)
    target = tf.constant(np.random.RandomState(1).normal(size=(2, 6, 5)).astype("float32"))
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum((block(x) - target) ** 2)
    grads = tape.gradient(loss, [w.value for w in block.trainable_weights])
    assert len(grads) == len(block.trainable_weights) == 10  # qkv, qkv LN, 2 MLP, out LN
    for weight, grad in zip(block.trainable_weights, grads, strict=True):
        assert grad is not None, weight.path
        grad = grad.numpy()
        assert np.isfinite(grad).all(), weight.path
        assert np.abs(grad).max() > 0, weight.path


def test_numeric_gradient_float64():
    keras.config.set_floatx("float64")
    try:
        block = keras_relational.RelationalBlock(1, 2, mlp_hidden_units=(3,), dtype="float64")
        x = tf.constant(np.random.RandomState(2).normal(size=(1, 3, 4)))
        block(x)
        # The default step (1/1024) leaves a finite-difference error near 1e-6 for some weight
        # draws; 1e-5 in float64 brings it to ~1e-10, so the check can be 100x stricter.
        theoretical, numerical = tf.test.compute_gradient(lambda e: block(e), [x], delta=1e-5)
        np.testing.assert_allclose(theoretical[0], numerical[0], atol=1e-8)
    finally:
        keras.config.set_floatx("float32")


def _float64_block(qkv_norm):
    keras.utils.set_random_seed(0)
    block = keras_relational.RelationalBlock(2, 3, value_dim=2 if qkv_norm == "separate" else None,
                                             mlp_hidden_units=(5,), qkv_norm=qkv_norm,
                                             dtype="float64")
    x = tf.constant(np.random.RandomState(2).normal(size=(2, 4, 6)))
    block(x)
    ref.randomise_layer_norms(block)
    return block, x, np.random.RandomState(3).normal(size=(2, 4, 6))


def _weight_gradients(block, x, cotangent):
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(block(x) * cotangent)
    return [g.numpy() for g in tape.gradient(loss, [w.value for w in block.trainable_weights])]


@pytest.mark.parametrize("qkv_norm", ["joint", "separate", "none"])
def test_weight_gradients_and_hessian_vector_products_match_finite_differences(qkv_norm):
    """First and second derivatives of every weight (the LayerNorms have a hand-written backward
    pass) against central differences, in float64."""
    keras.config.set_floatx("float64")
    try:
        block, x, cotangent = _float64_block(qkv_norm)
        weights = block.trainable_weights
        initial = [w.numpy() for w in weights]
        direction = [np.random.RandomState(4 + i).normal(size=w.shape)
                     for i, w in enumerate(weights)]
        with tf.GradientTape() as outer:
            with tf.GradientTape() as inner:
                loss = tf.reduce_sum(block(x) * cotangent)
            grads = inner.gradient(loss, [w.value for w in weights])
            along = tf.add_n([tf.reduce_sum(g * d) for g, d in zip(grads, direction, strict=True)])
        hvp = [np.zeros(w.shape) if h is None else h.numpy()
               for w, h in zip(weights, outer.gradient(along, [w.value for w in weights]),
                               strict=True)]
        eps = 1e-5

        def shifted(sign):
            for w, w0, d in zip(weights, initial, direction, strict=True):
                w.assign(w0 + sign * eps * d)
            return tf.reduce_sum(block(x) * cotangent).numpy(), _weight_gradients(block, x,
                                                                                  cotangent)

        (loss_plus, grads_plus), (loss_minus, grads_minus) = shifted(1.0), shifted(-1.0)
        directional = sum(np.sum(g.numpy() * d) for g, d in zip(grads, direction, strict=True))
        np.testing.assert_allclose(directional, (loss_plus - loss_minus) / (2 * eps), rtol=1e-6)
        for w, h, gp, gm in zip(weights, hvp, grads_plus, grads_minus, strict=True):
            np.testing.assert_allclose(h, (gp - gm) / (2 * eps), atol=1e-4, err_msg=w.path)
    finally:
        keras.config.set_floatx("float32")


def test_clear_errors():
    with pytest.raises(ValueError, match="mlp_hidden_units.*received mlp_hidden_units=0"):
        keras_relational.RelationalBlock(mlp_hidden_units=(8, 0))
    with pytest.raises(ValueError, match="key_dim.*received key_dim=-1"):
        keras_relational.RelationalBlock(key_dim=-1)
    with pytest.raises(ValueError, match=r"rank 3.*received shape \(2, 3, 4, 5\)"):
        keras_relational.RelationalBlock()(np.zeros((2, 3, 4, 5), "float32"))


@pytest.mark.subprocess
def test_layer_contract(tmp_path):
    run_layer_contract(
        lambda: keras_relational.RelationalBlock(2, 4, mlp_hidden_units=(8,)), _entities(),
        tmp_path)
