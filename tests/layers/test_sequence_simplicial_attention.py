import itertools

import keras
import numpy as np
import pytest
from layer_contract import run_layer_contract

import keras_relational

# ---------------------------------------------------------------------------------------------
# NumPy reference (float64): the windowed equation with explicit loops over queries, written
# from Roy et al. 2025, Sec. 4 (trilinear) and Clift et al. 2020, eq. (7) (triple product).
# ---------------------------------------------------------------------------------------------

B, N, F, HEADS, DK, DV = 2, 7, 6, 4, 3, 2


def allowed(i, n, w, causal):
    """The key positions of query i in a window of length w (None: the whole sequence)."""
    if w is None:
        return list(range(i + 1)) if causal else list(range(n))
    low, high = (i - w + 1, i) if causal else (i - (w - 1) // 2, i + w // 2)
    return [j for j in range(low, high + 1) if 0 <= j < n]


def trilinear(q, a, b):
    return float(np.sum(q * a * b))


def triple_product(q, a, b):
    return float(np.linalg.norm(np.dot(q, a) * b - np.dot(q, b) * a + np.dot(a, b) * q))


def reference(layer, x, mask=None):
    """Outputs ``[B, N, out]`` of ``layer`` on ``x``, with loops over (b, h, i) and pairs."""
    x = np.asarray(x, np.float64)
    parts = ("query", "key", "value", "output")
    kernels = {part: np.asarray(getattr(layer, f"{part}_kernel").numpy(), np.float64)
               for part in parts}
    biases = {part: 0.0 if getattr(layer, f"{part}_bias") is None else
              np.asarray(getattr(layer, f"{part}_bias").numpy(), np.float64) for part in parts}
    heads, dk, dv = layer.num_heads, layer.key_dim, layer._value_dim
    kv_heads = layer.num_key_value_heads or heads
    groups = heads // kv_heads
    b_, n, _ = x.shape

    def dense(y, part):
        return y @ kernels[part] + biases[part]

    q = dense(x, "query").reshape(b_, n, heads, dk)
    k1, k2 = (k.reshape(b_, n, kv_heads, dk) for k in np.split(dense(x, "key"), 2, -1))
    v1, v2 = (v.reshape(b_, n, kv_heads, dv) for v in np.split(dense(x, "value"), 2, -1))
    logit = trilinear if layer.logit_form == "trilinear" else triple_product
    scale = layer.logit_scale
    if scale is None:
        scale = 1 / np.sqrt(dk) if layer.logit_form == "trilinear" else 1.0
    mask = np.ones((b_, n), bool) if mask is None else mask
    w1, w2 = layer.window or (None, None)
    out = np.zeros((b_, n, heads, dv))
    for b, h, i in itertools.product(range(b_), range(heads), range(n)):
        g = h // groups
        pairs = [(j, k) for j in allowed(i, n, w1, layer.causal)
                 for k in allowed(i, n, w2, layer.causal) if mask[b, j] and mask[b, k]]
        if not pairs or not mask[b, i]:
            continue
        logits = np.array([scale * logit(q[b, i, h], k1[b, j, g], k2[b, k, g])
                           for j, k in pairs])
        weights = np.exp(logits - logits.max())
        weights /= weights.sum()
        for weight, (j, k) in zip(weights, pairs, strict=True):
            out[b, i, h] += weight * v1[b, j, g] * v2[b, k, g]
    out = dense(out.reshape(b_, n, heads * dv), "output")
    return np.where(mask[:, :, None], out, 0.0)


def make_layer(**kwargs):
    kwargs.setdefault("window", (3, 2))
    return keras_relational.SequenceSimplicialAttention(
        num_heads=kwargs.pop("num_heads", HEADS), key_dim=DK, value_dim=DV, **kwargs)


def sequence(seed=0, batch=B, length=N, features=F):
    return np.random.RandomState(seed).normal(size=(batch, length, features)).astype("float32")


def built(layer, x):
    layer(x)
    return layer


# ---------------------------------------------------------------------------------------------
# The equation
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("logit_form, causal, window, kv_heads, chunk", [
    ("trilinear", True, (3, 2), 1, 4),  # two chunks, the second padded
    ("triple_product", True, (4, 3), 2, 3),
    ("trilinear", False, (3, 4), 2, None),  # centred windows
    ("triple_product", False, (5, 2), 4, 2),
    ("trilinear", True, None, 4, 5),  # the whole causal sequence
    ("trilinear", True, (9, 12), 2, 1),  # windows longer than the sequence: cut to it
])
def test_matches_numpy_reference(logit_form, causal, window, kv_heads, chunk):
    x = sequence(1)
    layer = make_layer(logit_form=logit_form, causal=causal, window=window,
                       num_key_value_heads=kv_heads, query_chunk_size=chunk)
    outputs, weights = layer(x, return_attention_scores=True)
    np.testing.assert_allclose(np.asarray(outputs), reference(layer, x), atol=1e-5)
    widths = tuple(a + b + 1 for a, b in layer.window_extents(N))
    assert tuple(weights.shape) == (B, HEADS, N, *widths)
    np.testing.assert_allclose(np.asarray(weights).sum(axis=(-2, -1)), 1.0, atol=1e-5)


def test_logit_scale_and_bias():
    x = sequence(2)
    layer = make_layer(logit_scale=0.3, use_bias=True, bias_initializer="random_normal")
    np.testing.assert_allclose(np.asarray(layer(x)), reference(layer, x), atol=1e-5)


def test_weights_equal_full_simplicial_attention():
    """Triple-product logits, no window, not causal: the weights of Clift et al.'s full mode;
    causal windows: those weights restricted to the window and renormalised."""
    x = sequence(3)
    full = keras_relational.SimplicialAttention(num_heads=HEADS, key_dim=DK, value_dim=DV,
                                                mode="full")
    _, expected = full(x, return_attention_scores=True)
    expected = np.asarray(expected)  # [B, H, N(i), N(j), N(k)]
    kernel = full.kernel.numpy()
    width = HEADS * DK

    def copied(layer):
        built(layer, x)
        layer.query_kernel.assign(kernel[:, :width])
        layer.key_kernel.assign(kernel[:, width:3 * width])
        return layer

    layer = copied(make_layer(logit_form="triple_product", causal=False, window=None))
    _, weights = layer(x, return_attention_scores=True)
    weights = np.asarray(weights)  # [B, H, N, 2N - 1, 2N - 1], offset N - 1
    i, j, k = np.meshgrid(*(np.arange(N),) * 3, indexing="ij")
    absolute = weights[:, :, i, j - i + N - 1, k - i + N - 1]
    np.testing.assert_allclose(absolute, expected, atol=1e-6)

    w1, w2 = 3, 2
    layer = copied(make_layer(logit_form="triple_product", window=(w1, w2)))
    _, weights = layer(x, return_attention_scores=True)
    weights = np.asarray(weights)  # [B, H, N, w1, w2], offsets w - 1
    in_window = (j <= i) & (j > i - w1) & (k <= i) & (k > i - w2)
    restricted = np.where(in_window, expected, 0.0)
    restricted /= restricted.sum(axis=(-2, -1), keepdims=True)
    inside = np.clip(j - i + w1 - 1, 0, w1 - 1), np.clip(k - i + w2 - 1, 0, w2 - 1)
    absolute = np.where(in_window, weights[:, :, i, inside[0], inside[1]], 0.0)
    np.testing.assert_allclose(absolute, restricted, atol=1e-6)


@pytest.mark.parametrize("causal", [True, False])
def test_causality_and_locality(causal):
    """Perturbing position t changes no output before t (causal), and none outside the reach
    of the windows."""
    length, t = 12, 6
    layer = make_layer(window=(4, 2), causal=causal, query_chunk_size=5)
    x = sequence(4, length=length)
    y = x.copy()
    y[:, t] += 10.0
    before, after = np.asarray(layer(x)), np.asarray(layer(y))
    changed = np.any(before != after, axis=(0, 2))
    reach = range(t, t + 4) if causal else range(t - 2, t + 2)  # j in [i - 1, i + 2] centred
    assert changed[list(reach)].all()
    assert not changed[[p for p in range(length) if p not in reach]].any()


def test_grouped_heads_equal_repeated_key_value_heads():
    x = sequence(5)
    grouped = built(make_layer(num_key_value_heads=2), x)
    repeated = built(make_layer(), x)
    repeated.query_kernel.assign(grouped.query_kernel.numpy())
    repeated.output_kernel.assign(grouped.output_kernel.numpy())
    for part, dim in (("key", DK), ("value", DV)):
        kernel = getattr(grouped, f"{part}_kernel").numpy().reshape(F, 2, 2, 1, dim)
        tiled = np.repeat(kernel, HEADS // 2, axis=3)  # kv head g serves query heads 2g, 2g+1
        getattr(repeated, f"{part}_kernel").assign(tiled.reshape(F, 2 * HEADS * dim))
    np.testing.assert_allclose(np.asarray(repeated(x)), np.asarray(grouped(x)), atol=1e-6)


def test_padding_mask():
    x = sequence(6)
    layer = built(make_layer(window=(4, 3), query_chunk_size=3), x)
    mask = np.ones((B, N), bool)
    mask[0, 2] = False
    mask[1, [0, 5, 6]] = False
    outputs = np.asarray(layer(x, mask=mask))
    np.testing.assert_allclose(outputs, reference(layer, x, mask), atol=1e-5)
    assert np.all(outputs[~mask] == 0.0)
    y = x.copy()
    y[~mask] = 100.0  # masked positions influence nothing
    np.testing.assert_array_equal(np.asarray(layer(y, mask=mask)), outputs)
    assert layer.compute_mask(x, mask) is mask  # propagated to the output


@pytest.mark.parametrize("logit_form", ["trilinear", "triple_product"])
def test_finite_gradients_on_degenerate_inputs(logit_form):
    import tensorflow as tf

    layer = built(make_layer(logit_form=logit_form), sequence(7))
    identical = np.repeat(sequence(8, length=1), N, axis=1)
    huge = sequence(9) * 1e3
    for x in (np.zeros((B, N, F), "float32"), identical, huge):
        x = tf.constant(x)
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(tf.square(layer(x)))
        grads = tape.gradient(loss, [x, *layer.trainable_variables])
        assert all(np.all(np.isfinite(np.asarray(g))) for g in grads)


def test_sixteen_bit_policy_keeps_logits_in_float32():
    x = sequence(10)
    exact = built(make_layer(), x)
    half = built(make_layer(dtype="mixed_bfloat16"), x)
    half.set_weights(exact.get_weights())
    outputs, weights = half(x, return_attention_scores=True)
    assert keras.backend.standardize_dtype(outputs.dtype) == "bfloat16"
    np.testing.assert_allclose(np.asarray(outputs, np.float32), np.asarray(exact(x)),
                               atol=0.05, rtol=0.05)
    np.testing.assert_allclose(np.asarray(weights, np.float32).sum(axis=(-2, -1)), 1.0,
                               atol=0.02)


# ---------------------------------------------------------------------------------------------
# Arguments and the layer contract
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs, message", [
    (dict(window=(0, 2)), "window"),
    (dict(window=3), "window"),
    (dict(num_key_value_heads=3), "num_key_value_heads"),
    (dict(logit_form="dot"), "logit_form"),
    (dict(query_chunk_size=0), "query_chunk_size"),
    (dict(causal="yes"), "causal"),
    (dict(logit_scale=-1.0), "logit_scale"),
])
def test_invalid_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_layer(**kwargs)


