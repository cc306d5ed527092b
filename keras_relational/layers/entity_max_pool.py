"""Feature-wise max over the entity axis, ignoring masked entities."""

import keras
from keras import ops

from keras_relational import validation
from keras_relational.layers import _utils


@keras.saving.register_keras_serializable(package="keras_relational")
class EntityMaxPool(keras.layers.Layer):
    """Feature-wise maximum over entities: ``z[b, f] = max_i E[b, i, f]``.

    The readout of Zambaldi et al. (2019, Sec. 2, "Output module"): permutation-invariant over
    entities. Masked entities (Keras mask False) are ignored; a set with every entity masked pools
    to zeros. A set of zero entities (``N = 0``) is refused with a ValueError: its maximum is
    undefined.

    Shapes: ``[B, N, F] -> [B, F]``.

    Call arguments:
        entities: ``[B, N, F]``.
        mask: optional boolean ``[B, N]`` Keras mask (integer 1/0 accepted, float refused).

    Example:

    >>> entities = np.random.rand(2, 49, 26).astype("float32")
    >>> tuple(keras_relational.EntityMaxPool()(entities).shape)
    (2, 26)

    Reference: Zambaldi et al., "Deep reinforcement learning with relational inductive biases",
    ICLR 2019, Sec. 2 ("Output module").
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def build(self, entities_shape):
        validation.check_rank(self, "entities", entities_shape, 3, "[batch, entities, features]")
        validation.check_entity_count(self, "entities", entities_shape)
        super().build(entities_shape)

    def _check_call_arguments(self, entities_shape, mask):
        validation.check_entity_count(self, "entities", entities_shape)
        _utils.check_masks(self, entities_shape, mask)

    def call(self, entities, mask=None):
        self._check_call_arguments(entities.shape, mask)
        if mask is None:
            return ops.max(entities, axis=1)
        valid = ops.cast(mask, "bool")[:, :, None]
        lowest = _utils.lowest_value(entities.dtype)
        pooled = ops.max(ops.where(valid, entities, lowest), axis=1)
        any_valid = ops.any(valid, axis=1)
        return ops.where(any_valid, pooled, ops.zeros_like(pooled))

    def compute_mask(self, entities, mask=None):
        return None

    def compute_output_shape(self, entities_shape):
        validation.check_entity_count(self, "entities", entities_shape)
        return (entities_shape[0], entities_shape[2])
