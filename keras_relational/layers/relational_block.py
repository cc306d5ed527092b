"""The relational block: MHDPA, a per-entity MLP, a residual and a layer norm."""

import keras
from keras import ops

from keras_relational import validation
from keras_relational.layers import _utils
from keras_relational.layers.dense_stack import apply_dense_stack, dense_stack
from keras_relational.layers.multi_head_dot_product_attention import (
    MultiHeadDotProductAttention,
    layer_norm,
)


def block_arguments(layer, serialize=True):
    """The :class:`RelationalBlock` arguments held by ``layer``.

    ``layer`` is a ``RelationalBlock`` (its ``get_config``) or a layer that builds them with the
    same attributes (``RelationalModule``). With ``serialize`` the initializers are serialised
    (a config); without, they are fresh clones, so that every block built from the dict has its
    own instances. Building uses the clones: ``keras.initializers.serialize`` probes for
    TensorFlow (importing it where installed), which loading a model under JAX must not do.
    """
    initializer = keras.initializers.serialize if serialize else _utils.clone_initializer
    return {
        "num_heads": layer.num_heads,
        "key_dim": layer.key_dim,
        "value_dim": layer.value_dim,
        "mlp_hidden_units": list(layer.mlp_hidden_units),
        "qkv_norm": layer.qkv_norm,
        "attention_scale": layer.attention_scale,
        "use_bias": layer.use_bias,
        "layer_norm_epsilon": layer.layer_norm_epsilon,
        "kernel_initializer": initializer(layer.kernel_initializer),
        "bias_initializer": initializer(layer.bias_initializer),
    }


