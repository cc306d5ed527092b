"""Zambaldi et al. (2019)'s StarCraft II agents as Keras 3 models (no pysc2 needed).

:func:`sc2_agent` builds the relational agent (``core="relational"``, App. C, Table 3) or the
control agent (``core="control"``: the relational module swapped for a 12-layer residual conv net).
One call is one environment step; the ConvLSTM state goes in and comes out explicitly.

* Input stems (one per spatial input, unshared): categorical feature layers -> 10-d embeddings,
  scalar layers -> ``log(1 + x)``; tiled with two binary channels saying whether the previous action
  was a screen or a minimap action; then 2 x [conv 4x4 stride 2 -> residual block of two 3x3 convs]:
  ``32 x 32 -> 8 x 8 x channels_1``. Screen and minimap concatenated on depth.
* ``player`` (``log(1 + x)``) and the one-hot previous function id -> MLP(128, ReLU, 64): inputs_2D.
* Core: ConvLSTM (``keras.layers.ConvLSTM2D``, 96 channels, 3x3, stride 1) -> ``[8, 8, 96]``.
* Relational: 64 entities (+ 2 coordinate channels, projected to ``d*H``) -> K shared MHDPA blocks
  (d = 32, g_theta hidden 384) -> ``[64, d*H]``; spatial pathway = reshape to ``[8, 8, d*H]``,
  non-spatial pathway = max over entities -> MLP(512, ReLU, 512, ReLU).
* Shared features = concat(inputs_2D, non-spatial). Policy MLP(256, ReLU, |functions|) with the
  logits of unavailable functions set to -1e9; baseline MLP(256, ReLU, 1).
* Arguments, conditioned on the 16-d embedding of the chosen function id: one linear layer per
  non-spatial argument type on concat(shared, embedding); spatial arguments from two
  Conv2DTranspose(16, 4x4, stride 2) ``8 -> 32``, the tiled embedding concatenated, then one 1x1
  conv per spatial argument type -> flat ``32*32`` logits (index = row * 32 + column).

The model is built from two sub-models that can be called alone, so an actor samples the function
id from the trunk before it asks for the arguments: ``model.get_layer("sc2_trunk")`` maps the
observation and state to function logits, value, new state and the features the heads need;
``model.get_layer("sc2_argument_heads")`` maps those features and a function id to argument logits.
The full model takes the function id as an input (the learner's, from the trajectory).

Example:

>>> model = sc2_agent(screen_size=8, screen_layers=(0, 5), minimap_layers=(0,), num_functions=10)
>>> inputs = {k: np.zeros((2,) + tuple(s.shape[1:]), s.dtype) for k, s in model.input.items()}
>>> outputs = model(inputs)
>>> tuple(outputs["function_logits"].shape), tuple(outputs["screen"].shape)
((2, 10), (2, 64))

Reference: Zambaldi et al., "Deep reinforcement learning with relational inductive biases",
ICLR 2019, Sec. 4 and Appendix C (Tables 2-4).
"""

import keras
from keras import ops

from keras_relational import validation
from keras_relational.layers.relational_module import RelationalModule
from keras_relational.layers.spatial_entities import SpatialEntities

# pysc2 4.0 feature layers (pysc2.lib.features): 0 = scalar, n > 0 = categorical with n values.
SCREEN_LAYERS = (0, 4, 2, 2, 17, 5, 1962, 2, 0, 0, 0, 0, 0, 0, 0, 0, 16, 2, 2, 2, 290, 0, 2, 0,
                 2, 2, 2)
MINIMAP_LAYERS = (0, 4, 2, 2, 17, 5, 2, 1962, 2, 2, 2)
NUM_PLAYER_FEATURES = 11
NUM_FUNCTIONS = 573
# pysc2 4.0 argument types (pysc2.lib.actions.TYPES): spatial ones, then (name, size) non-spatial.
SPATIAL_ARGUMENTS = ("screen", "minimap", "screen2")
NON_SPATIAL_ARGUMENTS = (("queued", 2), ("control_group_act", 5), ("control_group_id", 10),
                         ("select_point_act", 4), ("select_add", 2), ("select_unit_act", 4),
                         ("select_unit_id", 500), ("select_worker", 4), ("build_queue_id", 10),
                         ("unload_id", 500))
