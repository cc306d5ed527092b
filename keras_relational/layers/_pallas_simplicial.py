"""A fused Pallas kernel for causal, sliding-window 2-simplicial attention (JAX only).

The JAX fast path of :class:`SequenceSimplicialAttention`, as cuDNN flash attention is Keras'
fast path of ``ops.dot_product_attention``: imported lazily by the layer, only under the JAX
backend. Trilinear logits (Roy et al. 2025, Sec. 4), causal windows ``(w1, w2)`` (Sec. 6)::

    L[i, j, k] = scale * sum_d q_i[d] k1_j[d] k2_k[d],   i - w1 < j <= i,  i - w2 < k <= i
    out_i = sum_{j, k} softmax_{(j, k)}(L[i])[j, k] (v1_j * v2_k)

Flash-style (Dao et al. 2022, Alg. 1, over pairs instead of keys): a program owns ``block``
queries and loops over the second key's offset ``t = i - k`` (``w2`` steps; the second keys of
a query block are one shifted block of rows) and, inside, over blocks of first keys; the
softmax's running maximum and sum and the output are kept in float32, so no ``[N, w1, w2]``
tensor exists: memory is ``O(N d)``. The backward pass (``jax.custom_vjp``) recomputes the
pair weights from the saved log-sum-exp, in three kernels: one over query blocks (``dq``), one
over blocks of first keys (``dk1``, ``dv1``) and one over blocks of second keys (``dk2``,
``dv2``); gradients of grouped key/value heads are summed over their query heads outside.

Inputs are float32, bfloat16 or float16; products go to the matrix units in the input dtype
with float32 accumulation (float32 inputs without TF32). ``interpret=True`` runs the same
kernels in Pallas' interpreter (any device; slow: for tests).
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl

SUPPORTED_DTYPES = ("float32", "bfloat16", "float16")
MIN_HEAD_DIM, MAX_HEAD_DIM = 16, 256
# A finite stand-in for -inf (as jax.experimental.pallas.ops.gpu.attention): a row whose pairs
# are all masked keeps finite statistics and gets weight 0 everywhere.
_MASKED = -0.7 * float(np.finfo(np.float32).max)


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


def _forward_kernel(q_ref, k1_ref, k2_ref, v1_ref, v2_ref, valid_ref, o_ref, lse_ref, *, g,
                    scale, block, exact):
    dtype = q_ref.dtype
    i0 = pl.program_id(0) * block
    rows = i0 + jnp.arange(block)
    pad = g["pad"]
    q = q_ref[pl.ds(pad + i0, block), :].astype(jnp.float32) * scale

    def over_offsets(t, carry):
        at = pl.ds(pad + i0 - t, block)  # second keys k = i - t, one row per query
        k2 = k2_ref[at, :].astype(jnp.float32)
        v2 = v2_ref[at, :].astype(jnp.float32)
        valid2 = valid_ref[at] > 0
        qk2 = (q * k2).astype(dtype)

        def over_first_keys(jb, carry):
            acc, m, s = carry
            start = i0 + block - g["first_key_blocks"] * block + jb * block
            at1 = pl.ds(pad + start, block)
            k1, v1 = k1_ref[at1, :], v1_ref[at1, :]
            allowed = (valid2[:, None] & (valid_ref[at1] > 0)[None, :]
                       & _window(rows, start + jnp.arange(block), g["w1"]))
            logits = jnp.where(allowed, _dot(qk2, k1, trans_b=True, exact=exact), _MASKED)
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


def _pair_gradients(qk2, dov2, k1, v1, lse, delta, allowed, exact):
    """Recomputed weights P and logit gradients dL = P (dP - delta) of one tile, float32."""
    logits = _dot(qk2, k1, trans_b=True, exact=exact)
    p = jnp.where(allowed, jnp.exp(logits - lse[:, None]), 0.0)
    dp = _dot(dov2, v1, trans_b=True, exact=exact)
    return p, p * (dp - delta[:, None])


def _query_grad_kernel(q_ref, k1_ref, k2_ref, v1_ref, v2_ref, valid_ref, do_ref, lse_ref,
                       delta_ref, dq_ref, *, g, scale, block, exact):
    dtype = q_ref.dtype
    pad = g["pad"]
    i0 = pl.program_id(0) * block
    rows = i0 + jnp.arange(block)
    here = pl.ds(pad + i0, block)
    q = q_ref[here, :].astype(jnp.float32) * scale
    do = do_ref[here, :].astype(jnp.float32)
    lse, delta = lse_ref[here], delta_ref[here]

    def over_offsets(t, dq):
        at = pl.ds(pad + i0 - t, block)
        k2 = k2_ref[at, :].astype(jnp.float32)
        qk2 = (q * k2).astype(dtype)
        dov2 = (do * v2_ref[at, :].astype(jnp.float32)).astype(dtype)
        valid2 = valid_ref[at] > 0

        def over_first_keys(jb, dq):
            start = i0 + block - g["first_key_blocks"] * block + jb * block
            at1 = pl.ds(pad + start, block)
            k1 = k1_ref[at1, :]
            allowed = (valid2[:, None] & (valid_ref[at1] > 0)[None, :]
                       & _window(rows, start + jnp.arange(block), g["w1"]))
            _, dl = _pair_gradients(qk2, dov2, k1, v1_ref[at1, :], lse, delta, allowed, exact)
            return dq + _dot(dl.astype(dtype), k1, exact=exact) * k2

        return lax.fori_loop(0, g["first_key_blocks"], over_first_keys, dq)

    dq = lax.fori_loop(0, g["w2"], over_offsets, jnp.zeros(q.shape, jnp.float32))
    dq_ref[...] = (dq * scale).astype(dq_ref.dtype)


def _first_key_grad_kernel(q_ref, k1_ref, k2_ref, v1_ref, v2_ref, valid_ref, do_ref, lse_ref,
                           delta_ref, dk1_ref, dv1_ref, *, g, scale, block, length, exact):
    dtype = q_ref.dtype
    pad = g["pad"]
    j0 = pl.program_id(0) * block
    cols = j0 + jnp.arange(block)
    at1 = pl.ds(pad + j0, block)
    k1, v1 = k1_ref[at1, :], v1_ref[at1, :]
    valid1 = valid_ref[at1] > 0

    def over_query_blocks(qb, carry):
        # The queries that see first key j: j <= i < j + w1.
        i_start = j0 + qb * block
        rows = i_start + jnp.arange(block)
        here = pl.ds(pad + i_start, block)
        q = q_ref[here, :].astype(jnp.float32) * scale
        do = do_ref[here, :].astype(jnp.float32)
        lse, delta = lse_ref[here], delta_ref[here]
        in_window = (rows < length)[:, None] & valid1[None, :] & _window(rows, cols, g["w1"])

        def over_offsets(t, carry):
            dk1, dv1 = carry
            at = pl.ds(pad + i_start - t, block)
            qk2 = (q * k2_ref[at, :].astype(jnp.float32)).astype(dtype)
            dov2 = (do * v2_ref[at, :].astype(jnp.float32)).astype(dtype)
            allowed = in_window & (valid_ref[at] > 0)[:, None]
            p, dl = _pair_gradients(qk2, dov2, k1, v1, lse, delta, allowed, exact)
            dv1 = dv1 + _dot(p.astype(dtype), dov2, trans_a=True, exact=exact)
            dk1 = dk1 + _dot(dl.astype(dtype), qk2, trans_a=True, exact=exact)
            return dk1, dv1

        return lax.fori_loop(0, g["w2"], over_offsets, carry)

    init = (jnp.zeros(k1.shape, jnp.float32), jnp.zeros(v1.shape, jnp.float32))
    dk1, dv1 = lax.fori_loop(0, g["first_key_blocks"], over_query_blocks, init)
    dk1_ref[...] = dk1.astype(dk1_ref.dtype)
    dv1_ref[...] = dv1.astype(dv1_ref.dtype)


def _second_key_grad_kernel(q_ref, k1_ref, k2_ref, v1_ref, v2_ref, valid_ref, do_ref, lse_ref,
                            delta_ref, dk2_ref, dv2_ref, *, g, scale, block, length, exact):
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
        rows = i_start + jnp.arange(block)
        here = pl.ds(pad + i_start, block)
        q = q_ref[here, :].astype(jnp.float32) * scale
        do = do_ref[here, :].astype(jnp.float32)
        lse, delta = lse_ref[here], delta_ref[here]
        qk2 = (q * k2).astype(dtype)
        dov2 = (do * v2).astype(dtype)
        row_ok = (rows < length) & valid2

        def over_first_keys(jb, carry):
            dk2, dv2 = carry
            start = i_start + block - g["first_key_blocks"] * block + jb * block
            at1 = pl.ds(pad + start, block)
            k1, v1 = k1_ref[at1, :], v1_ref[at1, :]
            allowed = (row_ok[:, None] & (valid_ref[at1] > 0)[None, :]
                       & _window(rows, start + jnp.arange(block), g["w1"]))
            p, dl = _pair_gradients(qk2, dov2, k1, v1, lse, delta, allowed, exact)
            dv2 = dv2 + _dot(p.astype(dtype), v1, exact=exact) * do
            dk2 = dk2 + _dot(dl.astype(dtype), k1, exact=exact) * q
            return dk2, dv2

        return lax.fori_loop(0, g["first_key_blocks"], over_first_keys, carry)

    init = (jnp.zeros(k2.shape, jnp.float32), jnp.zeros(v2.shape, jnp.float32))
    dk2, dv2 = lax.fori_loop(0, g["w2"], over_offsets, init)
    dk2_ref[...] = dk2.astype(dk2_ref.dtype)
    dv2_ref[...] = dv2.astype(dv2_ref.dtype)


def _compiler_params(interpret, key_dim):
    if interpret:
        return None
    from jax.experimental.pallas import triton as plgpu

    return plgpu.CompilerParams(num_warps=4 if key_dim <= 64 else 8, num_stages=2)


def _call(kernel, config, inputs, outputs, name):
    """Runs ``kernel`` over (blocks, batch, heads); inputs [B, H', total, ...] whole per head."""
    length, window, scale, block, interpret, groups = config
    g = _geometry(length, window, block)
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
    extra = dict(length=length) if kernel in key_kernels else {}
    return pl.pallas_call(
        functools.partial(kernel, g=g, scale=scale, block=block, exact=exact, **extra),
        grid=(g["blocks"], batch, heads), in_specs=in_specs, out_specs=out_specs,
        out_shape=outputs, interpret=interpret, name=name,
        compiler_params=_compiler_params(interpret, inputs[0].shape[-1]))(*inputs)


def _to_kernel_layout(x, g, length):
    """[B, N, H, d] -> [B, H, total, d], zero rows before and after the sequence."""
    x = jnp.swapaxes(x, 1, 2)
    return jnp.pad(x, ((0, 0), (0, 0), (g["pad"], g["total"] - g["pad"] - length), (0, 0)))


def _padded_rows(x, g, length):
    """[B, H, N(, d)] -> [B, H, total(, d)]."""
    pads = [(0, 0), (0, 0), (g["pad"], g["total"] - g["pad"] - length)]
    return jnp.pad(x, pads + [(0, 0)] * (x.ndim - 3))


def _prepare(config, q, k1, k2, v1, v2, valid):
    length, window, _, block, _, _ = config
    g = _geometry(length, window, block)
    valid = jnp.pad(valid.astype(jnp.int32), ((0, 0), (g["pad"], g["total"] - g["pad"] - length)))
    return g, [_to_kernel_layout(x, g, length) for x in (q, k1, k2, v1, v2)] + [valid]


def _forward(config, q, k1, k2, v1, v2, valid):
    length = config[0]
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
    length, groups = config[0], config[5]
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


def simplicial_attention(q, k1, k2, v1, v2, valid, *, window, scale, block=64,
                         interpret=False):
    """Causal sliding-window 2-simplicial attention with trilinear logits, fused.

    Args:
        q: queries ``[B, N, H, dk]``.
        k1, k2: first and second keys ``[B, N, Hkv, dk]`` (``Hkv`` divides ``H``; query head
            ``h`` uses key/value head ``h // (H // Hkv)``).
        v1, v2: first and second values ``[B, N, Hkv, dv]``.
        valid: ``[B, N]`` booleans; a False position is never part of a pair.
        window: ``(w1, w2)``, cut to N.
        scale: multiplies the logits.
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
    dtypes = {x.dtype for x in (q, k1, k2, v1, v2)}
    if len(dtypes) != 1:
        raise ValueError(f"q, k1, k2, v1, v2 must share one dtype, received "
                         f"{sorted(map(str, dtypes))}.")
    config = (q.shape[1], tuple(int(w) for w in window), float(scale), int(block),
              bool(interpret), heads // kv_heads)
    return _attention(config, q, k1, k2, v1, v2, valid)


def flops(batch, length, heads, key_dim, value_dim, window):
    """Multiply-adds x 2 of the forward pass over the allowed pairs (Roy et al.'s count)."""
    w1, w2 = (min(w, length) for w in window)
    return 2.0 * batch * heads * length * w1 * w2 * (key_dim + value_dim)