@keras.saving.register_keras_serializable(package="keras_relational")
class RelationalBlock(keras.layers.Layer):
    """One relational block of Zambaldi et al. (2019): ``E' = LN(E + g_theta(MHDPA(E)))``.

    Every entity attends to all entities with :class:`MultiHeadDotProductAttention`
    (layer-normalised q, k, v; heads concatenated), the attended vector goes through the
    per-entity MLP ``g_theta`` (the same MLP for every entity, ending in a linear layer back to the
    entity width ``F``), is added to the block input, and the sum is layer-normalised. There is
    one residual connection around the whole attention + MLP path, not the Transformer's two
    sub-layers.

    Shapes: ``[B, N, F] -> [B, N, F]``; attention scores ``[B, H, N, N]``. The block is
    permutation-equivariant over entities.

    Args:
        num_heads: H (Zambaldi et al.: 2 to 4 on Box-World).
        key_dim: d, per-head query/key size (Zambaldi et al.: 64).
        value_dim: per-head value size; defaults to ``key_dim``.
        mlp_hidden_units: widths of ``g_theta``'s hidden ReLU layers; a final linear layer maps
            back to ``F``. Default ``(256,)`` (Zambaldi et al. 2019 give no Box-World size; our
            choice).
        qkv_norm, attention_scale, use_bias, layer_norm_epsilon, kernel_initializer,
            bias_initializer: as in :class:`MultiHeadDotProductAttention` (the epsilon is shared
            with the output LayerNorm).
        **kwargs: standard ``keras.layers.Layer`` arguments.

    Call arguments:
        entities: ``[B, N, F]``.
        mask: optional boolean ``[B, N]`` Keras mask: masked entities are never attended to.
        attention_mask: optional boolean mask ``[N, N]``, ``[1, N, N]`` or ``[B, N, N]``, True
            where entity ``i`` may attend to entity ``j``. Masks are boolean (or integer 1/0) as
            in :class:`MultiHeadDotProductAttention`; float masks are refused.
        return_attention_scores: if True, also return the weights ``[B, H, N, N]``.

    Example:

    >>> entities = np.random.rand(2, 49, 26).astype("float32")
    >>> block = keras_relational.RelationalBlock(num_heads=2, key_dim=64)
    >>> tuple(block(entities).shape)
    (2, 49, 26)

    Reference: Zambaldi et al., "Deep reinforcement learning with relational inductive biases",
    ICLR 2019, Sec. 2 ("Relational module") and Appendix B.
    """

    def __init__(
        self,
        num_heads=2,  # Zambaldi et al. 2019: 2 to 4 heads on Box-World
        key_dim=64,  # Zambaldi et al. 2019, App. B
        value_dim=None,
        mlp_hidden_units=(256,),  # not in Zambaldi et al. 2019; our choice
        qkv_norm="joint",
        attention_scale="key_dim",
        use_bias=True,
        layer_norm_epsilon=1e-6,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        mlp_hidden_units = tuple(mlp_hidden_units)
        validation.check_positive_int_sequence(type(self).__name__, "mlp_hidden_units",
                                               mlp_hidden_units)
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.value_dim = value_dim
        self.mlp_hidden_units = mlp_hidden_units
        self.qkv_norm = qkv_norm
        self.attention_scale = attention_scale
        self.use_bias = use_bias
        validation.check_layer_norm_epsilon(type(self).__name__, layer_norm_epsilon)
        self.layer_norm_epsilon = layer_norm_epsilon
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        validation.check_attention_arguments(type(self).__name__, num_heads, key_dim, value_dim,
                                             qkv_norm, attention_scale)
        self.supports_masking = True

    def build(self, entities_shape):
        validation.check_rank(self, "entities", entities_shape, 3, "[batch, entities, features]")
        features = validation.check_known_dim(self, "entities", entities_shape, -1, "feature width")
        self._features = features
        self._attention = MultiHeadDotProductAttention(
            num_heads=self.num_heads,
            key_dim=self.key_dim,
            value_dim=self.value_dim,
            qkv_norm=self.qkv_norm,
            use_bias=self.use_bias,
            attention_scale=self.attention_scale,
            layer_norm_epsilon=self.layer_norm_epsilon,
            kernel_initializer=_utils.clone_initializer(self.kernel_initializer),
            bias_initializer=_utils.clone_initializer(self.bias_initializer),
            dtype=self.dtype_policy,
            name="attention",
        )
        self._attention.build((None, None, features))
        width = self._attention.compute_output_shape((None, None, features))[-1]
        # g_theta: ReLU hidden layers, then a linear layer back to the entity width F.
        self._mlp_layers = dense_stack(
            (*self.mlp_hidden_units, features),
            names=[f"mlp_{i}" for i in range(len(self.mlp_hidden_units) + 1)],
            activation="relu", output_activation=None, input_width=width,
            kernel_initializer=self.kernel_initializer, bias_initializer=self.bias_initializer,
            dtype=self.dtype_policy,
        )
        self._output_layer_norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name="output_layer_norm"
        )
        self._output_layer_norm.build((None, None, features))
        self.built = True

    def _check_call_arguments(self, entities, mask, attention_mask):
        _utils.check_feature_width(self, "entities", entities.shape,
                                   getattr(self, "_features", None))
        _utils.check_masks(self, entities.shape, mask, attention_mask)

    def call(self, entities, mask=None, attention_mask=None, return_attention_scores=False):
        self._check_call_arguments(entities, mask, attention_mask)
        attended, weights = self._attention(
            entities, mask=mask, attention_mask=attention_mask, return_attention_scores=True
        )
        # g_theta, the residual and the LayerNorm act on each entity alone: run them on
        # [B * N, .] rows (plain 2-D matmuls; a faster XLA step, see MHDPA._project).
        features = entities.shape[-1]
        update = ops.reshape(attended, (-1, attended.shape[-1]))
        update = apply_dense_stack(self._mlp_layers, update)
        outputs = layer_norm(ops.reshape(entities, (-1, features)) + update,
                             self._output_layer_norm)
        outputs = ops.reshape(outputs, ops.shape(entities))
        if return_attention_scores:
            return outputs, weights
        return outputs

    def compute_mask(self, entities, mask=None, attention_mask=None,
                     return_attention_scores=False):
        return [mask, None] if return_attention_scores else mask

    def compute_output_shape(self, entities_shape, return_attention_scores=False):
        outputs = tuple(entities_shape)
        if return_attention_scores:
            batch, count = entities_shape[0], entities_shape[1]
            return outputs, (batch, self.num_heads, count, count)
        return outputs

    def compute_output_spec(self, entities, mask=None, attention_mask=None,
                            return_attention_scores=False):
        self._check_call_arguments(entities, mask, attention_mask)
        return _utils.output_spec(
            self.compute_output_shape(entities.shape, return_attention_scores), self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(block_arguments(self))
        return config