MASKED_LOGIT = -1e9  # unavailable functions (Vinyals et al. 2017, SC2LE)
EMBEDDING_DIM = 10  # Zambaldi et al. 2019, App. C: categorical features -> 10-d embeddings
_CORES = ("relational", "control")


def _conv(filters, kernel, name, strides=1, activation="relu"):
    return keras.layers.Conv2D(filters, kernel, strides=strides, padding="same",
                               activation=activation, name=name)


def _residual(x, filters, first_kernel, first_strides, name):
    """conv(first_kernel) -> ReLU -> [conv 3x3 -> ReLU -> conv 3x3] + skip -> ReLU."""
    x = _conv(filters, first_kernel, f"{name}_conv0", strides=first_strides)(x)
    y = _conv(filters, 3, f"{name}_conv1")(x)
    y = _conv(filters, 3, f"{name}_conv2", activation=None)(y)
    return keras.layers.ReLU(name=f"{name}_relu")(keras.layers.Add(name=f"{name}_add")([x, y]))


@keras.saving.register_keras_serializable(package="keras_relational")
class CategoricalIndices(keras.layers.Layer):
    """Rows of one embedding table that holds every categorical feature layer's embeddings.

    Channel ``channels[k]`` of ``features`` ``[..., C]`` is a categorical layer with
    ``sizes[k]`` values: its value, clipped to ``[0, sizes[k])``, plus ``sum(sizes[:k])`` (where
    layer ``k``'s rows start) is its row; returns int32 ``[..., len(channels)]``. A layer rather
    than ``ops`` in the functional graph: the per-channel bounds are constant tensors, which a
    functional model cannot serialise, so the model would not save as a ``.keras`` file.
    Never autocast: feature values up to 1962 (pysc2's unit types) are not exact in float16.

    Args:
        channels: the channels of ``features`` that are categorical.
        sizes: the number of values of each of them.
    """

    def __init__(self, channels, sizes, **kwargs):
        kwargs["autocast"] = False
        super().__init__(**kwargs)
        self.channels = [int(c) for c in channels]
        self.sizes = [int(s) for s in sizes]
        if len(self.channels) != len(self.sizes) or not self.channels:
            raise ValueError("CategoricalIndices expects one size per channel (at least one); "
                             f"received channels={channels}, sizes={sizes}.")
        for size in self.sizes:
            validation.check_positive_int("CategoricalIndices", "sizes", size)

    def call(self, features):
        index = ops.cast(ops.take(features, self.channels, axis=-1), "int32")
        offsets = [sum(self.sizes[:k]) for k in range(len(self.sizes))]
        return ops.clip(index, 0, ops.convert_to_tensor(self.sizes, "int32") - 1) + \
            ops.convert_to_tensor(offsets, "int32")

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (len(self.channels),)

    def compute_output_spec(self, features):
        return keras.KerasTensor(self.compute_output_shape(features.shape), "int32")

    def get_config(self):
        config = super().get_config()
        config.update(channels=self.channels, sizes=self.sizes)
        return config


def _spatial_stem(features, previous_masks, layers, channels, name):
    """Embeds categorical layers, log-scales scalar ones, tiles the previous-action masks, then
    2 x [conv 4x4 stride 2 + residual block] (Zambaldi et al. 2019, App. C)."""
    # One table holds every categorical layer's embeddings (layer i's rows start at offsets[i]):
    # the same parameters as one Embedding per layer, in a few ops instead of a few per layer.
    categorical = [i for i, categories in enumerate(layers) if categories]
    scalar = [i for i, categories in enumerate(layers) if not categories]
    parts = []
    if categorical:
        sizes = [layers[i] for i in categorical]
        index = CategoricalIndices(categorical, sizes, name=f"{name}_indices")(features)
        embedded = keras.layers.Embedding(sum(sizes), EMBEDDING_DIM, name=f"{name}_embed")(index)
        parts.append(keras.layers.Reshape(
            (features.shape[1], features.shape[2], len(categorical) * EMBEDDING_DIM),
            name=f"{name}_embed_flat")(embedded))
    if scalar:
        values = ops.cast(ops.take(features, scalar, axis=-1), "float32")
        parts.append(ops.log1p(ops.maximum(values, 0.0)))
    # Tiled by broadcasting against a ones map (a symbolic batch size cannot be broadcast to).
    ones = ops.ones_like(ops.cast(features[..., :1], "float32"))
    parts.append(previous_masks[:, None, None, :] * ones)
    x = ops.concatenate(parts, axis=-1)
    for block in range(2):
        x = _residual(x, channels, 4, 2, f"{name}_block{block}")
    return x


