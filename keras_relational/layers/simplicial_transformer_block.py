"""The 2-simplicial Transformer block of Clift et al. (2020), iterated with shared weights."""

import keras
from keras import ops

from keras_relational import validation
from keras_relational.layers import _utils
from keras_relational.layers.dense_stack import apply_dense_stack, dense_stack
from keras_relational.layers.multi_head_dot_product_attention import (
    MultiHeadDotProductAttention,
    layer_norm,
)
from keras_relational.layers.simplicial_attention import (
    SimplicialAttention,
    resolve_num_virtual_entities,
)

_MODES = ("virtual", "full")


def _virtual_routing_mask(num_standard, num_virtual):
    """``[T, T]`` allow-mask of eqs. (13)-(14): standard queries see standard keys only."""
    index = ops.arange(num_standard + num_virtual)
    key_is_standard = index[None, :] < num_standard
    query_is_virtual = index[:, None] >= num_standard
    return ops.logical_or(key_is_standard, query_is_virtual)


@keras.saving.register_keras_serializable(package="keras_relational")
class SimplicialTransformerBlock(keras.layers.Layer):
    """The 2-simplicial Transformer block (Clift et al. 2020, eqs. 11-14), iterated.

    One iteration, for every entity ``e_i`` (pseudo-code of Sec. 4, eqs. 11-12)::

        x  = LN_in(e)
        v' = MHDPA(x) (+) LN_a2(SimplicialAttention(x))    # 1-simplicial (+) 2-simplicial heads
        e' = LN_out(e + g_theta(v'))                       # g_theta: Dense(64, ReLU), Dense(F)

    There is a single residual around attention + MLP, a layer norm on the block input and after
    the residual, and the extra layer norm on the 2-simplicial output (Remark 2.3: training is
    unstable without it). The 1-simplicial attention is :class:`MultiHeadDotProductAttention`
    without biases, q/k/v layer norms or output projection (the authors' code); its logits are
    scaled by ``1/sqrt(key_dim)`` (code) unlike eq. (2) (``attention_scale=None``).

    Virtual entities (``simplicial_mode="virtual"``, all of Clift et al.'s experiments, Sec. 2.6):
    ``M`` learned vectors ``[M, F]`` (the same for every sample) are appended to the ``N`` input
    entities before the first iteration. In the 1-simplicial attention a standard entity attends
    to standard entities only and a virtual entity to all ``N + M`` (eqs. 13-14), so information
    flows standard -> virtual only. In the 2-simplicial attention standard entities attend to
    pairs of virtual entities; the 2-simplicial slot of a virtual entity is ``LN_a2(u_i)``, its own
    2-simplicial value (eq. 14), through the same ``LN_a2`` as the standard rows (code). The
    virtual entities are dropped after the last iteration. ``simplicial_mode="full"`` scores all
    pairs of the ``N`` entities instead (eq. 11, ``O(N^3)``) and adds no virtual entity.

    With ``use_simplicial=False`` the 2-simplicial branch is switched off and this is the
    relational block of Clift et al.'s baseline agent (``LN_out(e + g_theta(MHDPA(LN_in(e))))``).

    Sharing (Sec. 4): the iterations share the attention weights (projections and ``W_B``) and
    ``g_theta``; the layer norms are new in every iteration, as in the authors' code
    (``share_layer_norms=True`` shares them too; ``share_weights=False`` shares nothing).

    Masking: a False entity of the Keras mask ``[B, N]`` is never attended to, is in no scored
    pair, and does not change the outputs of the other entities. Virtual entities are never masked.

    Shapes: ``[B, N, F] -> [B, N, F]`` (``[B, N + M, F]`` with ``return_virtual_entities``, the
    virtual entities last).

    Args:
        num_heads: H1, 1-simplicial heads (Clift et al. Sec. 4: 2).
        key_dim: d1, per-head 1-simplicial query/key width (Sec. 4: 32).
        value_dim: per-head 1-simplicial value width; defaults to ``key_dim``.
        simplicial_num_heads: H2, 2-simplicial heads (Sec. 4: 1; more are untested in the paper).
        simplicial_key_dim: d2, per-head width of ``p``, ``l1``, ``l2`` (Sec. 4: 48).
        simplicial_value_dim: per-head width of ``u``; defaults to ``simplicial_key_dim``.
        simplicial_mode: ``"virtual"`` (default) or ``"full"``, see above.
        num_virtual_entities: M; None means 2 in virtual mode (Sec. 4) and 0 otherwise.
        num_iterations: how many times the block is applied (Sec. 4: 2).
        share_weights: share attention and ``g_theta`` weights across iterations (Sec. 4: yes).
        share_layer_norms: share the three layer norms across iterations (code: no).
        use_simplicial: False switches the 2-simplicial branch off (relational baseline).
        mlp_hidden_units: hidden ReLU widths of ``g_theta``; a final linear layer maps back to
            ``F`` (Sec. 4: one hidden layer of 64).
        attention_scale: 1-simplicial logit scale, ``"key_dim"`` (code, default) or None (eq. 2);
            see :class:`MultiHeadDotProductAttention`.
        logit_scale, sqrt_epsilon: of the 2-simplicial logits, see :class:`SimplicialAttention`.
        layer_norm_epsilon: of every layer norm (code, keras-transformer: 1e-5).
        return_virtual_entities: also return the virtual entities (rows ``N..N+M-1``).
        kernel_initializer: of every projection and dense kernel (each gets its own clone).
        bilinear_initializer: of ``W_B``.
        bias_initializer: of the ``g_theta`` biases.
        virtual_entity_initializer: of the ``[M, F]`` virtual entities (code: the Keras
            ``Embedding`` default, uniform in [-0.05, 0.05]).
        **kwargs: standard ``keras.layers.Layer`` arguments.

    Call arguments:
        entities: ``[B, N, F]`` standard entities.
        mask: optional boolean Keras mask ``[B, N]`` (propagated to the output); integer masks
            (1 entity, 0 padding) are accepted, float masks refused with a ValueError.
        return_attention_scores: if True, also return a list with one dict per iteration:
            ``"one_simplicial"``: ``[B, H1, T, T]`` and, when the branch is on,
            ``"two_simplicial"``: ``[B, H2, N, M, M]`` (virtual) or ``[B, H2, N, N, N]`` (full).

    Returns:
        The updated entities, and the attention scores when requested.

    Example:

    >>> entities = np.random.rand(2, 40, 64).astype("float32")
    >>> block = keras_relational.SimplicialTransformerBlock()
    >>> tuple(block(entities).shape)
    (2, 40, 64)

    Reference: Clift, Doryn, Murfet and Wallbridge, "Logic and the 2-Simplicial Transformer",
    ICLR 2020, Secs. 2.2-2.3 and 4.
    """

    def __init__(
        self,
        num_heads=2,  # Clift et al. 2020, Sec. 4
        key_dim=32,  # Clift et al. 2020, Sec. 4
        value_dim=None,
        simplicial_num_heads=1,  # Clift et al. 2020, Sec. 4
        simplicial_key_dim=48,  # Clift et al. 2020, Sec. 4
        simplicial_value_dim=None,
        simplicial_mode="virtual",  # Clift et al. 2020, Sec. 2.3
        num_virtual_entities=None,  # 2: Clift et al. 2020, Sec. 4
        num_iterations=2,  # Clift et al. 2020, Sec. 4
        share_weights=True,  # Clift et al. 2020, Sec. 4
        share_layer_norms=False,  # authors' code
        use_simplicial=True,
        mlp_hidden_units=(64,),  # Clift et al. 2020, Sec. 4
        attention_scale="key_dim",  # authors' code; eq. (2) has none
        logit_scale=1.0,  # Clift et al. 2020 (paper and code): no scale
        sqrt_epsilon=1e-12,  # not in the paper, see SimplicialAttention
        layer_norm_epsilon=1e-5,  # authors' code (keras-transformer)
        return_virtual_entities=False,
        kernel_initializer="glorot_uniform",  # authors' code
        bilinear_initializer="glorot_uniform",  # authors' code
        bias_initializer="zeros",  # authors' code
        virtual_entity_initializer="random_uniform",  # Keras Embedding default, authors' code
        **kwargs,
    ):
        super().__init__(**kwargs)
        name = type(self).__name__
        validation.check_attention_arguments(name, num_heads, key_dim, value_dim, "none",
                                             attention_scale)
        validation.check_positive_int(name, "simplicial_num_heads", simplicial_num_heads)
        validation.check_positive_int(name, "simplicial_key_dim", simplicial_key_dim)
        validation.check_positive_int(name, "simplicial_value_dim", simplicial_value_dim,
                                   allow_none=True)
        validation.check_choice(name, "simplicial_mode", simplicial_mode, _MODES)
        validation.check_positive_int(name, "num_iterations", num_iterations)
        validation.check_logit_arguments(name, logit_scale, sqrt_epsilon)
        mlp_hidden_units = tuple(mlp_hidden_units)
        validation.check_positive_int_sequence(name, "mlp_hidden_units", mlp_hidden_units)
        validation.check_num_virtual_entities(
            name, num_virtual_entities, use_simplicial and simplicial_mode == "virtual",
            unless="unless use_simplicial=True and simplicial_mode='virtual'",
            received_context=(f" with use_simplicial={use_simplicial!r}, "
                              f"simplicial_mode={simplicial_mode!r}"))
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.value_dim = value_dim
        self.simplicial_num_heads = simplicial_num_heads
        self.simplicial_key_dim = simplicial_key_dim
        self.simplicial_value_dim = simplicial_value_dim
        self.simplicial_mode = simplicial_mode
        self.num_virtual_entities = num_virtual_entities
        self.num_iterations = num_iterations
        self.share_weights = bool(share_weights)
        self.share_layer_norms = bool(share_layer_norms)
        self.use_simplicial = bool(use_simplicial)
        self.mlp_hidden_units = mlp_hidden_units
        self.attention_scale = attention_scale
        self.logit_scale = logit_scale
        self.sqrt_epsilon = sqrt_epsilon
        validation.check_layer_norm_epsilon(type(self).__name__, layer_norm_epsilon)
        self.layer_norm_epsilon = layer_norm_epsilon
        self.return_virtual_entities = bool(return_virtual_entities)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bilinear_initializer = keras.initializers.get(bilinear_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.virtual_entity_initializer = keras.initializers.get(virtual_entity_initializer)
        self.supports_masking = True

    @property
    def _num_virtual(self):
        """M: 2 (Clift et al. Sec. 4) when None in virtual mode, else 0."""
        return resolve_num_virtual_entities(
            self.num_virtual_entities, self.use_simplicial and self.simplicial_mode == "virtual")

    def _make_simplicial_attention(self, name):
        return SimplicialAttention(
            num_heads=self.simplicial_num_heads,
            key_dim=self.simplicial_key_dim,
            value_dim=self.simplicial_value_dim,
            mode=self.simplicial_mode,
            num_virtual_entities=self._num_virtual or None,
            logit_scale=self.logit_scale,
            sqrt_epsilon=self.sqrt_epsilon,
            use_bias=False,
            kernel_initializer=_utils.clone_initializer(self.kernel_initializer),
            bilinear_initializer=_utils.clone_initializer(self.bilinear_initializer),
            dtype=self.dtype_policy,
            name=name,
        )

    def _layer_norm(self, name, width):
        norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name=name
        )
        norm.build((None, None, width))
        return norm

    def _per_iteration(self, shared, make):
        """``num_iterations`` references to one layer (shared) or to fresh layers."""
        if shared:
            layer = make("")
            return [layer] * self.num_iterations
        return [make(f"_{i}") for i in range(self.num_iterations)]

    def build(self, entities_shape, mask_shape=None):
        validation.check_rank(self, "entities", entities_shape, 3, "[batch, entities, features]")
        features = validation.check_known_dim(self, "entities", entities_shape, -1, "feature width")
        self._features = features
        m = self._num_virtual
        self.virtual_entities = None
        if m:
            self.virtual_entities = self.add_weight(
                name="virtual_entities", shape=(m, features),
                initializer=_utils.clone_initializer(self.virtual_entity_initializer),
            )

        def make_attention(suffix):
            attention = MultiHeadDotProductAttention(
                num_heads=self.num_heads,
                key_dim=self.key_dim,
                value_dim=self.value_dim,
                qkv_norm="none",
                use_bias=False,
                attention_scale=self.attention_scale,
                kernel_initializer=_utils.clone_initializer(self.kernel_initializer),
                dtype=self.dtype_policy,
                name=f"attention{suffix}",
            )
            attention.build((None, None, features))
            return attention

        def make_simplicial(suffix):
            attention = self._make_simplicial_attention(f"simplicial_attention{suffix}")
            attention.build((None, None, features))
            return attention

        one_width = self.num_heads * (self.value_dim or self.key_dim)
        two_width = self.simplicial_num_heads * (self.simplicial_value_dim
                                                 or self.simplicial_key_dim)
        mlp_input = one_width + (two_width if self.use_simplicial else 0)

        def make_mlp(suffix):  # g_theta: ReLU hidden layers, then linear back to F
            return dense_stack(
                (*self.mlp_hidden_units, features),
                names=[f"mlp{suffix}_{i}" for i in range(len(self.mlp_hidden_units) + 1)],
                activation="relu", output_activation=None, input_width=mlp_input,
                kernel_initializer=self.kernel_initializer,
                bias_initializer=self.bias_initializer, dtype=self.dtype_policy,
            )

        self._attentions = self._per_iteration(self.share_weights, make_attention)
        self._simplicial_attentions = (
            self._per_iteration(self.share_weights, make_simplicial) if self.use_simplicial
            else [None] * self.num_iterations
        )
        self._mlps = self._per_iteration(self.share_weights, make_mlp)
        self._input_layer_norms = self._per_iteration(
            self.share_layer_norms, lambda s: self._layer_norm(f"input_layer_norm{s}", features))
        self._simplicial_layer_norms = (
            self._per_iteration(
                self.share_layer_norms,
                lambda s: self._layer_norm(f"simplicial_layer_norm{s}", two_width))
            if self.use_simplicial else [None] * self.num_iterations
        )
        self._output_layer_norms = self._per_iteration(
            self.share_layer_norms, lambda s: self._layer_norm(f"output_layer_norm{s}", features))
        self.built = True

    def _check_call_arguments(self, entities, mask):
        _utils.check_feature_width(self, "entities", entities.shape,
                                   getattr(self, "_features", None))
        _utils.check_masks(self, entities.shape, mask)

    def call(self, entities, mask=None, return_attention_scores=False):
        self._check_call_arguments(entities, mask)
        m = self._num_virtual
        shape = ops.shape(entities)
        batch, num_standard = shape[0], shape[1]
        routing = None
        if m:
            virtual = ops.broadcast_to(
                ops.cast(self.virtual_entities, entities.dtype)[None], (batch, m, shape[2])
            )
            entities = ops.concatenate([entities, virtual], axis=1)
            routing = _virtual_routing_mask(num_standard, m)
            if mask is not None:
                mask = ops.concatenate(
                    [ops.cast(mask, "bool"), ops.ones((batch, m), dtype="bool")], axis=1
                )
        scores = []
        for i in range(self.num_iterations):
            # layer_norm: the LayerNorms' own variables, with moments that cannot overflow.
            x = layer_norm(entities, self._input_layer_norms[i])
            attended, one_weights = self._attentions[i](
                x, mask=mask, attention_mask=routing, return_attention_scores=True
            )
            iteration_scores = {"one_simplicial": one_weights}
            if self.use_simplicial:
                simplicial, two_weights = self._simplicial_attentions[i](
                    x, mask=mask, return_attention_scores=True
                )
                iteration_scores["two_simplicial"] = two_weights
                attended = ops.concatenate(
                    [attended, layer_norm(simplicial, self._simplicial_layer_norms[i])], axis=-1
                )
            update = apply_dense_stack(self._mlps[i], attended)
            entities = layer_norm(entities + update, self._output_layer_norms[i])
            scores.append(iteration_scores)
        if m and not self.return_virtual_entities:
            entities = entities[:, :-m]
        if return_attention_scores:
            return entities, scores
        return entities

    def compute_mask(self, entities, mask=None, return_attention_scores=False):
        if mask is not None and self._num_virtual and self.return_virtual_entities:
            shape = ops.shape(mask)
            mask = ops.concatenate(
                [ops.cast(mask, "bool"), ops.ones((shape[0], self._num_virtual), "bool")],
                axis=1,
            )
        if return_attention_scores:
            return [mask, None]
        return mask

    def compute_output_shape(self, entities_shape, return_attention_scores=False):
        batch, count, features = entities_shape
        m = self._num_virtual
        outputs = (batch, count + m if self.return_virtual_entities and m and count is not None
                   else count, features)
        if not return_attention_scores:
            return outputs
        total = None if count is None else count + m
        scores = []
        for _ in range(self.num_iterations):
            iteration_scores = {"one_simplicial": (batch, self.num_heads, total, total)}
            if self.use_simplicial:
                pairs = (m, m) if m else (count, count)
                iteration_scores["two_simplicial"] = (batch, self.simplicial_num_heads, count,
                                                      *pairs)
            scores.append(iteration_scores)
        return outputs, scores

    def compute_output_spec(self, entities, mask=None, return_attention_scores=False):
        self._check_call_arguments(entities, mask)
        return _utils.output_spec(
            self.compute_output_shape(entities.shape, return_attention_scores), self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "key_dim": self.key_dim,
                "value_dim": self.value_dim,
                "simplicial_num_heads": self.simplicial_num_heads,
                "simplicial_key_dim": self.simplicial_key_dim,
                "simplicial_value_dim": self.simplicial_value_dim,
                "simplicial_mode": self.simplicial_mode,
                "num_virtual_entities": self.num_virtual_entities,
                "num_iterations": self.num_iterations,
                "share_weights": self.share_weights,
                "share_layer_norms": self.share_layer_norms,
                "use_simplicial": self.use_simplicial,
                "mlp_hidden_units": list(self.mlp_hidden_units),
                "attention_scale": self.attention_scale,
                "logit_scale": self.logit_scale,
                "sqrt_epsilon": self.sqrt_epsilon,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "return_virtual_entities": self.return_virtual_entities,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bilinear_initializer": keras.initializers.serialize(self.bilinear_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
                "virtual_entity_initializer": keras.initializers.serialize(
                    self.virtual_entity_initializer),
            }
        )
        return config
