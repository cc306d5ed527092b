"""A fused Pallas kernel for causal, sliding-window 2-simplicial attention (JAX only).

The JAX fast path of :class:`SequenceSimplicialAttention`, as cuDNN flash attention is Keras'
fast path of ``ops.dot_product_attention``: imported lazily by the layer, only under the JAX
backend. Causal windows ``(w1, w2)`` (Roy et al. 2025, Sec. 6), one of the layer's two logits::

    trilinear (Roy et al. 2025, Sec. 4):
        L[i, j, k] = scale * sum_d q_i[d] k1_j[d] k2_k[d]
    triple_product (Clift et al. 2020, Sec. 2, eqs. 7-8, in the normalised form of eq. 26, as
    simplicial_scores.triple_product_logits):
        L[i, j, k] = scale * |q_i| |k1_j| |k2_k| sqrt(max(s, 0) + sqrt_epsilon),
        s = x^2 + y^2 + z^2 - 2 x y z,  x = cos(q_i, k1_j), y = cos(q_i, k2_k), z = cos(k1_j, k2_k)

    i - w1 < j <= i,  i - w2 < k <= i
    out_i = sum_{j, k} softmax_{(j, k)}(L[i])[j, k] (v1_j * v2_k)

Flash-style (Dao et al. 2022, Alg. 1, over pairs instead of keys): a program owns ``block``
queries and loops over the second key's offset ``t = i - k`` (``w2`` steps; the second keys of
a query block are one shifted block of rows) and, inside, over blocks of first keys; the
softmax's running maximum and sum and the output are kept in float32, so no ``[N, w1, w2]``
tensor exists: memory is ``O(N d)``. The backward pass (``jax.custom_vjp``) recomputes the
pair weights from the saved log-sum-exp, in three kernels: one over query blocks (``dq``), one
over blocks of first keys (``dk1``, ``dv1``) and one over blocks of second keys (``dk2``,
``dv2``); gradients of grouped key/value heads are summed over their query heads outside.
A tile of the triple product takes two products with the first keys (``x`` and ``z``; ``y`` is
one number per row), so it costs about ``(2 dk + dv) / (dk + dv)`` times a trilinear tile.

Inputs are float32, bfloat16 or float16; products go to the matrix units in the input dtype
with float32 accumulation (float32 inputs without TF32); the triple product's unit vectors are
formed in float32 and rounded to the input dtype for its two products. ``interpret=True`` runs
the same kernels in Pallas' interpreter (any device; slow: for tests).
"""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl

from keras_relational.layers.simplicial_scores import _MIN_SQUARED_NORM

SUPPORTED_DTYPES = ("float32", "bfloat16", "float16")
MIN_HEAD_DIM, MAX_HEAD_DIM = 16, 256
TRILINEAR, TRIPLE_PRODUCT = "trilinear", "triple_product"
LOGIT_FORMS = (TRILINEAR, TRIPLE_PRODUCT)
# A finite stand-in for -inf (as jax.experimental.pallas.ops.gpu.attention): a row whose pairs
# are all masked keeps finite statistics and gets weight 0 everywhere.
_MASKED = -0.7 * float(np.finfo(np.float32).max)


class _Config(NamedTuple):
    """The static arguments of one attention (hashable: ``custom_vjp``'s nondiff argument)."""
    length: int
    window: tuple
    scale: float
    block: int
    interpret: bool
    groups: int  # query heads per key/value head
    logit_form: str
    sqrt_epsilon: float


def unsupported_reason(dtype, key_dim, value_dim):
    """None if the kernel takes these inputs, else why not (one sentence)."""
    if dtype not in SUPPORTED_DTYPES:
        return f"dtype {dtype} is not one of {SUPPORTED_DTYPES}"
    for name, dim in (("key_dim", key_dim), ("value_dim", value_dim)):
        if dim < MIN_HEAD_DIM or dim > MAX_HEAD_DIM or dim & (dim - 1):
            return (f"{name}={dim} is not a power of two in [{MIN_HEAD_DIM}, {MAX_HEAD_DIM}] "
                    f"(the kernel's tiles)")
    return None


