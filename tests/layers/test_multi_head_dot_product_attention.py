import json
import sys

import keras
import numpy as np
import pytest
import reference_relational as ref
from layer_contract import run_fresh_process, run_layer_contract

import keras_relational
from keras_relational.layers.multi_head_dot_product_attention import layer_norm


def _entities(b=2, n=6, f=5, seed=0):
    return np.random.RandomState(seed).normal(size=(b, n, f)).astype("float32")


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(num_heads=2, key_dim=4),
        dict(num_heads=3, key_dim=4, value_dim=2, qkv_norm="separate"),
        dict(num_heads=1, key_dim=3, qkv_norm="none", use_bias=False),
        dict(num_heads=2, key_dim=4, attention_scale="rmc", output_dim=7),
        dict(num_heads=2, key_dim=4, attention_scale=None),
    ],
)
def test_matches_numpy_reference(kwargs):
    x = _entities()
    layer = keras_relational.MultiHeadDotProductAttention(**kwargs)
    layer(x)
    ref.randomise_layer_norms(layer)
    outputs, scores = layer(x, return_attention_scores=True)
    expected_outputs, expected_scores = ref.mhdpa(x, layer)
    np.testing.assert_allclose(np.asarray(outputs), expected_outputs, atol=1e-5)
    np.testing.assert_allclose(np.asarray(scores), expected_scores, atol=1e-5)


def test_attention_rows_are_distributions():
    _, scores = keras_relational.MultiHeadDotProductAttention(2, 4)(
        _entities(), return_attention_scores=True)
    scores = np.asarray(scores)
    assert scores.shape == (2, 2, 6, 6) and (scores >= 0).all()
    np.testing.assert_allclose(scores.sum(-1), 1.0, atol=1e-6)


def test_single_entity_attends_to_itself_only():
    layer = keras_relational.MultiHeadDotProductAttention(2, 4, qkv_norm="none")
    x = _entities(n=1)
    outputs, scores = layer(x, return_attention_scores=True)
    np.testing.assert_allclose(np.asarray(scores), 1.0)
    kernel = ref.to_numpy(layer._qkv_projection.kernel)
    values = x @ kernel[:, 16:] + ref.to_numpy(layer._qkv_projection.bias)[16:]
    np.testing.assert_allclose(np.asarray(outputs), values, atol=1e-5)


def test_zero_queries_give_uniform_attention():
    layer = keras_relational.MultiHeadDotProductAttention(2, 4, qkv_norm="none", use_bias=False)
    x = _entities()
    layer(x)
    kernel = np.array(layer._qkv_projection.kernel)
    kernel[:, :8] = 0.0
    layer._qkv_projection.kernel.assign(kernel)
    outputs, scores = layer(x, return_attention_scores=True)
    np.testing.assert_allclose(np.asarray(scores), 1.0 / 6, atol=1e-6)
    values = (x @ kernel[:, 16:]).mean(axis=1, keepdims=True)
    np.testing.assert_allclose(np.asarray(outputs), np.broadcast_to(values, (2, 6, 8)), atol=1e-5)


def test_reduces_to_keras_multi_head_attention():
    """qkv_norm="none", one head: plain softmax(QK^T/sqrt(d))V, i.e. Keras MHA with an identity
    output projection (Zambaldi et al. 2019, Sec. 2)."""
    f, d = 5, 4
    x = _entities(f=f)
    ours = keras_relational.MultiHeadDotProductAttention(1, d, qkv_norm="none", output_dim=None)
    ours(x)
    theirs = keras.layers.MultiHeadAttention(num_heads=1, key_dim=d, output_shape=d)
    theirs(x, x)
    kernel = ref.to_numpy(ours._qkv_projection.kernel).astype("float32")
    bias = ref.to_numpy(ours._qkv_projection.bias).astype("float32")
    for i, dense in enumerate((theirs._query_dense, theirs._key_dense, theirs._value_dense)):
        dense.kernel.assign(kernel[:, i * d:(i + 1) * d].reshape(f, 1, d))
        dense.bias.assign(bias[i * d:(i + 1) * d].reshape(1, d))
    theirs._output_dense.kernel.assign(np.eye(d, dtype="float32").reshape(1, d, d))
    theirs._output_dense.bias.assign(np.zeros(d, "float32"))
    np.testing.assert_allclose(np.asarray(ours(x)), np.asarray(theirs(x, x)), atol=1e-5)