def test_unknown_sequence_length_is_an_error():
    import tensorflow as tf

    layer = built(make_layer(), sequence(12))
    traced = tf.function(layer, input_signature=[tf.TensorSpec((None, None, F))])
    with pytest.raises(ValueError, match="sequence length"):
        traced.get_concrete_function()


@pytest.mark.slow
@pytest.mark.subprocess
def test_layer_contract(tmp_path):
    run_layer_contract(
        lambda: make_layer(num_key_value_heads=2, query_chunk_size=3, window=(4, 2),
                           output_dim=5), sequence(11), tmp_path)


_MEMORY_SCRIPT = """
import jax, jax.numpy as jnp, numpy as np, keras_relational

def temp_bytes(length, chunk):
    layer = keras_relational.SequenceSimplicialAttention(
        num_heads=2, key_dim=8, num_key_value_heads=1, window=(8, 8), query_chunk_size=chunk)
    x = jnp.zeros((1, length, 16))
    layer(x[:, :16])
    weights = [v.value for v in layer.trainable_variables]
    def forward(w, x):
        return layer.stateless_call(w, [], x)[0]
    def step(w, x):
        return jax.grad(lambda w, x: jnp.sum(forward(w, x) ** 2), argnums=(0, 1))(w, x)
    return [jax.jit(f).lower(weights, x).compile().memory_analysis().temp_size_in_bytes
            for f in (forward, step)]

small, large = temp_bytes(512, 64), temp_bytes(2048, 64)
assert large[0] < 5 * small[0] and large[1] < 5 * small[1], (small, large)  # 4x N: linear
assert max(large) < 2048 * 2048 * 4, large  # less than one float32 [N, N] matrix
"""


