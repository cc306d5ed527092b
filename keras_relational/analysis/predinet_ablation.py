"""Head ablation of a Relations Game model (Shanahan et al. 2020, Fig. 6c).

At test time a subset of the central module's heads is kept and every output of the others is
set to 0 (our reading: the paper says the heads are "removed"); the accuracy is measured as a
function of how many heads are kept, over random subsets. The paper compares PrediNet, MHA and
"PrediNet*", which samples only from the heads whose two masks attend to the objects: pass those
heads as ``candidate_heads``. The model is split at the central module
(``relations_game.central_model`` / ``readout_model``), so the images go through the CNN and the
central module once and only the small output MLP runs per subset.

Example:

```python
from keras_relational.analysis import predinet_ablation

per_head = predinet_ablation.head_ablation(model, images, tasks, labels)    # [H]
curve = predinet_ablation.pruning_curve(model, images, tasks, labels, num_samples=10)
curve["num_kept"], curve["accuracies"]                                       # [K], [K, 10]
predinet_ablation.plot_pruning_curves({"PrediNet": curve}, path="/tmp/pruning.png")
```
"""

import keras
import numpy as np

from keras_relational.analysis import plotting, predinet_pca
from keras_relational.models import relations_game


class _SplitModel:
    """The central outputs of fixed images and the readout that turns them into predictions."""

    def __init__(self, model, images, tasks, labels, batch_size):
        self.heads = predinet_pca.num_heads_of(model)
        self.outputs = predinet_pca.central_outputs(model, images, batch_size)
        self.head_dim = self.outputs.shape[-1] // self.heads
        self.readout = relations_game.readout_model(model)
        num_tasks = model.input["task"].shape[-1]
        self.tasks = np.eye(num_tasks, dtype="float32")[np.asarray(tasks, dtype="int64")]
        self.labels = np.asarray(labels, dtype="int64")
        self.batch_size = batch_size
        if not len(self.outputs) == len(self.tasks) == len(self.labels):
            raise ValueError(f"`images`, `tasks` and `labels`: expected the same length, "
                             f"received {len(self.outputs)}, {len(self.tasks)} and "
                             f"{len(self.labels)}.")

    def accuracy(self, keep):
        """Accuracy with only the heads where ``keep`` ([H] bool) is True."""
        mask = np.repeat(np.asarray(keep, dtype="float32"), self.head_dim)
        outputs = (self.outputs * mask).astype("float32")
        predicted = []
        for start in range(0, len(outputs), self.batch_size):
            stop = start + self.batch_size
            logits = self.readout({"central": outputs[start:stop],
                                   "task": self.tasks[start:stop]})
            predicted.append(np.argmax(keras.ops.convert_to_numpy(logits), -1))
        return float(np.mean(np.concatenate(predicted) == self.labels))


def ablation_accuracy(model, images, tasks, labels, keep_heads, batch_size=256):
    """Accuracy of ``model`` with only the heads in ``keep_heads`` (indices) kept."""
    split = _SplitModel(model, images, tasks, labels, batch_size)
    keep = np.zeros(split.heads, bool)
    keep[list(keep_heads)] = True
    return split.accuracy(keep)


def head_ablation(model, images, tasks, labels, batch_size=256):
    """Accuracy with each head zeroed in turn: ``[H]`` (entry h: every head but h kept)."""
    split = _SplitModel(model, images, tasks, labels, batch_size)
    return np.array([split.accuracy(np.arange(split.heads) != h) for h in range(split.heads)])


def pruning_curve(model, images, tasks, labels, num_kept=None, num_samples=10,
                  candidate_heads=None, seed=0, batch_size=256):
    """Accuracy against the number of heads kept, over random subsets (Fig. 6c).

    Args:
        model: a Relations Game model with a PrediNet or MHA central module.
        images, tasks, labels: raw-pixel images ``[B, 36, 36, 3]``, task ids ``[B]`` and labels.
        num_kept: the subset sizes (default ``0 .. len(candidate_heads)``).
        num_samples: random subsets per size.
        candidate_heads: the heads subsets are drawn from (default all; PrediNet* passes the
            heads whose masks attend to the objects).
        seed: seed of the subset sampling.

    Returns:
        ``{"num_kept": [K], "accuracies": [K, num_samples]}`` NumPy arrays.
    """
    split = _SplitModel(model, images, tasks, labels, batch_size)
    candidates = np.arange(split.heads) if candidate_heads is None else np.asarray(
        candidate_heads, dtype="int64")
    sizes = np.arange(len(candidates) + 1) if num_kept is None else np.asarray(num_kept)
    if sizes.size and (sizes.min() < 0 or sizes.max() > len(candidates)):
        raise ValueError(f"`num_kept`: expected sizes in [0, {len(candidates)}] (the number of "
                         f"candidate heads), received {sizes.tolist()}.")
    rng = np.random.default_rng(seed)
    accuracies = np.zeros((len(sizes), num_samples))
    for i, size in enumerate(sizes):
        for s in range(num_samples):
            keep = np.zeros(split.heads, bool)
            keep[rng.choice(candidates, size=int(size), replace=False)] = True
            accuracies[i, s] = split.accuracy(keep)
    return {"num_kept": sizes, "accuracies": accuracies}


def plot_pruning_curves(curves, chance=None, path=None):
    """Mean accuracy (and its spread over subsets) against heads kept, one line per model.

    ``curves`` maps a name to a :func:`pruning_curve` result; ``chance`` draws a dashed line.
    Returns the matplotlib figure (saved at ``path`` if given).
    """
    plt = plotting.pyplot()
    figure, ax = plt.subplots(figsize=(4.5, 3.2))
    for name, curve in curves.items():
        mean, spread = curve["accuracies"].mean(-1), curve["accuracies"].std(-1)
        ax.plot(curve["num_kept"], mean, marker="o", markersize=3, label=name)
        ax.fill_between(curve["num_kept"], mean - spread, mean + spread, alpha=0.2)
    if chance is not None:
        ax.axhline(chance, color="grey", linestyle="--", linewidth=1)
    ax.set_xlabel("heads kept")
    ax.set_ylabel("accuracy")
    ax.legend(fontsize=8)
    figure.tight_layout()
    if path is not None:
        figure.savefig(path, dpi=100)
    return figure
