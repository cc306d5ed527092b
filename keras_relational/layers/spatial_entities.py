"""Feature map -> entity set with appended (x, y) coordinates."""

import keras
from keras import ops

from keras_relational import validation

_COORDINATE_MODES = ("symmetric", "unit")


@keras.saving.register_keras_serializable(package="keras_relational")
class SpatialEntities(keras.layers.Layer):
    """Turns a feature map into a set of entities, one per cell, with its (x, y) position appended.

    Each cell ``(row, col)`` of a ``[B, H, W, C]`` feature map becomes entity
    ``index = row * W + col`` (row-major) of a ``[B, H*W, C+2]`` entity set: the cell's ``C``
    features followed by its x coordinate (varies along the width) and its y coordinate (varies
    along the height). The coordinates are constants, not weights. Use :meth:`entity_index` and
    :meth:`cell_of_entity` to go between cells and entities (e.g. to draw attention maps).

    Coordinate modes:

    * ``"symmetric"`` (default): ``x = linspace(-1, 1, W)``, ``y = linspace(-1, 1, H)``, so the
      top-left cell is (-1, -1) and the bottom-right cell is (+1, +1), as in Zambaldi et al. (2019,
      Sec. 2.2) and Clift et al. (2020).
    * ``"unit"``: ``x = col / W``, ``y = row / H`` in ``[0, 1)``, as in PrediNet (Shanahan et al.
      2020).

    Args:
        coordinate_mode: ``"symmetric"`` or ``"unit"``, see above.
        **kwargs: standard ``keras.layers.Layer`` arguments (``name``, ``dtype``, ...).

    Call arguments:
        inputs: feature map of shape ``[B, H, W, C]``.

    Returns:
        Entities of shape ``[B, H*W, C+2]``.

    Example:

    >>> feature_map = np.zeros((2, 3, 4, 5), "float32")
    >>> entities = keras_relational.SpatialEntities()(feature_map)
    >>> tuple(entities.shape)
    (2, 12, 7)

    Reference: Zambaldi et al., "Deep reinforcement learning with relational inductive biases",
    ICLR 2019.
    """

    def __init__(self, coordinate_mode="symmetric", **kwargs):
        super().__init__(**kwargs)
        validation.check_choice(
            "SpatialEntities", "coordinate_mode", coordinate_mode, _COORDINATE_MODES
        )
        self.coordinate_mode = coordinate_mode

    def build(self, input_shape):
        validation.check_rank(self, "inputs", input_shape, 4, "[batch, height, width, channels]")
        super().build(input_shape)

    def _coordinates(self, height, width):
        """The ``[H, W, 2]`` (x, y) grid in the layer's compute dtype."""
        dtype = self.compute_dtype
        cols = ops.cast(ops.arange(width), dtype)
        rows = ops.cast(ops.arange(height), dtype)
        width_f = ops.cast(width, dtype)
        height_f = ops.cast(height, dtype)
        if self.coordinate_mode == "symmetric":
            # linspace(-1, 1, n); a single cell sits at -1, like np.linspace(-1, 1, 1).
            xs = -1.0 + 2.0 * cols / ops.maximum(width_f - 1.0, 1.0)
            ys = -1.0 + 2.0 * rows / ops.maximum(height_f - 1.0, 1.0)
        else:
            xs = cols / width_f
            ys = rows / height_f
        x_grid = ops.broadcast_to(xs[None, :], (height, width))
        y_grid = ops.broadcast_to(ys[:, None], (height, width))
        return ops.stack([x_grid, y_grid], axis=-1)

    def call(self, inputs):
        shape = ops.shape(inputs)
        batch, height, width = shape[0], shape[1], shape[2]
        coordinates = self._coordinates(height, width)
        coordinates = ops.broadcast_to(coordinates[None], (batch, height, width, 2))
        with_coordinates = ops.concatenate([inputs, ops.cast(coordinates, inputs.dtype)], axis=-1)
        channels = with_coordinates.shape[-1]
        if channels is None:
            channels = ops.shape(with_coordinates)[-1]
        return ops.reshape(with_coordinates, (batch, height * width, channels))

    def compute_output_shape(self, input_shape):
        batch, height, width, channels = input_shape
        entities = None if height is None or width is None else height * width
        channels = None if channels is None else channels + 2
        return (batch, entities, channels)

    def get_config(self):
        config = super().get_config()
        config.update({"coordinate_mode": self.coordinate_mode})
        return config

    @staticmethod
    def entity_index(row, col, width):
        """Index of the entity made from cell ``(row, col)`` of a map ``width`` cells wide."""
        return row * width + col

    @staticmethod
    def cell_of_entity(index, width):
        """``(row, col)`` of the cell that entity ``index`` comes from."""
        return divmod(index, width)