def test_permutation_equivariance():
    layer = keras_relational.MultiHeadDotProductAttention(2, 4)
    x = _entities(n=7)
    perm = np.random.RandomState(3).permutation(7)
    outputs, scores = (np.asarray(t) for t in layer(x, return_attention_scores=True))
    p_outputs, p_scores = (np.asarray(t) for t in layer(x[:, perm],
                                                       return_attention_scores=True))
    np.testing.assert_allclose(p_outputs, outputs[:, perm], atol=1e-5)
    np.testing.assert_allclose(p_scores, scores[:, :, perm][:, :, :, perm], atol=1e-6)


def test_masked_entities_have_no_influence():
    layer = keras_relational.MultiHeadDotProductAttention(2, 4)
    x = _entities()
    mask = np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], bool)
    outputs, scores = layer(x, mask=mask, return_attention_scores=True)
    changed = x.copy()
    changed[0, 4:] = 100.0 * np.random.RandomState(5).normal(size=(2, 5))
    changed_outputs = layer(changed, mask=mask)
    np.testing.assert_allclose(np.asarray(changed_outputs)[:, :4], np.asarray(outputs)[:, :4],
                               atol=1e-5)
    np.testing.assert_allclose(np.asarray(changed_outputs)[1], np.asarray(outputs)[1], atol=1e-5)
    np.testing.assert_array_equal(np.asarray(scores)[0, :, :, 4:], 0.0)
    expected, _ = ref.mhdpa(x, layer, mask=mask)
    np.testing.assert_allclose(np.asarray(outputs), expected, atol=1e-5)


def test_attention_mask_matches_reference():
    layer = keras_relational.MultiHeadDotProductAttention(2, 4)
    x = _entities()
    allowed = np.tril(np.ones((6, 6), bool))
    outputs, scores = layer(x, attention_mask=allowed, return_attention_scores=True)
    expected, expected_scores = ref.mhdpa(x, layer, attention_mask=allowed)
    np.testing.assert_allclose(np.asarray(outputs), expected, atol=1e-5)
    np.testing.assert_allclose(np.asarray(scores), expected_scores, atol=1e-6)


@pytest.mark.parametrize("shape", [(7, 12), (2, 3, 12)])
def test_layer_norm_matches_keras_layer_norm_and_its_gradients(shape):
    """The hand-written LayerNorm (used for q, k, v) against keras.layers.LayerNormalization."""
    import tensorflow as tf  # here: the JAX subprocess imports this file

    rng = np.random.RandomState(0)
    x = tf.constant(rng.normal(2.0, 3.0, size=shape).astype("float32"))
    norm = keras.layers.LayerNormalization(epsilon=1e-6)
    norm.build(shape)
    norm.gamma.assign(rng.uniform(0.5, 1.5, size=12).astype("float32"))
    norm.beta.assign(rng.normal(size=12).astype("float32"))
    cotangent = tf.constant(rng.normal(size=shape).astype("float32"))
    gain_scale = np.where(np.arange(12) < 4, 0.5, 1.0).astype("float32")
    results = []
    for fn in (lambda t: norm(t) * gain_scale, lambda t: layer_norm(t, norm, gain_scale)):
        with tf.GradientTape() as tape:
            tape.watch(x)
            outputs = fn(x)
            loss = tf.reduce_sum(outputs * cotangent)
        results.append([outputs, *tape.gradient(loss, [x, norm.gamma.value, norm.beta.value])])
    for expected, actual in zip(*results, strict=True):
        np.testing.assert_allclose(np.asarray(actual), np.asarray(expected), atol=2e-5)


@pytest.mark.parametrize("scale", [1e20, 1e30, 1e38])
def test_layer_norm_is_right_for_every_finite_input(scale):
    """Issue 48. Measured before: from |x| ~ 1.8e19 the variance overflowed, so every row came
    out as beta (zeros here) with a zero gradient, and near 3.4e38 outputs and gradients were
    NaN; keras.layers.LayerNormalization still does both."""
    import tensorflow as tf  # here: the JAX subprocess imports this file

    rng = np.random.RandomState(0)
    unit = rng.uniform(-1.0, 1.0, size=(3, 8))
    x = tf.constant((scale * unit).astype("float32"))
    norm = keras.layers.LayerNormalization(epsilon=1e-6)
    norm.build((3, 8))
    cotangent = tf.constant(rng.normal(size=(3, 8)).astype("float32"))
    with tf.GradientTape() as tape:
        tape.watch(x)
        outputs = layer_norm(x, norm)
        loss = tf.reduce_sum(outputs * cotangent)
    gradient = tape.gradient(loss, x).numpy()
    expected = (unit - unit.mean(-1, keepdims=True)) / unit.std(-1, keepdims=True)
    np.testing.assert_allclose(np.asarray(outputs), expected, atol=1e-5)
    # d LN / dx = (g - mean(g) - x_hat mean(g x_hat)) / std: scales as 1 / scale.
    g = cotangent.numpy()
    expected_gradient = (g - g.mean(-1, keepdims=True) - expected * (g * expected).mean(
        -1, keepdims=True)) / (scale * unit.std(-1, keepdims=True))
    assert np.all(np.isfinite(gradient))
    if scale < 1e38:  # near 1e38 the true gradient, ~1e-38, is subnormal: finite, not precise
        np.testing.assert_allclose(gradient * scale, expected_gradient * scale, atol=1e-4)


