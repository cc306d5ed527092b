"""The convolutional stack LSTM as a Keras RNN layer (Mitchell & Bowers, Sec. III and App. B)."""

import keras

from keras_relational import validation
from keras_relational.layers import _utils
from keras_relational.layers.conv_stack_memory_cell import ConvStackMemoryCell


@keras.saving.register_keras_serializable(package="keras_relational")
class ConvStackMemory(keras.layers.RNN):
    """An LSTM whose memory cells form N stacks of depth D, shifted by a learnt convolution.

    A ``keras.layers.RNN`` over :class:`keras_relational.layers.conv_stack_memory_cell.
    ConvStackMemoryCell`: at every step each of the N stacks gets its own softmax-normalised
    width-3 filter (push / stay / pop), the stacks are shifted by it, a value is written to cell 0
    and the hidden state is the gated read-out of cell 0 (see the cell for the equations). Because
    the shift is a convolution, the stack is the same everywhere along its depth (translation
    symmetry), which is what lets the model recall longer and more deeply nested strings than it
    was trained on.

    Args:
        units: N, number of stacks = hidden units. Paper: 10.
        stack_depth: D, cells per stack. Paper: 20. No parameter depends on it.
        write_mode: ``"gated"`` (paper's equations, default) or ``"embedding_on_push"`` (authors'
            code; needs input size M == units). See Mitchell & Bowers, App. B.
        return_filters: also return the ``3N`` filter taps per step after ``h`` (for plotting).
        return_memory: also return the flattened ``D*N`` memory per step (for plotting).
        kernel_initializer, bias_initializer: see the cell.
        straight_through: hard one-hot push / stay / pop in the forward pass, softmax gradients
            (straight-through estimator; not in the paper). See the cell.
        return_sequences, return_state, go_backwards, stateful, unroll: as ``keras.layers.RNN``.
        **kwargs: other ``keras.layers.RNN`` / ``Layer`` arguments.

    Call arguments:
        sequences: ``[B, T, M]`` inputs (e.g. token embeddings).
        initial_state: optional ``[h [B, N], C [B, D*N]]``.
        mask: optional ``[B, T]`` boolean mask (masked steps carry the state over); integer
            masks (1/0) are accepted, float masks refused with a ValueError.

    Returns:
        ``[B, T, N']`` if ``return_sequences`` else ``[B, N']`` (``N' = N`` plus ``3N`` /
        ``D*N`` with ``return_filters`` / ``return_memory``); with ``return_state`` followed by
        the final ``h`` and flattened ``C``.

    Example:

    >>> layer = keras_relational.ConvStackMemory(10, stack_depth=20, return_sequences=True)
    >>> tuple(layer(np.zeros((2, 7, 10), "float32")).shape)
    (2, 7, 10)

    Reference: J. Mitchell and J. S. Bowers, "Harnessing the Symmetry of Convolutions for
    Systematic Generalisation", Sec. III and Appendix B, eqs. (1)-(8).
    """

    def __init__(self, units, stack_depth=20, write_mode="gated", return_filters=False,
                 return_memory=False, kernel_initializer="glorot_uniform", bias_initializer=None,
                 return_sequences=False, return_state=False, go_backwards=False, stateful=False,
                 unroll=False, straight_through=False, **kwargs):
        cell_kwargs = {k: kwargs.pop(k) for k in ("dtype",) if k in kwargs}
        cell = ConvStackMemoryCell(
            units, stack_depth=stack_depth, write_mode=write_mode, return_filters=return_filters,
            return_memory=return_memory, kernel_initializer=kernel_initializer,
            bias_initializer=bias_initializer, straight_through=straight_through,
            name="conv_stack_memory_cell", **cell_kwargs)
        super().__init__(cell, return_sequences=return_sequences, return_state=return_state,
                         go_backwards=go_backwards, stateful=stateful, unroll=unroll,
                         **cell_kwargs, **kwargs)

    def call(self, sequences, initial_state=None, mask=None, training=False):
        shape = tuple(sequences.shape)
        input_dim = getattr(self.cell, "_built_input_dim", None)
        if input_dim is not None:
            validation.check_built_shape(self, "sequences", shape, (None, None, input_dim),
                                         "[batch, time, input size M]")
        _utils.check_masks(self, shape, mask, argument="sequences")
        return super().call(sequences, initial_state=initial_state, mask=mask,
                            training=training)

    units = property(lambda self: self.cell.units)
    stack_depth = property(lambda self: self.cell.stack_depth)
    write_mode = property(lambda self: self.cell.write_mode)
    return_filters = property(lambda self: self.cell.return_filters)
    return_memory = property(lambda self: self.cell.return_memory)
    straight_through = property(lambda self: self.cell.straight_through)

    def get_config(self):
        config = super().get_config()
        del config["cell"]
        cell_config = self.cell.get_config()
        for key in ("units", "stack_depth", "write_mode", "return_filters", "return_memory",
                    "kernel_initializer", "bias_initializer", "straight_through"):
            config[key] = cell_config[key]
        return config

    @classmethod
    def from_config(cls, config):
        return cls(**config)