def _mlp(x, units, name, output_activation="relu"):
    for i, width in enumerate(units):
        activation = "relu" if i < len(units) - 1 else output_activation
        x = keras.layers.Dense(width, activation=activation, name=f"{name}_fc{i}")(x)
    return x


def _trunk(screen_size, minimap_size, screen_layers, minimap_layers, num_player_features,
           num_functions, stem_channels, lstm_channels, core, num_blocks, num_heads, key_dim,
           mlp_units, append_coordinates):
    screen = keras.Input((screen_size, screen_size, len(screen_layers)), name="screen")
    minimap = keras.Input((minimap_size, minimap_size, len(minimap_layers)), name="minimap")
    player = keras.Input((num_player_features,), name="player")
    previous_function = keras.Input((), dtype="int32", name="previous_function")
    previous_spatial = keras.Input((2,), name="previous_spatial")  # (screen, minimap) flags
    available = keras.Input((num_functions,), name="available_actions")
    core_size = screen_size // 4
    state_h = keras.Input((core_size, core_size, lstm_channels), name="state_h")
    state_c = keras.Input((core_size, core_size, lstm_channels), name="state_c")

    spatial = ops.concatenate([
        _spatial_stem(screen, previous_spatial, screen_layers, stem_channels, "screen_stem"),
        _spatial_stem(minimap, previous_spatial, minimap_layers, stem_channels, "minimap_stem"),
    ], axis=-1)  # inputs_3D [B, 8, 8, 2 * channels_1]
    flat = ops.concatenate([ops.log1p(ops.maximum(player, 0.0)),
                            ops.one_hot(previous_function, num_functions)], axis=-1)
    inputs_2d = _mlp(flat, (128, 64), "inputs_2d", output_activation=None)

    # Zambaldi et al. 2019, Table 2: Conv2DLSTM, 96 channels, 3x3, stride 1; one step per call.
    outputs_3d, new_h, new_c = keras.layers.ConvLSTM2D(
        lstm_channels, 3, padding="same", return_state=True, name="conv_lstm",
    )(spatial[:, None], initial_state=[state_h, state_c])

    if core == "relational":
        entities = (SpatialEntities(name="entities")(outputs_3d) if append_coordinates
                    else keras.layers.Reshape((core_size * core_size, lstm_channels))(outputs_3d))
        width = num_heads * key_dim  # Zambaldi et al. 2019, App. C: output [64, d*H]
        relational = RelationalModule(
            num_blocks=num_blocks, share_weights=True, model_dim=width, num_heads=num_heads,
            key_dim=key_dim, mlp_hidden_units=mlp_units, name="relational_module",
        )(entities)
        spatial_out = keras.layers.Reshape((core_size, core_size, width),
                                           name="relational_spatial")(relational)
        pooled = ops.max(relational, axis=1)
    else:
        # Zambaldi et al. 2019, App. C: control agent, 4 residual blocks x 3 convs, 32 channels.
        x = outputs_3d
        for block in range(4):
            x = _residual(x, 32, 4, 1, f"control_block{block}")
        spatial_out = x
        pooled = keras.layers.Flatten(name="control_flatten")(x)
    nonspatial = _mlp(pooled, (512, 512), "nonspatial")
    shared = ops.concatenate([inputs_2d, nonspatial], axis=-1)
    logits = keras.layers.Dense(num_functions, name="policy_fc1")(
        keras.layers.Dense(256, activation="relu", name="policy_fc0")(shared))
    logits = ops.where(ops.cast(available, "bool"), ops.cast(logits, "float32"), MASKED_LOGIT)
    value = keras.layers.Dense(1, name="baseline_fc1")(
        keras.layers.Dense(256, activation="relu", name="baseline_fc0")(shared))[..., 0]
    inputs = {"screen": screen, "minimap": minimap, "player": player,
              "previous_function": previous_function, "previous_spatial": previous_spatial,
              "available_actions": available, "state_h": state_h, "state_c": state_c}
    outputs = {"function_logits": logits, "value": ops.cast(value, "float32"), "state_h": new_h,
               "state_c": new_c, "shared": shared, "spatial": spatial_out}
    return keras.Model(inputs, outputs, name="sc2_trunk")