@pytest.mark.slow
@pytest.mark.subprocess
def test_peak_memory_is_linear_in_sequence_length_under_jax(tmp_path):
    """XLA's planned temporaries (JAX), forward and forward + backward, grow at most linearly
    with N at a fixed window and chunk, and stay below one [N, N] matrix."""
    from layer_contract import run_fresh_process

    script = tmp_path / "memory.py"
    script.write_text(_MEMORY_SCRIPT)
    run_fresh_process([str(script)], backend="jax")


# ---------------------------------------------------------------------------------------------
# The fused kernel (JAX Pallas; here in Pallas' interpreter, under the JAX backend)
# ---------------------------------------------------------------------------------------------


def test_flash_attention_argument_and_config():
    with pytest.raises(ValueError, match="flash_attention"):
        make_layer(flash_attention="yes")
    for value in (None, True, False):
        layer = make_layer(flash_attention=value)
        config = layer.get_config()
        assert config["flash_attention"] is value
        assert type(layer).from_config(config).flash_attention is value


@pytest.mark.skipif(keras.backend.backend() == "jax", reason="checks a non-JAX backend")
def test_forcing_the_kernel_off_jax_is_an_error():
    layer = make_layer(flash_attention=True)
    with pytest.raises(ValueError, match=r"flash_attention=True.*backend"):
        layer(sequence(13))
    # None: the keras.ops form (the reference tests above run it).
    np.testing.assert_allclose(np.asarray(make_layer(flash_attention=None)(sequence(13))).shape,
                               (B, N, F))


