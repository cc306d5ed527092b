"""The Relations Game classifier of Shanahan et al. (2020) and its four baseline central modules.

The whole model (spec Sec. 2.1) is the same for every architecture; only the central module
changes::

    image [B, 36, 36, 3] (raw pixels 0..255)  -> / 256
      -> Conv2D(32, 12x12, stride 6, VALID, ReLU)        "input_cnn"   [B, 5, 5, 32]
      -> (x, y) = (col / 5, row / 5) appended             "entities"    [B, 25, 34]
      -> central module                                   "central"     [B, 640]
      -> concat task one-hot [B, 5]
      -> Dense(8, ReLU)                                   "output_hidden"
      -> Dense(num_classes) logits                        "output_logits"

Central modules: ``keras_relational.PrediNet`` and the baselines defined here, :class:`MLPCentral`
(MLP1 and MLP2), :class:`RelationNetCentral` and :class:`MultiHeadAttentionCentral`. Every
kernel starts from a truncated normal with stddev 0.1 and every bias from 0.1 (the authors'
reference notebook). :func:`reinitialize` restores that distribution (transfer protocol,
spec Sec. 6.2).

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
from keras_relational.layers.predinet import PrediNet
from keras_relational.layers.spatial_entities import SpatialEntities

CENTRAL_MODULES = ("predinet", "mlp1", "mlp2", "relation_net", "mha")
NUM_TASKS = 5  # Shanahan et al. 2020, reference notebook: the task one-hot always has 5 slots.
IMAGE_SHAPE = (36, 36, 3)  # Shanahan et al. 2020, Sec. 4
PIXEL_SCALE = 1.0 / 256.0  # reference notebook: uint8 pixels / 256
BIAS_INIT = 0.1  # reference notebook: every bias starts at 0.1
# Names of the model's stages, used by the transfer protocol.
INPUT_CNN, ENTITIES, CENTRAL, OUTPUT_HIDDEN, OUTPUT_LOGITS = (
    "input_cnn", "entities", "central", "output_hidden", "output_logits")
OUTPUT_LAYERS = (OUTPUT_HIDDEN, OUTPUT_LOGITS)


def kernel_initializer():
    """Truncated normal, stddev 0.1, re-drawn beyond 2 stddev (reference notebook)."""
    return keras.initializers.TruncatedNormal(mean=0.0, stddev=0.1)


def bias_initializer():
    return keras.initializers.Constant(BIAS_INIT)


class _CentralModule(keras.layers.Layer):
    """Shared helpers: weights with the paper's initialisers, entity-shape checks."""

    def _kernel(self, name, shape):
        return self.add_weight(name=name, shape=shape, initializer=kernel_initializer())

    def _bias(self, name, shape):
        return self.add_weight(name=name, shape=shape, initializer=bias_initializer())

    def _entity_shape(self, input_shape):
        validation.check_rank(self, "inputs", input_shape, 3, "[batch, entities, features]")
        entities = validation.check_known_dim(
            self, "inputs", input_shape, 1, "number of entities N")
        features = validation.check_known_dim(self, "inputs", input_shape, 2, "feature size m")
        return entities, features


@keras.saving.register_keras_serializable(package="keras_relational")
class MLPCentral(_CentralModule):
    """MLP baselines: ``flatten(L)`` through Dense+ReLU layers (MLP1: (640,), MLP2: (1024, 640)).

    Args:
        hidden_units: the widths of the Dense layers; each has a bias and a ReLU. Defaults to
            ``(640,)``, MLP1 (Shanahan et al. 2020, Table S2); MLP2 is ``(1024, 640)``.
        **kwargs: standard ``keras.layers.Layer`` arguments.

    Call arguments:
        inputs: entities ``[B, N, m]`` with ``N`` and ``m`` known.

    Returns:
        ``[B, hidden_units[-1]]``.
    """

    def __init__(self, hidden_units=(640,), **kwargs):  # Shanahan et al. 2020, Table S2
        super().__init__(**kwargs)
        if not isinstance(hidden_units, (list, tuple)) or not hidden_units:
            raise ValueError("MLPCentral expects `hidden_units` to be a non-empty list of positive "
                             f"integers, received hidden_units={hidden_units!r}.")
        for units in hidden_units:
            validation.check_positive_int("MLPCentral", "hidden_units", units)
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
        hidden = ops.reshape(inputs, (-1, self.flat_size))
        for kernel, bias in self.dense_weights:
            hidden = ops.relu(ops.matmul(hidden, kernel) + bias)
        return hidden

    def compute_output_shape(self, input_shape):
        return (input_shape[0], self.hidden_units[-1])

    def get_config(self):
        config = super().get_config()
        config.update({"hidden_units": list(self.hidden_units)})
        return config


