"""Convolution over the symbol axis with time steps as channels (Mitchell & Bowers, Sec. II)."""

import keras
from keras import ops

from keras_relational import validation

_POOLINGS = ("max", "mean", "sum", None)


@keras.saving.register_keras_serializable(package="keras_relational")
class SymbolConvolution(keras.layers.Layer):
    """Width-1 convolution along the symbol axis, then pooling over symbols.

    The input is a ``[B, V, T]`` symbol grid: ``inputs[b, v, t] = 1`` iff symbol ``v`` occurs at
    time step ``t``. The **symbol axis V is the convolved (spatial) axis and the time axis T is the
    channel axis**, so every symbol row (its ``T``-bit pattern of positions) goes through the same
    filter bank::

        Z[b, v, k] = activation(sum_t inputs[b, v, t] * kernel[t, k] + bias[k])   # [B, V, K]
        outputs[b, k] = pool_v Z[b, v, k]                                          # [B, K]

    The width-1 convolution is equivariant to *every* permutation of the symbol axis and the pooling
    is invariant to it, so the pooled output is invariant to renaming symbols: a rule learnt on some
    syllables transfers exactly to syllables never seen in training (Mitchell & Bowers, App. A).
    There is no per-symbol parameter, so the layer works for any vocabulary size V, also one that
    differs between training and test.

    Defaults follow the authors' reference code: no bias, no activation, Glorot-uniform kernel
    (identical to the fans of their ``[1, T, K]`` conv filter), max pooling over **all** V rows,
    including the all-zero rows of absent symbols (that is the paper's model; it can leave a filter
    "dead" at 0 when all its responses to present symbols are negative, which ``use_bias=True``
    makes rarer).

    Args:
        filters: K, number of filters (= classes for the paper's classifier).
        use_bias: add a learnt bias per filter (shared by all symbols). Default False (authors'
            code).
        activation: applied between the convolution and the pooling. Default None [paper].
        pooling: ``"max"`` (paper), ``"mean"``, ``"sum"`` (all permutation invariant), or None to
            return the un-pooled ``[B, V, K]`` activation map (e.g. to draw Fig. 1).
        kernel_initializer: initializer of the ``[T, K]`` kernel.
        bias_initializer: initializer of the ``[K]`` bias.
        **kwargs: standard ``keras.layers.Layer`` arguments.

    Call arguments:
        inputs: ``[B, V, T]`` symbol grid (float; one-hot in the paper, any values allowed).

    Returns:
        ``[B, K]`` pooled responses, or ``[B, V, K]`` when ``pooling=None``.

    Example:

    >>> grid = np.zeros((1, 12, 3), "float32"); grid[0, 8, [0, 2]] = 1; grid[0, 9, 1] = 1
    >>> tuple(keras_relational.SymbolConvolution(2)(grid).shape)
    (1, 2)

    Reference: J. Mitchell and J. S. Bowers, "Harnessing the Symmetry of Convolutions for
    Systematic Generalisation", Sec. II and Appendix A.
    """

    def __init__(self, filters, use_bias=False, activation=None, pooling="max",
                 kernel_initializer="glorot_uniform", bias_initializer="zeros", **kwargs):
        super().__init__(**kwargs)
        validation.check_positive_int("SymbolConvolution", "filters", filters)
        validation.check_choice("SymbolConvolution", "pooling", pooling, _POOLINGS)
        self.filters = filters
        self.use_bias = bool(use_bias)
        self.activation = keras.activations.get(activation)
        self.pooling = pooling
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)

    def build(self, input_shape):
        validation.check_rank(self, "inputs", input_shape, 3, "[batch, symbols, time]")
        steps = validation.check_known_dim(self, "inputs", input_shape, 2, "number of time steps T")
        self.kernel = self.add_weight(name="kernel", shape=(steps, self.filters),
                                      initializer=self.kernel_initializer)
        self.bias = None
        if self.use_bias:
            self.bias = self.add_weight(name="bias", shape=(self.filters,),
                                        initializer=self.bias_initializer)
        super().build(input_shape)

    def _check_inputs(self, input_shape):
        if self.built:  # the kernel fixes the number of time steps T
            validation.check_built_shape(self, "inputs", tuple(input_shape),
                                         (None, None, int(self.kernel.shape[0])),
                                         "[batch, symbols, time steps T]")

    def symbol_responses(self, inputs):
        """The un-pooled ``[B, V, K]`` responses of every symbol row to every filter."""
        self._check_inputs(inputs.shape)
        inputs = ops.cast(inputs, self.compute_dtype)
        responses = ops.einsum("bvt,tk->bvk", inputs, self.kernel)
        if self.bias is not None:
            responses = responses + self.bias
        return self.activation(responses)

    def call(self, inputs):
        responses = self.symbol_responses(inputs)
        if self.pooling == "max":
            return ops.max(responses, axis=1)
        if self.pooling == "mean":
            return ops.mean(responses, axis=1)
        if self.pooling == "sum":
            return ops.sum(responses, axis=1)
        return responses

    def compute_output_shape(self, input_shape):
        self._check_inputs(input_shape)
        if self.pooling is None:
            return (input_shape[0], input_shape[1], self.filters)
        return (input_shape[0], self.filters)

    def get_config(self):
        config = super().get_config()
        config.update({
            "filters": self.filters,
            "use_bias": self.use_bias,
            "activation": keras.activations.serialize(self.activation),
            "pooling": self.pooling,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
        })
        return config
