"""A regulariser towards discrete push / stay / pop actions of the convolutional stacks."""

import keras
from keras import ops

from keras_relational import validation
from keras_relational.layers import _utils


@keras.saving.register_keras_serializable(package="keras_relational")
class ShiftEntropyPenalty(keras.layers.Layer):
    """Adds ``cost`` times the mean entropy of the stack-shift filters to the model's losses.

    In words: every stack of a :class:`keras_relational.ConvStackMemory` run with
    ``return_filters=True`` shifts its content at each step with a filter ``F = (F_push, F_stay,
    F_pop)`` (a softmax, Mitchell & Bowers, App. B, eq. (2)). Its entropy
    ``-sum_k F_k log F_k`` is 0 for a hard push, stay or pop and ``ln 3`` for a uniform one. The
    layer adds ``cost * sum_{b,t,n} valid[b,t] H(F[b,t,n]) / (N * sum_{b,t} valid[b,t])`` to the
    model's losses, where ``valid`` leaves out the steps whose token is ``padding_id``, so padding
    a batch does not change the penalty; ``h`` is returned unchanged. Not in the paper (its cost
    is 0): a push towards discrete stack actions, used by
    ``keras_relational.models.symmetry.conv_stack_lstm(shift_entropy_cost=...)``.

    Shapes: ``h`` ``[B, T, N]``, ``filters`` ``[B, T, 3N]`` (the push / stay / pop taps of each of
    the ``N`` stacks, stack-major), ``tokens`` ``[B, T]`` -> ``[B, T, N]`` (``h``).

    Args:
        cost: the multiple of the mean entropy added to the loss, ``>= 0``.
        padding_id: the token id of padding steps, left out of the mean. Defaults to 0.
        **kwargs: standard ``keras.layers.Layer`` arguments.

    Call arguments:
        h: the stacks' outputs ``[B, T, N]``, passed through.
        filters: the shift filters ``[B, T, 3N]``.
        tokens: the token ids ``[B, T]``.

    Example:

    >>> h = np.zeros((2, 5, 4), "float32")
    >>> filters = np.full((2, 5, 12), 1.0 / 3.0, "float32")  # uniform: entropy ln 3
    >>> penalty = keras_relational.ShiftEntropyPenalty(cost=0.1)
    >>> outputs = penalty(h, filters, np.ones((2, 5), "int32"))
    >>> round(float(penalty.losses[0]), 4)  # 0.1 * ln 3
    0.1099

    Reference: the filters are those of J. Mitchell and J. S. Bowers, "Harnessing the Symmetry of
    Convolutions for Systematic Generalisation", App. B, eq. (2); the penalty is this package's
    addition.
    """

    def __init__(self, cost, padding_id=0, **kwargs):
        super().__init__(**kwargs)
        validation.check_positive_number("ShiftEntropyPenalty", "cost", cost, allow_zero=True)
        self.cost = float(cost)
        self.padding_id = padding_id

    def call(self, h, filters, tokens):
        taps = ops.reshape(filters, (ops.shape(filters)[0], ops.shape(filters)[1], -1, 3))
        # In float32 under a 16-bit policy: the 1e-12 floor underflows to 0 in float16.
        taps = _utils.at_least_float32(taps)
        entropy = -ops.sum(taps * ops.log(ops.maximum(taps, 1e-12)), axis=-1)  # [B, T, N]
        valid = ops.cast(ops.not_equal(tokens, self.padding_id), entropy.dtype)[..., None]
        count = ops.maximum(ops.sum(valid) * ops.cast(ops.shape(entropy)[-1], entropy.dtype),
                            1.0)
        self.add_loss(self.cost * ops.sum(entropy * valid) / count)
        return h

    def compute_output_shape(self, h_shape, filters_shape, tokens_shape):
        return h_shape

    def get_config(self):
        config = super().get_config()
        config.update({"cost": self.cost, "padding_id": self.padding_id})
        return config