def _argument_heads(shared_dim, core_size, spatial_channels, num_functions, screen_size,
                    transpose_channels, action_embedding_dim):
    shared = keras.Input((shared_dim,), name="shared")
    spatial = keras.Input((core_size, core_size, spatial_channels), name="spatial")
    function_id = keras.Input((), dtype="int32", name="function_id")
    embedded = keras.layers.Embedding(num_functions, action_embedding_dim,
                                      name="function_embedding")(function_id)
    conditioned = ops.concatenate([shared, embedded], axis=-1)
    outputs = {name: ops.cast(keras.layers.Dense(size, name=f"{name}_logits")(conditioned),
                              "float32")
               for name, size in NON_SPATIAL_ARGUMENTS}
    x = spatial
    while x.shape[1] < screen_size:  # Table 2: Conv2DTranspose 16 channels, 4x4, stride 2
        x = keras.layers.Conv2DTranspose(transpose_channels, 4, strides=2, padding="same",
                                         activation="relu",
                                         name=f"upsample{x.shape[1]}")(x)
    tiled = embedded[:, None, None, :] * ops.ones_like(x[..., :1])
    x = ops.concatenate([x, tiled], axis=-1)
    for name in SPATIAL_ARGUMENTS:
        logit_map = keras.layers.Conv2D(1, 1, name=f"{name}_logits")(x)
        outputs[name] = ops.cast(ops.reshape(logit_map, (-1, screen_size * screen_size)),
                                 "float32")
    return keras.Model({"shared": shared, "spatial": spatial, "function_id": function_id},
                       outputs, name="sc2_argument_heads")


