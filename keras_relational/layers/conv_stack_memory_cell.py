"""The convolutional stack LSTM cell (Mitchell & Bowers, Sec. III and Appendix B).

``stack_update`` is the pure memory update (eq. 5-6); ``ConvStackMemoryCell`` adds the gates and is
a Keras RNN cell; ``keras_relational.ConvStackMemory`` wraps it in a ``keras.layers.RNN``.
"""

import math

import keras
from keras import ops

from keras_relational import validation
from keras_relational.layers import _utils

WRITE_MODES = ("gated", "embedding_on_push")
PUSH, STAY, POP = 0, 1, 2  # tap order of the filter F[..., k] (authors' code: up, stay, down)


def shift_stack(memory, filters):
    """Depthwise width-3 convolution of N stacks with per-example kernels (eq. 5).

    Args:
        memory: ``[B, D, N]`` cell contents, cell 0 first (the only cell that is read/written).
        filters: ``[B, N, 3]`` taps (push, stay, pop) of each stack's filter.

    Returns:
        ``[B, D, N]``: ``F_push * C[j-1] + F_stay * C[j] + F_pop * C[j+1]`` with zero padding at
        both ends (a push empties cell 0 and loses cell D-1, a pop loses cell 0 and empties cell
        D-1).
    """
    zero = ops.zeros_like(memory[:, :1, :])
    up = ops.concatenate([zero, memory[:, :-1, :]], axis=1)  # up[:, j] = C[:, j-1]
    down = ops.concatenate([memory[:, 1:, :], zero], axis=1)  # down[:, j] = C[:, j+1]
    return (filters[:, None, :, PUSH] * up + filters[:, None, :, STAY] * memory
            + filters[:, None, :, POP] * down)


def stack_update(memory, filters, write=None, push_write=None):
    """One memory step: shift by the filters, then add the write to cell 0 (eq. 5 then 6).

    Args:
        memory: ``[B, D, N]`` previous contents.
        filters: ``[B, N, 3]`` (push, stay, pop) taps; the paper's are a softmax (convex).
        write: optional ``[B, N]`` value added to cell 0 *after* the shift (paper, eq. 6).
        push_write: optional ``[B, N]`` value added to cell 0 *of the push branch* before mixing,
            i.e. ``F_push * push_write`` lands in cell 0 (the authors' code variant).

    Returns:
        ``[B, D, N]`` new contents.
    """
    new_memory = shift_stack(memory, filters)
    depth = ops.shape(memory)[1]
    at_top = ops.cast(ops.arange(depth) == 0, memory.dtype)[None, :, None]  # [1, D, 1]
    if push_write is not None:
        new_memory = new_memory + at_top * (filters[:, None, :, PUSH] * push_write[:, None, :])
    if write is not None:
        new_memory = new_memory + at_top * write[:, None, :]
    return new_memory


@keras.saving.register_keras_serializable(package="keras_relational")
class GlorotUniformBias(keras.initializers.Initializer):
    """Glorot-uniform for a bias stored as a ``(1, n)`` matrix: ``U(±sqrt(6 / (1 + n)))``.

    This is how the authors' TF1 code (``xavier_initializer`` on ``[1, n]`` biases) initialised
    every bias; Keras' ``GlorotUniform`` on a 1-D ``(n,)`` shape would use ``sqrt(3 / n)`` instead.
    """

    def __init__(self, seed=None):
        self.seed = seed

    def __call__(self, shape, dtype=None):
        n = int(shape[-1])
        limit = math.sqrt(6.0 / (1.0 + n))
        init = keras.initializers.RandomUniform(-limit, limit, seed=self.seed)
        return init(shape, dtype=dtype)

    def get_config(self):
        return {"seed": self.seed}


