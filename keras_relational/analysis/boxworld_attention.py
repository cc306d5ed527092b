"""Attention maps of the Box-World agents, and plots of them over the frame (Zambaldi et al. 2019,
Fig. 4 style).

Example::

    model = relational_agent()                       # or a trained model from a .keras file
    weights = attention_maps(model, frames)          # [B, K, H, N, N]
    figure = plot_attention(frames[0], weights[0, -1], source_entity=42)
"""

import keras
import numpy as np


def attention_maps(model, observations, layer_name="relational_module"):
    """Per-block attention weights ``[B, K, H, N, N]`` of a relational agent on ``observations``.

    Works for any functional model whose ``layer_name`` layer was called with
    ``return_attention_scores=True`` (as :func:`~keras_relational.models.boxworld_agents.
    relational_agent` does), trained or not: the weights are the model's own.
    """
    try:
        layer = model.get_layer(layer_name)
    except ValueError as error:
        raise ValueError(
            f"`model` has no layer named {layer_name!r} (`layer_name`); layers: "
            f"{[layer.name for layer in model.layers]}.") from error
    outputs = layer.output
    if not isinstance(outputs, (list, tuple)) or len(outputs) != 2:
        raise ValueError(f"Layer {layer_name!r} does not output attention scores; it must be "
                         "called with return_attention_scores=True in the model.")
    extractor = keras.Model(model.inputs, outputs[1])
    return np.asarray(extractor.predict(np.asarray(observations), verbose=0))


def entity_centres(frame_shape, feature_shape, padding="same", num_convs=2, kernel_size=2):
    """Frame coordinates (row, col) of each entity's receptive-field centre, ``[N, 2]``.

    With stride-1 ``kernel_size`` convolutions, TF/Keras "same" padding pads bottom/right for
    even kernels, so entity ``(i, j)`` covers pixels ``i .. i + num_convs*(k-1)`` from its
    top-left corner ``(i, j)``; "valid" padding gives the same anchoring (the Keras and
    TensorFlow padding convention, which Zambaldi et al. 2019 use).
    """
    del frame_shape, padding  # both paddings anchor at the top-left pixel for stride-1 convs
    rows, cols = feature_shape
    reach = num_convs * (kernel_size - 1) / 2.0
    grid = np.stack(np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij"), axis=-1)
    return grid.reshape(-1, 2).astype("float64") + reach


def top_attended(weights_row, k=5):
    """The ``k`` entities with the largest weight in one attention row, best first."""
    order = np.argsort(-np.asarray(weights_row))[:k]
    return [(int(i), float(weights_row[i])) for i in order]


def plot_attention(frame, head_weights, source_entity, feature_shape=None, padding="same",
                   num_convs=2, ax=None, scale=1.0, title=None):
    """Draws arrows from ``source_entity`` to every entity, opacity = attention weight.

    Args:
        frame: RGB frame ``[H, W, 3]`` (uint8).
        head_weights: ``[H, N, N]`` attention of one block (e.g. ``attention_maps(...)[b, -1]``).
        source_entity: index of the attending entity (row-major over the feature map).
        feature_shape: (rows, cols) of the entity grid; defaults to the frame's (same padding).
        ax: optional matplotlib axes; one subplot per head is created otherwise.

    Returns:
        The matplotlib figure.
    """
    import matplotlib.pyplot as plt

    frame = np.asarray(frame)
    head_weights = np.asarray(head_weights)
    if head_weights.ndim != 3:
        raise ValueError(f"`head_weights` must be [heads, N, N], received shape "
                         f"{head_weights.shape}.")
    if feature_shape is None:
        feature_shape = frame.shape[:2]
    centres = entity_centres(frame.shape, feature_shape, padding, num_convs)
    if not 0 <= source_entity < len(centres):
        raise ValueError(f"`source_entity` must be in [0, {len(centres)}), received "
                         f"{source_entity}.")
    num_heads = head_weights.shape[0]
    if ax is None:
        figure, axes = plt.subplots(1, num_heads, figsize=(4 * num_heads, 4), squeeze=False)
        axes = axes[0]
    else:
        figure, axes = ax.figure, [ax] * num_heads
    source = centres[source_entity]
    for head, axis in enumerate(axes):
        axis.imshow(frame, interpolation="nearest")
        weights = head_weights[head, source_entity]
        strongest = weights.max()
        for target, weight in enumerate(weights):
            if weight < 0.02 * strongest:
                continue
            dy, dx = centres[target] - source
            axis.annotate("", xy=(source[1] + dx, source[0] + dy), xytext=(source[1], source[0]),
                          arrowprops=dict(arrowstyle="->", color="red", alpha=float(
                              weight / strongest) * scale, lw=1.5))
        axis.plot(source[1], source[0], "o", color="yellow")
        axis.set_title(title or f"head {head}")
        axis.set_xticks([])
        axis.set_yticks([])
    return figure
