"""The fused Pallas kernel of 2-simplicial attention in Pallas' interpreter (CPU), against a dense
reference: outputs and the gradients of the queries, both keys and both values, for both logit
forms (trilinear and triple product).

The interpreter compiles each shape for about 20 s on a 2-core machine; one case runs by
default, the others are marked slow. The same kernels on a GPU:
benchmarks/simplicial_kernel_speed.py.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from keras_relational.layers import _pallas_simplicial


def triple_products(q, k1, k2):
    """Unsigned triple products ``<a, b, c>`` of every (query, first key, second key) from the
    plain dot products, the degree-6 polynomial under the root of Clift et al. 2020's eq. 8,
    ``(a.b)^2 |c|^2 + (a.c)^2 |b|^2 + (b.c)^2 |a|^2 - 2 (a.b)(a.c)(b.c)``; not from cosines as
    the kernel and the layer (eq. 26). ``[B, N, H, d]`` each -> ``[B, H, N, N, N]``."""
    ab = jnp.einsum("bihd,bjhd->bhij", q, k1)[:, :, :, :, None]
    ac = jnp.einsum("bihd,bkhd->bhik", q, k2)[:, :, :, None, :]
    bc = jnp.einsum("bjhd,bkhd->bhjk", k1, k2)[:, :, None, :, :]
    aa, bb, cc = (jnp.swapaxes(jnp.sum(x * x, axis=-1), 1, 2) for x in (q, k1, k2))
    aa, bb, cc = aa[:, :, :, None, None], bb[:, :, None, :, None], cc[:, :, None, None, :]
    return jnp.sqrt(ab * ab * cc + ac * ac * bb + bc * bc * aa - 2.0 * ab * ac * bc)


def test_the_reference_triple_product_is_the_norm_of_clifts_vector():
    """eq. 8 (the reference) against eq. 7, ``|(a.b) c - (a.c) b + (b.c) a|``, formed as a
    vector; no kernel, so it runs in milliseconds."""
    rng = np.random.RandomState(1)
    q, k1, k2 = (rng.normal(size=(2, 5, 3, 16)) for _ in range(3))
    a, b, c = q[:, :, None, None], k1[:, None, :, None], k2[:, None, None, :]  # [B,I,J,K,H,d]

    def dot(x, y):
        return np.sum(x * y, axis=-1, keepdims=True)

    vectors = dot(a, b) * c - dot(a, c) * b + dot(b, c) * a
    expected = np.moveaxis(np.linalg.norm(vectors, axis=-1), 4, 1)  # [B, H, I, J, K]
    np.testing.assert_allclose(np.asarray(triple_products(
        *(jnp.asarray(x, jnp.float32) for x in (q, k1, k2)))), expected, rtol=2e-5)


def dense_reference(q, k1, k2, v1, v2, valid, window, scale, logit_form="trilinear"):
    """Every (i, j, k) logit at once, trilinear (Roy et al. 2025, Sec. 4) or triple product
    (Clift et al. 2020, eq. 8); causal windows (Roy et al., Sec. 6)."""
    groups = q.shape[2] // k1.shape[2]
    k1, k2, v1, v2 = (jnp.repeat(x, groups, axis=2) for x in (k1, k2, v1, v2))
    if logit_form == "trilinear":
        logits = scale * jnp.einsum("bihd,bjhd,bkhd->bhijk", q, k1, k2)
    else:
        logits = scale * triple_products(q, k1, k2)
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
FORMS = ("trilinear", "triple_product")


def default_scale(logit_form, key_dim):
    """1 / sqrt(dk) (Roy et al.); 1 / dk for the triple product, whose logits of normal inputs
    grow as dk^1.5 (three norms), so that both softmaxes are neither flat nor one-hot."""
    return 1 / np.sqrt(key_dim) if logit_form == "trilinear" else 1 / key_dim


def kernel_and_reference(arrays, valid, cotangent, window, scale, block, logit_form,
                         reference_arrays=None):
    kernel = value_and_grads(lambda *a: _pallas_simplicial.simplicial_attention(
        *a, valid, window=window, scale=scale, block=block, interpret=True,
        logit_form=logit_form), arrays, cotangent)
    expected = value_and_grads(
        lambda *a: dense_reference(*a, valid, window, scale, logit_form),
        arrays if reference_arrays is None else reference_arrays, cotangent)
    return kernel, expected


def check_case(batch, length, heads, kv_heads, key_dim, value_dim, window, block, masked=0.2,
               logit_form="trilinear"):
    arrays, valid, cotangent = inputs(batch, length, heads, kv_heads, key_dim, value_dim,
                                      masked=masked)
    kernel, expected = kernel_and_reference(arrays, valid, cotangent, window,
                                            default_scale(logit_form, key_dim), block, logit_form)
    for name, got, want in zip(NAMES, kernel, expected, strict=True):
        np.testing.assert_allclose(got, want, atol=2e-5, rtol=1e-4, err_msg=name)
    return kernel


def test_ragged_grouped_heads_and_padding_mask():
    # N = 13: two blocks of 8, the second ragged; 4 query heads on 2 key/value heads.
    check_case(batch=2, length=13, heads=4, kv_heads=2, key_dim=16, value_dim=16,
               window=(5, 3), block=8)


def test_triple_product_ragged_many_grouped_heads_padding_mask_window_over_blocks():
    # The trilinear cases above and below in one (one compilation less): N = 19 in blocks of
    # 4, the last ragged; 6 query heads on 2 key/value heads; w1 = 11 spans three blocks of
    # first keys, w2 = 6 crosses a block boundary; a padding mask.
    check_case(batch=2, length=19, heads=6, kv_heads=2, key_dim=16, value_dim=16,
               window=(11, 6), block=4, logit_form="triple_product")


@pytest.mark.slow
def test_windows_longer_than_the_sequence_one_head():
    # (The triple product's case: the last one of the fully masked rows' test.)
    check_case(batch=1, length=6, heads=1, kv_heads=1, key_dim=16, value_dim=32,
               window=(9, 7), block=8)


@pytest.mark.slow
def test_many_heads_on_one_key_value_head_window_over_blocks():
    # w1 = 11 spans three blocks of 4 first keys; w2 = 6 crosses a block boundary.
    check_case(batch=1, length=19, heads=6, kv_heads=1, key_dim=16, value_dim=16,
               window=(11, 6), block=4, masked=0.0)


@pytest.mark.slow
@pytest.mark.parametrize("logit_form, length, heads, value_dim, window, block, invalid", [
    ("trilinear", 9, 2, 16, (3, 2), 4, 4),
    # One head, windows longer than the sequence (one test less to compile).
    ("triple_product", 6, 1, 32, (9, 7), 8, 2),
], ids=["trilinear", "triple_product-one_head-windows_longer_than_the_sequence"])
def test_fully_masked_rows_are_zero_with_zero_gradients(logit_form, length, heads, value_dim,
                                                        window, block, invalid):
    arrays, _, cotangent = inputs(1, length, heads, 1, 16, value_dim)
    valid = jnp.asarray(np.arange(length)[None] >= invalid)  # these queries see no valid pair
    kernel, expected = kernel_and_reference(arrays, valid, cotangent, window, 0.25, block,
                                            logit_form)
    assert all(np.all(np.isfinite(x)) for x in kernel)
    assert np.all(kernel[0][:, :invalid] == 0.0)
    for grad in kernel[2:]:  # keys and values at invalid positions get no gradient
        assert np.all(grad[:, :invalid] == 0.0)
    for name, got, want in zip(NAMES, kernel, expected, strict=True):
        np.testing.assert_allclose(got, want, atol=2e-5, rtol=1e-4, err_msg=name)


# Bounds on the largest error of each output or gradient, relative to its largest value, in
# units of the 16-bit dtype's epsilon. Measured (these inputs, interpreter on the CPU): at most
# 1.1 (bfloat16, trilinear: dk1) and 2.4 (bfloat16, triple product: dk1; its cosines come from
# unit vectors rounded to bfloat16, and a square root and three norms amplify their error).
# The error grows with the logits: the triple product's at scale 1 (logits 16 times these)
# measured 6.7, so the bounds hold for these scales only.
SIXTEEN_BIT_BOUNDS = {("bfloat16", "trilinear"): 8, ("float16", "trilinear"): 8,
                      ("bfloat16", "triple_product"): 8}


@pytest.mark.slow
@pytest.mark.parametrize("dtype, logit_form", list(SIXTEEN_BIT_BOUNDS))
def test_sixteen_bit_inputs_against_a_float32_reference(dtype, logit_form):
    """16-bit inputs, float32 statistics: the error is what rounding the inputs, the products
    fed to the matrix units and the outputs to 8 (bfloat16) or 11 (float16) significant bits
    explains: a few units of that precision relative to the largest value."""
    arrays, valid, cotangent = inputs(2, 13, 2, 1, 16, 16, seed=3)
    low = [x.astype(dtype) for x in arrays]
    exact = [x.astype(jnp.float32) for x in low]  # the same rounded inputs, in float32
    kernel, expected = kernel_and_reference(low, valid, cotangent, (5, 3),
                                            default_scale(logit_form, 16), 8, logit_form,
                                            reference_arrays=exact)
    unit = float(jnp.finfo(dtype).eps)
    errors = {name: float(np.max(np.abs(got - want)) / np.max(np.abs(want)) / unit)
              for name, got, want in zip(NAMES, kernel, expected, strict=True)}
    assert max(errors.values()) < SIXTEEN_BIT_BOUNDS[dtype, logit_form], errors


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
    with pytest.raises(ValueError, match="logit_form='bilinear'"):
        _pallas_simplicial.simplicial_attention(*arrays, valid, window=(2, 2), scale=1.0,
                                                logit_form="bilinear", interpret=True)
    with pytest.raises(ValueError, match="sqrt_epsilon=-1"):
        _pallas_simplicial.simplicial_attention(*arrays, valid, window=(2, 2), scale=1.0,
                                                logit_form="triple_product", sqrt_epsilon=-1.0,
                                                interpret=True)


@pytest.mark.accelerator
@pytest.mark.parametrize("logit_form", FORMS)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_compiled_kernel_on_a_gpu_matches_the_dense_reference(dtype, logit_form):
    """The Triton-compiled kernels (not the interpreter) at a head dim of 64 and 64-row blocks,
    N = 300 (ragged), a first window over two blocks: outputs and the five gradients."""
    if jax.default_backend() != "gpu":
        pytest.skip(f"JAX's default backend is {jax.default_backend()!r}, not a GPU")
    arrays, valid, cotangent = inputs(2, 300, 4, 2, 64, 64, seed=5)
    low = [x.astype(dtype) for x in arrays]
    exact = [x.astype(jnp.float32) for x in low]
    scale = default_scale(logit_form, 64)
    kernel = value_and_grads(lambda *a: _pallas_simplicial.simplicial_attention(
        *a, valid, window=(100, 16), scale=scale, block=64, logit_form=logit_form),
        low, cotangent)
    with jax.default_matmul_precision("highest"):
        expected = value_and_grads(
            lambda *a: dense_reference(*a, valid, (100, 16), scale, logit_form), exact,
            cotangent)
    limit = (1e-4 if dtype == "float32"
             else SIXTEEN_BIT_BOUNDS[dtype, logit_form] * float(jnp.finfo(dtype).eps))
    for name, got, want in zip(NAMES, kernel, expected, strict=True):
        error = np.max(np.abs(got - want)) / np.max(np.abs(want))
        assert error < limit, (name, error)