_KERNEL_SCRIPT = """
import logging
import jax, jax.numpy as jnp, keras, numpy as np, pytest, keras_relational
from keras_relational.layers import sequence_simplicial_attention as module

def make(**kwargs):
    kwargs.setdefault("window", (4, 3))
    return keras_relational.SequenceSimplicialAttention(
        num_heads=4, key_dim=16, num_key_value_heads=2, use_bias=True,
        bias_initializer="random_normal", query_chunk_size=4, **kwargs)

rng = np.random.RandomState(0)
x = jnp.asarray(rng.normal(size=(2, 11, 8)).astype("float32"))
mask = jnp.asarray(rng.rand(2, 11) > 0.2)

def outputs_and_grads(layer):
    weights = [v.value for v in layer.trainable_variables]
    def loss(weights, x):
        out = layer.stateless_call(weights, [], x, mask=mask)[0].astype("float32")
        return jnp.sum(out * jnp.cos(jnp.arange(out.size).reshape(out.shape))), out
    (_, out), grads = jax.jit(jax.value_and_grad(loss, argnums=(0, 1), has_aux=True))(weights, x)
    return [np.asarray(a, np.float32) for a in (out, *grads[0], grads[1])]

# (16-bit inputs: tests/layers/test_pallas_simplicial.py, on the kernel itself)
for logit_form in ("trilinear", "triple_product"):
    ops_form, kernel = (make(logit_form=logit_form, flash_attention=flash)
                        for flash in (False, True))
    ops_form.build(x.shape), kernel.build(x.shape)
    kernel.set_weights(ops_form.get_weights())
    expected, got = outputs_and_grads(ops_form), outputs_and_grads(kernel)
    for index, (a, b) in enumerate(zip(got, expected, strict=True)):
        np.testing.assert_allclose(a, b, atol=2e-5, rtol=1e-4, err_msg=f"{logit_form} {index}")
    assert np.all(got[0][~np.asarray(mask)] == 0.0)

# Where the kernel cannot run: forced, an error naming the argument; by default on a GPU
# (pretended), one logged line and the keras.ops form.
for kwargs, fragment in ((dict(causal=False), "causal"),
                         (dict(), "return_attention_scores")):
    with pytest.raises(ValueError, match="flash_attention=True.*" + fragment):
        make(flash_attention=True, **kwargs)(x, return_attention_scores=not kwargs)
with pytest.raises(ValueError, match="flash_attention=True.*key_dim=8"):
    keras_relational.SequenceSimplicialAttention(
        num_heads=2, key_dim=8, flash_attention=True)(x)

records = []
handler = logging.Handler()
handler.emit = records.append
module._LOGGER.addHandler(handler)
jax.default_backend = lambda: "gpu"
auto, reference = make(causal=False), make(causal=False, flash_attention=False)
auto.build(x.shape), reference.build(x.shape)
auto.set_weights(reference.get_weights())
for _ in range(2):  # logged once
    np.testing.assert_allclose(np.asarray(auto(x, mask=mask)),
                               np.asarray(reference(x, mask=mask)), atol=1e-6)
assert len(records) == 1 and "causal=False" in records[0].getMessage(), records
"""


@pytest.mark.slow
@pytest.mark.subprocess
def test_fused_kernel_equals_the_keras_ops_form_under_jax(tmp_path):
    """flash_attention=True (Pallas' interpreter on the CPU) against flash_attention=False,
    trilinear and triple-product logits: outputs and the gradients of every weight and the
    inputs, with a padding mask; where the kernel cannot run, an error (forced) or one logged
    line (auto)."""
    from layer_contract import run_fresh_process

    script = tmp_path / "kernel.py"
    script.write_text(_KERNEL_SCRIPT)
    run_fresh_process([str(script)], backend="jax")
