"""The MLP baselines of the Relations Game (Shanahan et al. 2020, Sec. 4): MLP1 and MLP2."""

import keras
from keras import ops

from keras_relational import validation
from keras_relational.layers._central_module import CentralModule


@keras.saving.register_keras_serializable(package="keras_relational")
class MLPCentral(CentralModule):
    """MLP baseline central module: the flattened entities through Dense + ReLU layers.

    In words: the entities ``L`` (``[B, N, m]``) are flattened entity-major,
    ``F[b, n*m + f] = L[b, n, f]``, and go through ``len(hidden_units)`` fully-connected layers,
    each ``h <- relu(h W_i + b_i)`` (the last one too). MLP1 is one layer of 640, MLP2 two layers
    of 1024 and 640 (Shanahan et al. 2020, Sec. 4 and Table S2). Every kernel starts from a
    truncated normal of stddev 0.1 and every bias from 0.1 (the authors' reference notebook, see
    ``keras_relational.layers.initializers``). The weights are read position by position, so
    ``N`` and ``m`` must be known when the layer is built, and the output depends on the order
    of the entities.

    Shapes: ``[B, N, m] -> [B, hidden_units[-1]]``.

    Args:
        hidden_units: the widths of the Dense layers, non-empty; each has a bias and a ReLU.
            Defaults to ``(640,)``, MLP1 (Table S2); MLP2 is ``(1024, 640)``.
        **kwargs: standard ``keras.layers.Layer`` arguments.

    Call arguments:
        inputs: entities ``[B, N, m]`` with ``N`` and ``m`` known.

    Returns:
        ``[B, hidden_units[-1]]``.

    Example:

    >>> entities = np.random.rand(2, 25, 34).astype("float32")
    >>> mlp2 = keras_relational.MLPCentral(hidden_units=(1024, 640))
    >>> tuple(mlp2(entities).shape)
    (2, 640)

    Reference: Shanahan et al., "An Explicitly Relational Neural Network Architecture",
    ICML 2020, Sec. 4 (baselines) and Table S2.
    """

    def __init__(self, hidden_units=(640,), **kwargs):  # Shanahan et al. 2020, Table S2
        super().__init__(**kwargs)
        validation.check_positive_int_sequence("MLPCentral", "hidden_units", hidden_units,
                                               allow_empty=False)
        self.hidden_units = tuple(hidden_units)

    def build(self, input_shape):
        entities, features = self._entity_shape(input_shape)
        self.flat_size = entities * features
        self.dense_weights = []
        width = self.flat_size
        for i, units in enumerate(self.hidden_units):
            self.dense_weights.append((self._kernel(f"kernel_{i}", (width, units)),
                                       self._bias(f"bias_{i}", (units,))))
            width = units
        super().build(input_shape)

    def call(self, inputs):
        self._check_inputs(inputs.shape)
        hidden = ops.reshape(inputs, (-1, self.flat_size))
        for kernel, bias in self.dense_weights:
            hidden = ops.relu(ops.matmul(hidden, kernel) + bias)
        return hidden

    def compute_output_shape(self, input_shape):
        self._check_inputs(input_shape)
        return (input_shape[0], self.hidden_units[-1])

    def get_config(self):
        config = super().get_config()
        config.update({"hidden_units": list(self.hidden_units)})
        return config
