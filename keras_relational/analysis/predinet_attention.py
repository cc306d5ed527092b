"""Which entities each PrediNet head attends to, and plots of it over the image (Shanahan et al.
2020, Fig. 6a).

Works on a whole Relations Game model from :func:`keras_relational.models.relations_game.
build_model` with a PrediNet central module. Matplotlib is imported only by
:func:`plot_attention`.

Example:

```python
from keras_relational.analysis import predinet_attention

attention_1, attention_2 = predinet_attention.attention_maps(model, images)  # [B, H, 5, 5]
print(predinet_attention.attended_cells(attention_1[0]))   # per head: (row, col, weight)
figure = predinet_attention.plot_attention(images[0], attention_1[0], attention_2[0],
                                           heads=(0, 1, 2, 3), path="/tmp/attention.png")
```
"""

import keras
import numpy as np

from keras_relational.analysis import plotting
from keras_relational.models import relations_game


def attention_maps(model, images, batch_size=256):
    """The two attention masks of every head as feature-map grids.

    The masks do not depend on the task id (it joins after the central module).

    Args:
        model: a Relations Game model with a PrediNet central module.
        images: ``[B, 36, 36, 3]`` raw pixels (0..255).
        batch_size: images per forward pass.

    Returns:
        ``(attention_1, attention_2)``, NumPy arrays ``[B, H, S, S]`` (``S`` = 5 for the paper's
        feature map; entity ``n`` is cell ``(n // S, n % S)``).
    """
    # Eager calls: re-calling a functional model's layer symbolically with a different output
    # structure (return_attention_scores=True) is not supported by Keras 3 functional graphs.
    to_entities = relations_game.entity_model(model)
    central = model.get_layer(relations_game.CENTRAL)
    images = np.asarray(images, dtype="float32")
    firsts, seconds = [], []
    for start in range(0, len(images), batch_size):
        entities = to_entities(images[start:start + batch_size])
        _, attention_1, attention_2 = central(entities, return_attention_scores=True)
        firsts.append(keras.ops.convert_to_numpy(attention_1))
        seconds.append(keras.ops.convert_to_numpy(attention_2))
    attention_1, attention_2 = np.concatenate(firsts), np.concatenate(seconds)
    side = int(round(np.sqrt(attention_1.shape[-1])))
    shape = attention_1.shape[:2] + (side, side)
    return attention_1.reshape(shape), attention_2.reshape(shape)


def split_propositions(outputs, num_heads, num_relations, position_dims=2):
    """Splits PrediNet's flat ``[B, H * (j + 2p)]`` output into its parts (Shanahan et al. 2020,
    Sec. 2, eq. (7)).

    Returns ``{"values": D [B, H, j], "pos1": [B, H, p], "pos2": [B, H, p]}`` as NumPy arrays:
    ``values[b, h, i]`` is the signed distance between head ``h``'s two attended entities along
    relation axis ``i``.
    """
    outputs = np.asarray(outputs)
    per_head = outputs.reshape(outputs.shape[0], num_heads, num_relations + 2 * position_dims)
    return {"values": per_head[..., :num_relations],
            "pos1": per_head[..., num_relations:num_relations + position_dims],
            "pos2": per_head[..., num_relations + position_dims:]}


def attended_cells(attention):
    """Per head, the cell with the largest weight: a list of ``(row, col, weight)``.

    ``attention`` is one image's ``[H, S, S]`` masks. With the paper's geometry, cell ``(r, c)``
    covers pixels ``[6r, 6r + 12) x [6c, 6c + 12)``; even cells line up with the 3x3 grid
    (cell ``(2R, 2C)`` = grid cell ``(R, C)``).
    """
    attention = np.asarray(attention)
    flat = attention.reshape(attention.shape[0], -1)
    best = flat.argmax(-1)
    side = attention.shape[-1]
    return [(int(i // side), int(i % side), float(flat[h, i])) for h, i in enumerate(best)]


def to_image_space(mask, image_size=36, kernel=12, stride=6):
    """Spreads each cell's weight over its receptive field and normalises to max 1.

    Our way of drawing the 5x5 masks over the 36x36 image (Shanahan et al. 2020, Fig. 6a shows
    the masks, not how they were drawn).
    """
    mask = np.asarray(mask, dtype="float64")
    heat = np.zeros((image_size, image_size))
    for r in range(mask.shape[0]):
        for c in range(mask.shape[1]):
            heat[stride * r:stride * r + kernel, stride * c:stride * c + kernel] += mask[r, c]
    return heat / max(heat.max(), 1e-12)


def plot_attention(image, attention_1, attention_2, heads=(0, 1, 2, 3), path=None):
    """Plots the image and, per head, both masks over it (rows: heads; columns: A1, A2).

    Args:
        image: ``[36, 36, 3]`` uint8 image.
        attention_1, attention_2: that image's ``[H, S, S]`` masks (from :func:`attention_maps`).
        heads: which heads to draw.
        path: if given, the figure is saved there.

    Returns:
        The matplotlib figure.
    """
    plt = plotting.pyplot()
    image = np.asarray(image, dtype="uint8")
    figure, axes = plt.subplots(len(heads), 3, figsize=(6.6, 2.2 * len(heads)), squeeze=False)
    for row, head in enumerate(heads):
        axes[row, 0].imshow(image)
        axes[row, 0].set_title(f"head {head}")
        for col, mask in ((1, attention_1[head]), (2, attention_2[head])):
            axes[row, col].imshow(image)
            axes[row, col].imshow(to_image_space(mask), cmap="inferno", alpha=0.6,
                                  vmin=0.0, vmax=1.0)
            r, c, w = attended_cells(np.asarray(mask)[None])[0]
            axes[row, col].set_title(f"A{col} max ({r},{c}) {w:.2f}", fontsize=8)
        for ax in axes[row]:
            ax.set_xticks([])
            ax.set_yticks([])
    figure.tight_layout()
    if path is not None:
        figure.savefig(path, dpi=100)
    return figure
