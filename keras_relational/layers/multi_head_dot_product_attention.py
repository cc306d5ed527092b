"""Relational multi-head dot-product attention (MHDPA) of Zambaldi et al. (2019)."""

import keras
import numpy as np
from keras import ops

from keras_relational import validation
from keras_relational.layers import _utils

# Backends whose ``ops.dot_product_attention`` is tested to compute this layer (the same float32
# logits and softmax, a masked row's logits replaced by one large negative value).
_DOT_PRODUCT_ATTENTION_BACKENDS = ("jax", "tensorflow")
# cuDNN flash attention's head dims (jax.nn.dot_product_attention, Hopper: up to 256).
_FLASH_MAX_HEAD_DIM = 256


def layer_norm(x, norm, gain_scale=None):
    """``norm`` (a built ``keras.layers.LayerNormalization`` over the last axis) applied to ``x``.

    The same equation and variables as ``norm(x)``: ``(x - mean) / sqrt(var + epsilon) * gamma +
    beta`` over the last axis, computed in at least float32. The backward pass is written out as
    one formula instead of the autodiff of the moments: fewer ops, which matters on CPU without
    XLA (``benchmarks/relational_speed.py``), and exact second derivatives too (TF's
    ``tf.nn.moments``, used by ``keras.layers.LayerNormalization``, stops the gradient through
    the mean inside the variance, which drops terms of the second derivative).
    ``gain_scale`` (broadcastable to gamma) multiplies gamma and beta, i.e. the output; the
    attention uses it to fold its logit scale into the queries' LayerNorm.
    The moments are taken of each row divided by its largest magnitude (when above 1), so the
    output and its gradient are finite and correct for every finite float32 input, where
    ``keras.layers.LayerNormalization`` returns ``beta`` from about ``|x| = 1.8e19`` (its
    variance overflows) and NaN near ``3.4e38``.
    """
    dtype = x.dtype
    compute_dtype = "float32" if _utils.is_half(dtype) else dtype
    gamma, beta = ops.cast(norm.gamma, compute_dtype), ops.cast(norm.beta, compute_dtype)
    if gain_scale is not None:
        gain_scale = ops.cast(gain_scale, compute_dtype)
        gamma, beta = gamma * gain_scale, beta * gain_scale
    outputs = _layer_norm_last_axis(ops.cast(x, compute_dtype), gamma, beta, norm.epsilon)
    return ops.cast(outputs, dtype)


def _layer_norm_last_axis(x, gamma, beta, epsilon):
    def normalise(x):
        # The moments of x / s, s = max(max|x|, 1) per row: the same x_hat, but no sum or square
        # overflows for any finite x (x^2 overflows float32 past |x| ~ 1.8e19, where the plain
        # form returns beta for every row: rsqrt(inf) = 0). Rows within [-1, 1] are untouched.
        row_scale = ops.maximum(ops.max(ops.abs(x), axis=-1, keepdims=True),
                                ops.cast(1.0, x.dtype))
        x = x / row_scale
        centred = x - ops.mean(x, axis=-1, keepdims=True)
        variance = ops.mean(ops.square(centred), axis=-1, keepdims=True)
        inverse_std = ops.rsqrt(variance + epsilon / ops.square(row_scale))
        # 1 / std of the unscaled row, for the backward pass.
        return centred * inverse_std, inverse_std / row_scale

    @ops.custom_gradient
    def forward(x, gamma, beta):
        normalised, inverse_std = normalise(x)

        def grad(*args, upstream=None):
            if upstream is None:  # TF passes the upstream gradient positionally
                (upstream,) = args
            # d/dx of LN: (g - mean(g) - x_hat * mean(g * x_hat)) / std, with g = dy * gamma.
            scaled = upstream * gamma
            d_x = inverse_std * (
                scaled
                - ops.mean(scaled, axis=-1, keepdims=True)
                - normalised * ops.mean(scaled * normalised, axis=-1, keepdims=True)
            )
            rows = tuple(range(len(x.shape) - 1))
            return d_x, ops.sum(upstream * normalised, axis=rows), ops.sum(upstream, axis=rows)

        return normalised * gamma + beta, grad

    return forward(x, gamma, beta)


