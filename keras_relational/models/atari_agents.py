"""The Atari agents of Shanahan et al. (2020), Supplement S11 (Table S3), as Keras 3 models.

Both agents share an IMPALA-style vision network (Espeholt et al. 2018): 3 stages of 16, 32 and
32 channels, each a 3x3 conv (stride 1, SAME), a 3x3 max-pool (stride 2, SAME) and 2 residual
blocks of two 3x3 convs; a 210x160x3 frame becomes a 27x20x32 feature map. Then:

* :func:`atari_baseline_agent`: flatten -> Dense(256, ReLU), the "single fully-connected layer"
  PrediNet replaces;
* :func:`atari_predinet_agent`: (x, y) coordinates appended to every cell (N = 540 entities of
  34 features) -> ``keras_relational.PrediNet`` with 16 heads, 16-dim keys and 64 relations, whose
  queries come from a 3-layer CNN (32 channels, 3x3, stride 2, VALID, ReLU) over the 34-channel
  map instead of the flattened input (S11), giving 16 * (64 + 4) = 1,088 propositions.

With ``recurrent=True`` (the paper's agents) the torso output and the last reward feed an
LSTM(256) and the value MLP [128, 1] and policy MLP [64, A] read its output; the model then takes
unrolls ``{"frames": [B, T, 210, 160, 3], "reward": [B, T]}`` (starting from a zero LSTM state)
and returns ``(logits [B, T, A], value [B, T])``. With the paper's sizes the baseline has
5,098,515 parameters and the PrediNet agent 1,590,355 (Table S3). With ``recurrent=False`` the
heads read the torso output directly: frames ``[B, H, W, C]`` -> ``(logits [B, A], value [B])``,
the feed-forward interface of ``keras_relational.agents.Keras3Network``.

Example:

>>> model = atari_predinet_agent()
>>> model.count_params()
1590355

Reference: Shanahan et al., "An Explicitly Relational Neural Network Architecture", ICML 2020,
Supplementary Material S11.
"""

import keras

from keras_relational.layers.predinet import PrediNet
from keras_relational.layers.spatial_entities import SpatialEntities

FRAME_SHAPE = (210, 160, 3)  # full Atari frames (S11's parameter totals need this size)
NUM_ACTIONS = 18  # the full Atari action set
PIXEL_SCALE = 1.0 / 255.0


def impala_vision(frames, channels=(16, 32, 32), num_residual_blocks=2, name="vision"):
    """IMPALA's deep vision network (Espeholt et al. 2018, Fig. 3) on ``frames`` [B, H, W, C]."""
    x = keras.layers.Rescaling(PIXEL_SCALE, name=f"{name}_rescale")(
        keras.ops.cast(frames, "float32"))
    for stage, filters in enumerate(channels):
        x = keras.layers.Conv2D(filters, 3, padding="same", name=f"{name}_{stage}_conv")(x)
        x = keras.layers.MaxPooling2D(3, strides=2, padding="same",
                                      name=f"{name}_{stage}_pool")(x)
        for block in range(num_residual_blocks):
            y = keras.layers.ReLU()(x)
            y = keras.layers.Conv2D(filters, 3, padding="same",
                                    name=f"{name}_{stage}_res{block}_a")(y)
            y = keras.layers.ReLU()(y)
            y = keras.layers.Conv2D(filters, 3, padding="same",
                                    name=f"{name}_{stage}_res{block}_b")(y)
            x = keras.layers.Add()([x, y])
    return keras.layers.ReLU(name=f"{name}_output")(x)


def query_cnn(map_shape, filters=(32, 32, 32), name="query_cnn"):
    """S11's query network: the entities ``[B, h*w, c]`` as a map, 3 strided VALID convs, flat."""
    height, width, channels = map_shape
    layers = [keras.layers.Input((height * width, channels)),
              keras.layers.Reshape((height, width, channels))]
    layers += [keras.layers.Conv2D(f, 3, strides=2, padding="valid", activation="relu",
                                   name=f"{name}_conv{i}") for i, f in enumerate(filters)]
    return keras.Sequential(layers + [keras.layers.Flatten()], name=name)