@keras.saving.register_keras_serializable(package="keras_relational")
class ConvStackMemoryCell(keras.layers.Layer):
    """LSTM cell whose memory is N stacks of depth D, shifted by a data-dependent convolution.

    Per step, with input ``x_t`` (``[B, M]``) and previous read-out ``h`` (``[B, N]``)::

        g   = concat(h, x_t)                                        # (1)
        F   = softmax(reshape(g @ W_f + b_f, [B, N, 3]), axis=-1)   # (2) push/stay/pop per stack
              (one_hot(argmax F) in the forward pass with ``straight_through``)
        o   = sigmoid(g @ W_o + b_o)                                # (4)
        "gated" (paper, default):
            i  = sigmoid(g @ W_i + b_i) * tanh(g @ W_c + b_c)       # (3)
            C  = shift(C, F);  C[:, 0] += i                         # (5), (6)
        "embedding_on_push" (authors' code; needs M == N, no W_i, W_c):
            C  = F_push * (shift_up(C) + [j == 0] x_t) + F_stay * C + F_pop * shift_down(C)
        h   = o * tanh(C[:, 0])                                     # (7)

    ``shift`` is ``stack_update``: ``F[..., 0]`` pushes (content moves away from cell 0),
    ``F[..., 1]`` stays, ``F[..., 2]`` pops (content moves towards cell 0), zero padding at both
    ends. Stacks never mix, and there is no forget gate: the taps sum to 1: content only moves.
    The cell has no parameter that depends on D.

    States: ``[h, C]`` with ``h`` of shape ``[B, N]`` and ``C`` stored flattened as ``[B, D*N]``
    (row-major ``[D, N]``, so ``reshape(C, [B, D, N])[:, 0]`` is cell 0 of every stack).

    Args:
        units: N, number of stacks (= hidden units). Paper: 10.
        stack_depth: D, cells per stack. Paper: 20.
        write_mode: ``"gated"`` (paper eqs. 3 and 6, default) or ``"embedding_on_push"`` (the
            authors' public code: the raw input is written on the push branch; needs M == N).
        straight_through: if True, the forward pass uses hard one-hot (argmax) push / stay /
            pop filters and the gradient is the softmax's (straight-through estimator, Bengio
            et al., 2013): every stack moves by exactly one cell or stays, a discrete push-down
            automaton. Not in the paper. Default False (the paper's soft filters).
        return_filters: also output the filters ``F`` flattened to ``3N`` (stack-major) after h
            (the hard ones with ``straight_through``).
        return_memory: also output the new memory ``C`` flattened to ``D*N`` (after h and F).
        kernel_initializer: for ``W_f, W_i, W_c, W_o``. Default Glorot-uniform (authors' code).
        bias_initializer: for ``b_f, b_i, b_c, b_o``. Default ``GlorotUniformBias`` (authors' code).
        **kwargs: standard ``keras.layers.Layer`` arguments.

    Reference: J. Mitchell and J. S. Bowers, "Harnessing the Symmetry of Convolutions for
    Systematic Generalisation", Sec. III and Appendix B, eqs. (1)-(8).
    """

    def __init__(self, units, stack_depth=20, write_mode="gated", return_filters=False,
                 return_memory=False, kernel_initializer="glorot_uniform",
                 bias_initializer=None, straight_through=False, **kwargs):
        super().__init__(**kwargs)
        validation.check_positive_int("ConvStackMemoryCell", "units", units)
        validation.check_positive_int("ConvStackMemoryCell", "stack_depth", stack_depth)
        validation.check_choice("ConvStackMemoryCell", "write_mode", write_mode, WRITE_MODES)
        self.units = units
        self.stack_depth = stack_depth
        self.write_mode = write_mode
        self.return_filters = bool(return_filters)
        self.return_memory = bool(return_memory)
        self.straight_through = bool(straight_through)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(
            bias_initializer if bias_initializer is not None else GlorotUniformBias())
        self.state_size = [units, stack_depth * units]
        self.output_size = (units + (3 * units if self.return_filters else 0)
                            + (stack_depth * units if self.return_memory else 0))

    def _gate(self, name, input_dim, width):
        kernel = self.add_weight(name=f"{name}_kernel", shape=(input_dim, width),
                                 initializer=self.kernel_initializer)
        bias = self.add_weight(name=f"{name}_bias", shape=(width,),
                               initializer=self.bias_initializer)
        return kernel, bias

    def build(self, input_shape):
        input_dim = validation.check_known_dim(self, "inputs", input_shape, -1, "input size M")
        if self.write_mode == "embedding_on_push" and input_dim != self.units:
            raise ValueError(
                f"ConvStackMemoryCell with write_mode='embedding_on_push' writes the input into "
                f"the stacks, so it needs input size M == units ({self.units}), received "
                f"input shape {tuple(input_shape)}.")
        self._built_input_dim = input_dim
        concat_dim = self.units + input_dim
        names = ["filter", "output"] + (["input", "candidate"] if self.write_mode == "gated"
                                        else [])
        widths = [3 * self.units] + [self.units] * (len(names) - 1)
        kernels, biases = [], []
        for name, width in zip(names, widths, strict=True):
            kernel, bias = self._gate(name, concat_dim, width)
            kernels.append(kernel)
            biases.append(bias)
            setattr(self, f"{name}_kernel", kernel)
            setattr(self, f"{name}_bias", bias)
        self._kernels, self._biases = kernels, biases
        super().build(input_shape)

    def gates(self, inputs, h):
        """The gate values for one step: ``(F [B, N, 3], o [B, N], i [B, N] or None)``."""
        g = ops.concatenate([h, ops.cast(inputs, h.dtype)], axis=-1)
        kernel = ops.concatenate(self._kernels, axis=1)
        bias = ops.concatenate(self._biases, axis=0)
        z = ops.matmul(g, kernel) + bias
        n = self.units
        filters = _utils.softmax(ops.reshape(z[:, :3 * n], (-1, n, 3)), axis=-1)
        if self.straight_through:  # value: exactly one-hot; gradient: the softmax's
            hard = ops.one_hot(ops.argmax(filters, axis=-1), 3, dtype=filters.dtype)
            filters = hard + (filters - ops.stop_gradient(filters))
        output_gate = ops.sigmoid(z[:, 3 * n:4 * n])
        write = None
        if self.write_mode == "gated":
            write = ops.sigmoid(z[:, 4 * n:5 * n]) * ops.tanh(z[:, 5 * n:6 * n])
        return filters, output_gate, write

    def call(self, inputs, states, training=None):
        h, flat_memory = states[0], states[1]
        memory = ops.reshape(flat_memory, (-1, self.stack_depth, self.units))
        filters, output_gate, write = self.gates(inputs, h)
        if self.write_mode == "gated":
            memory = stack_update(memory, filters, write=write)
        else:
            memory = stack_update(memory, filters, push_write=ops.cast(inputs, memory.dtype))
        new_h = output_gate * ops.tanh(memory[:, 0, :])
        flat_memory = ops.reshape(memory, (-1, self.stack_depth * self.units))
        outputs = [new_h]
        if self.return_filters:
            outputs.append(ops.reshape(filters, (-1, 3 * self.units)))
        if self.return_memory:
            outputs.append(flat_memory)
        output = outputs[0] if len(outputs) == 1 else ops.concatenate(outputs, axis=-1)
        return output, [new_h, flat_memory]

    def get_initial_state(self, batch_size=None):
        dtype = self.compute_dtype
        return [ops.zeros((batch_size, self.units), dtype=dtype),
                ops.zeros((batch_size, self.stack_depth * self.units), dtype=dtype)]

    def get_config(self):
        config = super().get_config()
        config.update({
            "units": self.units,
            "stack_depth": self.stack_depth,
            "write_mode": self.write_mode,
            "return_filters": self.return_filters,
            "return_memory": self.return_memory,
            "straight_through": self.straight_through,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
        })
        return config
