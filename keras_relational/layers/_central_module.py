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
        self._built_entity_shape = (entities, features)
        return entities, features

    def _check_inputs(self, input_shape, fixed_count=True):
        """Raises a ValueError naming `inputs` if ``input_shape`` differs from the ``[B, N, m]``
        the weights were built for (N only when ``fixed_count``): at call and symbolic time."""
        built = getattr(self, "_built_entity_shape", None)
        if built is not None:
            count, features = built
            validation.check_built_shape(
                self, "inputs", tuple(input_shape), (None, count if fixed_count else None,
                                                     features),
                "[batch, entities N, features m]")
