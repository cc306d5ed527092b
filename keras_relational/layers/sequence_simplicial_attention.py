"""Causal, sliding-window 2-simplicial attention over sequences (Roy et al. 2025, Secs. 4 and 6)."""

import logging
import math

import keras
import numpy as np
from keras import ops

from keras_relational import validation
from keras_relational.layers import _utils
from keras_relational.layers.simplicial_scores import joint_pair_softmax, triple_product_logits

_LOGIT_FORMS = ("trilinear", "triple_product")
_SIXTEEN_BIT = ("float16", "bfloat16")
# Rows per program of the fused kernel: 64 on a GPU; 16 in Pallas' interpreter (tests).
_KERNEL_BLOCK, _INTERPRETED_BLOCK = 64, 16
_LOGGER = logging.getLogger(__name__)


@keras.saving.register_keras_serializable(package="keras_relational")
class SequenceSimplicialAttention(keras.layers.Layer):
    """2-simplicial attention over a sequence: each position attends to pairs of nearby positions.

    Every position ``x_i`` is projected (no bias by default) to a query ``q_i`` (per query head),
    two keys ``k1_i``, ``k2_i`` (width ``key_dim``) and two values ``v1_i``, ``v2_i`` (width
    ``value_dim``), the keys and values per key/value head. Query ``i`` scores the pair of
    positions ``(j, k)`` with one of two logits:

    * ``"trilinear"`` (default; Roy et al. 2025, Sec. 4):
      ``L[i, j, k] = logit_scale * sum_d q_i[d] k1_j[d] k2_k[d]``, ``logit_scale`` defaulting
      to ``1 / sqrt(key_dim)`` as in Roy et al.;
    * ``"triple_product"`` (Clift et al. 2020, eqs. 7-8): the unsigned scalar triple product
      ``L[i, j, k] = logit_scale * <q_i, k1_j, k2_k>`` of :class:`SimplicialAttention`,
      computed by the same function (:func:`triple_product_logits`, with ``sqrt_epsilon``),
      ``logit_scale`` defaulting to 1 (Clift et al. use none).

    The weights are a softmax over all allowed pairs jointly and the message of a pair is the
    elementwise product of its two values (Roy et al. 2025, Sec. 4)::

        A[i] = softmax_{(j, k) in W(i)} L[i]
        out_i = W_O concat_heads( sum_{(j, k) in W(i)} A[i, j, k] (v1_j * v2_k) )

    Windows ``W(i) = W1(i) x W2(i)``, with ``window=(w1, w2)``:

    * ``causal=True`` (default): ``W1(i) = {j : i - w1 < j <= i}``, the ``w1`` positions up to
      and including ``i`` itself, and ``W2(i) = {k : i - w2 < k <= i}`` (Roy et al.'s
      two-dimensional sliding window); no output depends on a later position.
    * ``causal=False``: windows centred on ``i``, ``i - (w - 1) // 2 <= j <= i + w // 2``.
    * ``window=None``: the whole sequence (``w = N``, causal or not), ``O(N^3)``: for small N.

    Positions outside ``[0, N)`` and positions masked out by the padding mask are never part of a
    pair. Query head ``h`` uses key/value head ``h // (num_heads // num_key_value_heads)``
    (grouped keys and values; Roy et al. share one key/value head among many query heads).

    Cost: ``O(N w1 w2 (key_dim + value_dim))`` time per head and memory linear in N: the
    windows are gathered (``[B, C, w, ...]``) for chunks of ``C = query_chunk_size`` queries at a
    time, looped over with ``keras.ops.map`` (a ``lax.map`` / ``tf.map_fn`` loop, one chunk
    live at a time in the forward pass; the backward pass keeps each chunk's pair weights,
    ``O(N H w1 w2)``). With a window no tensor grows faster than N; ``window=None`` forms
    ``[C, N, N]`` logits per chunk, never ``[N, N, N]``.
    A window longer than the sequence is cut to it (exactly the same outputs). Under a 16-bit
    dtype policy the logits and the softmax are computed in float32.

    Fused kernel: under JAX on a GPU the layer computes the attention with a fused Pallas
    (Triton) kernel instead, as Keras' ``ops.dot_product_attention`` takes cuDNN flash
    attention: flash-style (the softmax's running maximum and sum over the window's pairs kept
    in float32, the pair weights never stored: memory ``O(N d)`` in the forward and the backward
    pass), products in the input dtype with float32 accumulation. It takes causal windows
    (or ``window=None``), either logit form, float32, bfloat16 or float16, and ``key_dim`` and
    ``value_dim`` powers of two from 16 to 256, without ``return_attention_scores``; any other
    call runs the ``keras.ops`` form, with one logged line on a GPU. Its triple product is the
    same normalised form (cosines of unit vectors formed in float32, then rounded to the input
    dtype for its two products with the first keys: a tile costs about
    ``(2 key_dim + value_dim) / (key_dim + value_dim)`` times a trilinear one); in float32 it
    equals the ``keras.ops`` form to rounding, outputs and gradients; with 16-bit inputs its
    error (rounded cosines, then a square root and three norms) grows with the size of the
    logits (``tests/layers/test_pallas_simplicial.py`` bounds both forms' at one size).
    ``flash_attention=True`` forces the kernel (off a GPU, in Pallas' interpreter: slow, for
    tests) and is an error where it cannot run; ``False`` forces the ``keras.ops`` form. Its
    speed with trilinear logits against the ``keras.ops`` form, Keras' flash attention and
    lucidrains' Triton kernel is measured by ``benchmarks/simplicial_kernel_speed.py`` (the
    ``simplicial_kernel`` part of a GPU session).

    Masking: a False position of the Keras ``mask`` ``[B, N]`` is never part of a scored pair and
    its own output row is 0.

    Shapes: ``[B, N, F] -> [B, N, output_dim]`` (``output_dim`` defaults to ``F``). The sequence
    length N must be known when the layer is traced.

    Args:
        num_heads: H, the number of query heads.
        key_dim: width of the queries and keys per head.
        value_dim: width of the values per head; defaults to ``key_dim``.
        num_key_value_heads: the number of key/value heads; must divide ``num_heads``.
            Defaults to ``num_heads`` (one key/value head per query head).
        window: ``(w1, w2)``, the window lengths of the first and the second key, or None (the
            whole sequence). Default ``(512, 32)``, Roy et al. 2025's (Sec. 6).
        causal: causal windows (default) or centred ones, see above.
        logit_form: ``"trilinear"`` or ``"triple_product"``, see above.
        logit_scale: multiplies the logits; None means ``1 / sqrt(key_dim)`` for
            ``"trilinear"`` and 1 for ``"triple_product"``.
        sqrt_epsilon: relative epsilon of the triple product's square root (see
            :func:`triple_product_logits`); unused by ``"trilinear"``.
        output_dim: width of the output projection ``W_O``; defaults to the input width F.
        query_chunk_size: C, the number of queries whose windows are formed at once; None forms
            them for the whole sequence at once. The peak memory of the forward pass grows with
            C, its speed too (up to a point). Unused by the fused kernel.
        flash_attention: None (default): the fused kernel under JAX on a GPU where it can run,
            else the ``keras.ops`` form; True: the kernel, an error where it cannot run; False:
            the ``keras.ops`` form. See "Fused kernel" above.
        use_bias: add biases to the projections. Default False (as Roy et al.'s LLaMA-style
            models).
        kernel_initializer: initializer of the projection kernels (each its own clone).
        bias_initializer: initializer of the projection biases.
        **kwargs: standard ``keras.layers.Layer`` arguments.

    Call arguments:
        inputs: ``[B, N, F]``.
        mask: optional boolean Keras mask ``[B, N]`` (propagated to the output); integer masks
            (1 position, 0 padding) are accepted, float masks refused with a ValueError.
        return_attention_scores: if True, also return the pair weights ``[B, H, N, w1, w2]``:
            ``[b, h, i, s, t]`` is query ``i``'s weight on the pair ``(j, k) = (i - a1 + s,
            i - a2 + t)``, where ``a = w - 1`` (causal) or ``(w - 1) // 2`` (centred), with the
            windows cut to the sequence.

    Returns:
        ``[B, N, output_dim]``, and the pair weights when requested.

    Example:

    >>> x = np.random.rand(2, 64, 32).astype("float32")
    >>> attention = keras_relational.SequenceSimplicialAttention(
    ...     num_heads=4, key_dim=8, num_key_value_heads=1, window=(16, 8), query_chunk_size=32)
    >>> outputs, weights = attention(x, return_attention_scores=True)
    >>> tuple(outputs.shape), tuple(weights.shape)
    ((2, 64, 32), (2, 4, 64, 16, 8))

    References: Roy, Chou, Duvvuri, Chen, Yu, Wang, Zaheer and Anil, "Fast and Simplex:
    2-Simplicial Attention in Triton", 2025, Sec. 4 (trilinear attention) and Sec. 6 (sliding
    windows, grouped key/value heads); Clift, Doryn, Murfet and Wallbridge, "Logic and the
    2-Simplicial Transformer", ICLR 2020, Sec. 2 (eqs. 7-10).
    """

    def __init__(
        self,
        num_heads,
        key_dim,
        value_dim=None,
        num_key_value_heads=None,
        window=(512, 32),  # Roy et al. 2025, Sec. 6
        causal=True,
        logit_form="trilinear",  # Roy et al. 2025, Sec. 4
        logit_scale=None,
        sqrt_epsilon=1e-12,  # as SimplicialAttention
        output_dim=None,
        query_chunk_size=256,
        flash_attention=None,
        use_bias=False,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        name = type(self).__name__
        validation.check_positive_int(name, "num_heads", num_heads)
        validation.check_positive_int(name, "key_dim", key_dim)
        validation.check_positive_int(name, "value_dim", value_dim, allow_none=True)
        if num_key_value_heads is not None:
            validation.check_divides(name, "num_key_value_heads", num_key_value_heads,
                                     "num_heads", num_heads)
        validation.check_window(name, window)
        validation.check_choice(name, "causal", causal, (True, False))
        validation.check_choice(name, "logit_form", logit_form, _LOGIT_FORMS)
        validation.check_logit_arguments(name, 1.0 if logit_scale is None else logit_scale,
                                         sqrt_epsilon)
        validation.check_positive_int(name, "output_dim", output_dim, allow_none=True)
        validation.check_positive_int(name, "query_chunk_size", query_chunk_size,
                                      allow_none=True)
        if flash_attention is not None and not isinstance(flash_attention, bool):
            raise ValueError(f"{name} expects `flash_attention` to be None, True or False, "
                             f"received flash_attention={flash_attention!r}.")
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.value_dim = value_dim
        self.num_key_value_heads = num_key_value_heads
        self.window = None if window is None else tuple(window)
        self.causal = causal
        self.logit_form = logit_form
        self.logit_scale = logit_scale
        self.sqrt_epsilon = sqrt_epsilon
        self.output_dim = output_dim
        self.query_chunk_size = query_chunk_size
        self.flash_attention = flash_attention
        self.use_bias = use_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.supports_masking = True

    @property
    def _value_dim(self):
        return self.key_dim if self.value_dim is None else self.value_dim

    @property
    def _kv_heads(self):
        return self.num_heads if self.num_key_value_heads is None else self.num_key_value_heads

    @property
    def _scale(self):
        if self.logit_scale is not None:
            return float(self.logit_scale)
        return 1.0 / math.sqrt(self.key_dim) if self.logit_form == "trilinear" else 1.0

    def window_extents(self, length):
        """``((a1, b1), (a2, b2))``: key ``s`` of query ``i`` spans ``[i - a_s, i + b_s]``.

        The windows cut to a sequence of ``length`` positions (offsets that never land inside
        it are dropped); the pair weights have shape ``[..., a1 + b1 + 1, a2 + b2 + 1]``.
        """
        extents = []
        for w in ((None, None) if self.window is None else self.window):
            if w is None:
                before, after = length - 1, (0 if self.causal else length - 1)
            elif self.causal:
                before, after = w - 1, 0
            else:
                before, after = (w - 1) // 2, w // 2
            extents.append((min(before, length - 1), min(after, length - 1)))
        return tuple(extents)

    def build(self, inputs_shape, mask_shape=None):
        validation.check_rank(self, "inputs", inputs_shape, 3, "[batch, sequence, features]")
        features = validation.check_known_dim(self, "inputs", inputs_shape, -1, "feature width")
        self._features = features
        heads, kv_heads, dk, dv = self.num_heads, self._kv_heads, self.key_dim, self._value_dim
        output_dim = self.output_dim or features
        shapes = {"query": (features, heads * dk), "key": (features, 2 * kv_heads * dk),
                  "value": (features, 2 * kv_heads * dv), "output": (heads * dv, output_dim)}
        for part, shape in shapes.items():
            setattr(self, f"{part}_kernel", self.add_weight(
                name=f"{part}_kernel", shape=shape,
                initializer=_utils.clone_initializer(self.kernel_initializer)))
            setattr(self, f"{part}_bias", None if not self.use_bias else self.add_weight(
                name=f"{part}_bias", shape=shape[-1:],
                initializer=_utils.clone_initializer(self.bias_initializer)))
        self.built = True

    def _dense(self, x, part):
        y = ops.matmul(x, getattr(self, f"{part}_kernel"))
        bias = getattr(self, f"{part}_bias")
        return y if bias is None else y + bias

    def _pair_weights(self, q, k1, k2, valid1, valid2):
        """Joint softmax over the window pairs, in float32 under 16-bit policies.

        ``q [R, Hkv, G, dk]``, ``k1 [R, Hkv, w1, dk]``, ``k2 [R, Hkv, w2, dk]``, validity
        ``[R, w1]``, ``[R, w2]`` (``R`` = batch x queries) -> ``[R, Hkv, G, w1, w2]``.
        """
        dtype = q.dtype
        if keras.backend.standardize_dtype(dtype) in _SIXTEEN_BIT:
            q, k1, k2 = (ops.cast(x, "float32") for x in (q, k1, k2))
        scale = self._scale
        if self.logit_form == "trilinear":
            # sum_d q[d] k1_j[d] k2_k[d]: the product with the (usually shorter) second window
            # first, then one contraction with the first keys (Roy et al. 2025, eq. in Sec. 4).
            q = q * ops.cast(scale, q.dtype)
            qk2 = q[:, :, :, None, :] * k2[:, :, None, :, :]  # [R, Hkv, G, w2, dk]
            logits = ops.einsum("rngtd,rnsd->rngst", qk2, k1)
        else:
            logits = triple_product_logits(q, k1, k2, self.sqrt_epsilon)  # [R, Hkv, G, w1, w2]
            if scale != 1.0:
                logits = logits * ops.cast(scale, logits.dtype)
        pair_mask = ops.logical_and(valid1[:, :, None], valid2[:, None, :])
        return ops.cast(joint_pair_softmax(logits, pair_mask), dtype)

    def _chunk(self, chunk, extents, return_weights):
        """Attention of one chunk of C queries: spans of keys/values -> ``[B, C, H dv]``."""
        q, k1, k2, v1, v2, valid1, valid2 = chunk
        batch, count = ops.shape(q)[0], q.shape[1]
        kv_heads, groups = self._kv_heads, self.num_heads // self._kv_heads
        rows = batch * count

        def windows(span, extent):
            # Query t of the chunk sees span rows t .. t + a + b (the span starts a rows before
            # the chunk's first query): a banded gather, [B, S, ...] -> [R, Hkv, w, ...].
            width = extent[0] + extent[1] + 1
            index = np.arange(count)[:, None] + np.arange(width)[None, :]
            gathered = ops.take(span, ops.convert_to_tensor(index, "int32"), axis=1)
            if len(span.shape) == 2:  # validity [B, S] -> [R, w]
                return ops.reshape(gathered, (rows, width))
            gathered = ops.reshape(gathered, (rows, width, kv_heads, span.shape[-1]))
            return ops.transpose(gathered, (0, 2, 1, 3))

        (e1, e2) = extents
        k1, v1, valid1 = (windows(x, e1) for x in (k1, v1, valid1))
        k2, v2, valid2 = (windows(x, e2) for x in (k2, v2, valid2))
        q = ops.reshape(q, (rows, kv_heads, groups, self.key_dim))
        weights = self._pair_weights(q, k1, k2, valid1, valid2)  # [R, Hkv, G, w1, w2]
        # sum_{j,k} A[j, k] v1_j * v2_k = sum_k v2_k * (sum_j A[j, k] v1_j): the longer first
        # window is contracted first.
        z = ops.einsum("rngst,rnsd->rngtd", weights, v1)
        attended = ops.einsum("rngtd,rntd->rngd", z, v2)
        attended = ops.reshape(attended, (batch, count, self.num_heads * self._value_dim))
        if not return_weights:
            return attended
        shape = ops.shape(weights)
        return attended, ops.reshape(weights, (batch, count, self.num_heads, shape[3], shape[4]))

    def _check_call_arguments(self, inputs, mask):
        _utils.check_feature_width(self, "inputs", inputs.shape, getattr(self, "_features", None),
                                   layout="[batch, sequence, features]")
        _utils.check_masks(self, inputs.shape, mask, argument="inputs")

    def _kernel_unsupported(self, dtype, return_attention_scores):
        """None if the fused kernel computes this call, else why not."""
        backend = keras.backend.backend()
        if backend != "jax":
            return f"the Keras backend is {backend!r} (the kernel is JAX Pallas)"
        if not self.causal:
            return "causal=False (the kernel has causal windows only)"
        if return_attention_scores:
            return "return_attention_scores=True (the kernel never forms the pair weights)"
        from keras_relational.layers import _pallas_simplicial  # imports JAX: only under JAX

        return _pallas_simplicial.unsupported_reason(
            keras.backend.standardize_dtype(dtype), self.key_dim, self._value_dim)

    def _kernel_settings(self, dtype, return_attention_scores):
        """None (the keras.ops form) or the fused kernel's ``block`` and ``interpret``."""
        if self.flash_attention is False:
            return None
        on_gpu = False
        if keras.backend.backend() == "jax":
            import jax

            on_gpu = jax.default_backend() == "gpu"
        if self.flash_attention is None and not on_gpu:
            return None
        reason = self._kernel_unsupported(dtype, return_attention_scores)
        if reason is None:  # off a GPU only when forced: Pallas' interpreter
            return {"block": _KERNEL_BLOCK if on_gpu else _INTERPRETED_BLOCK,
                    "interpret": not on_gpu}
        if self.flash_attention:
            raise ValueError(f"{type(self).__name__} cannot run its fused kernel "
                             f"(flash_attention=True): {reason}. Pass flash_attention=None "
                             f"(the kernel where it can run) or False (the keras.ops form).")
        if not getattr(self, "_logged_fallback", False):
            self._logged_fallback = True
            _LOGGER.warning("%s %r: the keras.ops form instead of the fused kernel: %s.",
                            type(self).__name__, self.name, reason)
        return None

    def call(self, inputs, mask=None, return_attention_scores=False):
        self._check_call_arguments(inputs, mask)
        length = inputs.shape[1]
        if length is None:
            raise ValueError(f"{type(self).__name__} needs the sequence length (axis 1) of "
                             f"`inputs` to be known when it is traced, received shape "
                             f"{tuple(inputs.shape)}.")
        batch = ops.shape(inputs)[0]
        kv_heads, dk, dv = self._kv_heads, self.key_dim, self._value_dim
        q = ops.reshape(self._dense(inputs, "query"), (batch, length, self.num_heads, dk))
        k1, k2 = (ops.reshape(k, (batch, length, kv_heads, dk))
                  for k in ops.split(self._dense(inputs, "key"), 2, axis=-1))
        v1, v2 = (ops.reshape(v, (batch, length, kv_heads, dv))
                  for v in ops.split(self._dense(inputs, "value"), 2, axis=-1))
        valid = (ops.ones((batch, length), "bool") if mask is None
                 else ops.cast(mask, "bool"))
        kernel = self._kernel_settings(q.dtype, return_attention_scores)
        if kernel is not None:
            from keras_relational.layers import _pallas_simplicial

            attended = _pallas_simplicial.simplicial_attention(
                q, k1, k2, v1, v2, valid, window=self.window or (length, length),
                scale=self._scale, logit_form=self.logit_form, sqrt_epsilon=self.sqrt_epsilon,
                **kernel)
            outputs = self._dense(
                ops.reshape(attended, (batch, length, self.num_heads * dv)), "output")
            if mask is not None:
                outputs = ops.where(valid[:, :, None], outputs, ops.zeros_like(outputs))
            return outputs
        extents = self.window_extents(length)
        size = length if self.query_chunk_size is None else min(self.query_chunk_size, length)
        chunks = -(-length // size)
        padded = chunks * size

        def spans(x, extent):
            # Zero rows (invalid) before and after the sequence, then one span of
            # size + a + b rows per chunk: [chunks, B, S, ...].
            before, after = extent
            pad = [(0, 0)] * len(x.shape)
            pad[1] = (before, padded - length + after)
            x = ops.pad(x, pad)
            if chunks == 1:
                return x[None]
            index = (size * np.arange(chunks)[:, None]
                     + np.arange(size + before + after)[None, :])
            x = ops.take(x, ops.convert_to_tensor(index, "int32"), axis=1)  # [B, chunks, S..]
            return ops.moveaxis(x, 1, 0)

        q = ops.pad(q, [(0, 0), (0, padded - length), (0, 0), (0, 0)])
        q = ops.moveaxis(ops.reshape(q, (batch, chunks, size, self.num_heads, dk)), 1, 0)
        (e1, e2) = extents
        chunk_inputs = (q, spans(k1, e1), spans(k2, e2), spans(v1, e1), spans(v2, e2),
                        spans(valid, e1), spans(valid, e2))

        def body(chunk):
            return self._chunk(chunk, extents, return_attention_scores)

        if chunks == 1:
            results = keras.tree.map_structure(lambda x: x[None], body(
                tuple(x[0] for x in chunk_inputs)))
        else:
            results = ops.map(body, chunk_inputs)

        def unchunk(x):  # [chunks, B, C, ...] -> [B, N, ...]
            x = ops.moveaxis(x, 0, 1)
            x = ops.reshape(x, (batch, padded, *x.shape[3:]))
            return x[:, :length]

        if return_attention_scores:
            attended, weights = (unchunk(x) for x in results)
            weights = ops.transpose(weights, (0, 2, 1, 3, 4))  # [B, H, N, w1, w2]
        else:
            attended = unchunk(results)
        outputs = self._dense(attended, "output")
        if mask is not None:
            outputs = ops.where(valid[:, :, None], outputs, ops.zeros_like(outputs))
        if return_attention_scores:
            return outputs, weights
        return outputs

    def compute_mask(self, inputs, mask=None, return_attention_scores=False):
        return [mask, None] if return_attention_scores else mask

    def compute_output_shape(self, inputs_shape, return_attention_scores=False):
        batch, length = inputs_shape[0], inputs_shape[1]
        outputs = (batch, length, self.output_dim or inputs_shape[-1])
        if not return_attention_scores:
            return outputs
        if length is None:
            widths = (None, None)
        else:
            widths = tuple(a + b + 1 for a, b in self.window_extents(length))
        return outputs, (batch, self.num_heads, length, *widths)

    def compute_output_spec(self, inputs, mask=None, return_attention_scores=False):
        self._check_call_arguments(inputs, mask)
        return _utils.output_spec(
            self.compute_output_shape(inputs.shape, return_attention_scores), self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "key_dim": self.key_dim,
                "value_dim": self.value_dim,
                "num_key_value_heads": self.num_key_value_heads,
                "window": None if self.window is None else list(self.window),
                "causal": self.causal,
                "logit_form": self.logit_form,
                "logit_scale": self.logit_scale,
                "sqrt_epsilon": self.sqrt_epsilon,
                "output_dim": self.output_dim,
                "query_chunk_size": self.query_chunk_size,
                "flash_attention": self.flash_attention,
                "use_bias": self.use_bias,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return config
