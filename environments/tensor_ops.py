"""Row-wise tensor helpers of the tensor BoxWorlds, in `keras.ops` (any backend).

Each works on a batch of levels, one row per level: rows selected by a mask, one cell of each
row read or written, the actions checked. `tensor_base`, the variants' `tensor` modules and the
on-device level samplers (`tensor_random`, `*/tensor_levels`) share them.
"""

import keras
import numpy as np
from keras import ops

from keras_relational.validation import invalid_value

from .base import NUM_ACTIONS


def expand_as(mask, x):
    """`mask` `[N]` reshaped to broadcast against `x` `[N, ...]`."""
    return ops.reshape(mask, (-1,) + (1,) * (len(x.shape) - 1))


def row_select(mask, new, old):
    """`new` where `mask` `[N]` is True, `old` elsewhere (rows of `[N, ...]` tensors)."""
    return ops.where(expand_as(mask, old), new, old)


def gather_cells(grid, index):
    """`grid[i, index[i]]` for int `[N, C]` `grid` and int `[N]` `index` (in range)."""
    return ops.take_along_axis(grid, ops.expand_dims(index, 1), axis=1)[:, 0]


def set_cells(grid, mask, index, value):
    """`grid` with `grid[i, index[i]] = value` where `mask[i]`."""
    cells = ops.arange(grid.shape[1], dtype="int32")[None, :]
    hit = ops.logical_and(ops.expand_dims(mask, 1), cells == ops.expand_dims(index, 1))
    value = ops.cast(value, grid.dtype)
    if len(value.shape) == 1:  # one value per row
        value = ops.expand_dims(value, 1)
    return ops.where(hit, value, grid)


def _concrete(values):
    """`values` as a NumPy array when they are known now (not traced), else None."""
    if isinstance(values, np.ndarray | list | tuple | int | np.integer):
        return np.asarray(values)
    try:
        return np.asarray(ops.convert_to_numpy(values))
    except Exception:  # a JAX tracer or a symbolic TF tensor: values unknown until run time
        return None


def check_actions(actions, batch_size):
    """`actions` as int32 `[batch_size]`; raises a ValueError naming `actions` otherwise."""
    if not hasattr(actions, "dtype") or isinstance(actions, list | tuple):
        actions = np.asarray(actions)
    dtype = keras.backend.standardize_dtype(actions.dtype)
    shape = tuple(actions.shape)
    if not dtype.startswith(("int", "uint")):
        raise invalid_value("actions", f"integers in [0, {NUM_ACTIONS}) (0 up, 1 down, 2 left, "
                            "3 right)", f"dtype {dtype}")
    if shape != (batch_size,):
        raise invalid_value("actions", f"shape ({batch_size},), one action per slot of "
                            "`state`", f"shape {shape}")
    values = _concrete(actions)
    if values is not None and values.size and (values.min() < 0 or values.max() >= NUM_ACTIONS):
        raise invalid_value("actions", f"values in [0, {NUM_ACTIONS})",
                            values.tolist() if values.size <= 8 else
                            f"values in [{values.min()}, {values.max()}]")
    return ops.cast(actions, "int32")


def keras_backend():
    """The Keras backend the tensor environments compute with (`keras.backend.backend()`)."""
    return keras.backend.backend()
