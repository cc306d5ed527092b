"""The Box-World agents' networks as Keras 3 models: observation -> (policy logits, value).

* :func:`relational_agent` - Zambaldi et al. (2019): conv stem -> entities with coordinates ->
  relational module -> entity max-pool -> 4 x Dense(256) -> logits and value.
* :func:`baseline_agent` - the same with the relational module replaced by residual conv blocks.
* :func:`simplicial_agent` - Clift et al. (2020): the same stem with 2-simplicial Transformer
  blocks and virtual entities.

The models take uint8 (or float) RGB frames ``[B, H, W, C]`` and scale them to [0, 1] inside, so an
exported model serves raw environment observations. They are backend-agnostic (pure Keras 3) and
export with ``model.export``; ``keras_relational.agents.Keras3Network`` puts them into TF-Agents.

Example:

>>> model = relational_agent()
>>> logits, value = model(np.zeros((2, 14, 14, 3), "uint8"))
>>> tuple(logits.shape), tuple(value.shape)
((2, 4), (2,))
"""

import keras

import keras_relational
from keras_relational.layers.dense_stack import apply_dense_stack, dense_stack

PIXEL_SCALE = 1.0 / 255.0  # uint8 RGB frames -> [0, 1]


def _stem(inputs, conv_filters, padding, input_scale, name):
    """Scales the input (pixels to [0, 1]) and applies the 2x2 ReLU conv stem (Zambaldi et al.,
    App. B)."""
    x = keras.layers.Rescaling(input_scale, name=f"{name}_rescale")(
        keras.ops.cast(inputs, "float32"))
    for i, filters in enumerate(conv_filters):
        x = keras.layers.Conv2D(filters, 2, padding=padding, activation="relu",
                                name=f"{name}_conv{i}")(x)
    return x


def _heads(pooled, head_units, num_actions, name):
    """``len(head_units)`` Dense+ReLU layers, then linear policy logits and a scalar value.

    The two output layers compute in float32 under every dtype policy (the softmax, the
    sampling and the V-trace loss need float32 logits and values; Micikevicius et al. 2018).
    """
    hidden = dense_stack(head_units, [f"{name}_fc{i}" for i in range(len(head_units))],
                         activation="relu", output_activation="relu")
    x = apply_dense_stack(hidden, pooled)
    logits = keras.layers.Dense(num_actions, dtype="float32", name="policy_logits")(x)
    value = keras.layers.Reshape((), dtype="float32", name="value")(
        keras.layers.Dense(1, dtype="float32", name="value_head")(x))
    return logits, value


def relational_agent(
    observation_shape=(14, 14, 3),  # 12x12 room (Zambaldi et al. 2019, Sec. 3.1) + 1-pixel wall
    num_actions=4,
    conv_filters=(12, 24),  # Zambaldi et al. 2019, App. B: 12 and 24 kernels, 2x2
    padding="same",  # not in the paper; Sonnet's default. "valid" gives N = 144
    num_blocks=1,  # Zambaldi et al.: 1 block for distractor branch length 1
    share_weights=True,  # Zambaldi et al.: shared parameters across blocks
    num_heads=2,  # Zambaldi et al.: 2 to 4 heads
    key_dim=64,  # Zambaldi et al.: d = 64
    mlp_hidden_units=(256,),  # not in the paper; our choice
    head_units=(256, 256, 256, 256),  # Zambaldi et al.: 4 FC layers (width: our choice)
    return_attention_scores=False,
    input_scale=PIXEL_SCALE,  # 1.0 for one-hot observations
    name="relational_agent",
):
    """Zambaldi et al.'s relational Box-World agent.

    With the defaults it has 257,799 parameters.

    Returns:
        ``keras.Model``: observation ``[B, H, W, C]`` -> ``(logits [B, A], value [B])``, plus the
        attention of every block ``[B, K, H, N, N]`` when ``return_attention_scores``.
    """
    inputs = keras.Input(observation_shape, name="observation")
    features = _stem(inputs, conv_filters, padding, input_scale, name)
    entities = keras_relational.SpatialEntities(name="entities")(features)
    entities, attention = keras_relational.RelationalModule(
        num_blocks=num_blocks, share_weights=share_weights, num_heads=num_heads, key_dim=key_dim,
        mlp_hidden_units=mlp_hidden_units, name="relational_module",
    )(entities, return_attention_scores=True)
    pooled = keras_relational.EntityMaxPool(name="max_pool")(entities)
    logits, value = _heads(pooled, head_units, num_actions, name)
    outputs = (logits, value, attention) if return_attention_scores else (logits, value)
    return keras.Model(inputs, outputs, name=name)