def _geometry(length, window, block):
    """Static sizes: windows cut to the sequence, blocks, and the zero rows padded around."""
    w1, w2 = (min(int(w), length) for w in window)
    blocks = -(-length // block)
    first_key_blocks = -(-(block + w1 - 1) // block)  # blocks of first keys a query block sees
    pad = max((first_key_blocks - 1) * block, w2 - 1)
    pad = -(-pad // block) * block
    return dict(w1=w1, w2=w2, blocks=blocks, first_key_blocks=first_key_blocks, pad=pad,
                padded=blocks * block, total=pad + blocks * block + pad)


def _dot(a, b, trans_a=False, trans_b=False, exact=False):
    """``a @ b`` (optionally transposed) accumulated in float32."""
    contract = (0 if trans_a else 1, 1 if trans_b else 0)
    out = lax.dot_general(a, b, ((contract[:1], contract[1:]), ((), ())),
                          precision=lax.Precision.HIGHEST if exact else None,
                          preferred_element_type=jnp.float32)
    return out


def _window(rows, cols, w1):
    """Causal first-key window of each (query row, first-key column): i - w1 < j <= i."""
    return (cols[None, :] <= rows[:, None]) & (cols[None, :] > rows[:, None] - w1)


# ---------------------------------------------------------------------------------------------
# Logits of one tile. A tile's row r holds one query i and its second key k = i - t (t fixed),
# its column c one first key j. The triple product needs only cosines (triple_product_logits'
# normalised form), so each row and column is split once into a unit vector and its norm.
#
# Its gradient (the chain rule through s; eqs. 7-8 of Clift et al. 2020, Sec. 2). With
# F = scale |q_i| |k1_j| |k2_k| and r = sqrt(max(s, 0) + sqrt_epsilon), L = F r, and for s > 0
#     dL/dx = F (x - y z) / r,  dL/dy = F (y - x z) / r,  dL/dz = F (z - x y) / r,
#     |q_i| dL/d|q_i| = |k1_j| dL/d|k1_j| = |k2_k| dL/d|k2_k| = L
# (0 for s <= 0, as the max's gradient). With G = dLoss/dL[i, j, k] = P (dP - delta) and the
# unit vectors a = q_i/|q_i|, b = k1_j/|k1_j|, c = k2_k/|k2_k| (x = a.b, y = a.c, z = b.c):
#     dLoss/da_i = sum_{j,k} G (dL/dx b_j + dL/dy c_k)     h_i = sum_{j,k} G L   (first keys:
#     dLoss/db_j = sum_{i,k} G (dL/dx a_i + dL/dz c_k)     h_j = sum_{i,k} G L,  second keys:
#     dLoss/dc_k = sum_{i,j} G (dL/dy a_i + dL/dz b_j)     h_k = sum_{i,j} G L)
# and back to a vector v = |v| u (u = v / |v|, d|v|/dv = u, du/dv = (I - u u^T) / |v|):
#     dLoss/dv = (dLoss/du + (h - u . dLoss/du) u) / |v|        (_from_unit)
# Each sum is over one kernel's tiles, as the trilinear gradients are: per query row (dq),
# per first-key column (dk1), per second-key row (dk2); memory stays O(N d).
# ---------------------------------------------------------------------------------------------


def _unit_rows(x):
    """float32 rows -> (unit rows, norms), the norms floored as triple_product_logits' are."""
    norm = jnp.sqrt(jnp.maximum(jnp.sum(x * x, axis=1), _MIN_SQUARED_NORM))
    return x / norm[:, None], norm


def _from_unit(x, grad_unit, grad_log_norm):
    """dLoss/dx from dLoss/du (u = x / |x|) and |x| dLoss/d|x|, rows of float32 (see above).

    A row shorter than the floor has a constant norm (the max's gradient), so u = x / floor
    (such rows, zero vectors, are not checked against the layer's keras.ops form).
    """
    squared = jnp.sum(x * x, axis=1)
    norm = jnp.sqrt(jnp.maximum(squared, _MIN_SQUARED_NORM))
    unit = x / norm[:, None]
    radial = jnp.where(squared > _MIN_SQUARED_NORM,
                       grad_log_norm - jnp.sum(grad_unit * unit, axis=1), 0.0)
    return (grad_unit + radial[:, None] * unit) / norm[:, None]


def _row_terms(form, q, k2, scale, dtype):
    """What the tiles need of their rows (float32 queries and second keys of one offset)."""
    if form == TRILINEAR:
        q = q * scale
        return {"q": q, "qk2": (q * k2).astype(dtype)}
    a, norm_a = _unit_rows(q)
    c, norm_c = _unit_rows(k2)
    return {"a": a, "c": c, "a_low": a.astype(dtype), "c_low": c.astype(dtype),
            "y": jnp.sum(a * c, axis=1), "factor": scale * norm_a * norm_c}


def _column_terms(form, k1):
    """What the tiles need of a block of first keys (in the input dtype)."""
    if form == TRILINEAR:
        return {"k1": k1}
    b, norm_b = _unit_rows(k1.astype(jnp.float32))
    return {"b_low": b.astype(k1.dtype), "norm_b": norm_b}


def _logits(form, rows, cols, exact, sqrt_epsilon):
    """One tile's float32 logits [rows, first keys] and what the triple product's gradient uses."""
    if form == TRILINEAR:
        return _dot(rows["qk2"], cols["k1"], trans_b=True, exact=exact), None
    x = _dot(rows["a_low"], cols["b_low"], trans_b=True, exact=exact)  # cos(q_i, k1_j)
    z = _dot(rows["c_low"], cols["b_low"], trans_b=True, exact=exact)  # cos(k2_k, k1_j)
    y = rows["y"][:, None]  # cos(q_i, k2_k)
    s = x * x + y * y + z * z - 2.0 * x * y * z
    root = jnp.sqrt(jnp.maximum(s, 0.0) + sqrt_epsilon)
    factor = rows["factor"][:, None] * cols["norm_b"][None, :]
    return factor * root, (x, y, z, s, root, factor)


def _pair_gradients(form, rows, cols, dov2, v1, lse, delta, allowed, exact, sqrt_epsilon):
    """Recomputed weights P and logit gradients G = P (dP - delta) of one tile, float32."""
    logits, parts = _logits(form, rows, cols, exact, sqrt_epsilon)
    p = jnp.where(allowed, jnp.exp(logits - lse[:, None]), 0.0)
    dp = _dot(dov2, v1, trans_b=True, exact=exact)
    return p, p * (dp - delta[:, None]), parts


def _triple_product_partials(parts, dl):
    """G dL/dx, G dL/dy, G dL/dz and G L of a tile (see above)."""
    x, y, z, s, root, factor = parts
    # root > 0 wherever s > 0; the guard only keeps masked tiles finite under sqrt_epsilon=0.
    w = jnp.where(s > 0.0, dl * factor / jnp.where(root > 0.0, root, 1.0), 0.0)
    return w * (x - y * z), w * (y - x * z), w * (z - x * y), dl * factor * root


# ---------------------------------------------------------------------------------------------
# The kernels.
# ---------------------------------------------------------------------------------------------


def _forward_kernel(q_ref, k1_ref, k2_ref, v1_ref, v2_ref, valid_ref, o_ref, lse_ref, *, g,
                    form, scale, sqrt_epsilon, block, exact):
    dtype = q_ref.dtype
    i0 = pl.program_id(0) * block
    positions = i0 + jnp.arange(block)
    pad = g["pad"]
    q = q_ref[pl.ds(pad + i0, block), :].astype(jnp.float32)

    def over_offsets(t, carry):
        at = pl.ds(pad + i0 - t, block)  # second keys k = i - t, one row per query
        k2 = k2_ref[at, :].astype(jnp.float32)
        v2 = v2_ref[at, :].astype(jnp.float32)
        valid2 = valid_ref[at] > 0
        rows = _row_terms(form, q, k2, scale, dtype)

        def over_first_keys(jb, carry):
            acc, m, s = carry
            start = i0 + block - g["first_key_blocks"] * block + jb * block
            at1 = pl.ds(pad + start, block)
            k1, v1 = k1_ref[at1, :], v1_ref[at1, :]
            allowed = (valid2[:, None] & (valid_ref[at1] > 0)[None, :]
                       & _window(positions, start + jnp.arange(block), g["w1"]))
            logits, _ = _logits(form, rows, _column_terms(form, k1), exact, sqrt_epsilon)
            logits = jnp.where(allowed, logits, _MASKED)
            m_next = jnp.maximum(m, jnp.max(logits, axis=1))
            p = jnp.where(allowed, jnp.exp(logits - m_next[:, None]), 0.0)
            correction = jnp.exp(m - m_next)
            s = s * correction + jnp.sum(p, axis=1)
            acc = acc * correction[:, None] + _dot(p.astype(dtype), v1, exact=exact) * v2
            return acc, m_next, s

        return lax.fori_loop(0, g["first_key_blocks"], over_first_keys, carry)

    init = (jnp.zeros((block, o_ref.shape[-1]), jnp.float32),
            jnp.full((block,), _MASKED, jnp.float32), jnp.zeros((block,), jnp.float32))
    acc, m, s = lax.fori_loop(0, g["w2"], over_offsets, init)
    some = s > 0  # a row without an allowed pair (all masked) outputs 0
    o_ref[...] = jnp.where(some[:, None], acc / jnp.where(some, s, 1.0)[:, None],
                           0.0).astype(o_ref.dtype)
    lse_ref[...] = jnp.where(some, m + jnp.log(jnp.where(some, s, 1.0)), 0.0)


def _query_grad_kernel(q_ref, k1_ref, k2_ref, v1_ref, v2_ref, valid_ref, do_ref, lse_ref,
                       delta_ref, dq_ref, *, g, form, scale, sqrt_epsilon, block, exact):
    dtype = q_ref.dtype
    pad = g["pad"]
    i0 = pl.program_id(0) * block
    positions = i0 + jnp.arange(block)
    here = pl.ds(pad + i0, block)
    q = q_ref[here, :].astype(jnp.float32)
    do = do_ref[here, :].astype(jnp.float32)
    lse, delta = lse_ref[here], delta_ref[here]

    def over_offsets(t, carry):
        at = pl.ds(pad + i0 - t, block)
        k2 = k2_ref[at, :].astype(jnp.float32)
        rows = _row_terms(form, q, k2, scale, dtype)
        dov2 = (do * v2_ref[at, :].astype(jnp.float32)).astype(dtype)
        valid2 = valid_ref[at] > 0

        def over_first_keys(jb, carry):
            grad, log_norm_grad = carry
            start = i0 + block - g["first_key_blocks"] * block + jb * block
            at1 = pl.ds(pad + start, block)
            k1 = k1_ref[at1, :]
            cols = _column_terms(form, k1)
            allowed = (valid2[:, None] & (valid_ref[at1] > 0)[None, :]
                       & _window(positions, start + jnp.arange(block), g["w1"]))
            _, dl, parts = _pair_gradients(form, rows, cols, dov2, v1_ref[at1, :], lse, delta,
                                           allowed, exact, sqrt_epsilon)
            if form == TRILINEAR:
                return grad + _dot(dl.astype(dtype), k1, exact=exact) * k2, log_norm_grad
            gx, gy, _, gl = _triple_product_partials(parts, dl)
            grad = (grad + _dot(gx.astype(dtype), cols["b_low"], exact=exact)
                    + jnp.sum(gy, axis=1)[:, None] * rows["c"])
            return grad, log_norm_grad + jnp.sum(gl, axis=1)

        return lax.fori_loop(0, g["first_key_blocks"], over_first_keys, carry)

    init = (jnp.zeros(q.shape, jnp.float32), jnp.zeros((block,), jnp.float32))
    grad, log_norm_grad = lax.fori_loop(0, g["w2"], over_offsets, init)
    dq = grad * scale if form == TRILINEAR else _from_unit(q, grad, log_norm_grad)
    dq_ref[...] = dq.astype(dq_ref.dtype)


def _first_key_grad_kernel(q_ref, k1_ref, k2_ref, v1_ref, v2_ref, valid_ref, do_ref, lse_ref,
                           delta_ref, dk1_ref, dv1_ref, *, g, form, scale, sqrt_epsilon, block,
                           length, exact):
    dtype = q_ref.dtype
    pad = g["pad"]
    j0 = pl.program_id(0) * block
    key_positions = j0 + jnp.arange(block)
    at1 = pl.ds(pad + j0, block)
    k1, v1 = k1_ref[at1, :], v1_ref[at1, :]
    cols = _column_terms(form, k1)
    valid1 = valid_ref[at1] > 0

    def over_query_blocks(qb, carry):
        # The queries that see first key j: j <= i < j + w1.
        i_start = j0 + qb * block
        positions = i_start + jnp.arange(block)
        here = pl.ds(pad + i_start, block)
        q = q_ref[here, :].astype(jnp.float32)
        do = do_ref[here, :].astype(jnp.float32)
        lse, delta = lse_ref[here], delta_ref[here]
        in_window = ((positions < length)[:, None] & valid1[None, :]
                     & _window(positions, key_positions, g["w1"]))

        def over_offsets(t, carry):
            dk1, log_norm_grad, dv1 = carry
            at = pl.ds(pad + i_start - t, block)
            rows = _row_terms(form, q, k2_ref[at, :].astype(jnp.float32), scale, dtype)
            dov2 = (do * v2_ref[at, :].astype(jnp.float32)).astype(dtype)
            allowed = in_window & (valid_ref[at] > 0)[:, None]
            p, dl, parts = _pair_gradients(form, rows, cols, dov2, v1, lse, delta, allowed,
                                           exact, sqrt_epsilon)
            dv1 = dv1 + _dot(p.astype(dtype), dov2, trans_a=True, exact=exact)
            if form == TRILINEAR:
                dk1 = dk1 + _dot(dl.astype(dtype), rows["qk2"], trans_a=True, exact=exact)
                return dk1, log_norm_grad, dv1
            gx, _, gz, gl = _triple_product_partials(parts, dl)
            dk1 = (dk1 + _dot(gx.astype(dtype), rows["a_low"], trans_a=True, exact=exact)
                   + _dot(gz.astype(dtype), rows["c_low"], trans_a=True, exact=exact))
            return dk1, log_norm_grad + jnp.sum(gl, axis=0), dv1

        return lax.fori_loop(0, g["w2"], over_offsets, carry)

    init = (jnp.zeros(k1.shape, jnp.float32), jnp.zeros((block,), jnp.float32),
            jnp.zeros(v1.shape, jnp.float32))
    dk1, log_norm_grad, dv1 = lax.fori_loop(0, g["first_key_blocks"], over_query_blocks, init)
    if form != TRILINEAR:
        dk1 = _from_unit(k1.astype(jnp.float32), dk1, log_norm_grad)
    dk1_ref[...] = dk1.astype(dk1_ref.dtype)
    dv1_ref[...] = dv1.astype(dv1_ref.dtype)


def _second_key_grad_kernel(q_ref, k1_ref, k2_ref, v1_ref, v2_ref, valid_ref, do_ref, lse_ref,
                            delta_ref, dk2_ref, dv2_ref, *, g, form, scale, sqrt_epsilon, block,
                            length, exact):
    dtype = q_ref.dtype
    pad = g["pad"]
    k0 = pl.program_id(0) * block
    at2 = pl.ds(pad + k0, block)
    k2 = k2_ref[at2, :].astype(jnp.float32)
    v2 = v2_ref[at2, :].astype(jnp.float32)
    valid2 = valid_ref[at2] > 0

    def over_offsets(t, carry):
        # Row r: second key k = k0 + r and its query i = k + t.
        i_start = k0 + t
        positions = i_start + jnp.arange(block)
        here = pl.ds(pad + i_start, block)
        q = q_ref[here, :].astype(jnp.float32)
        do = do_ref[here, :].astype(jnp.float32)
        lse, delta = lse_ref[here], delta_ref[here]
        rows = _row_terms(form, q, k2, scale, dtype)
        dov2 = (do * v2).astype(dtype)
        row_ok = (positions < length) & valid2

        def over_first_keys(jb, carry):
            dk2, log_norm_grad, dv2 = carry
            start = i_start + block - g["first_key_blocks"] * block + jb * block
            at1 = pl.ds(pad + start, block)
            k1, v1 = k1_ref[at1, :], v1_ref[at1, :]
            cols = _column_terms(form, k1)
            allowed = (row_ok[:, None] & (valid_ref[at1] > 0)[None, :]
                       & _window(positions, start + jnp.arange(block), g["w1"]))
            p, dl, parts = _pair_gradients(form, rows, cols, dov2, v1, lse, delta, allowed,
                                           exact, sqrt_epsilon)
            dv2 = dv2 + _dot(p.astype(dtype), v1, exact=exact) * do
            if form == TRILINEAR:
                dk2 = dk2 + _dot(dl.astype(dtype), k1, exact=exact) * rows["q"]
                return dk2, log_norm_grad, dv2
            _, gy, gz, gl = _triple_product_partials(parts, dl)
            dk2 = (dk2 + jnp.sum(gy, axis=1)[:, None] * rows["a"]
                   + _dot(gz.astype(dtype), cols["b_low"], exact=exact))
            return dk2, log_norm_grad + jnp.sum(gl, axis=1), dv2

        return lax.fori_loop(0, g["first_key_blocks"], over_first_keys, carry)

    init = (jnp.zeros(k2.shape, jnp.float32), jnp.zeros((block,), jnp.float32),
            jnp.zeros(v2.shape, jnp.float32))
    dk2, log_norm_grad, dv2 = lax.fori_loop(0, g["w2"], over_offsets, init)
    if form != TRILINEAR:
        dk2 = _from_unit(k2, dk2, log_norm_grad)
    dk2_ref[...] = dk2.astype(dk2_ref.dtype)
    dv2_ref[...] = dv2.astype(dv2_ref.dtype)


def _compiler_params(interpret, key_dim):
    if interpret:
        return None
    from jax.experimental.pallas import triton as plgpu

    return plgpu.CompilerParams(num_warps=4 if key_dim <= 64 else 8, num_stages=2)


def _call(kernel, config, inputs, outputs, name):
    """Runs ``kernel`` over (blocks, batch, heads); inputs [B, H', total, ...] whole per head."""
    block, groups = config.block, config.groups
    g = _geometry(config.length, config.window, block)
    exact = inputs[0].dtype == jnp.float32
    batch, heads = inputs[0].shape[:2]

    def whole(x, per_query_head):
        head = (lambda h: h) if per_query_head else (lambda h: h // groups)
        return pl.BlockSpec((None, None, *x.shape[2:]),
                            lambda i, b, h: (b, head(h), *(0,) * (x.ndim - 2)))

    # q, k1, k2, v1, v2, valid, then per-query-head rows (dO, lse, delta).
    kinds = (True, False, False, False, False, None) + (True,) * (len(inputs) - 6)
    in_specs = [pl.BlockSpec((None, g["total"]), lambda i, b, h: (b, 0)) if kind is None
                else whole(x, kind) for x, kind in zip(inputs, kinds, strict=True)]

    def rows(o):  # one block of rows of [B, H, padded(, d)]
        trailing = (0,) * (len(o.shape) - 3)
        return pl.BlockSpec((None, None, block, *o.shape[3:]),
                            lambda i, b, h: (b, h, i, *trailing))

    out_specs = [rows(o) for o in outputs]
    key_kernels = (_first_key_grad_kernel, _second_key_grad_kernel)
    extra = dict(length=config.length) if kernel in key_kernels else {}
    return pl.pallas_call(
        functools.partial(kernel, g=g, form=config.logit_form, scale=config.scale,
                          sqrt_epsilon=config.sqrt_epsilon, block=block, exact=exact, **extra),
        grid=(g["blocks"], batch, heads), in_specs=in_specs, out_specs=out_specs,
        out_shape=outputs, interpret=config.interpret, name=name,
        compiler_params=_compiler_params(config.interpret, inputs[0].shape[-1]))(*inputs)


def _to_kernel_layout(x, g, length):
    """[B, N, H, d] -> [B, H, total, d], zero rows before and after the sequence."""
    x = jnp.swapaxes(x, 1, 2)
    return jnp.pad(x, ((0, 0), (0, 0), (g["pad"], g["total"] - g["pad"] - length), (0, 0)))


def _padded_rows(x, g, length):
    """[B, H, N(, d)] -> [B, H, total(, d)]."""
    pads = [(0, 0), (0, 0), (g["pad"], g["total"] - g["pad"] - length)]
    return jnp.pad(x, pads + [(0, 0)] * (x.ndim - 3))


def _prepare(config, q, k1, k2, v1, v2, valid):
    length = config.length
    g = _geometry(length, config.window, config.block)
    valid = jnp.pad(valid.astype(jnp.int32), ((0, 0), (g["pad"], g["total"] - g["pad"] - length)))
    return g, [_to_kernel_layout(x, g, length) for x in (q, k1, k2, v1, v2)] + [valid]


def _forward(config, q, k1, k2, v1, v2, valid):
    length = config.length
    g, inputs = _prepare(config, q, k1, k2, v1, v2, valid)
    batch, heads = q.shape[0], q.shape[2]
    out, lse = _call(_forward_kernel, config, inputs, [
        jax.ShapeDtypeStruct((batch, heads, g["padded"], v1.shape[-1]), q.dtype),
        jax.ShapeDtypeStruct((batch, heads, g["padded"]), jnp.float32)], "simplicial_forward")
    return jnp.swapaxes(out[:, :, :length], 1, 2), lse[:, :, :length]


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _attention(config, q, k1, k2, v1, v2, valid):
    return _forward(config, q, k1, k2, v1, v2, valid)[0]


def _attention_fwd(config, q, k1, k2, v1, v2, valid):
    out, lse = _forward(config, q, k1, k2, v1, v2, valid)
    return out, (q, k1, k2, v1, v2, valid, out, lse)


def _attention_bwd(config, residuals, d_out):
    q, k1, k2, v1, v2, valid, out, lse = residuals
    length, groups = config.length, config.groups
    g, inputs = _prepare(config, q, k1, k2, v1, v2, valid)
    batch, heads, kv_heads = q.shape[0], q.shape[2], k1.shape[2]
    d_out = d_out.astype(q.dtype)
    delta = jnp.sum(d_out.astype(jnp.float32) * out.astype(jnp.float32), axis=-1)  # [B, N, H]
    inputs += [_to_kernel_layout(d_out, g, length), _padded_rows(lse, g, length),
               _padded_rows(jnp.swapaxes(delta, 1, 2), g, length)]

    def rows_of(x):
        return jax.ShapeDtypeStruct((batch, heads, g["padded"], x.shape[-1]), x.dtype)

    (dq,) = _call(_query_grad_kernel, config, inputs, [rows_of(q)], "simplicial_dq")
    dk1, dv1 = _call(_first_key_grad_kernel, config, inputs, [rows_of(k1), rows_of(v1)],
                     "simplicial_dk1_dv1")
    dk2, dv2 = _call(_second_key_grad_kernel, config, inputs, [rows_of(k2), rows_of(v2)],
                     "simplicial_dk2_dv2")

    def per_query_head(x):  # [B, H, padded, d] -> [B, N, H, d]
        return jnp.swapaxes(x[:, :, :length], 1, 2)

    def per_key_value_head(x):  # summed over the query heads that share a key/value head
        x = x[:, :, :length].astype(jnp.float32)
        x = x.reshape(batch, kv_heads, groups, length, x.shape[-1]).sum(axis=2)
        return jnp.swapaxes(x, 1, 2).astype(q.dtype)

    return (per_query_head(dq), per_key_value_head(dk1), per_key_value_head(dk2),
            per_key_value_head(dv1), per_key_value_head(dv2), None)


_attention.defvjp(_attention_fwd, _attention_bwd)


def simplicial_attention(q, k1, k2, v1, v2, valid, *, window, scale, logit_form=TRILINEAR,
                         sqrt_epsilon=1e-12, block=64, interpret=False):
    """Causal sliding-window 2-simplicial attention, fused.

    Args:
        q: queries ``[B, N, H, dk]``.
        k1, k2: first and second keys ``[B, N, Hkv, dk]`` (``Hkv`` divides ``H``; query head
            ``h`` uses key/value head ``h // (H // Hkv)``).
        v1, v2: first and second values ``[B, N, Hkv, dv]``.
        valid: ``[B, N]`` booleans; a False position is never part of a pair.
        window: ``(w1, w2)``, cut to N.
        scale: multiplies the logits.
        logit_form: ``"trilinear"`` or ``"triple_product"`` (see the module's docstring).
        sqrt_epsilon: the triple product's epsilon under its square root (>= 0; as
            ``triple_product_logits``); unused by ``"trilinear"``.
        block: rows per program (queries or keys); a power of two, at least 16 on a GPU.
        interpret: run the kernels in Pallas' interpreter.

    Returns:
        ``[B, N, H, dv]`` in the dtype of ``q`` (a row without an allowed pair is 0).
    """
    heads, kv_heads = q.shape[2], k1.shape[2]
    if heads % kv_heads:
        raise ValueError(f"The number of key/value heads must divide the query heads, received "
                         f"{kv_heads} and {heads}.")
    if block < 1 or block & (block - 1):
        raise ValueError(f"block must be a power of two, received block={block}.")
    if logit_form not in LOGIT_FORMS:
        raise ValueError(f"logit_form must be one of {LOGIT_FORMS}, received "
                         f"logit_form={logit_form!r}.")
    if not sqrt_epsilon >= 0:
        raise ValueError(f"sqrt_epsilon must be >= 0, received sqrt_epsilon={sqrt_epsilon!r}.")
    dtypes = {x.dtype for x in (q, k1, k2, v1, v2)}
    if len(dtypes) != 1:
        raise ValueError(f"q, k1, k2, v1, v2 must share one dtype, received "
                         f"{sorted(map(str, dtypes))}.")
    config = _Config(length=q.shape[1], window=tuple(int(w) for w in window),
                     scale=float(scale), block=int(block), interpret=bool(interpret),
                     groups=heads // kv_heads, logit_form=logit_form,
                     sqrt_epsilon=float(sqrt_epsilon))
    return _attention(config, q, k1, k2, v1, v2, valid)


def flops(batch, length, heads, key_dim, value_dim, window, logit_form=TRILINEAR):
    """Multiply-adds x 2 of the forward pass over the allowed pairs (Roy et al.'s count).

    The triple product takes two products with the first keys per pair (``x`` and ``z``).
    """
    w1, w2 = (min(w, length) for w in window)
    key_products = 2 if logit_form == TRIPLE_PRODUCT else 1
    return 2.0 * batch * heads * length * w1 * w2 * (key_products * key_dim + value_dim)
