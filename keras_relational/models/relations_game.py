"""The Relations Game classifier of Shanahan et al. (2020) and its four baseline central modules.

The whole model (Shanahan et al. 2020, Sec. 4 and Fig. 3) is the same for every architecture;
only the central module changes::

    image [B, 36, 36, 3] (raw pixels 0..255)  -> / 256
      -> Conv2D(32, 12x12, stride 6, VALID, ReLU)        "input_cnn"   [B, 5, 5, 32]
      -> (x, y) = (col / 5, row / 5) appended             "entities"    [B, 25, 34]
      -> central module                                   "central"     [B, 640]
      -> concat task one-hot [B, 5]
      -> Dense(8, ReLU)                                   "output_hidden"
      -> Dense(num_classes) logits                        "output_logits"

Central modules: ``keras_relational.PrediNet`` and the baselines ``keras_relational.MLPCentral``
(MLP1 and MLP2), ``RelationNetCentral`` and ``MultiHeadAttentionCentral``. Every
kernel starts from a truncated normal with stddev 0.1 and every bias from 0.1 (the authors'
reference notebook). :func:`reinitialize` restores that distribution (transfer protocol,
Shanahan et al. 2020, Sec. 4 and Fig. 3).

Example:

```python
from keras_relational.models import relations_game

model = relations_game.build_model("predinet")           # 890,530 parameters
logits = model({"image": images, "task": task_one_hot})  # images: raw 0..255 floats
```

Reference: Shanahan et al., "An Explicitly Relational Neural Network Architecture", ICML 2020.
"""

import keras
from keras import ops

from keras_relational import validation
from keras_relational.layers import initializers
from keras_relational.layers.mlp_central import MLPCentral
from keras_relational.layers.multi_head_attention_central import MultiHeadAttentionCentral
from keras_relational.layers.predinet import PrediNet
from keras_relational.layers.relation_net_central import RelationNetCentral
from keras_relational.layers.spatial_entities import SpatialEntities
from keras_relational.models.choices import CENTRAL_MODULES

NUM_TASKS = 5  # Shanahan et al. 2020, reference notebook: the task one-hot always has 5 slots.
IMAGE_SHAPE = (36, 36, 3)  # Shanahan et al. 2020, Sec. 4
PIXEL_SCALE = 1.0 / 256.0  # reference notebook: uint8 pixels / 256
BIAS_INIT = initializers.BIAS_INIT  # reference notebook: every bias starts at 0.1
# Names of the model's stages, used by the transfer protocol.
INPUT_CNN, ENTITIES, CENTRAL, WITH_TASK, OUTPUT_HIDDEN, OUTPUT_LOGITS = (
    "input_cnn", "entities", "central", "with_task", "output_hidden", "output_logits")
OUTPUT_LAYERS = (OUTPUT_HIDDEN, OUTPUT_LOGITS)


# The paper's initialisers, shared with the central modules (keras_relational.layers.initializers).
kernel_initializer = initializers.truncated_normal_kernel
bias_initializer = initializers.constant_bias


def make_central(central="predinet", **kwargs):
    """The central module named ``central`` (one of ``CENTRAL_MODULES``), with paper defaults.

    ``kwargs`` override the module's constructor arguments (e.g. ``num_heads=8``).
    """
    validation.check_choice("make_central", "central", central, CENTRAL_MODULES)
    if central == "predinet":
        return PrediNet(name=CENTRAL, **kwargs)
    if central == "mlp1":
        return MLPCentral(**{"hidden_units": (640,), **kwargs}, name=CENTRAL)
    if central == "mlp2":
        return MLPCentral(**{"hidden_units": (1024, 640), **kwargs}, name=CENTRAL)
    if central == "relation_net":
        return RelationNetCentral(name=CENTRAL, **kwargs)
    return MultiHeadAttentionCentral(name=CENTRAL, **kwargs)