@pytest.mark.parametrize("qkv_norm", ["joint", "separate", "none"])
def test_mixed_precision_matches_float32(qkv_norm):
    x = _entities()
    layers = []
    for dtype in ("float32", "mixed_float16"):
        keras.utils.set_random_seed(0)
        layer = keras_relational.MultiHeadDotProductAttention(2, 4, qkv_norm=qkv_norm, dtype=dtype)
        layers.append(layer)
        layer(x)
    ref.randomise_layer_norms(layers[0])
    layers[1].set_weights(layers[0].get_weights())
    (expected, expected_scores), (outputs, scores) = (
        layer(x, return_attention_scores=True) for layer in layers)
    assert outputs.dtype == scores.dtype == "float16"
    np.testing.assert_allclose(np.asarray(outputs, "float32"), np.asarray(expected), atol=1e-2)
    np.testing.assert_allclose(np.asarray(scores, "float32"), np.asarray(expected_scores),
                               atol=1e-2)


def test_clear_errors():
    layer_cls = keras_relational.MultiHeadDotProductAttention
    with pytest.raises(ValueError, match="num_heads.*received num_heads=0"):
        layer_cls(0, 4)
    with pytest.raises(ValueError, match="qkv_norm.*'batch'"):
        layer_cls(2, 4, qkv_norm="batch")
    with pytest.raises(ValueError, match=r"rank 3.*received shape \(2, 6\)"):
        layer_cls(2, 4)(np.zeros((2, 6), "float32"))
    with pytest.raises(ValueError, match="mask.*shape"):
        layer_cls(2, 4)(_entities(), mask=np.ones((2, 5), bool))
    with pytest.raises(ValueError, match="attention_mask.*shape"):
        layer_cls(2, 4)(_entities(), attention_mask=np.ones((5, 5), bool))


@pytest.mark.subprocess
def test_layer_contract(tmp_path):
    run_layer_contract(
        lambda: keras_relational.MultiHeadDotProductAttention(2, 4, qkv_norm="separate",
                                                              output_dim=3),
        _entities(), tmp_path)


# Issue 45: the attention through keras.ops.dot_product_attention (flash_attention=True) against
# the matmul form (False): (layer kwargs, mask, attention_mask) over heads, key/value dims, all
# three qkv norms, a padding mask, an [N, N] and a [B, N, N] attention mask, fully masked rows.
_N = 6
_WITH_EMPTY_ROWS = np.tril(np.ones((2, _N, _N), bool))
_WITH_EMPTY_ROWS[0, 2] = False  # entity 2 of the first example may attend to no entity
_PATH_CASES = [
    (dict(num_heads=2, key_dim=8), None, None),
    (dict(num_heads=3, key_dim=4, value_dim=4, qkv_norm="separate", attention_scale=None,
          output_dim=5), np.array([[1, 1, 1, 1, 0, 0], [0] * _N], bool),
     _WITH_EMPTY_ROWS),  # the second example fully masked: every row empty
    (dict(num_heads=1, key_dim=8, qkv_norm="none", attention_scale="rmc"), None,
     np.tril(np.ones((_N, _N), bool))),
]


def _outputs_and_gradients(layer, x, mask, attention_mask, cotangent):
    """The layer's outputs and the gradients of <outputs, cotangent> w.r.t. x and every
    trainable weight, all as float32 NumPy arrays (TensorFlow or JAX backend)."""
    if keras.backend.backend() == "jax":
        import jax

        def loss(weights, x):
            outputs, _ = layer.stateless_call(weights, [], x, mask=mask,
                                              attention_mask=attention_mask)
            return (outputs.astype("float32") * cotangent).sum(), outputs

        weights = [w.value for w in layer.trainable_weights]
        (_, outputs), grads = jax.jit(jax.value_and_grad(loss, argnums=(0, 1), has_aux=True))(
            weights, x)
        grads = [*grads[0], grads[1]]
    else:
        import tensorflow as tf

        x = tf.constant(x)
        with tf.GradientTape() as tape:
            tape.watch(x)
            outputs = layer(x, mask=mask, attention_mask=attention_mask)
            loss = tf.reduce_sum(tf.cast(outputs, "float32") * cotangent)
        grads = tape.gradient(loss, [*layer.trainable_weights, x])
    return [np.asarray(t, "float32") for t in (outputs, *grads)]


