"""2-simplicial attention: each query attends to pairs of entities (Clift et al. 2020, Sec. 2)."""

import keras
from keras import ops

from keras_relational import validation
from keras_relational.layers import _utils
from keras_relational.layers.simplicial_scores import joint_pair_softmax, triple_product_logits

_MODES = ("virtual", "full")
DEFAULT_NUM_VIRTUAL_ENTITIES = 2  # Clift et al. 2020, Sec. 4: M = 2 in every experiment


def resolve_num_virtual_entities(num_virtual_entities, virtual=True):
    """M, the number of virtual entities: 0 without them, and None means 2 (Clift et al. Sec. 4).

    The one place of this rule for :class:`SimplicialAttention`, the Transformer block and the
    agents built from them.
    """
    if not virtual:
        return 0
    if num_virtual_entities is None:
        return DEFAULT_NUM_VIRTUAL_ENTITIES
    return num_virtual_entities


@keras.saving.register_keras_serializable(package="keras_relational")
class SimplicialAttention(keras.layers.Layer):
    """2-simplicial attention: every query entity attends jointly to pairs of entities.

    Each head projects every entity ``x_i`` (no bias by default) to a query ``p_i``, two keys
    ``l1_i``, ``l2_i`` (all of width ``key_dim``) and a value ``u_i`` (width ``value_dim``). Query
    ``i`` scores the pair ``(j, k)`` with the unsigned scalar triple product (eqs. 7, 8)::

        L[i, j, k] = <p_i, l1_j, l2_k> = ||(p_i.l1_j) l2_k - (p_i.l2_k) l1_j + (l1_j.l2_k) p_i||

    which is large when the three vectors are close to linearly dependent and 0 when they are
    pairwise orthogonal (there is no ``1/sqrt(d)``: Clift et al. use none). The weights are a
    softmax over **all pairs jointly**, ``A[i] = softmax_{(j,k)}(logit_scale * L[i])``, and the
    message of a pair is a learned bilinear map of the two values, per head (eq. 10)::

        out_i = sum_{j,k} A[i, j, k] W_B(u_j (x) u_k)
        W_B(x (x) y)[q] = sum_{r,s} W_B[q, r, s] x_r y_s

    ``j`` goes with ``l1`` and the first factor, ``k`` with ``l2`` and the second; ``W_B`` is not
    symmetric. Heads are concatenated; there is no output projection (Clift et al. concatenate the
    branch with the 1-simplicial heads and layer-normalise it, see
    :class:`SimplicialTransformerBlock`).

    Modes:

    * ``"virtual"`` (default, used in all of Clift et al.'s experiments, eqs. 13-14): the last
      ``M = num_virtual_entities`` rows of the input are virtual entities. Only the ``N``
      standard entities query, and only pairs of virtual entities are scored: ``A`` is
      ``[B, H, N, M, M]`` and the cost is ``O(N M^2 + M d^3)`` per head. The ``M^2`` messages
      ``W_B(u_j (x) u_k)`` are formed once, never per query, and ``p`` is projected for the
      standard rows only, ``l1, l2, u`` for the virtual rows only (the others are never used).
      The output rows of the virtual entities are their own values ``u_i`` (eq. 14, before the
      layer norm of the block).
      The softmax runs over the ``M^2`` virtual pairs only: eq. (13)'s denominator runs over all
      ``N + M`` entities, a typo that would make the weights not sum to 1 (the authors' code
      normalises over the virtual pairs).
    * ``"full"`` (eq. 10): all ``N`` entities query and all ``N^2`` pairs are scored, ``A`` is
      ``[B, H, N, N, N]``: ``O(N^3)`` time and memory, for small ``N``. The messages are
      contracted one value at a time (``O(N^3 d + N^2 d^2 + N d^3)``), never per pair.

    Numerics: the logit is computed in the normalised form of eq. (26) as
    ``||p|| ||l1|| ||l2|| sqrt(max(s, 0) + sqrt_epsilon)``, see :func:`triple_product_logits`;
    outputs and gradients are finite for zero, orthogonal and collinear vectors, and the
    relative epsilon keeps the logit exactly homogeneous in each argument. An absolute floor
    ``sqrt(max(sq, 0) + 1e-6)`` on eq. (8) would not be homogeneous and overflows earlier.
    Under a 16-bit dtype policy the logits and the softmax are computed in float32.
    Range: the logits grow as the cube of the input scale and the outputs (the bilinear message
    ``W_B(u_j (x) u_k)``) as its square, so large inputs overflow sooner than in
    :class:`MultiHeadDotProductAttention` (under ``mixed_float16`` the float16 outputs first);
    :class:`SimplicialTransformerBlock` layer-normalises its input first. Measured ranges:
    ``benchmarks/results/extreme_inputs.md``.

    Masking: a False entity in the Keras ``mask`` ``[B, T]`` is never part of a scored pair, and
    its own output row is 0. A query none of whose pairs is allowed gets uniform (finite) weights.

    Shapes (``T = N + M`` in virtual mode, ``T = N`` in full mode): ``[B, T, F] -> [B, T, H *
    value_dim]``.

    Args:
        num_heads: H. Clift et al. use one head (Sec. 4) and never test more; every head has its
            own projections and its own ``W_B`` (our extension to several heads).
        key_dim: width of ``p``, ``l1`` and ``l2`` per head (Clift et al. Sec. 4: 48).
        value_dim: width of ``u`` per head; defaults to ``key_dim`` (as in Clift et al.).
        mode: ``"virtual"`` or ``"full"``, see above.
        num_virtual_entities: M, the number of trailing virtual rows in ``"virtual"`` mode;
            None means 2 (Clift et al. Sec. 4). Must be None or 0 in ``"full"`` mode.
        logit_scale: multiplies the logits before the softmax. Default 1.0: no temperature, as in
            the paper and the authors' code.
        sqrt_epsilon: relative epsilon under the square root of the logit (see Numerics).
            Default 1e-12; 0 gives the code's plain, NaN-prone square root.
        use_bias: add a bias to the p/l1/l2/u projection. Default False (the authors' code).
        kernel_initializer: initializer of the ``[F, 3 H key_dim + H value_dim]`` projection;
            Glorot-uniform on that joint matrix as in the code (columns: all heads' ``p``, then
            ``l1``, ``l2``, ``u``).
        bilinear_initializer: initializer of ``W_B``, shape ``[H, value_dim, value_dim,
            value_dim]`` indexed ``(head, output, first factor, second factor)``. Keras's
            Glorot-uniform gives the code's limit ``sqrt(6 / (2 d^2))`` for one head (and
            ``sqrt(6 / (2 H d^2))`` for H heads, as Keras counts fans of a 4-D kernel).
        bias_initializer: initializer of the projection bias.
        **kwargs: standard ``keras.layers.Layer`` arguments.

    Call arguments:
        entities: ``[B, T, F]``; in virtual mode the last ``M`` rows are the virtual entities.
        mask: optional boolean Keras mask ``[B, T]`` (propagated to the output); integer masks
            (1 entity, 0 padding) are accepted, float masks refused with a ValueError.
        return_attention_scores: if True, also return the pair weights ``[B, H, N, M, M]``
            (virtual mode) or ``[B, H, N, N, N]`` (full mode); ``[b, h, i, j, k]`` is query ``i``'s
            weight on the pair ``(j, k)``, summing to 1 over ``(j, k)``.

    Returns:
        ``[B, T, H * value_dim]``, and the pair weights when requested.

    Example:

    >>> entities = np.random.rand(2, 40 + 2, 64).astype("float32")  # N = 40, M = 2
    >>> attention = keras_relational.SimplicialAttention(num_heads=1, key_dim=48)
    >>> outputs, weights = attention(entities, return_attention_scores=True)
    >>> tuple(outputs.shape), tuple(weights.shape)
    ((2, 42, 48), (2, 1, 40, 2, 2))

    Reference: Clift, Doryn, Murfet and Wallbridge, "Logic and the 2-Simplicial Transformer",
    ICLR 2020, Sec. 2 (eqs. 7-14) and Appendix C.
    """

    def __init__(
        self,
        num_heads,
        key_dim,
        value_dim=None,
        mode="virtual",
        num_virtual_entities=None,
        logit_scale=1.0,  # Clift et al. 2020 use no scale (paper and code)
        sqrt_epsilon=1e-12,  # not in the paper; relative, see triple_product_logits
        use_bias=False,  # Clift et al. 2020, authors' code
        kernel_initializer="glorot_uniform",  # authors' code
        bilinear_initializer="glorot_uniform",  # authors' code
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        name = type(self).__name__
        validation.check_positive_int(name, "num_heads", num_heads)
        validation.check_positive_int(name, "key_dim", key_dim)
        validation.check_positive_int(name, "value_dim", value_dim, allow_none=True)
        validation.check_choice(name, "mode", mode, _MODES)
        validation.check_num_virtual_entities(name, num_virtual_entities, mode == "virtual",
                                              unless="in mode='full'")
        validation.check_logit_arguments(name, logit_scale, sqrt_epsilon)
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.value_dim = value_dim
        self.mode = mode
        self.num_virtual_entities = num_virtual_entities
        self.logit_scale = logit_scale
        self.sqrt_epsilon = sqrt_epsilon
        self.use_bias = use_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bilinear_initializer = keras.initializers.get(bilinear_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.supports_masking = True

    @property
    def _value_dim(self):
        return self.key_dim if self.value_dim is None else self.value_dim

    @property
    def _num_virtual(self):
        """M: 0 in full mode, 2 (Clift et al. Sec. 4) when ``num_virtual_entities`` is None."""
        return resolve_num_virtual_entities(self.num_virtual_entities, self.mode == "virtual")

    def build(self, entities_shape, mask_shape=None):
        validation.check_rank(self, "entities", entities_shape, 3, "[batch, entities, features]")
        features = validation.check_known_dim(self, "entities", entities_shape, -1, "feature width")
        self._features = features
        if entities_shape[1] is not None:
            self._check_count(entities_shape)
        width = 3 * self.num_heads * self.key_dim + self.num_heads * self._value_dim
        self.kernel = self.add_weight(
            name="kernel", shape=(features, width),
            initializer=_utils.clone_initializer(self.kernel_initializer),
        )
        self.bias = None
        if self.use_bias:
            self.bias = self.add_weight(
                name="bias", shape=(width,),
                initializer=_utils.clone_initializer(self.bias_initializer),
            )
        value_dim = self._value_dim
        self.bilinear_kernel = self.add_weight(
            name="bilinear_kernel", shape=(self.num_heads, value_dim, value_dim, value_dim),
            initializer=_utils.clone_initializer(self.bilinear_initializer),
        )
        self.built = True

    def _count_error(self, received):
        if self.mode == "virtual":
            expected = (f"more than num_virtual_entities={self._num_virtual} entities (axis 1: "
                        f"N >= 1 standard entities, then the M virtual ones) in mode='virtual'")
        else:
            expected = "at least 1 entity (axis 1) in mode='full'"
        return f"{type(self).__name__} expects `entities` with {expected}, received {received}."

    def _check_count(self, entities_shape):
        if entities_shape[1] <= self._num_virtual:
            raise ValueError(self._count_error(f"shape {tuple(entities_shape)}"))

    def _check_static_arguments(self, entities, mask):
        """The feature width it was built for, the mask's dtype and shape (also symbolic)."""
        shape = tuple(entities.shape)
        _utils.check_feature_width(self, "entities", shape, getattr(self, "_features", None))
        _utils.check_masks(self, shape, mask)
        if shape[1] is not None:
            self._check_count(shape)

    def _check_call_arguments(self, entities, mask):
        """The entity count and the mask, when the layer is called (traced)."""
        self._check_static_arguments(entities, mask)
        if entities.shape[1] is not None:
            return entities
        # A dynamic entity count: checked when the graph runs, before N = T - M queries would
        # silently be zero or negative.
        return _utils.assert_axis_greater(entities, 1, self._num_virtual,
                                          self._count_error("a dynamic entity count"))

    def _project(self, entities, first=0, last=None):
        """Columns ``[first:last]`` of the (p, l1, l2, u) projection of ``entities``."""
        projected = ops.matmul(entities, self.kernel[:, first:last])
        if self.bias is not None:
            projected = projected + self.bias[first:last]
        return projected

    def _heads(self, x, width):
        """``[B, T, H * width]`` -> ``[B, H, T, width]``."""
        shape = ops.shape(x)
        x = ops.reshape(x, (shape[0], shape[1], self.num_heads, width))
        return ops.transpose(x, (0, 2, 1, 3))

    def _pair_weights(self, p, l1, l2, key_mask):
        """Joint softmax over pairs of the triple-product logits: ``[B, H, I, J, K]``."""
        dtype = p.dtype
        p, l1, l2 = (_utils.at_least_float32(x) for x in (p, l1, l2))
        logits = triple_product_logits(p, l1, l2, self.sqrt_epsilon)
        if self.logit_scale != 1.0:
            logits = logits * ops.cast(self.logit_scale, logits.dtype)
        pair_mask = None
        if key_mask is not None:
            key_mask = ops.cast(key_mask, "bool")
            pair_mask = ops.logical_and(key_mask[:, :, None], key_mask[:, None, :])
        return ops.cast(joint_pair_softmax(logits, pair_mask), dtype)

    def _virtual_attention(self, entities, mask):
        m, dk = self._num_virtual, self.key_dim
        key_width = self.num_heads * dk
        # Only standard entities query and only virtual entities are keys and values (Clift
        # et al. 2020, eqs. 13-14), so p is projected for the N standard rows and l1, l2, u for
        # the M virtual rows only: the same outputs as projecting every row, at ~1/4 of the cost.
        p = self._heads(self._project(entities[:, :-m], 0, key_width), dk)
        l1, l2, u = ops.split(self._project(entities[:, -m:], key_width), [key_width,
                                                                         2 * key_width], axis=-1)
        key_mask = None if mask is None else mask[:, -m:]
        weights = self._pair_weights(p, self._heads(l1, dk), self._heads(l2, dk), key_mask)
        shape = ops.shape(weights)
        flat_weights = ops.reshape(weights, (shape[0], shape[1], shape[2], m * m))
        flat_messages = self._pair_messages(u)  # [B, H, M^2, dv]
        attended = ops.matmul(flat_weights, flat_messages)  # [B, H, N, dv]
        # Eq. (14): the virtual rows carry their own value vectors.
        return ops.concatenate([self._merge_heads(attended), u], axis=1), weights

    def _pair_messages(self, u):
        """``W_B(u_j (x) u_k)`` of all M^2 virtual pairs: ``[B, M, H dv] -> [B, H, M^2, dv]``.

        The first factor is contracted first (``M d^3 + M^2 d^2`` per head, as in the code),
        written as plain matmuls: on XLA's CPU backend they beat the equivalent einsums.
        """
        m, heads, dv = self._num_virtual, self.num_heads, self._value_dim
        batch = ops.shape(u)[0]
        u = ops.transpose(ops.reshape(u, (batch * m, heads, dv)), (1, 0, 2))  # [H, B M, r]
        kernel = ops.transpose(self.bilinear_kernel, (0, 2, 1, 3))  # [H, r, q, s]
        half = ops.matmul(u, ops.reshape(kernel, (heads, dv, dv * dv)))  # [H, B M, q s]
        half = ops.reshape(half, (heads, batch, m * dv, dv))  # [H, B, j q, s]
        second = ops.transpose(ops.reshape(u, (heads, batch, m, dv)), (0, 1, 3, 2))  # [H,B,s,k]
        messages = ops.reshape(ops.matmul(half, second), (heads, batch, m, dv, m))  # [H,B,j,q,k]
        messages = ops.transpose(messages, (1, 0, 2, 4, 3))  # [B, H, j, k, q]
        return ops.reshape(messages, (batch, heads, m * m, dv))

    def _full_attention(self, entities, mask):
        dk, dv = self.key_dim, self._value_dim
        key_width = self.num_heads * dk
        p, l1, l2, u = ops.split(self._project(entities),
                                 [key_width, 2 * key_width, 3 * key_width], axis=-1)
        p, l1, l2 = (self._heads(x, dk) for x in (p, l1, l2))
        weights = self._pair_weights(p, l1, l2, mask)  # [B, H, N, N, N]
        u = self._heads(u, dv)  # [B, H, N, dv]
        # z_ik = sum_j A_ijk u_j, then S_i = sum_k z_ik u_k^T, then out_i = W_B : S_i.
        # Einsums rather than matmuls with broadcast batch dimensions: TensorFlow's oneDNN batch
        # matmul crashed on those on some CPUs.
        z = ops.einsum("bhijk,bhjr->bhikr", weights, u)  # [B, H, N(i), N(k), dv]
        s = ops.einsum("bhikr,bhks->bhirs", z, u)  # [B, H, N, dv(r), dv(s)]
        shape = ops.shape(s)
        s = ops.reshape(s, (shape[0], shape[1], shape[2], dv * dv))
        bilinear = ops.reshape(self.bilinear_kernel, (self.num_heads, dv, dv * dv))
        attended = ops.einsum("bhnx,hqx->bhnq", s, bilinear)  # [B, H, N, dv]
        return self._merge_heads(attended), weights

    def _merge_heads(self, attended):
        """``[B, H, N, dv]`` -> ``[B, N, H * dv]``."""
        attended = ops.transpose(attended, (0, 2, 1, 3))
        shape = ops.shape(attended)
        return ops.reshape(attended, (shape[0], shape[1], self.num_heads * self._value_dim))

    def call(self, entities, mask=None, return_attention_scores=False):
        entities = self._check_call_arguments(entities, mask)
        if self.mode == "virtual":
            outputs, weights = self._virtual_attention(entities, mask)
        else:
            outputs, weights = self._full_attention(entities, mask)
        if mask is not None:
            outputs = ops.where(ops.cast(mask, "bool")[:, :, None], outputs,
                                ops.zeros_like(outputs))
        if return_attention_scores:
            return outputs, weights
        return outputs

    def compute_mask(self, entities, mask=None, return_attention_scores=False):
        return [mask, None] if return_attention_scores else mask

    def compute_output_shape(self, entities_shape, return_attention_scores=False):
        batch, count = entities_shape[0], entities_shape[1]
        outputs = (batch, count, self.num_heads * self._value_dim)
        if not return_attention_scores:
            return outputs
        m = self._num_virtual
        if self.mode == "virtual":
            queries, pairs = (None if count is None else count - m), (m, m)
        else:
            queries, pairs = count, (count, count)
        return outputs, (batch, self.num_heads, queries, *pairs)

    def compute_output_spec(self, entities, mask=None, return_attention_scores=False):
        self._check_static_arguments(entities, mask)
        return _utils.output_spec(
            self.compute_output_shape(entities.shape, return_attention_scores), self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "key_dim": self.key_dim,
                "value_dim": self.value_dim,
                "mode": self.mode,
                "num_virtual_entities": self.num_virtual_entities,
                "logit_scale": self.logit_scale,
                "sqrt_epsilon": self.sqrt_epsilon,
                "use_bias": self.use_bias,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bilinear_initializer": keras.initializers.serialize(self.bilinear_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return config

