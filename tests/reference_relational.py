"""NumPy references of the relational equations (Zambaldi et al. 2019, Sec. 2.2; Shanahan et al.
2020, Sec. 4) and the entity sets the tests feed them."""

import keras
import numpy as np


def to_numpy(variable):
    return np.asarray(keras.ops.convert_to_numpy(variable), dtype="float64")


def layer_norm(x, gain, bias, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * gain + bias


def softmax(x, axis=-1):
    x = x - x.max(axis, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis, keepdims=True)


def mhdpa(entities, layer, mask=None, attention_mask=None):
    """The layer's equation with the layer's own weights: returns (outputs, weights)."""
    e = np.asarray(entities, "float64")
    b, n, _ = e.shape
    h, dk = layer.num_heads, layer.key_dim
    dv = layer.value_dim or dk
    dense = layer._qkv_projection
    qkv = e @ to_numpy(dense.kernel)
    if layer.use_bias:
        qkv = qkv + to_numpy(dense.bias)
    eps = layer.layer_norm_epsilon
    norms = layer._qkv_layer_norms
    if layer.qkv_norm == "joint":
        qkv = layer_norm(qkv, to_numpy(norms[0].gamma), to_numpy(norms[0].beta), eps)
    q, k, v = np.split(qkv, [h * dk, 2 * h * dk], axis=-1)
    if layer.qkv_norm == "separate":
        q, k, v = (layer_norm(x, to_numpy(nm.gamma), to_numpy(nm.beta), eps)
                   for x, nm in zip((q, k, v), norms, strict=True))
    q, k, v = q.reshape(b, n, h, dk), k.reshape(b, n, h, dk), v.reshape(b, n, h, dv)
    scale = {"key_dim": dk**-0.5, "rmc": (2 * dk + dv) ** -0.5, None: 1.0}[layer.attention_scale]
    logits = np.einsum("bihd,bjhd->bhij", q, k) * scale
    allowed = np.ones((b, 1, n, n), bool)
    if mask is not None:
        allowed &= np.asarray(mask, bool)[:, None, None, :]
    if attention_mask is not None:
        allowed &= np.broadcast_to(np.asarray(attention_mask, bool), (b, n, n))[:, None]
    logits = np.where(allowed, logits, -1e9)
    weights = softmax(logits)
    attended = np.einsum("bhij,bjhd->bihd", weights, v).reshape(b, n, h * dv)
    if layer._output_projection is not None:
        attended = attended @ to_numpy(layer._output_projection.kernel) + to_numpy(
            layer._output_projection.bias)
    return attended, weights


def relational_block(entities, block, mask=None):
    """``LN(E + g_theta(MHDPA(E)))`` with the block's own weights."""
    e = np.asarray(entities, "float64")
    attended, weights = mhdpa(e, block._attention, mask=mask)
    x = attended
    for i, dense in enumerate(block._mlp_layers):
        x = x @ to_numpy(dense.kernel) + to_numpy(dense.bias)
        if i < len(block._mlp_layers) - 1:
            x = np.maximum(x, 0.0)
    norm = block._output_layer_norm
    return layer_norm(e + x, to_numpy(norm.gamma), to_numpy(norm.beta),
                      block.layer_norm_epsilon), weights


def randomise_layer_norms(layer, seed=0):
    """Gives every LayerNorm in ``layer`` random gains/biases so the reference must use them."""
    rng = np.random.RandomState(seed)
    for sub in layer._flatten_layers(include_self=True, recursive=True):
        if isinstance(sub, keras.layers.LayerNormalization):
            sub.gamma.assign(rng.uniform(0.5, 1.5, size=sub.gamma.shape).astype("float32"))
            sub.beta.assign(rng.normal(scale=0.1, size=sub.beta.shape).astype("float32"))


def relu(x):
    return np.maximum(x, 0.0)


def relations_game_entities(seed=0, batch=2, n=25, m=34):
    """Random entities ``[batch, n, m]`` whose last two features are the (x, y) = (c/S, r/S)
    coordinates of an ``S x S`` grid, as the Relations Game models build them."""
    rng = np.random.RandomState(seed)
    features = rng.uniform(0, 1, size=(batch, n, m - 2))
    side = int(round(np.sqrt(n)))
    rows, cols = np.meshgrid(np.arange(side), np.arange(side), indexing="ij")
    coords = np.stack([cols / side, rows / side], -1).reshape(n, 2)
    coords = np.broadcast_to(coords, (batch, n, 2))
    return np.concatenate([features, coords], -1).astype("float32")
