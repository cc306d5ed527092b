"""PrediNet's output read as propositions about symbolic objects (Shanahan et al. 2020, Sec. 6,
Fig. 7 and Eq. 7).

For one image, the 2k attention masks of the k heads are clustered with mean-shift; each cluster
is an object symbol ``ob_1``, ``ob_2``, ... (ordered by first appearance, head by head, mask 1
before mask 2), each relation axis ``i`` is a symbol ``r_<i+1>``, and head ``h`` contributes the
``j`` facts ``rel(r_i, ob_a, ob_b, d)`` with ``a`` and ``b`` the clusters of its two masks and
``d = D[h, i]``: ``k * j`` facts in all (64 for the paper's 8-head, 8-relation network trained on
``between``). :func:`to_prolog` writes them as Prolog clauses; running Prolog is up to the user.
The paper does not give the mean-shift bandwidth: ours (0.5, with a flat kernel, on masks that
sum to 1) merges masks that share most of their weight; tune it per network.

Example:

```python
from keras_relational.analysis import predinet_attention, predinet_propositions

a1, a2 = predinet_attention.attention_maps(model, images[:1])          # [1, H, 5, 5] each
parts = predinet_attention.split_propositions(outputs, num_heads=8, num_relations=8)
objects, facts = predinet_propositions.propositions(a1[0], a2[0], parts["values"][0])
print(predinet_propositions.to_prolog(facts))                          # rel(r_1, ob_1, ob_2, 0.12).
```
"""

import numpy as np

DEFAULT_BANDWIDTH = 0.5  # our choice; the paper does not state it


def mean_shift(points, bandwidth=DEFAULT_BANDWIDTH, max_iterations=100):
    """Mean-shift with a flat kernel: a cluster index per row of ``points`` ``[P, d]``.

    Every point climbs to the mean of the points within ``bandwidth`` of it until it stops
    moving; modes closer than ``bandwidth / 2`` are one cluster. Clusters are numbered in the
    order of their first point.
    """
    points = np.asarray(points, dtype="float64")
    if not bandwidth > 0:
        raise ValueError(f"`bandwidth`: expected a positive number, received {bandwidth!r}.")
    modes = points.copy()
    for _ in range(max_iterations):
        near = np.linalg.norm(modes[:, None] - points[None], axis=-1) <= bandwidth
        moved = (near[..., None] * points[None]).sum(1) / near.sum(1, keepdims=True)
        if np.allclose(moved, modes, atol=1e-9):
            break
        modes = moved
    labels = -np.ones(len(points), dtype="int64")
    centres = []
    for i, mode in enumerate(modes):
        for c, centre in enumerate(centres):
            if np.linalg.norm(mode - centre) < bandwidth / 2:
                labels[i] = c
                break
        else:
            centres.append(mode)
            labels[i] = len(centres) - 1
    return labels


def propositions(attention_1, attention_2, values, bandwidth=DEFAULT_BANDWIDTH):
    """The objects and facts of one image.

    Args:
        attention_1, attention_2: the image's masks ``[H, N]`` (or ``[H, S, S]``).
        values: the relation values ``D`` ``[H, j]`` (``split_propositions(...)["values"]``).
        bandwidth: mean-shift bandwidth (see the module docstring).

    Returns:
        ``(objects, facts)``: ``objects`` is ``[H, 2]`` object numbers (1-based, ``ob_<n>``) of
        each head's two masks; ``facts`` is a list of ``H * j`` tuples
        ``("r_<i>", "ob_<a>", "ob_<b>", d)``, head by head.
    """
    first = np.asarray(attention_1).reshape(len(attention_1), -1)
    second = np.asarray(attention_2).reshape(len(attention_2), -1)
    values = np.asarray(values)
    if not first.shape == second.shape or values.shape[0] != first.shape[0]:
        raise ValueError(f"`attention_1`, `attention_2`, `values`: expected [H, N], [H, N] and "
                         f"[H, j] with the same H, received {first.shape}, {second.shape} and "
                         f"{values.shape}.")
    heads = first.shape[0]
    masks = np.stack([first, second], 1).reshape(2 * heads, -1)  # head by head, mask 1 first
    objects = mean_shift(masks, bandwidth).reshape(heads, 2) + 1
    facts = [(f"r_{i + 1}", f"ob_{objects[h, 0]}", f"ob_{objects[h, 1]}", float(values[h, i]))
             for h in range(heads) for i in range(values.shape[1])]
    return objects, facts


def to_prolog(facts, predicate="rel"):
    """The facts as Prolog clauses, one a line: ``rel(r_1, ob_1, ob_2, 0.123456).``"""
    return "".join(f"{predicate}({r}, {a}, {b}, {d:.6f}).\n" for r, a, b, d in facts)
