"""The one builder of stacks of ``keras.layers.Dense`` (MLPs) used by the layers and models."""

import keras

from keras_relational.layers import _utils


def dense_stack(units, names, activation="relu", output_activation=None, input_width=None,
                use_bias=True, kernel_initializer="glorot_uniform", bias_initializer="zeros",
                dtype=None):
    """``len(units)`` Dense layers: widths ``units``, ``activation`` on all but the last.

    Args:
        units: the output width of each layer, in order.
        names: the name of each layer (the layer paths of saved models depend on them).
        activation: of every layer but the last.
        output_activation: of the last layer (None: linear, e.g. ``g_theta`` back to the entity
            width; the same as ``activation`` for a stack of hidden layers).
        input_width: if given, every layer is built for it (and the widths before it), as a
            composite layer's ``build`` must; None leaves them to be built on first call (in a
            functional model).
        use_bias, kernel_initializer, bias_initializer, dtype: of every layer; each layer gets its
            own clone of the initializers, so no two start from the same weights.

    Returns:
        The list of layers; apply them with :func:`apply_dense_stack`.
    """
    units, names = tuple(units), tuple(names)
    if len(units) != len(names):
        raise ValueError(f"dense_stack expects one name per layer, received units={units!r} and "
                         f"names={names!r}.")
    layers = []
    for i, (width, name) in enumerate(zip(units, names, strict=True)):
        dense = keras.layers.Dense(
            width,
            activation=output_activation if i == len(units) - 1 else activation,
            use_bias=use_bias,
            kernel_initializer=_utils.clone_initializer(kernel_initializer),
            bias_initializer=_utils.clone_initializer(bias_initializer),
            dtype=dtype,
            name=name,
        )
        if input_width is not None:
            dense.build((None, input_width))
            input_width = width
        layers.append(dense)
    return layers


def apply_dense_stack(layers, inputs):
    """``inputs`` through each of ``layers`` in turn."""
    outputs = inputs
    for dense in layers:
        outputs = dense(outputs)
    return outputs