def sc2_agent(
    screen_size=32,  # not in the paper; 32 makes the 8x8 core and the 32x32 argument maps agree
    screen_layers=SCREEN_LAYERS,
    minimap_layers=MINIMAP_LAYERS,
    num_player_features=NUM_PLAYER_FEATURES,
    num_functions=NUM_FUNCTIONS,
    core="relational",
    stem_channels=32,  # channels_1: not in the paper; our choice
    lstm_channels=96,  # Zambaldi et al. 2019, Table 2
    num_blocks=3,  # Table 4 sweep: {1, 3, 5}
    num_heads=3,  # Table 4 sweep: {1, 3}
    key_dim=32,  # Table 3: attention embedding size 32
    mlp_units=(384,),  # Table 3: g_theta 2 layers of 384; the last outputs the stream width
    append_coordinates=True,  # not stated for SC2; as in Box-World
    transpose_channels=16,  # Table 2: Conv2DTranspose 16 channels
    action_embedding_dim=16,  # App. C: the sampled action is embedded into 16 dims
    name="sc2_agent",
):
    """The relational (or control) SC2 agent; see the module docstring for the architecture.

    Inputs (dict): ``screen [B, S, S, len(screen_layers)]``, ``minimap [B, S, S, ...]`` (raw
    pysc2 feature values), ``player [B, 11]``, ``previous_function [B]`` int,
    ``previous_spatial [B, 2]`` (was the previous action a screen / minimap action),
    ``available_actions [B, num_functions]`` 0/1, ``state_h`` and ``state_c`` ``[B, S/4, S/4,
    lstm_channels]`` and ``function_id [B]`` int (the function whose arguments are scored).
    Outputs (dict): ``function_logits [B, num_functions]`` (masked), ``value [B]``, ``state_h``,
    ``state_c`` and one logit vector per argument type (``screen``, ``minimap``, ``screen2``:
    ``[B, S*S]``; non-spatial: ``[B, size]``), all logits float32.
    """
    validation.check_choice("sc2_agent", "core", core, _CORES)
    for argument, value in (("screen_size", screen_size), ("stem_channels", stem_channels),
                            ("lstm_channels", lstm_channels), ("num_blocks", num_blocks),
                            ("num_heads", num_heads), ("key_dim", key_dim),
                            ("num_functions", num_functions),
                            ("num_player_features", num_player_features)):
        validation.check_positive_int("sc2_agent", argument, value)
    if screen_size % 4:
        raise ValueError("sc2_agent: `screen_size` must be a multiple of 4 (two stride-2 "
                         f"convs); received screen_size={screen_size}")
    trunk = _trunk(screen_size, screen_size, tuple(screen_layers), tuple(minimap_layers),
                   num_player_features, num_functions, stem_channels, lstm_channels, core,
                   num_blocks, num_heads, key_dim, tuple(mlp_units), append_coordinates)
    heads = _argument_heads(trunk.output["shared"].shape[-1], screen_size // 4,
                            trunk.output["spatial"].shape[-1], num_functions, screen_size,
                            transpose_channels, action_embedding_dim)
    inputs = {key: keras.Input(tensor.shape[1:], dtype=tensor.dtype, name=key)
              for key, tensor in trunk.input.items()}
    inputs["function_id"] = keras.Input((), dtype="int32", name="function_id")
    trunk_out = trunk({key: inputs[key] for key in trunk.input})
    args = heads({"shared": trunk_out["shared"], "spatial": trunk_out["spatial"],
                  "function_id": inputs["function_id"]})
    outputs = {key: trunk_out[key] for key in ("function_logits", "value", "state_h", "state_c")}
    outputs.update(args)
    return keras.Model(inputs, outputs, name=name)


def initial_state(model, batch_size):
    """Zero ConvLSTM state ``(h, c)`` for ``model`` (reset at episode start)."""
    shape = (batch_size,) + tuple(model.get_layer("sc2_trunk").input["state_h"].shape[1:])
    return ops.zeros(shape), ops.zeros(shape)


def composite_log_prob_and_entropy(outputs, action, argument_mask,
                                   argument_names=SPATIAL_ARGUMENTS + tuple(
                                       name for name, _ in NON_SPATIAL_ARGUMENTS)):
    """Log-probability and entropy of a composite SC2 action (Vinyals et al. 2017, Sec. 4.1).

    ``log pi(a) = log pi(function) + sum_k used[function, k] * log pi(argument_k)``: only the
    arguments the chosen function takes count. The entropy is the function's plus, likewise, the
    used arguments' entropies (an estimate given the chosen function).

    Args:
        outputs: the model's output dict (``function_logits`` and one logit vector per argument).
        action: dict of int tensors ``[B]``: ``function`` and one per argument name.
        argument_mask: ``[num_functions, len(argument_names)]`` 0/1, which function takes which
            argument (``SC2Environment.argument_mask()``).
        argument_names: the column order of ``argument_mask``.

    Returns:
        ``(log_prob [B], entropy [B])``, float32.
    """
    def log_prob_entropy(logits, index):
        log_p = ops.log_softmax(ops.cast(logits, "float32"), axis=-1)
        chosen = ops.take_along_axis(log_p, ops.cast(index, "int32")[:, None], axis=-1)[:, 0]
        return chosen, -ops.sum(ops.exp(log_p) * log_p, axis=-1)

    function = ops.cast(action["function"], "int32")
    log_prob, entropy = log_prob_entropy(outputs["function_logits"], function)
    used = ops.take(ops.convert_to_tensor(argument_mask, "float32"), function, axis=0)
    for k, name in enumerate(argument_names):
        arg_log_prob, arg_entropy = log_prob_entropy(outputs[name], action[name])
        log_prob = log_prob + used[:, k] * arg_log_prob
        entropy = entropy + used[:, k] * arg_entropy
    return log_prob, entropy
