"""The 2-simplicial agent's attention over a bridge Box-World frame (Clift et al. 2020, Figs. 7
and 11-13 style).

Works on any model from :func:`keras_relational.models.boxworld_agents.simplicial_agent`,
trained or not, whether or not it was built with ``return_attention_scores``: the block is
called again, eagerly, on the model's own entities. With Clift et al.'s agent (7 x 10 frames,
two valid 2x2 convolutions) there are ``N = 40`` standard entities on a 5 x 8 grid (entity
``i`` is cell ``(i // 8, i % 8)``) and ``M = 2`` virtual entities ``40, 41``.

Example::

    scores = attention_maps(model, frames)         # one dict per iteration of the block
    scores[1]["two_simplicial"].shape               # [B, 1, 40, 2, 2]
    figure = plot_simplicial_attention(frames[0], [s for s in scores], batch_index=0,
                                       feature_shape=(5, 8), query_entity=25)
"""

import keras
import numpy as np

from keras_relational.analysis.boxworld_attention import entity_centres


def attention_maps(model, observations, entities_layer="entities",
                   block_layer="simplicial_block"):
    """The block's attention on ``observations``: one dict of NumPy arrays per iteration.

    ``"one_simplicial"``: ``[B, H1, N + M, N + M]`` (rows: queries, the virtual entities last);
    ``"two_simplicial"``: ``[B, H2, N, M, M]``, query ``i``'s weight on the virtual pair
    ``(j, k)`` (Clift et al. 2020, eqs. 13-14).
    """
    names = [layer.name for layer in model.layers]
    for argument, name in (("entities_layer", entities_layer), ("block_layer", block_layer)):
        if name not in names:
            raise ValueError(f"`model` has no layer named {name!r} (`{argument}`); layers: "
                             f"{names}.")
    to_entities = keras.Model(model.inputs, model.get_layer(entities_layer).output)
    entities = to_entities(np.asarray(observations))
    _, scores = model.get_layer(block_layer)(entities, return_attention_scores=True)
    return [{key: keras.ops.convert_to_numpy(value) for key, value in iteration.items()}
            for iteration in scores]


def pair_matrix(two_simplicial):
    """``[H2, N, M, M]`` -> ``[H2, M * M, N]``: rows the pairs ``(j, k)`` in lexicographic order,
    columns the query entities, as Clift et al. draw it (Fig. 7, bottom)."""
    two_simplicial = np.asarray(two_simplicial)
    heads, queries, m, _ = two_simplicial.shape
    return two_simplicial.reshape(heads, queries, m * m).transpose(0, 2, 1)


def plot_simplicial_attention(frame, scores, batch_index=0, feature_shape=(5, 8),
                              query_entity=None, num_convs=2, path=None):
    """Draws the agent's attention over one frame: a Fig. 7 / 11 / 12-13 style panel set.

    Panels: the frame with the 2-simplex of ``query_entity`` (lines from the query to the
    entities each virtual entity of its strongest pair attends to most, Figs. 12-13); the
    first iteration's 1-simplicial attention of every virtual entity, per head, over the frame
    (Fig. 7, top right); the first iteration's 1-simplicial attention between standard entities
    per head (Fig. 11); the last iteration's 2-simplicial attention, pairs x queries (Fig. 7,
    bottom).

    Args:
        frame: the RGB frame ``[H, W, 3]``.
        scores: :func:`attention_maps` of a batch holding that frame.
        batch_index: the frame's index in that batch.
        feature_shape: (rows, cols) of the standard entities' grid.
        query_entity: the target of the drawn 2-simplex (default: the query whose strongest
            pair weight is the largest).
        num_convs: 2x2 convolutions of the stem (entity centres on the frame).
        path: if given, the figure is saved there.

    Returns:
        The matplotlib figure.
    """
    import matplotlib.pyplot as plt

    frame = np.asarray(frame)
    first = scores[0]["one_simplicial"][batch_index]          # [H1, T, T]
    two = scores[-1]["two_simplicial"][batch_index]            # [H2, N, M, M]
    num_standard = two.shape[1]
    m = two.shape[2]
    rows, cols = feature_shape
    if rows * cols != num_standard:
        raise ValueError(f"`feature_shape` {feature_shape} holds {rows * cols} entities, the "
                         f"scores have {num_standard} standard entities.")
    centres = entity_centres(frame.shape, feature_shape, num_convs=num_convs)
    best_pair = two[0].reshape(num_standard, m * m)
    if query_entity is None:
        query_entity = int(best_pair.max(-1).argmax())
    if not 0 <= query_entity < num_standard:
        raise ValueError(f"`query_entity` must be in [0, {num_standard}), received "
                         f"{query_entity}.")
    heads = first.shape[0]
    figure, axes = plt.subplots(2, max(1 + heads * m, 1 + heads, 2),
                                figsize=(3.2 * max(1 + heads * m, 3), 6.4), squeeze=False)
    for axis in axes.flat:
        axis.set_xticks([])
        axis.set_yticks([])
    # The 2-simplex of the query (Figs. 12-13): its strongest pair (j, k) of virtual entities,
    # each drawn at the standard entity it attends to most in the first iteration's head 0.
    axis = axes[0, 0]
    axis.imshow(frame, interpolation="nearest")
    j, k = divmod(int(best_pair[query_entity].argmax()), m)
    query = centres[query_entity]
    corners = [query]
    for virtual in (j, k):
        target = int(first[min(virtual, heads - 1), num_standard + virtual, :num_standard]
                     .argmax())
        corners.append(centres[target])
    triangle = np.array(corners + [query])
    axis.plot(triangle[:, 1], triangle[:, 0], "-o", color="yellow", lw=2)
    axis.set_title(f"2-simplex of entity {query_entity}: pair ({j + 1},{k + 1}) "
                   f"{best_pair[query_entity].max():.2f}", fontsize=8)
    # Fig. 7, top right: each virtual entity's 1-simplicial attention over the frame, per head.
    for head in range(heads):
        for virtual in range(m):
            axis = axes[0, 1 + head * m + virtual]
            weights = first[head, num_standard + virtual, :num_standard].reshape(rows, cols)
            axis.imshow(frame, interpolation="nearest")
            heat = np.zeros(frame.shape[:2])
            for index, (r, c) in enumerate(np.round(centres).astype(int)):
                heat[min(r, heat.shape[0] - 1), min(c, heat.shape[1] - 1)] = weights.flat[index]
            axis.imshow(heat, cmap="inferno", alpha=0.6, interpolation="nearest")
            axis.set_title(f"virtual {virtual + 1}, head {head + 1}", fontsize=8)
    # Fig. 11: 1-simplicial attention between standard entities, per head (queries x keys).
    for head in range(heads):
        axis = axes[1, head]
        axis.imshow(first[head, :num_standard, :num_standard], cmap="viridis")
        axis.set_title(f"1-simplicial head {head + 1} (query x key)", fontsize=8)
    # Fig. 7, bottom: the 2-simplicial attention, rows the pairs (1,1), (1,2), (2,1), (2,2).
    axis = axes[1, heads]
    axis.imshow(pair_matrix(two)[0], cmap="viridis", aspect="auto")
    axis.set_yticks(range(m * m))
    axis.set_yticklabels([f"({a + 1},{b + 1})" for a in range(m) for b in range(m)], fontsize=7)
    axis.set_title("2-simplicial, last iteration (pair x query)", fontsize=8)
    for axis in axes[1, heads + 1:]:
        axis.set_visible(False)
    figure.tight_layout()
    if path is not None:
        figure.savefig(path, dpi=100)
    return figure
