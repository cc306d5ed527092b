"""Deliberately defective layers that the contract's own tests feed to it."""

import keras


@keras.saving.register_keras_serializable(package="keras_relational_tests")
class BackendDependent(keras.layers.Layer):
    """Adds 1 under the JAX backend only: the JAX check must notice."""

    def call(self, inputs):
        return inputs + (1.0 if keras.backend.backend() == "jax" else 0.0)
