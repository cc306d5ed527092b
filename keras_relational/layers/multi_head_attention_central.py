"""The multi-head-attention baseline of the Relations Game (Shanahan et al. 2020, Sec. 4)."""

import keras
from keras import ops

from keras_relational import validation
from keras_relational.layers import _utils
from keras_relational.layers._central_module import CentralModule


@keras.saving.register_keras_serializable(package="keras_relational")
class MultiHeadAttentionCentral(CentralModule):
    """Multi-head-attention baseline with the paper's "CombineValues".

    ``K = L W_K``, ``Q = L W_Q``, ``V = L W_V`` per entity (no biases), split into H heads;
    ``O = softmax(Q K^T) V`` (unscaled, softmax over the keys); each head's output is the learned,
    unnormalised weighted sum ``out[h] = sum_n w[h, n] O[h, n]`` over the N query positions; the
    heads are concatenated into ``[B, H * value_dim]``. No nonlinearity, residual or layer norm
    (Shanahan et al. 2020, Sec. 4: "each head's output is a weighted sum of the resulting
    vectors"; the missing scale and biases and the ``[H, N]`` weights follow the authors'
    reference notebook). Self-contained on purpose (not
    ``keras_relational.MultiHeadDotProductAttention``), so that the baseline is exactly the
    paper's. Kernels start from a truncated normal of stddev 0.1 (reference notebook). Before
    CombineValues the module is permutation-equivariant; ``w`` makes it position-specific.

    Shapes: ``[B, N, m] -> [B, H * value_dim]``; attention ``[B, H, N, N]``.

    Args:
        num_heads: H. Defaults to 32 (Table S2).
        key_dim: key/query size per head. Defaults to 16 (Table S2).
        value_dim: value size per head. Defaults to 20 = j + 4, so that the output is 640 like
            PrediNet's (Table S2).
        **kwargs: standard ``keras.layers.Layer`` arguments.

    Call arguments:
        inputs: entities ``[B, N, m]`` with ``N`` known (``w`` is ``[H, N]``).
        return_attention_scores: also return the attention ``[B, H, N, N]``.

    Returns:
        ``[B, H * value_dim]``, or ``(outputs, attention)``.

    Example:

    >>> entities = np.random.rand(2, 25, 34).astype("float32")
    >>> mha = keras_relational.MultiHeadAttentionCentral()
    >>> outputs, attention = mha(entities, return_attention_scores=True)
    >>> tuple(outputs.shape), tuple(attention.shape)
    ((2, 640), (2, 32, 25, 25))

    Reference: Shanahan et al., "An Explicitly Relational Neural Network Architecture",
    ICML 2020, Sec. 4 (baselines) and Table S2.
    """

    def __init__(self, num_heads=32, key_dim=16, value_dim=20, **kwargs):  # Table S2
        super().__init__(**kwargs)
        validation.check_positive_int("MultiHeadAttentionCentral", "num_heads", num_heads)
        validation.check_positive_int("MultiHeadAttentionCentral", "key_dim", key_dim)
        validation.check_positive_int("MultiHeadAttentionCentral", "value_dim", value_dim)
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.value_dim = value_dim

    def build(self, input_shape):
        entities, features = self._entity_shape(input_shape)
        self.num_entities = entities
        self.key_kernel = self._kernel("key_kernel", (features, self.num_heads * self.key_dim))
        self.query_kernel = self._kernel("query_kernel", (features, self.num_heads * self.key_dim))
        self.value_kernel = self._kernel("value_kernel",
                                         (features, self.num_heads * self.value_dim))
        self.combine_kernel = self._kernel("combine_kernel", (self.num_heads, entities))
        super().build(input_shape)

    def _split_heads(self, inputs, kernel, size):
        projected = ops.matmul(inputs, kernel)
        return ops.reshape(projected, (-1, self.num_entities, self.num_heads, size))

    def call(self, inputs, return_attention_scores=False):
        self._check_inputs(inputs.shape)
        keys = self._split_heads(inputs, self.key_kernel, self.key_dim)
        queries = self._split_heads(inputs, self.query_kernel, self.key_dim)
        values = self._split_heads(inputs, self.value_kernel, self.value_dim)
        # Logits and softmax in float32 under a 16-bit policy (float16 overflows past 65504).
        logits = ops.einsum("bqhg,bkhg->bhqk", _utils.at_least_float32(queries),
                            _utils.at_least_float32(keys))
        attention = ops.cast(ops.softmax(logits, axis=-1), values.dtype)
        attended = ops.einsum("bhqk,bkhv->bhqv", attention, values)
        combined = ops.einsum("bhnv,hn->bhv", attended, self.combine_kernel)
        outputs = ops.reshape(combined, (-1, self.num_heads * self.value_dim))
        if return_attention_scores:
            return outputs, attention
        return outputs

    def compute_output_shape(self, input_shape, return_attention_scores=False):
        self._check_inputs(input_shape)
        outputs = (input_shape[0], self.num_heads * self.value_dim)
        if return_attention_scores:
            n = input_shape[1]
            return outputs, (input_shape[0], self.num_heads, n, n)
        return outputs

    def compute_output_spec(self, inputs, return_attention_scores=False):
        return _utils.output_spec(
            self.compute_output_shape(inputs.shape, return_attention_scores), self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update({"num_heads": self.num_heads, "key_dim": self.key_dim,
                       "value_dim": self.value_dim})
        return config
