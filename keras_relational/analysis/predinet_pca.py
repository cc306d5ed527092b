"""Per-head PCA of a Relations Game model's central output (Shanahan et al. 2020, Fig. 6b, S8, S9).

Each PrediNet head h outputs ``R^h = [D^h, P1^h, P2^h]`` (``j + 4`` values); the paper fits a PCA
per head on 10,000 pentomino images of the ``colour_and_or_shape`` task, projects onto the first
two components and colours the points by the 4-way label; hexomino images projected with the
same (pentomino-fitted) components keep the clusters. The same functions work for the MHA
baseline, whose output is also head-major (``H`` heads of ``j + 4`` values), and for the whole
central output (treat it as one head: ``outputs[:, None]``).

Example:

```python
from keras_relational.analysis import predinet_pca

heads = predinet_pca.head_outputs(model, images)             # [B, H, j + 4]
pca = predinet_pca.fit_head_pca(heads, num_components=2)
points = predinet_pca.project_heads(pca, heads)               # [B, H, 2]
pca.explained_variance_ratio                                  # [H, 2]
figure = predinet_pca.plot_head_pca(points, labels, heads=(0, 1, 2, 3))
```
"""

import collections

import keras
import numpy as np

from keras_relational.analysis import plotting
from keras_relational.models import relations_game

HeadPCA = collections.namedtuple("HeadPCA", ["mean", "components", "explained_variance_ratio"])
HeadPCA.__doc__ = """One PCA per head: ``mean [H, d]``, ``components [H, c, d]`` (unit rows,
largest variance first) and ``explained_variance_ratio [H, c]`` (fraction of the head's total
variance along each component)."""


def num_heads_of(model):
    """The number of heads of ``model``'s central module (PrediNet or MHA)."""
    central = model.get_layer(relations_game.CENTRAL)
    heads = getattr(central, "num_heads", None)
    if heads is None:
        raise ValueError(f"`model`: expected a Relations Game model whose central module has "
                         f"heads (PrediNet or MHA), received one with "
                         f"{type(central).__name__}.")
    return int(heads)


def central_outputs(model, images, batch_size=256):
    """The central module's output ``[B, D]`` for raw-pixel ``images`` ``[B, 36, 36, 3]``."""
    to_central = relations_game.central_model(model)
    images = np.asarray(images, dtype="float32")
    parts = [keras.ops.convert_to_numpy(to_central(images[start:start + batch_size]))
             for start in range(0, len(images), batch_size)]
    return np.concatenate(parts)


def head_outputs(model, images, batch_size=256):
    """Each head's output ``[B, H, D / H]`` (PrediNet: ``R^h = [D^h, P1^h, P2^h]``)."""
    outputs = central_outputs(model, images, batch_size)
    heads = num_heads_of(model)
    return outputs.reshape(len(outputs), heads, outputs.shape[-1] // heads)


def fit_head_pca(head_outputs, num_components=2):
    """Fits a PCA per head on ``head_outputs`` ``[B, H, d]``; returns a :class:`HeadPCA`."""
    head_outputs = np.asarray(head_outputs, dtype="float64")
    if head_outputs.ndim != 3:
        raise ValueError(f"`head_outputs`: expected shape [B, H, d], received shape "
                         f"{head_outputs.shape}.")
    batch, heads, dims = head_outputs.shape
    if not 1 <= num_components <= min(batch, dims):
        raise ValueError(f"`num_components`: expected an integer in [1, {min(batch, dims)}] "
                         f"(at most B and d), received {num_components!r}.")
    mean = head_outputs.mean(axis=0)  # [H, d]
    centred = np.transpose(head_outputs - mean, (1, 0, 2))  # [H, B, d]
    _, singular, vectors = np.linalg.svd(centred, full_matrices=False)  # [H, k], [H, k, d]
    variance = singular ** 2
    total = variance.sum(axis=-1, keepdims=True)
    ratio = np.divide(variance, total, out=np.zeros_like(variance), where=total > 0)
    return HeadPCA(mean, vectors[:, :num_components], ratio[:, :num_components])


def project_heads(pca, head_outputs):
    """``head_outputs`` ``[B, H, d]`` on each head's components: ``[B, H, c]``."""
    centred = np.asarray(head_outputs, dtype="float64") - pca.mean
    return np.einsum("bhd,hcd->bhc", centred, pca.components)


def plot_head_pca(points, labels, heads=None, label_names=None, columns=4, path=None):
    """Scatter plots of the first two components of each head, coloured by label.

    Args:
        points: ``[B, H, c]`` projections (``c >= 2``) from :func:`project_heads`.
        labels: ``[B]`` integer labels (e.g. the 4 ``colour_and_or_shape`` classes).
        heads: which heads to draw (all by default).
        label_names: legend text per label value (default: the values).
        columns: panels per row.
        path: if given, the figure is saved there.

    Returns:
        The matplotlib figure.
    """
    plt = plotting.pyplot()
    points, labels = np.asarray(points), np.asarray(labels)
    heads = list(range(points.shape[1])) if heads is None else list(heads)
    rows = -(-len(heads) // columns)
    figure, axes = plt.subplots(rows, min(columns, len(heads)), figsize=(
        2.6 * min(columns, len(heads)), 2.6 * rows), squeeze=False)
    for ax in axes.flat[len(heads):]:
        ax.axis("off")
    for ax, head in zip(axes.flat, heads, strict=False):
        for value in np.unique(labels):
            chosen = labels == value
            name = label_names[value] if label_names is not None else str(value)
            ax.scatter(points[chosen, head, 0], points[chosen, head, 1], s=3, label=name)
        ax.set_title(f"head {head}", fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
    axes.flat[0].legend(fontsize=7, markerscale=3)
    figure.tight_layout()
    if path is not None:
        figure.savefig(path, dpi=100)
    return figure
