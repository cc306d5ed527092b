"""The fused Pallas kernel of 2-simplicial attention in Pallas' interpreter (CPU), against a dense
reference: outputs and the gradients of the queries, both keys and both values.

The interpreter compiles each shape for about 20 s on a 2-core machine; one case runs by
default, the others are marked slow. The same kernels on a GPU:
benchmarks/simplicial_kernel_speed.py.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from keras_relational.layers import _pallas_simplicial


def dense_reference(q, k1, k2, v1, v2, valid, window, scale):
    """Every (i, j, k) logit at once (Roy et al. 2025, Sec. 4), causal windows (Sec. 6)."""
    groups = q.shape[2] // k1.shape[2]
    k1, k2, v1, v2 = (jnp.repeat(x, groups, axis=2) for x in (k1, k2, v1, v2))
    logits = scale * jnp.einsum("bihd,bjhd,bkhd->bhijk", q, k1, k2)
    i = jnp.arange(q.shape[1])

    def causal_window(w):
        return (i[None, :] <= i[:, None]) & (i[None, :] > i[:, None] - w)

    allowed = causal_window(window[0])[:, :, None] & causal_window(window[1])[:, None, :]
    allowed = (allowed[None, None] & valid[:, None, None, :, None]
               & valid[:, None, None, None, :])
    logits = jnp.where(allowed, logits, -1e30)
    flat = logits.reshape(*logits.shape[:3], -1)
    weights = jnp.where(allowed, jax.nn.softmax(flat, axis=-1).reshape(logits.shape), 0.0)
    return jnp.einsum("bhijk,bjhd,bkhd->bihd", weights, v1, v2)


def inputs(batch, length, heads, kv_heads, key_dim, value_dim, seed=0, masked=0.2):
    rng = np.random.RandomState(seed)
    shapes = [(batch, length, heads, key_dim)] + [(batch, length, kv_heads, key_dim)] * 2 + [
        (batch, length, kv_heads, value_dim)] * 2
    arrays = [jnp.asarray(rng.normal(size=shape).astype("float32")) for shape in shapes]
    valid = jnp.asarray(rng.rand(batch, length) >= masked)
    cotangent = jnp.asarray(rng.normal(size=(batch, length, heads, value_dim)).astype("float32"))
    return arrays, valid, cotangent


def value_and_grads(attention, arrays, cotangent):
    """``sum(attention(*arrays) * cotangent)``, the outputs and the five gradients."""
    def loss(*arrays):
        out = attention(*arrays)
        return jnp.sum(out.astype(jnp.float32) * cotangent), out

    (_, out), grads = jax.jit(jax.value_and_grad(loss, argnums=range(5), has_aux=True))(*arrays)
    return [np.asarray(x, np.float32) for x in (out, *grads)]


NAMES = ("outputs", "dq", "dk1", "dk2", "dv1", "dv2")


def check_case(batch, length, heads, kv_heads, key_dim, value_dim, window, block, masked=0.2):
    arrays, valid, cotangent = inputs(batch, length, heads, kv_heads, key_dim, value_dim,
                                      masked=masked)
    scale = 1 / np.sqrt(key_dim)
    kernel = value_and_grads(lambda *a: _pallas_simplicial.simplicial_attention(
        *a, valid, window=window, scale=scale, block=block, interpret=True), arrays, cotangent)
    expected = value_and_grads(
        lambda *a: dense_reference(*a, valid, window, scale), arrays, cotangent)
    for name, got, want in zip(NAMES, kernel, expected, strict=True):
        np.testing.assert_allclose(got, want, atol=2e-5, rtol=1e-4, err_msg=name)
    return kernel


def test_ragged_grouped_heads_and_padding_mask():
    # N = 13: two blocks of 8, the second ragged; 4 query heads on 2 key/value heads.
    check_case(batch=2, length=13, heads=4, kv_heads=2, key_dim=16, value_dim=16,
               window=(5, 3), block=8)


@pytest.mark.slow
def test_windows_longer_than_the_sequence_one_head():
    check_case(batch=1, length=6, heads=1, kv_heads=1, key_dim=16, value_dim=32,
               window=(9, 7), block=8)


@pytest.mark.slow
def test_many_heads_on_one_key_value_head_window_over_blocks():
    # w1 = 11 spans three blocks of 4 first keys; w2 = 6 crosses a block boundary.
    check_case(batch=1, length=19, heads=6, kv_heads=1, key_dim=16, value_dim=16,
               window=(11, 6), block=4, masked=0.0)


@pytest.mark.slow
def test_fully_masked_rows_are_zero_with_zero_gradients():
    arrays, _, cotangent = inputs(1, 9, 2, 1, 16, 16)
    valid = jnp.asarray(np.arange(9)[None] >= 4)  # queries 0-3 see no valid pair
    kernel = value_and_grads(lambda *a: _pallas_simplicial.simplicial_attention(
        *a, valid, window=(3, 2), scale=0.25, block=4, interpret=True), arrays, cotangent)
    assert all(np.all(np.isfinite(x)) for x in kernel)
    assert np.all(kernel[0][:, :4] == 0.0)
    for grad in kernel[2:]:  # keys and values at invalid positions get no gradient
        assert np.all(grad[:, :4] == 0.0)
    expected = value_and_grads(
        lambda *a: dense_reference(*a, valid, (3, 2), 0.25), arrays, cotangent)
    for name, got, want in zip(NAMES, kernel, expected, strict=True):
        np.testing.assert_allclose(got, want, atol=2e-5, rtol=1e-4, err_msg=name)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_sixteen_bit_inputs_against_a_float32_reference(dtype):
    """16-bit inputs, float32 statistics: the error is what rounding the inputs, the products
    fed to the matrix units and the outputs to 8 (bfloat16) or 11 (float16) significant bits
    explains: a few units of that precision relative to the largest value."""
    arrays, valid, cotangent = inputs(2, 13, 2, 1, 16, 16, seed=3)
    low = [x.astype(dtype) for x in arrays]
    exact = [x.astype(jnp.float32) for x in low]  # the same rounded inputs, in float32
    kernel = value_and_grads(lambda *a: _pallas_simplicial.simplicial_attention(
        *a, valid, window=(5, 3), scale=0.25, block=8, interpret=True), low, cotangent)
    expected = value_and_grads(
        lambda *a: dense_reference(*a, valid, (5, 3), 0.25), exact, cotangent)
    unit = float(jnp.finfo(dtype).eps)
    for name, got, want in zip(NAMES, kernel, expected, strict=True):
        error = np.max(np.abs(got - want)) / np.max(np.abs(want))
        assert error < 8 * unit, (name, error, unit)


@pytest.mark.parametrize("dtype, key_dim, value_dim, fragment", [
    ("float64", 16, 16, "dtype float64"),
    ("float32", 24, 16, "key_dim=24"),
    ("bfloat16", 16, 8, "value_dim=8"),
    ("float16", 512, 16, "key_dim=512"),
])
def test_unsupported_inputs_are_named(dtype, key_dim, value_dim, fragment):
    assert fragment in _pallas_simplicial.unsupported_reason(dtype, key_dim, value_dim)


def test_supported_inputs():
    for dtype in _pallas_simplicial.SUPPORTED_DTYPES:
        assert _pallas_simplicial.unsupported_reason(dtype, 128, 64) is None


def test_invalid_block_and_heads_are_errors():
    arrays, valid, _ = inputs(1, 4, 3, 2, 16, 16)
    with pytest.raises(ValueError, match="key/value heads"):
        _pallas_simplicial.simplicial_attention(*arrays, valid, window=(2, 2), scale=1.0,
                                                interpret=True)
    arrays, valid, _ = inputs(1, 4, 2, 1, 16, 16)
    with pytest.raises(ValueError, match="block"):
        _pallas_simplicial.simplicial_attention(*arrays, valid, window=(2, 2), scale=1.0,
                                                block=12, interpret=True)


@pytest.mark.accelerator
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_compiled_kernel_on_a_gpu_matches_the_dense_reference(dtype):
    """The Triton-compiled kernels (not the interpreter) at a head dim of 64 and 64-row blocks,
    N = 300 (ragged), a first window over two blocks: outputs and the five gradients."""
    if jax.default_backend() != "gpu":
        pytest.skip(f"JAX's default backend is {jax.default_backend()!r}, not a GPU")
    arrays, valid, cotangent = inputs(2, 300, 4, 2, 64, 64, seed=5)
    low = [x.astype(dtype) for x in arrays]
    exact = [x.astype(jnp.float32) for x in low]
    kernel = value_and_grads(lambda *a: _pallas_simplicial.simplicial_attention(
        *a, valid, window=(100, 16), scale=0.125, block=64), low, cotangent)
    with jax.default_matmul_precision("highest"):
        expected = value_and_grads(
            lambda *a: dense_reference(*a, valid, (100, 16), 0.125), exact, cotangent)
    limit = 1e-4 if dtype == "float32" else 8 * float(jnp.finfo(dtype).eps)
    for name, got, want in zip(NAMES, kernel, expected, strict=True):
        error = np.max(np.abs(got - want)) / np.max(np.abs(want))
        assert error < limit, (name, error)
