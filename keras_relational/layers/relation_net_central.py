"""The relation-net baseline of the Relations Game (Shanahan et al. 2020, Sec. 4)."""

import keras
from keras import ops

from keras_relational import validation
from keras_relational.layers._central_module import CentralModule


@keras.saving.register_keras_serializable(package="keras_relational")
class RelationNetCentral(CentralModule):
    """Relation-net baseline: a pair MLP over all N^2 ordered pairs (self-pairs included), averaged.

    ``out = mean_{s, r} relu(relu([L_s, L_r] W1) W2)`` over every ordered pair ``(s, r)`` of the
    ``N`` entities, ``s = r`` included, with no biases (Shanahan et al. 2020, Sec. 4; the pairs,
    the mean and the missing biases follow the authors' reference notebook). The first layer is
    linear in the pair, so it is computed as ``L_s W1_top + L_r W1_bottom`` without materialising
    the ``[B, N^2, 2m]`` pair tensor (the same numbers). Invariant to any permutation of the
    entities. Kernels start from a truncated normal of stddev 0.1 (reference notebook).

    Shapes: ``[B, N, m] -> [B, output_dim]``; ``m`` must be known when built.

    Args:
        hidden_units: width of the first pair layer. Defaults to 256 (Table S2).
        output_dim: width of the second pair layer and of the output. Defaults to 640 (Table S2).
        **kwargs: standard ``keras.layers.Layer`` arguments.

    Call arguments:
        inputs: entities ``[B, N, m]``.

    Returns:
        ``[B, output_dim]``.

    Example:

    >>> entities = np.random.rand(2, 25, 34).astype("float32")
    >>> relation_net = keras_relational.RelationNetCentral()
    >>> tuple(relation_net(entities).shape)
    (2, 640)

    Reference: Shanahan et al., "An Explicitly Relational Neural Network Architecture",
    ICML 2020, Sec. 4 (baselines) and Table S2; Santoro et al., "A simple neural network module
    for relational reasoning", NeurIPS 2017.
    """

    def __init__(self, hidden_units=256, output_dim=640, **kwargs):  # Table S2
        super().__init__(**kwargs)
        validation.check_positive_int("RelationNetCentral", "hidden_units", hidden_units)
        validation.check_positive_int("RelationNetCentral", "output_dim", output_dim)
        self.hidden_units = hidden_units
        self.output_dim = output_dim

    def build(self, input_shape):
        _, features = self._entity_shape(input_shape)
        self.features = features
        self.pair_kernel = self._kernel("pair_kernel", (2 * features, self.hidden_units))
        self.output_kernel = self._kernel("output_kernel", (self.hidden_units, self.output_dim))
        super().build(input_shape)

    def call(self, inputs):
        self._check_inputs(inputs.shape, fixed_count=False)
        sender = ops.matmul(inputs, self.pair_kernel[:self.features])  # [B, N, hidden]
        receiver = ops.matmul(inputs, self.pair_kernel[self.features:])
        pairs = ops.relu(sender[:, :, None, :] + receiver[:, None, :, :])  # [B, N, N, hidden]
        outputs = ops.relu(ops.einsum("bsrh,ho->bsro", pairs, self.output_kernel))
        return ops.mean(outputs, axis=(1, 2))

    def compute_output_shape(self, input_shape):
        self._check_inputs(input_shape, fixed_count=False)
        return (input_shape[0], self.output_dim)

    def get_config(self):
        config = super().get_config()
        config.update({"hidden_units": self.hidden_units, "output_dim": self.output_dim})
        return config