def _heads(core, num_actions, value_units, policy_units):
    value = keras.layers.Dense(value_units, activation="relu", name="value_hidden")(core)
    value = keras.layers.Dense(1, name="value_head")(value)
    # [..., 1] -> [...]: [B] feed-forward, [B, T] recurrent.
    value = keras.layers.Reshape((-1,) if len(value.shape) == 3 else (), name="value")(value)
    policy = keras.layers.Dense(policy_units, activation="relu", name="policy_hidden")(core)
    return keras.layers.Dense(num_actions, name="policy_logits")(policy), value


def _agent(torso_fn, frame_shape, num_actions, recurrent, lstm_units, value_units,
           policy_units, name):
    frame = keras.Input(frame_shape, name="frame")
    torso = keras.Model(frame, torso_fn(frame), name=f"{name}_torso")
    if not recurrent:
        logits, value = _heads(torso.output, num_actions, value_units, policy_units)
        return keras.Model(frame, (logits, value), name=name)
    frames = keras.Input((None,) + tuple(frame_shape), name="frames")
    reward = keras.Input((None,), name="reward")
    features = keras.layers.TimeDistributed(torso, name="torso")(frames)
    # S11: the LSTM reads the torso output and one extra scalar (Table S3's totals need exactly
    # one), which we take to be the previous reward as in IMPALA.
    core_input = keras.layers.Concatenate(name="with_reward")(
        [features, keras.layers.Reshape((-1, 1), name="reward_column")(reward)])
    core = keras.layers.LSTM(lstm_units, return_sequences=True, name="lstm")(core_input)
    logits, value = _heads(core, num_actions, value_units, policy_units)
    return keras.Model({"frames": frames, "reward": reward}, (logits, value), name=name)


def atari_baseline_agent(
    frame_shape=FRAME_SHAPE,
    num_actions=NUM_ACTIONS,
    hidden_units=256,  # Shanahan et al. 2020, S11: the fully-connected layer PrediNet replaces
    recurrent=True,
    lstm_units=256,  # IMPALA's LSTM (Table S3's totals)
    value_units=128,  # value MLP [128, 1] (Table S3's totals)
    policy_units=64,  # policy MLP [64, A] (Table S3's totals)
    name="atari_baseline_agent",
):
    """The IMPALA-style baseline agent of S11: vision -> Dense(256) -> LSTM -> heads.

    With the defaults it has 5,098,515 parameters (Table S3). See the module docstring for the
    inputs and outputs.
    """

    def torso(frame):
        x = keras.layers.Flatten(name="flatten")(impala_vision(frame))
        return keras.layers.Dense(hidden_units, activation="relu", name="torso_fc")(x)

    return _agent(torso, frame_shape, num_actions, recurrent, lstm_units, value_units,
                  policy_units, name)


def atari_predinet_agent(
    frame_shape=FRAME_SHAPE,
    num_actions=NUM_ACTIONS,
    num_heads=16,  # Shanahan et al. 2020, S11
    key_dim=16,  # S11
    num_relations=64,  # S11
    query_filters=(32, 32, 32),  # S11: 3-layer query CNN, 32 channels, 3x3, stride 2
    recurrent=True,
    lstm_units=256,
    value_units=128,
    policy_units=64,
    name="atari_predinet_agent",
):
    """The PrediNet agent of S11: vision -> entities with (x, y) -> PrediNet -> LSTM -> heads.

    With the defaults it has 1,590,355 parameters (Table S3). See the module docstring for the
    inputs and outputs.
    """

    def torso(frame):
        features = impala_vision(frame)
        entities = SpatialEntities(coordinate_mode="unit", name="entities")(features)
        map_shape = (features.shape[1], features.shape[2], entities.shape[-1])
        return PrediNet(num_heads=num_heads, key_dim=key_dim, num_relations=num_relations,
                        query_network=query_cnn(map_shape, query_filters),
                        name="predinet")(entities)

    return _agent(torso, frame_shape, num_actions, recurrent, lstm_units, value_units,
                  policy_units, name)