def baseline_agent(
    observation_shape=(14, 14, 3),
    num_actions=4,
    conv_filters=(12, 24),
    padding="same",
    num_residual_blocks=3,  # Zambaldi et al.: 3 to 6 residual conv blocks
    residual_kernel_size=3,  # Zambaldi et al.: 3x3 kernels, 26 channels
    readout="max_pool",  # Zambaldi et al. 2019, Sec. 3.1: only the relational module changes
    head_units=(256, 256, 256, 256),
    input_scale=PIXEL_SCALE,
    name="baseline_agent",
):
    """The non-relational Box-World baseline: residual conv blocks in place of attention.

    Each block is ``x + conv(relu(conv(relu(x))))`` with ``C + 2`` channels (the stem output with
    its coordinate channels), the pre-activation order of He et al. 2016 (our reading of
    Zambaldi et al. 2019, App. B).
    """
    if readout not in ("max_pool", "flatten"):
        raise ValueError(f"`readout` must be 'max_pool' or 'flatten', received {readout!r}.")
    inputs = keras.Input(observation_shape, name="observation")
    features = _stem(inputs, conv_filters, padding, input_scale, name)
    height, width = features.shape[1], features.shape[2]
    entities = keras_relational.SpatialEntities(name="entities")(features)
    channels = entities.shape[-1]
    x = keras.layers.Reshape((height, width, channels))(entities)
    for i in range(num_residual_blocks):
        y = keras.layers.ReLU()(x)
        y = keras.layers.Conv2D(channels, residual_kernel_size, padding="same",
                                name=f"{name}_res{i}_a")(y)
        y = keras.layers.ReLU()(y)
        y = keras.layers.Conv2D(channels, residual_kernel_size, padding="same",
                                name=f"{name}_res{i}_b")(y)
        x = keras.layers.Add()([x, y])
    if readout == "max_pool":
        pooled = keras.layers.GlobalMaxPooling2D()(x)
    else:
        pooled = keras.layers.Flatten()(x)
    logits, value = _heads(pooled, head_units, num_actions, name)
    return keras.Model(inputs, (logits, value), name=name)


def simplicial_agent(
    observation_shape=(7, 10, 3),  # 7 rows, 9 columns + inventory (Clift et al. 2020, Sec. 3)
    num_actions=4,
    conv_filters=(12, 24),  # Clift et al. 2020, Sec. 4: two 2x2 convs, 12 and 24 filters
    padding="valid",  # Clift et al. 2020, Sec. 4
    model_dim=64,  # D = 64: a 62-wide projection plus 2 coordinates (Sec. 4)
    num_blocks=2,  # 2 iterations, shared weights (Sec. 4)
    num_heads=2,  # 1-simplicial: 2 heads x 32 (Sec. 4)
    key_dim=32,
    simplicial_key_dim=48,  # one 2-simplicial head of width 48 (Sec. 4)
    num_virtual_entities=2,  # M = 2 (Sec. 4)
    use_simplicial=True,
    mlp_hidden_units=(64,),  # Sec. 4 and the authors' code
    head_units=(256, 256, 256, 256),  # Sec. 4: four layers of 256
    return_attention_scores=False,
    input_scale=PIXEL_SCALE,
    name="simplicial_agent",
):
    """Clift et al.'s simplicial Box-World agent (``use_simplicial=False``: their relational one).

    Conv stem (valid padding) -> per-position linear projection to ``model_dim - 2`` (no bias) ->
    (x, y) coordinates in [-1, 1] -> :class:`keras_relational.SimplicialTransformerBlock`
    iterated ``num_blocks`` times with shared weights and ``num_virtual_entities`` virtual
    entities -> max-pool over the standard entities -> 4 x Dense(256) -> logits and value.
    The paper appends the coordinates as (row, column); we append (x, y) = (column, row) as
    :class:`keras_relational.SpatialEntities` does everywhere (the next layer is linear, so the
    order only permutes its weights).

    Returns:
        ``keras.Model``: observation -> ``(logits [B, A], value [B])`` (+ the block's attention
        scores when ``return_attention_scores``).
    """
    inputs = keras.Input(observation_shape, name="observation")
    features = _stem(inputs, conv_filters, padding, input_scale, name)
    features = keras.layers.Dense(model_dim - 2, use_bias=False, name=f"{name}_projection")(
        features)
    entities = keras_relational.SpatialEntities(name="entities")(features)
    block = keras_relational.SimplicialTransformerBlock(
        num_heads=num_heads, key_dim=key_dim, simplicial_key_dim=simplicial_key_dim,
        num_virtual_entities=num_virtual_entities if use_simplicial else None,
        num_iterations=num_blocks, use_simplicial=use_simplicial,
        mlp_hidden_units=mlp_hidden_units, name="simplicial_block",
    )
    if return_attention_scores:
        entities, attention = block(entities, return_attention_scores=True)
    else:
        entities = block(entities)
    pooled = keras_relational.EntityMaxPool(name="max_pool")(entities)
    logits, value = _heads(pooled, head_units, num_actions, name)
    outputs = (logits, value, attention) if return_attention_scores else (logits, value)
    return keras.Model(inputs, outputs, name=name)
