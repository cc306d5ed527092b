"""NumPy float64 references of the TPR memory (Schlag & Schmidhuber 2018, eqs. (6)-(20)): the
literal recurrence over the update MLPs' outputs and the chained normalised reads of the
inference module, for ``tests/layers/test_tpr_memory.py`` and the mixed-precision check of
``tests/mixed_precision_cases.py``."""

import numpy as np


def unbind(memory, x, y):
    """``U(F, x, y)``: ``[B,E,R,E], [B,E], [B,R] -> [B,E]``."""
    return np.einsum("be,br,berf->bf", x, y, memory)


def outer(x, y, z):
    """``x ⊗ y ⊗ z``: ``[B,E], [B,R], [B,E] -> [B,E,R,E]``."""
    return np.einsum("be,br,bf->berf", x, y, z)


def memory_from_parts(parts, mask, use_move=True, use_backlink=True):
    """``F_T`` ``[B,E,R,E]`` from the update MLPs' outputs ``parts`` (``{"e1": [B,S,E], "e2",
    "r1", "r2", "r3"}``) and ``mask`` ``[B,S]``: the literal six outer products per step, every
    hat read from ``F_{t-1}``; masked steps do not write."""
    parts = {n: np.asarray(v, "float64") for n, v in parts.items()}
    batch, steps, entity_dim = parts["e1"].shape
    memory = np.zeros((batch, entity_dim, parts["r1"].shape[-1], entity_dim))
    mask = np.asarray(mask, "float64")
    for t in range(steps):
        e1, e2, r1 = parts["e1"][:, t], parts["e2"][:, t], parts["r1"][:, t]
        w_hat = unbind(memory, e1, r1)  # all hats from F_{t-1}
        delta = outer(e1, r1, e2) - outer(e1, r1, w_hat)
        if use_move:
            r2 = parts["r2"][:, t]
            delta += outer(e1, r2, w_hat) - outer(e1, r2, unbind(memory, e1, r2))
        if use_backlink:
            r3 = parts["r3"][:, t]
            delta += outer(e2, r3, e1) - outer(e2, r3, unbind(memory, e2, r3))
        memory = memory + mask[:, t, None, None, None] * delta
    return memory


def chained_reads(memory, cues, gains, biases, epsilon):
    """``i1 + i2 + ...`` ``[B,E]``: ``i_k = gain_k * norm(U(F, i_{k-1}, l_k)) + bias_k`` with
    ``i_0 = n`` (``cues``: ``{"n": [B,E], "l1": [B,R], ...}``), a layer norm over the entity
    axis with scalar gain and bias."""
    entity = np.asarray(cues["n"], "float64")
    total = 0.0
    for step in range(len(gains)):
        x = unbind(memory, entity, np.asarray(cues[f"l{step + 1}"], "float64"))
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        entity = gains[step] * (x - mu) / np.sqrt(var + epsilon) + biases[step]
        total = total + entity
    return total