def measure_path_differences():
    """Per case: the dot_product_attention path's largest error over outputs and gradients
    against the float32 matmul path, in float32 and under mixed_bfloat16, absolute and relative
    (to the largest float32 magnitude of that tensor, at least 1)."""
    keras.utils.set_random_seed(0)  # the same weights in every process
    x = _entities(n=_N, f=5)
    cotangent = np.random.RandomState(7).normal(size=(2, _N, 1)).astype("float32")
    rows = []
    for kwargs, mask, attention_mask in _PATH_CASES:
        results = {}
        for dtype, flash in (("float32", False), ("float32", True), ("mixed_bfloat16", True)):
            layer = keras_relational.MultiHeadDotProductAttention(
                **kwargs, flash_attention=flash, dtype=dtype)
            layer(x)
            if not results:
                ref.randomise_layer_norms(layer)
                weights = layer.get_weights()
            layer.set_weights(weights)
            cotangent_width = np.ones((1, 1, layer.compute_output_shape(x.shape)[-1]), "float32")
            results[dtype, flash] = _outputs_and_gradients(
                layer, x, mask, attention_mask, cotangent * cotangent_width)
        expected = results["float32", False]
        rows.append({
            f"{name}_{kind}": max(float(np.max(np.abs(a - e))) / (
                max(1.0, float(np.max(np.abs(e)))) if kind == "relative" else 1.0)
                for e, a in zip(expected, results[key], strict=True))
            for name, key in (("float32", ("float32", True)),
                              ("bfloat16", ("mixed_bfloat16", True)))
            for kind in ("absolute", "relative")})
    return rows


@pytest.mark.subprocess
@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_dot_product_attention_path_equals_matmul_path(backend):
    """Issue 45: outputs and gradients of both paths agree to float32 rounding, fully masked
    rows included (uniform weights in both); under mixed_bfloat16 the dot_product_attention
    path is within a bfloat16 bound of the float32 layer. Measured on the CPU (Keras' XLA
    forms; cuDNN flash needs a GPU), relative to max(1, |float32|): float32 <= 2.0e-7 (TF) /
    2.8e-7 (JAX), mixed_bfloat16 <= 0.028 (TF) / 0.018 (JAX), i.e. up to 3.6 bfloat16 eps."""
    if backend == "tensorflow":
        rows = measure_path_differences()
    else:
        # XLA's CPU optimisations off: the nine small programs compile in half the time.
        script = ("import json, os, sys; sys.path.insert(0, 'tests/layers'); "
                  "os.environ['XLA_FLAGS'] = '--xla_backend_optimization_level=0'; "
                  "import test_multi_head_dot_product_attention as t; "
                  "print(json.dumps(t.measure_path_differences()))")
        rows = json.loads(run_fresh_process(["-c", script], backend).stdout.splitlines()[-1])
    print(backend, rows, file=sys.stderr)
    for row in rows:
        assert row["float32_relative"] <= 1e-5, row
        assert row["bfloat16_relative"] <= 6e-2, row


def test_flash_attention_argument_config_and_errors():
    layer_cls = keras_relational.MultiHeadDotProductAttention
    with pytest.raises(ValueError, match="flash_attention.*'yes'"):
        layer_cls(2, 4, flash_attention="yes")
    for value in (None, True, False):
        config = layer_cls(2, 4, flash_attention=value).get_config()
        assert config["flash_attention"] is value
        assert layer_cls.from_config(config).flash_attention is value
    del config["flash_attention"]  # a config saved before issue 45
    assert layer_cls.from_config(config).flash_attention is None
    x = _entities()
    with pytest.raises(ValueError, match=r"flash_attention=True.*key_dim=4 != value_dim=2"):
        layer_cls(2, 4, value_dim=2, flash_attention=True)(x)
    with pytest.raises(ValueError, match=r"flash_attention=True.*return_attention_scores"):
        layer_cls(2, 4, flash_attention=True)(x, return_attention_scores=True)
    # None off a GPU: the matmul form, which also returns the scores.
    layer = layer_cls(2, 4)
    assert not layer._uses_dot_product_attention(x, False, False)
    assert layer(x, return_attention_scores=True)[1].shape == (2, 2, 6, 6)
