"""The SC2 agent's greedy policy as one Keras model, and its SavedModel export.

:func:`greedy_policy` wires the trunk and the argument heads of
:func:`~keras_relational.models.sc2_agent.sc2_agent` into one functional model that maps an
adapter observation and the ConvLSTM state to a whole composite action: the most probable
*available* function id (the trunk masks the others), then the most probable value of every
argument given that id (Zambaldi et al. 2019, App. C; arguments the function does not take are
ignored by the environment). :func:`export_policy` writes it as a TensorFlow SavedModel
(``model.export``), which serves without pysc2, Keras or this package::

    import tensorflow as tf

    policy = tf.saved_model.load("ROOT/policy")
    outputs = policy.serve(inputs)   # inputs: the observation dict + state_h, state_c
    outputs["function"], outputs["screen"], outputs["state_h"]
"""

import keras

from keras_relational import whole_files
from keras_relational.models.sc2_agent import NON_SPATIAL_ARGUMENTS, SPATIAL_ARGUMENTS

ARGUMENTS = SPATIAL_ARGUMENTS + tuple(name for name, _ in NON_SPATIAL_ARGUMENTS)


def greedy_policy(model):
    """A functional model: trunk inputs -> ``function`` and one int32 ``[B]`` per argument,
    ``value`` ``[B]`` and the next ``state_h``, ``state_c``. Shares ``model``'s weights."""
    trunk = model.get_layer("sc2_trunk")
    heads = model.get_layer("sc2_argument_heads")
    inputs = {key: keras.Input(tensor.shape[1:], dtype=tensor.dtype, name=key)
              for key, tensor in trunk.input.items()}
    out = trunk(inputs)
    function = keras.ops.cast(keras.ops.argmax(out["function_logits"], axis=-1), "int32")
    args = heads({"shared": out["shared"], "spatial": out["spatial"], "function_id": function})
    outputs = {"function": function}
    outputs.update({name: keras.ops.cast(keras.ops.argmax(args[name], axis=-1), "int32")
                    for name in ARGUMENTS})
    outputs.update(value=out["value"], state_h=out["state_h"], state_c=out["state_c"])
    return keras.Model(inputs, outputs, name="sc2_greedy_policy")


def export_policy(model, directory):
    """Writes :func:`greedy_policy` of ``model`` as a SavedModel at ``directory`` (endpoint
    ``serve``); written next to it first and then moved, so an interrupted export never leaves
    a half-written policy (:func:`~keras_relational.whole_files.write_whole`, with the ``export``
    fault point). Returns ``directory``."""
    return whole_files.write_whole(
        directory, lambda partial: greedy_policy(model).export(partial, verbose=False),
        fault_point="export")
