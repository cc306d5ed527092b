"""K relational blocks applied in sequence, with shared (recurrent) or separate weights."""

import keras
from keras import ops

from keras_relational import validation
from keras_relational.layers import _utils
from keras_relational.layers.relational_block import RelationalBlock, block_arguments


@keras.saving.register_keras_serializable(package="keras_relational")
class RelationalModule(keras.layers.Layer):
    """``num_blocks`` relational blocks, sharing one set of weights or each with its own.

    With ``share_weights=True`` (default, as Zambaldi et al. did on Box-World and StarCraft II)
    the module owns a single :class:`RelationalBlock` and applies it ``num_blocks`` times
    (recurrently): the parameter count does not depend on ``num_blocks``. With
    ``share_weights=False`` it owns ``num_blocks`` independent blocks ("deep"). Because the block
    is residual, the entity width is constant; if ``model_dim`` is set and differs from the input
    width ``F``, one learned per-entity linear projection to ``model_dim`` comes first (our choice:
    Zambaldi et al. 2019, App. C give the StarCraft II blocks an output width of ``d * H``).

    Shapes: ``[B, N, F] -> [B, N, D]`` with ``D = model_dim or F``; attention scores of all
    blocks stacked ``[B, K, H, N, N]``.

    Args:
        num_blocks: K, how many times a block is applied (Zambaldi et al.: 1 for Box-World
            distractor branches of length 1, more for length 3).
        share_weights: one block applied K times (True) or K separate blocks (False).
        model_dim: optional residual-stream width; None keeps the input width.
        num_heads, key_dim, value_dim, mlp_hidden_units, qkv_norm, attention_scale, use_bias,
            layer_norm_epsilon, kernel_initializer, bias_initializer: passed to every
            :class:`RelationalBlock`.
        **kwargs: standard ``keras.layers.Layer`` arguments.

    Call arguments:
        entities: ``[B, N, F]``.
        mask: optional boolean ``[B, N]`` Keras mask.
        attention_mask: optional boolean mask ``[N, N]``, ``[1, N, N]`` or ``[B, N, N]``, True
            where entity ``i`` may attend to entity ``j``. Masks are boolean (or integer 1/0) as
            in :class:`MultiHeadDotProductAttention`; float masks are refused.
        return_attention_scores: if True, also return every block's weights ``[B, K, H, N, N]``.

    Example:

    >>> entities = np.random.rand(2, 49, 26).astype("float32")
    >>> module = keras_relational.RelationalModule(num_blocks=2, num_heads=2, key_dim=16)
    >>> outputs, scores = module(entities, return_attention_scores=True)
    >>> tuple(outputs.shape), tuple(scores.shape)
    ((2, 49, 26), (2, 2, 2, 49, 49))

    Reference: Zambaldi et al., "Deep reinforcement learning with relational inductive biases",
    ICLR 2019, Sec. 2 ("Relational module") and Appendix B.
    """

    def __init__(
        self,
        num_blocks=1,
        share_weights=True,  # Zambaldi et al. 2019: shared parameters on Box-World and SC2
        model_dim=None,
        num_heads=2,
        key_dim=64,
        value_dim=None,
        mlp_hidden_units=(256,),
        qkv_norm="joint",
        attention_scale="key_dim",
        use_bias=True,
        layer_norm_epsilon=1e-6,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        name = type(self).__name__
        validation.check_positive_int(name, "num_blocks", num_blocks)
        validation.check_positive_int(name, "model_dim", model_dim, allow_none=True)
        validation.check_attention_arguments(name, num_heads, key_dim, value_dim, qkv_norm,
                                             attention_scale)
        self.num_blocks = num_blocks
        self.share_weights = bool(share_weights)
        self.model_dim = model_dim
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.value_dim = value_dim
        self.mlp_hidden_units = tuple(mlp_hidden_units)
        self.qkv_norm = qkv_norm
        self.attention_scale = attention_scale
        self.use_bias = use_bias
        validation.check_layer_norm_epsilon(type(self).__name__, layer_norm_epsilon)
        self.layer_norm_epsilon = layer_norm_epsilon
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.supports_masking = True

    def _block(self, index):
        return RelationalBlock(**block_arguments(self, serialize=False), dtype=self.dtype_policy,
                               name=f"block_{index}")

    def _width(self, features):
        return self.model_dim or features

    def build(self, entities_shape):
        validation.check_rank(self, "entities", entities_shape, 3, "[batch, entities, features]")
        features = validation.check_known_dim(self, "entities", entities_shape, -1, "feature width")
        self._features = features
        width = self._width(features)
        self._input_projection = None
        if width != features:
            self._input_projection = keras.layers.Dense(
                width,
                kernel_initializer=_utils.clone_initializer(self.kernel_initializer),
                bias_initializer=_utils.clone_initializer(self.bias_initializer),
                dtype=self.dtype_policy,
                name="input_projection",
            )
            self._input_projection.build((None, None, features))
        distinct_blocks = 1 if self.share_weights else self.num_blocks
        self._blocks = [self._block(i) for i in range(distinct_blocks)]
        for block in self._blocks:
            block.build((None, None, width))
        self.built = True

    def _check_call_arguments(self, entities, mask, attention_mask):
        _utils.check_feature_width(self, "entities", entities.shape,
                                   getattr(self, "_features", None))
        _utils.check_masks(self, entities.shape, mask, attention_mask)

    def call(self, entities, mask=None, attention_mask=None, return_attention_scores=False):
        self._check_call_arguments(entities, mask, attention_mask)
        outputs = entities
        if self._input_projection is not None:
            outputs = self._input_projection(outputs)
        all_scores = []
        for step in range(self.num_blocks):
            block = self._blocks[0 if self.share_weights else step]
            outputs, scores = block(outputs, mask=mask, attention_mask=attention_mask,
                                    return_attention_scores=True)
            all_scores.append(scores)
        if return_attention_scores:
            return outputs, ops.stack(all_scores, axis=1)
        return outputs

    def compute_mask(self, entities, mask=None, attention_mask=None,
                     return_attention_scores=False):
        return [mask, None] if return_attention_scores else mask

    def compute_output_shape(self, entities_shape, return_attention_scores=False):
        outputs = (*entities_shape[:-1], self._width(entities_shape[-1]))
        if return_attention_scores:
            batch, count = entities_shape[0], entities_shape[1]
            return outputs, (batch, self.num_blocks, self.num_heads, count, count)
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
                "num_blocks": self.num_blocks,
                "share_weights": self.share_weights,
                "model_dim": self.model_dim,
                **block_arguments(self),
            }
        )
        return config