def build_model(central="predinet", num_classes=2, num_tasks=NUM_TASKS, image_shape=IMAGE_SHAPE,
                conv_filters=32, conv_kernel=12, conv_stride=6, hidden_units=8,
                central_kwargs=None, name=None):
    """The Relations Game classifier (Shanahan et al. 2020, Sec. 4) around the named central module.

    Args:
        central: one of ``"predinet"``, ``"mlp1"``, ``"mlp2"``, ``"relation_net"``, ``"mha"``.
        num_classes: 2 for every task but ``colour_and_or_shape`` (4).
        num_tasks: size of the task one-hot (5 in the paper, even for single-task data).
        image_shape: ``(36, 36, 3)`` in the paper.
        conv_filters, conv_kernel, conv_stride: the input CNN, one VALID conv layer with ReLU
            (32 filters, 12x12, stride 6: Table S2 and the reference notebook).
        hidden_units: the output MLP's hidden width (8, Table S2).
        central_kwargs: extra constructor arguments for the central module.
        name: the model's name (defaults to ``relations_game_<central>``).

    Returns:
        A functional ``keras.Model`` taking ``{"image": [B, 36, 36, 3] raw 0..255 floats,
        "task": [B, num_tasks] one-hot}`` and returning ``[B, num_classes]`` logits.
    """
    validation.check_choice("build_model", "central", central, CENTRAL_MODULES)
    for argument, value in (("num_classes", num_classes), ("num_tasks", num_tasks),
                            ("conv_filters", conv_filters), ("conv_kernel", conv_kernel),
                            ("conv_stride", conv_stride), ("hidden_units", hidden_units)):
        validation.check_positive_int("build_model", argument, value)
    image = keras.Input(shape=tuple(image_shape), name="image")
    task = keras.Input(shape=(num_tasks,), name="task")
    scaled = keras.layers.Rescaling(PIXEL_SCALE, name="scale")(image)
    features = keras.layers.Conv2D(
        conv_filters, conv_kernel, strides=conv_stride, padding="valid", activation="relu",
        kernel_initializer=kernel_initializer(), bias_initializer=bias_initializer(),
        name=INPUT_CNN)(scaled)
    entities = SpatialEntities(coordinate_mode="unit", name=ENTITIES)(features)
    propositions = make_central(central, **(central_kwargs or {}))(entities)
    joined = keras.layers.Concatenate(name=WITH_TASK)([propositions, task])
    hidden = keras.layers.Dense(hidden_units, activation="relu",
                                kernel_initializer=kernel_initializer(),
                                bias_initializer=bias_initializer(), name=OUTPUT_HIDDEN)(joined)
    logits = keras.layers.Dense(num_classes, kernel_initializer=kernel_initializer(),
                                bias_initializer=bias_initializer(), name=OUTPUT_LOGITS)(hidden)
    return keras.Model({"image": image, "task": task}, logits,
                       name=name or f"relations_game_{central}")


def entity_model(model):
    """A model sharing ``model``'s layers that maps its inputs to the entities ``[B, N, m]``."""
    return keras.Model(model.input["image"], model.get_layer(ENTITIES).output)


def central_model(model):
    """A model sharing ``model``'s layers that maps its image input to the central output
    ``[B, D]`` (the propositions ``R*`` for PrediNet; the task id joins only after it)."""
    return keras.Model(model.input["image"], model.get_layer(CENTRAL).output)


def readout_model(model):
    """A model sharing ``model``'s output MLP: ``{"central": [B, D], "task": [B, T]}`` -> logits.

    With :func:`central_model` it splits ``model`` at the central module, so the central output
    can be edited in between (head ablation, Shanahan et al. 2020, Fig. 6c).
    """
    propositions = keras.Input(shape=model.get_layer(CENTRAL).output.shape[1:], name="central")
    task = keras.Input(shape=model.input["task"].shape[1:], name="task")
    joined = model.get_layer(WITH_TASK)([propositions, task])
    hidden = model.get_layer(OUTPUT_HIDDEN)(joined)
    logits = model.get_layer(OUTPUT_LOGITS)(hidden)
    return keras.Model({"central": propositions, "task": task}, logits)


def reinitialize(layers, seed=None):
    """Re-draws the weights of ``layers`` from the paper's initial distribution, in place.

    Kernels get a truncated normal (stddev 0.1, |w| <= 0.2) and biases the constant 0.1 (Shanahan
    et al. 2020, Fig. 3: stages 3 and 4 of the protocol). A weight is a bias when its name
    contains ``"bias"``.
    """
    generator = keras.random.SeedGenerator(seed) if seed is not None else None
    for layer in layers:
        for variable in layer.weights:
            if "bias" in variable.name:
                value = ops.full(variable.shape, BIAS_INIT, dtype=variable.dtype)
            else:
                value = keras.random.truncated_normal(
                    variable.shape, stddev=initializers.KERNEL_STDDEV, dtype=variable.dtype,
                    seed=generator)
            variable.assign(value)