@keras.saving.register_keras_serializable(package="keras_relational")
class MultiHeadDotProductAttention(keras.layers.Layer):
    """Multi-head dot-product attention over a set of entities, with layer-normalised q, k, v.

    Every entity ``e_i`` is projected to per-head queries, keys and values, which are
    layer-normalised (Zambaldi et al. 2019, Sec. 2, "Relational module"); each entity then
    attends to every entity, itself included:

    ``w_ij^h = softmax_j(q_i^h . k_j^h / sqrt(d))``, ``a_i^h = sum_j w_ij^h v_j^h``,
    ``a_i = concat_h a_i^h``.

    Unlike ``keras.layers.MultiHeadAttention`` the projections are layer-normalised and there is no
    output projection by default (the relational block's MLP follows instead); set ``output_dim``
    to add one.

    Shapes: entities ``[B, N, F]`` -> ``[B, N, H * value_dim]`` (or ``[B, N, output_dim]``);
    attention scores ``[B, H, N, N]`` (row ``i`` = entity ``i``'s weights over all ``j``).

    Fast path: ``flash_attention=None`` (default) computes the attention with
    ``keras.ops.dot_product_attention`` (cuDNN flash attention) under JAX on a GPU when the
    compute dtype is float16 or bfloat16, ``key_dim == value_dim`` is a multiple of 8 up to 256,
    and neither ``return_attention_scores`` nor a mask over an odd number of entities (cuDNN's
    masked backward pass needs an even count) is asked for; everywhere else, float32 included
    (where cuDNN has no flash kernel and Keras' fallback is this layer's own arithmetic), the
    layer's matmul form. Both compute the same function: float32 logits and softmax (also
    under 16-bit policies), weights rounded to the compute dtype before they multiply the
    values, masked logits replaced by one large negative value, so a fully masked row attends
    uniformly to every entity in both. Only the order of the sums differs: in float32 they
    agree to rounding (outputs and gradients), under bfloat16 within a few bfloat16 eps of the
    float32 layer (``tests/layers/test_multi_head_dot_product_attention.py``, on the CPU,
    i.e. Keras' XLA form under JAX). cuDNN's form (an online softmax, a masked logit plus
    ``-0.7 * finfo(dtype).max`` as a bias) is not yet compared on a GPU: the accelerator lane's
    ``test_mhdpa_flash_path_on_gpu_is_as_accurate_as_the_einsum_path`` does. Under TensorFlow,
    ``keras.ops.dot_product_attention`` computes logits and softmax in the compute dtype, so in
    bfloat16 it is several times further from the float32 layer than the matmul form (that test,
    run on the CPU under TensorFlow), which is why the default never takes it there.
    ``benchmarks/accelerator.py`` times the two paths (its two
    ``MultiHeadDotProductAttention[N=196]`` rows).
    ``flash_attention=True`` always takes ``keras.ops.dot_product_attention`` (JAX or
    TensorFlow backend; Keras picks cuDNN flash where it can, else its XLA form) and is an
    error where it cannot: ``return_attention_scores=True`` (it never forms the weights),
    ``key_dim != value_dim`` or another backend. ``False`` always takes the matmul form.

    Input range: the logits, the softmax and the q/k/v LayerNorms (their moments taken of
    rescaled rows) run in float32, but the projection is a matmul in the compute dtype: under
    ``mixed_float16`` entities beyond float16's largest value (65504) are infinite once cast;
    with ``qkv_norm="none"`` the logits grow as the square of the input scale. Measured ranges:
    ``benchmarks/results/extreme_inputs.md``.

    Args:
        num_heads: H, number of attention heads (Zambaldi et al.: 2 to 4 on Box-World).
        key_dim: d, size of each head's query and key (Zambaldi et al.: 64).
        value_dim: size of each head's value; defaults to ``key_dim``.
        qkv_norm: how the projections are layer-normalised. ``"joint"`` (default): one LayerNorm
            over the concatenated ``[q_1..q_H, k_1..k_H, v_1..v_H]`` of each entity, as in
            DeepMind's contemporaneous relational-memory code by the same authors (the paper only
            says q, k and v are normalised); ``"separate"``: one LayerNorm each for q, k and v;
            ``"none"``: plain projections (Clift et al. normalise the input instead).
        use_bias: whether the q/k/v projection has a bias (redundant before a LayerNorm, harmless).
        output_dim: if set, a final linear projection of the concatenated heads to this width.
        attention_scale: ``"key_dim"`` (default, the paper's ``1/sqrt(d)``), ``"rmc"``
            (``(2 * key_dim + value_dim) ** -0.5``, DeepMind's RMC code) or None (no scaling).
        layer_norm_epsilon: LayerNorm epsilon (not stated in the paper; 1e-6, our choice).
        kernel_initializer: initializer of the projection kernels (each gets its own clone).
        bias_initializer: initializer of the projection biases.
        flash_attention: None (default): ``keras.ops.dot_product_attention`` where it may be
            faster (cuDNN flash under JAX on a GPU, see "Fast path" above), else the matmul
            form; True: always ``keras.ops.dot_product_attention``, an error where it cannot
            compute this layer; False: always the matmul form (the layer before issue 45).
        **kwargs: standard ``keras.layers.Layer`` arguments.

    Call arguments:
        entities: ``[B, N, F]``.
        mask: optional boolean ``[B, N]`` Keras mask; False entities are never attended to (their
            own output rows are still computed). Propagated to the output.
        attention_mask: optional boolean mask ``[N, N]``, ``[1, N, N]`` or ``[B, N, N]``;
            ``[i, j]`` True means entity ``i`` may attend to entity ``j`` (as in
            ``keras.layers.MultiHeadAttention``). Integer masks (1 attend, 0 not) are accepted;
            float masks are refused with a ValueError, since an additive mask (0 attend,
            ``-1e9`` blocked) would mean its opposite: pass ``additive_mask == 0`` instead.
        return_attention_scores: if True, also return the attention weights ``[B, H, N, N]``.

    Returns:
        The attended entities, and the attention weights when requested.

    Example:

    >>> entities = np.random.rand(2, 49, 26).astype("float32")
    >>> mhdpa = keras_relational.MultiHeadDotProductAttention(num_heads=2, key_dim=64)
    >>> outputs, scores = mhdpa(entities, return_attention_scores=True)
    >>> tuple(outputs.shape), tuple(scores.shape)
    ((2, 49, 128), (2, 2, 49, 49))

    Reference: Zambaldi et al., "Deep reinforcement learning with relational inductive biases",
    ICLR 2019, Sec. 2 ("Relational module").
    """

    def __init__(
        self,
        num_heads,
        key_dim,
        value_dim=None,
        qkv_norm="joint",
        use_bias=True,
        output_dim=None,
        attention_scale="key_dim",
        layer_norm_epsilon=1e-6,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        flash_attention=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        name = type(self).__name__
        validation.check_attention_arguments(name, num_heads, key_dim, value_dim, qkv_norm,
                                             attention_scale)
        validation.check_positive_int(name, "output_dim", output_dim, allow_none=True)
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.value_dim = value_dim
        self.qkv_norm = qkv_norm
        self.use_bias = use_bias
        self.output_dim = output_dim
        self.attention_scale = attention_scale
        if flash_attention is not None and not isinstance(flash_attention, bool):
            raise ValueError(f"{name} expects `flash_attention` to be None, True or False, "
                             f"received flash_attention={flash_attention!r}.")
        self.flash_attention = flash_attention
        validation.check_layer_norm_epsilon(name, layer_norm_epsilon)
        self.layer_norm_epsilon = layer_norm_epsilon
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.supports_masking = True

    @property
    def _value_dim(self):
        return self.key_dim if self.value_dim is None else self.value_dim

    @property
    def _split_sizes(self):
        """Widths of the q, k and v thirds of the joint projection."""
        key_width = self.num_heads * self.key_dim
        return key_width, key_width, self.num_heads * self._value_dim

    def _scale(self):
        if self.attention_scale == "key_dim":
            return self.key_dim**-0.5
        if self.attention_scale == "rmc":
            return (2 * self.key_dim + self._value_dim) ** -0.5
        return 1.0

    def _layer_norm(self, name):
        return keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name=name
        )

    def build(self, entities_shape, mask_shape=None, attention_mask_shape=None):
        validation.check_rank(self, "entities", entities_shape, 3, "[batch, entities, features]")
        features = validation.check_known_dim(self, "entities", entities_shape, -1, "feature width")
        self._features = features
        q_width, k_width, v_width = self._split_sizes
        projected_shape = (entities_shape[0], entities_shape[1], q_width + k_width + v_width)
        # Column layout [q | k | v], heads contiguous inside each third.
        self._qkv_projection = keras.layers.Dense(
            q_width + k_width + v_width,
            use_bias=self.use_bias,
            kernel_initializer=_utils.clone_initializer(self.kernel_initializer),
            bias_initializer=_utils.clone_initializer(self.bias_initializer),
            dtype=self.dtype_policy,
            name="qkv_projection",
        )
        self._qkv_projection.build((None, None, features))
        self._qkv_layer_norms = []
        if self.qkv_norm == "joint":
            norm = self._layer_norm("qkv_layer_norm")
            norm.build(projected_shape)
            self._qkv_layer_norms = [norm]
        elif self.qkv_norm == "separate":
            for part, width in zip("qkv", self._split_sizes, strict=True):
                norm = self._layer_norm(f"{part}_layer_norm")
                norm.build((None, None, width))
                self._qkv_layer_norms.append(norm)
        self._output_projection = None
        if self.output_dim is not None:
            self._output_projection = keras.layers.Dense(
                self.output_dim,
                kernel_initializer=_utils.clone_initializer(self.kernel_initializer),
                bias_initializer=_utils.clone_initializer(self.bias_initializer),
                dtype=self.dtype_policy,
                name="output_projection",
            )
            self._output_projection.build((None, None, self.num_heads * self._value_dim))
        self.built = True

    def _project(self, entities, heads_first=True):
        """``[B, N, F]`` -> heads-first q, k ``[B, H, N, d]`` (q scaled) and v ``[B, H, N, dv]``;
        with ``heads_first=False`` in ``keras.ops.dot_product_attention``'s ``[B, N, H, d]``.

        The projection and LayerNorms run on ``[B * N, .]`` rows: plain 2-D matmuls, and a
        faster XLA step (the LayerNorm's parameter gradients are then reduced over one axis).
        """
        shape = ops.shape(entities)
        rows = ops.reshape(entities, (-1, entities.shape[-1]))
        qkv = self._qkv_projection(rows)
        q_width, k_width, _ = self._split_sizes
        scale = self._scale()
        if self.qkv_norm == "joint":
            gain_scale = None
            if scale != 1.0:  # the logit scale, folded into the LayerNorm of the q columns
                gain_scale = np.ones(sum(self._split_sizes), "float32")
                gain_scale[:q_width] = scale
            qkv = layer_norm(qkv, self._qkv_layer_norms[0], gain_scale)
            scale = 1.0
        q, k, v = ops.split(qkv, [q_width, q_width + k_width], axis=-1)
        if self.qkv_norm == "separate":
            q_norm, k_norm, v_norm = self._qkv_layer_norms
            q = layer_norm(q, q_norm, None if scale == 1.0 else scale)
            k, v = layer_norm(k, k_norm), layer_norm(v, v_norm)
            scale = 1.0
        if scale != 1.0:  # qkv_norm="none": scale the queries, smaller than the [N, N] logits
            q = q * ops.cast(scale, q.dtype)
        heads = tuple(ops.reshape(x, (shape[0], shape[1], self.num_heads, width))
                      for x, width in ((q, self.key_dim), (k, self.key_dim), (v, self._value_dim)))
        if not heads_first:
            return heads
        return tuple(ops.transpose(x, (0, 2, 1, 3)) for x in heads)

    def _compute_attention(self, q, k, v, allowed):
        """Softmax attention on heads-first tensors; q is already scaled.

        ``allowed`` is None or boolean broadcastable to ``[B, H, N, N]``. Returns the attended
        values ``[B, H, N, dv]`` and the weights ``[B, H, N, N]``.
        """
        # Heads-first batched matmuls: on CPU about 30% faster than the equivalent einsums
        # (benchmarks/relational_speed.py), same result.
        # Under a 16-bit policy the logits and the softmax are float32: a float16 logit
        # overflows past 65504, and a masked logit must stay finite (a fully masked row then
        # gets uniform weights, not NaN).
        q, k = _utils.at_least_float32(q), _utils.at_least_float32(k)
        logits = ops.matmul(q, ops.transpose(k, (0, 1, 3, 2)))
        if allowed is not None:
            logits = ops.where(allowed, logits, _utils.large_negative(logits.dtype))
        weights = ops.cast(ops.softmax(logits, axis=-1), v.dtype)
        return ops.matmul(weights, v), weights

    def _dot_product_attention_unsupported(self, return_attention_scores):
        """None if ``keras.ops.dot_product_attention`` computes this call, else why not."""
        backend = keras.backend.backend()
        if backend not in _DOT_PRODUCT_ATTENTION_BACKENDS:
            return (f"the Keras backend is {backend!r} (tested: "
                    f"{', '.join(_DOT_PRODUCT_ATTENTION_BACKENDS)})")
        if return_attention_scores:
            return "return_attention_scores=True (it never forms the attention weights)"
        if self.key_dim != self._value_dim:
            return (f"key_dim={self.key_dim} != value_dim={self._value_dim} (it takes one head "
                    f"width for queries, keys and values)")
        return None

    def _flash_may_be_faster(self, entities, masked):
        """Whether Keras would take cuDNN flash attention for this call (JAX on a GPU only)."""
        if keras.backend.backend() != "jax":
            return False
        import jax

        if jax.default_backend() != "gpu":
            return False
        if not _utils.is_half(self.compute_dtype):  # cuDNN flash has 16-bit kernels only
            return False
        if self.key_dim % 8 or self.key_dim > _FLASH_MAX_HEAD_DIM:
            return False
        count = entities.shape[1]
        # cuDNN's backward pass with a mask (a bias to it) needs an even number of entities.
        return not (masked and (count is None or count % 2))

    def _uses_dot_product_attention(self, entities, masked, return_attention_scores):
        if self.flash_attention is False:
            return False
        if self.flash_attention is None:
            return (self._flash_may_be_faster(entities, masked)
                    and self._dot_product_attention_unsupported(return_attention_scores) is None)
        reason = self._dot_product_attention_unsupported(return_attention_scores)
        if reason is not None:
            raise ValueError(f"{type(self).__name__} cannot compute its attention with "
                             f"keras.ops.dot_product_attention (flash_attention=True): "
                             f"{reason}. Pass flash_attention=None (it where it may be faster) "
                             f"or False (the matmul form).")
        return True

    def _check_call_arguments(self, entities, mask, attention_mask):
        """The feature width it was built for, the masks' dtypes and shapes (also symbolic)."""
        _utils.check_feature_width(self, "entities", entities.shape,
                                   getattr(self, "_features", None))
        _utils.check_masks(self, entities.shape, mask, attention_mask)

    def call(self, entities, mask=None, attention_mask=None, return_attention_scores=False):
        self._check_call_arguments(entities, mask, attention_mask)
        allowed = _utils.entity_mask_to_attention_mask(mask, attention_mask)
        if self._uses_dot_product_attention(entities, allowed is not None,
                                            return_attention_scores):
            q, k, v = self._project(entities, heads_first=False)
            # The logit scale is already folded into q (scale=1). Keras' form under JAX: float32
            # logits and softmax, a masked logit replaced by -0.7 * finfo.max, weights cast to
            # v's dtype before the product with v, as _compute_attention. Under TensorFlow the
            # logits and softmax are in the compute dtype (see the class docstring).
            outputs = ops.dot_product_attention(q, k, v, mask=allowed, scale=1.0)  # [B,N,H,dv]
        else:
            q, k, v = self._project(entities)
            attended, weights = self._compute_attention(q, k, v, allowed)
            outputs = ops.transpose(attended, (0, 2, 1, 3))  # [B, N, H, dv]: heads side by side
        shape = ops.shape(entities)
        width = self.num_heads * self._value_dim
        if self._output_projection is not None:
            outputs = self._output_projection(ops.reshape(outputs, (-1, width)))
            width = self.output_dim
        outputs = ops.reshape(outputs, (shape[0], shape[1], width))
        if return_attention_scores:
            return outputs, weights
        return outputs

    def compute_mask(self, entities, mask=None, attention_mask=None,
                     return_attention_scores=False):
        if return_attention_scores:
            return [mask, None]
        return mask

    def compute_output_shape(self, entities_shape, return_attention_scores=False):
        batch, count = entities_shape[0], entities_shape[1]
        outputs = (batch, count, self.output_dim or self.num_heads * self._value_dim)
        if return_attention_scores:
            return outputs, (batch, self.num_heads, count, count)
        return outputs

    def compute_output_spec(self, entities, mask=None, attention_mask=None,
                            return_attention_scores=False):
        self._check_call_arguments(entities, mask, attention_mask)
        return _utils.output_spec(
            self.compute_output_shape(entities.shape, return_attention_scores), self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "key_dim": self.key_dim,
                "value_dim": self.value_dim,
                "qkv_norm": self.qkv_norm,
                "use_bias": self.use_bias,
                "output_dim": self.output_dim,
                "attention_scale": self.attention_scale,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
                "flash_attention": self.flash_attention,
            }
        )
        return config
