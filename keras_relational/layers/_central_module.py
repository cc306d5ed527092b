"""The base of the Relations Game baseline central modules (Shanahan et al. 2020, Sec. 4)."""

import keras

from keras_relational import validation
from keras_relational.layers import initializers


class CentralModule(keras.layers.Layer):
    """Weights drawn from the paper's initialisers, and the checks of the entities' shape.

    The baselines hold plain weights rather than sub-layers, so that their saved weight layout
    stays the one of the models trained before this base existed.
    """

    def _kernel(self, name, shape):
        return self.add_weight(name=name, shape=shape,
                               initializer=initializers.truncated_normal_kernel())

    def _bias(self, name, shape):
        return self.add_weight(name=name, shape=shape, initializer=initializers.constant_bias())

    def _entity_shape(self, input_shape):
        """``(N, m)`` of entities ``[B, N, m]``, both of which must be known."""
        validation.check_rank(self, "inputs", input_shape, 3, "[batch, entities, features]")
        entities = validation.check_known_dim(
            self, "inputs", input_shape, 1, "number of entities N")
        features = validation.check_known_dim(self, "inputs", input_shape, 2, "feature size m")
        return entities, features