@keras.saving.register_keras_serializable(package="keras_relational")
class RelationNetCentral(_CentralModule):
    """Relation-net baseline: a pair MLP over all N^2 ordered pairs (self-pairs included), averaged.

    ``out = mean_{s, r} relu(relu([L_s, L_r] W1) W2)`` with no biases (reference notebook). The
    first layer is linear in the pair, so it is computed as ``L_s W1_top + L_r W1_bottom`` without
    materialising the ``[B, N^2, 2m]`` pair tensor (the same numbers). Invariant to any
    permutation of the entities.

    Args:
        hidden_units: width of the first pair layer. Defaults to 256 (Table S2).
        output_dim: width of the second pair layer and of the output. Defaults to 640 (Table S2).
        **kwargs: standard ``keras.layers.Layer`` arguments.

    Call arguments:
        inputs: entities ``[B, N, m]``.

    Returns:
        ``[B, output_dim]``.
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
        sender = ops.matmul(inputs, self.pair_kernel[:self.features])  # [B, N, hidden]
        receiver = ops.matmul(inputs, self.pair_kernel[self.features:])
        pairs = ops.relu(sender[:, :, None, :] + receiver[:, None, :, :])  # [B, N, N, hidden]
        outputs = ops.relu(ops.einsum("bsrh,ho->bsro", pairs, self.output_kernel))
        return ops.mean(outputs, axis=(1, 2))

    def compute_output_shape(self, input_shape):
        return (input_shape[0], self.output_dim)

    def get_config(self):
        config = super().get_config()
        config.update({"hidden_units": self.hidden_units, "output_dim": self.output_dim})
        return config


@keras.saving.register_keras_serializable(package="keras_relational")
class MultiHeadAttentionCentral(_CentralModule):
    """Multi-head-attention baseline with the paper's "CombineValues" (reference notebook).

    ``K = L W_K``, ``Q = L W_Q``, ``V = L W_V`` per entity (no biases), split into H heads;
    ``O = softmax(Q K^T) V`` (unscaled, softmax over the keys); each head's output is the learned,
    unnormalised weighted sum ``out[h] = sum_n w[h, n] O[h, n]`` over the N query positions; the
    heads are concatenated into ``[B, H * value_dim]``. No nonlinearity, residual or layer norm.
    Self-contained on purpose (not ``keras_relational.MultiHeadDotProductAttention``), so that the
    baseline is exactly the paper's.

    Args:
        num_heads: H. Defaults to 32 (Table S2).
        key_dim: key/query size per head. Defaults to 16 (Table S2).
        value_dim: value size per head. Defaults to 20 = j + 4, so that the output is 640 like
            PrediNet's (Table S2).
        **kwargs: standard ``keras.layers.Layer`` arguments.

    Call arguments:
        inputs: entities ``[B, N, m]`` with ``N`` known (``w`` is ``[H, N]``).
        return_attention_scores: also return the attention ``[B, H, N, N]``.

    Returns:
        ``[B, H * value_dim]``, or ``(outputs, attention)``.
    """

    def __init__(self, num_heads=32, key_dim=16, value_dim=20, **kwargs):  # Table S2
        super().__init__(**kwargs)
        validation.check_positive_int("MultiHeadAttentionCentral", "num_heads", num_heads)
        validation.check_positive_int("MultiHeadAttentionCentral", "key_dim", key_dim)
        validation.check_positive_int("MultiHeadAttentionCentral", "value_dim", value_dim)
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.value_dim = value_dim

    def build(self, input_shape):
        entities, features = self._entity_shape(input_shape)
        self.num_entities = entities
        self.key_kernel = self._kernel("key_kernel", (features, self.num_heads * self.key_dim))
        self.query_kernel = self._kernel("query_kernel", (features, self.num_heads * self.key_dim))
        self.value_kernel = self._kernel("value_kernel",
                                         (features, self.num_heads * self.value_dim))
        self.combine_kernel = self._kernel("combine_kernel", (self.num_heads, entities))
        super().build(input_shape)

    def _split_heads(self, inputs, kernel, size):
        projected = ops.matmul(inputs, kernel)
        return ops.reshape(projected, (-1, self.num_entities, self.num_heads, size))

    def call(self, inputs, return_attention_scores=False):
        keys = self._split_heads(inputs, self.key_kernel, self.key_dim)
        queries = self._split_heads(inputs, self.query_kernel, self.key_dim)
        values = self._split_heads(inputs, self.value_kernel, self.value_dim)
        attention = ops.softmax(ops.einsum("bqhg,bkhg->bhqk", queries, keys), axis=-1)
        attended = ops.einsum("bhqk,bkhv->bhqv", attention, values)
        combined = ops.einsum("bhnv,hn->bhv", attended, self.combine_kernel)
        outputs = ops.reshape(combined, (-1, self.num_heads * self.value_dim))
        if return_attention_scores:
            return outputs, attention
        return outputs

    def compute_output_shape(self, input_shape, return_attention_scores=False):
        outputs = (input_shape[0], self.num_heads * self.value_dim)
        if return_attention_scores:
            n = input_shape[1]
            return outputs, (input_shape[0], self.num_heads, n, n)
        return outputs

    def compute_output_spec(self, inputs, return_attention_scores=False):
        shapes = self.compute_output_shape(inputs.shape, return_attention_scores)
        if not return_attention_scores:
            return keras.KerasTensor(shapes, dtype=self.compute_dtype)
        return tuple(keras.KerasTensor(s, dtype=self.compute_dtype) for s in shapes)

    def get_config(self):
        config = super().get_config()
        config.update({"num_heads": self.num_heads, "key_dim": self.key_dim,
                       "value_dim": self.value_dim})
        return config


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
    """The whole Relations Game classifier (spec Sec. 2.1) around the named central module.

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
    joined = keras.layers.Concatenate(name="with_task")([propositions, task])
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


def reinitialize(layers, seed=None):
    """Re-draws the weights of ``layers`` from the paper's initial distribution, in place.

    Kernels get a truncated normal (stddev 0.1, |w| <= 0.2) and biases the constant 0.1 (spec
    Sec. 6.2, stages 3 and 4). A weight is a bias when its name contains ``"bias"``.
    """
    generator = keras.random.SeedGenerator(seed) if seed is not None else None
    for layer in layers:
        for variable in layer.weights:
            if "bias" in variable.name:
                value = ops.full(variable.shape, BIAS_INIT, dtype=variable.dtype)
            else:
                value = keras.random.truncated_normal(variable.shape, stddev=0.1,
                                                      dtype=variable.dtype, seed=generator)
            variable.assign(value)
