import itertools

import keras
import numpy as np
import pytest
from layer_contract import run_layer_contract

import keras_relational
from keras_relational.layers.simplicial_scores import triple_product_logits

# ---------------------------------------------------------------------------------------------
# NumPy references (float64), written from the paper's equations, independent of the layer.
# ---------------------------------------------------------------------------------------------


def reference_triple_squared(p, l1, l2):
    """Eq. (8) for all triples: p [..., I, d], l1 [..., J, d], l2 [..., K, d] -> [..., I, J, K]."""
    pl1 = np.einsum("...id,...jd->...ij", p, l1)[..., :, :, None]
    pl2 = np.einsum("...id,...kd->...ik", p, l2)[..., :, None, :]
    l12 = np.einsum("...jd,...kd->...jk", l1, l2)[..., None, :, :]
    pp = (p * p).sum(-1)[..., :, None, None]
    n1 = (l1 * l1).sum(-1)[..., None, :, None]
    n2 = (l2 * l2).sum(-1)[..., None, None, :]
    return pl1**2 * n2 + l12**2 * pp + pl2**2 * n1 - 2 * pl1 * pl2 * l12


def grade_one(a, b, c):
    """Eq. (7)'s vector, the grade-1 part of the Clifford product abc."""
    return np.dot(a, b) * c - np.dot(a, c) * b + np.dot(b, c) * a


def softmax(z, axis):
    z = z - z.max(axis=axis, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=axis, keepdims=True)


def split_projection(x, kernel, heads, key_dim, value_dim):
    """x [B, T, F] -> p, l1, l2 [B, H, T, dk], u [B, H, T, dv] (column order p, l1, l2, u)."""
    b, t, _ = x.shape
    projected = x @ kernel
    width = heads * key_dim
    p, l1, l2 = (projected[..., i * width:(i + 1) * width].reshape(b, t, heads, key_dim)
                 .transpose(0, 2, 1, 3) for i in range(3))
    u = projected[..., 3 * width:].reshape(b, t, heads, value_dim).transpose(0, 2, 1, 3)
    return p, l1, l2, u


def reference_simplicial(x, kernel, bilinear, heads, key_dim, value_dim, mode, m=0, mask=None):
    """Eqs. (10), (13) (normalised over the pairs) and (14) with per-head W_B; float64."""
    x, kernel, bilinear = (np.asarray(a, np.float64) for a in (x, kernel, bilinear))
    b, t, _ = x.shape
    p, l1, l2, u = split_projection(x, kernel, heads, key_dim, value_dim)
    if mode == "virtual":
        p, l1, l2, u_keys = p[:, :, :-m], l1[:, :, -m:], l2[:, :, -m:], u[:, :, -m:]
        key_mask = None if mask is None else mask[:, -m:]
    else:
        u_keys, key_mask = u, mask
    logits = np.sqrt(np.maximum(reference_triple_squared(p, l1, l2), 0.0))  # [B, H, I, J, K]
    if key_mask is not None:
        pair_ok = key_mask[:, None, None, :, None] & key_mask[:, None, None, None, :]
        logits = np.where(pair_ok, logits, -np.inf)
    i, j, k = logits.shape[2:]
    weights = softmax(logits.reshape(b, heads, i, j * k), -1).reshape(logits.shape)
    messages = np.einsum("hqrs,bhjr,bhks->bhjkq", bilinear, u_keys, u_keys)
    out = np.einsum("bhijk,bhjkq->bihq", weights, messages).reshape(b, i, heads * value_dim)
    if mode == "virtual":
        own = u[:, :, -m:].transpose(0, 2, 1, 3).reshape(b, m, heads * value_dim)
        out = np.concatenate([out, own], axis=1)
    if mask is not None:
        out = np.where(mask[:, :, None], out, 0.0)
    return out, weights


def brute_force_full(x, kernel, bilinear, heads, key_dim, value_dim):
    """Eq. (10) with explicit loops over (i, j, k) and the eq. (7) vector norm."""
    x, kernel, bilinear = (np.asarray(a, np.float64) for a in (x, kernel, bilinear))
    p, l1, l2, u = split_projection(x, kernel, heads, key_dim, value_dim)
    b, _, n, _ = p.shape
    out = np.zeros((b, n, heads, value_dim))
    for bb, h, i in itertools.product(range(b), range(heads), range(n)):
        logits = np.array([[np.linalg.norm(grade_one(p[bb, h, i], l1[bb, h, j], l2[bb, h, k]))
                            for k in range(n)] for j in range(n)])
        weights = np.exp(logits - logits.max())
        weights /= weights.sum()
        for j, k in itertools.product(range(n), range(n)):
            message = np.einsum("qrs,r,s->q", bilinear[h], u[bb, h, j], u[bb, h, k])
            out[bb, i, h] += weights[j, k] * message
    return out.reshape(b, n, heads * value_dim)


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------

B, N, M, F, HEADS, DK, DV = 3, 5, 2, 6, 2, 3, 4


def make_layer(mode="virtual", **kwargs):
    kwargs.setdefault("num_virtual_entities", M if mode == "virtual" else None)
    return keras_relational.SimplicialAttention(num_heads=HEADS, key_dim=DK, value_dim=DV,
                                                mode=mode, **kwargs)


def entities(seed=0, batch=B, count=N + M, features=F):
    return np.random.RandomState(seed).normal(size=(batch, count, features)).astype("float32")


def built(layer, x):
    layer(x)
    return layer


def gradients(loss_fn, variables):
    """d loss / d variables, for the TensorFlow or JAX backend."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        variables = [tf.Variable(v) if not isinstance(v, tf.Variable) else v for v in variables]
        with tf.GradientTape() as tape:
            loss = loss_fn(*variables)
        return [np.asarray(g) for g in tape.gradient(loss, variables)]
    if backend == "jax":
        import jax

        grads = jax.grad(lambda vs: loss_fn(*vs))([keras.ops.convert_to_tensor(v)
                                                    for v in variables])
        return [np.asarray(g) for g in grads]
    pytest.skip(f"no gradient helper for backend {backend}")


# ---------------------------------------------------------------------------------------------
# The logit: unsigned scalar triple product (Clift et al. 2020, Sec. 2, eqs. 7-8, App. C)
# ---------------------------------------------------------------------------------------------


def triple(a, b, c, **kwargs):
    """<a, b, c> for batches of single vectors [S, d] through the layer's function -> [S]."""
    def lift(v):
        return np.asarray(v)[:, None, None, :]

    out = triple_product_logits(lift(a), lift(b), lift(c), **kwargs)
    return np.asarray(out)[:, 0, 0, 0, 0]


@pytest.mark.parametrize("dim", [3, 5, 48])
def test_triple_product_equals_eq7_eq8_and_gram_forms(dim):
    rng = np.random.RandomState(dim)
    a, b, c = (rng.normal(size=(50, dim)) for _ in range(3))
    eq7 = np.array([np.linalg.norm(grade_one(*v)) for v in zip(a, b, c, strict=True)])
    eq8 = np.sqrt(reference_triple_squared(a[:, None], b[:, None], c[:, None])[:, 0, 0, 0])
    gram = np.stack([np.stack([(x * y).sum(-1) for y in (a, b, c)], -1) for x in (a, b, c)], -2)
    norms = np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1) * np.linalg.norm(c, axis=-1)
    gram_form = np.sqrt(norms**2 - np.linalg.det(gram))
    np.testing.assert_allclose(eq8, eq7, rtol=1e-6)
    np.testing.assert_allclose(gram_form, eq7, rtol=1e-6)
    np.testing.assert_allclose(triple(a, b, c), eq7, rtol=1e-6)  # layer, float64
    np.testing.assert_allclose(triple(*(v.astype("float32") for v in (a, b, c))), eq7,
                               rtol=2e-4)


def test_triple_product_symmetry_scaling_and_bounds():
    rng = np.random.RandomState(1)
    a, b, c = (rng.normal(size=(40, 5)) for _ in range(3))
    value = triple(a, b, c)
    for perm in itertools.permutations((a, b, c)):
        np.testing.assert_allclose(triple(*perm), value, rtol=1e-9)
    lam = rng.normal(size=(3, 40, 1)) * 10
    np.testing.assert_allclose(triple(lam[0] * a, lam[1] * b, lam[2] * c),
                               np.abs(lam[0] * lam[1] * lam[2])[:, 0] * value, rtol=1e-9)
    norms = np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1) * np.linalg.norm(c, axis=-1)
    assert np.all(value >= 0) and np.all(value <= norms * (1 + 1e-9))


def test_triple_product_orthogonal_dependent_and_special_cases():
    rng = np.random.RandomState(2)
    q, _ = np.linalg.qr(rng.normal(size=(6, 6)))
    scales = np.array([0.5, 3.0, 7.0])
    a, b, c = (scales[i] * q[:, i][None] for i in range(3))
    # Pairwise orthogonal -> 0 (up to the relative epsilon floor sqrt(1e-12) * |a||b||c|).
    assert abs(triple(a, b, c)[0]) <= 1e-6 * scales.prod() + 1e-12
    np.testing.assert_allclose(triple(a, b, c, sqrt_epsilon=0.0), [0.0], atol=1e-12)
    # Linearly dependent -> |a||b||c|.
    a, b = rng.normal(size=(2, 30, 6))
    for c in (2 * a - 3 * b, -a, 0.5 * b, np.zeros_like(a) + 1e-3 * a):
        norms = np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1) * np.linalg.norm(c, axis=-1)
        np.testing.assert_allclose(triple(a, b, c), norms, rtol=1e-6)
    # c a unit vector orthogonal to a and b -> |a.b|.
    a, b = np.zeros((1, 4)), np.zeros((1, 4))
    a[0, :3], b[0, :3] = rng.normal(size=3), rng.normal(size=3)
    c = np.array([[0.0, 0.0, 0.0, 1.0]])
    np.testing.assert_allclose(triple(a, b, c), [abs(a[0] @ b[0])], rtol=1e-9)
    # In R^3: <a,b,c>^2 = |a|^2|b|^2|c|^2 - (a.(b x c))^2.
    a, b, c = rng.normal(size=(3, 30, 3))
    norms2 = (a * a).sum(-1) * (b * b).sum(-1) * (c * c).sum(-1)
    np.testing.assert_allclose(triple(a, b, c) ** 2,
                               norms2 - ((a * np.cross(b, c)).sum(-1)) ** 2, rtol=1e-8)


def test_triple_product_batched_equals_loop():
    rng = np.random.RandomState(3)
    p, l1, l2 = rng.normal(size=(2, 2, 4, 5)), rng.normal(size=(2, 2, 3, 5)), rng.normal(
        size=(2, 2, 2, 5))
    batched = np.asarray(triple_product_logits(p, l1, l2))
    for b, h, i, j, k in itertools.product(range(2), range(2), range(4), range(3), range(2)):
        expected = np.linalg.norm(grade_one(p[b, h, i], l1[b, h, j], l2[b, h, k]))
        np.testing.assert_allclose(batched[b, h, i, j, k], expected, rtol=1e-9)


def degenerate_triples(count=10_000, dim=4, seed=4):
    """10^4 triples: random, zero, orthogonal, collinear, identical, huge, tiny, mixed scales."""
    rng = np.random.RandomState(seed)
    groups = []
    per = count // 10
    groups.append(rng.normal(size=(3, per, dim)))
    groups.append(np.zeros((3, per, dim)))
    eye = np.eye(dim)[:3]
    groups.append(eye[:, None, :] * rng.uniform(0.1, 10, size=(3, per, 1)))  # orthogonal
    base = rng.normal(size=(1, per, dim))
    groups.append(base * rng.normal(size=(3, per, 1)))  # collinear
    groups.append(np.repeat(base, 3, axis=0))  # identical
    groups.append(rng.normal(size=(3, per, dim)) * 1e12)  # huge (product of norms ~1e37)
    groups.append(rng.normal(size=(3, per, dim)) * 1e-20)  # tiny
    mixed = rng.normal(size=(3, per, dim))
    mixed[0] *= 1e-30
    mixed[2] = 0
    groups.append(mixed)
    one_zero = rng.normal(size=(3, per, dim))
    one_zero[1] = 0
    groups.append(one_zero)
    near_orthogonal = eye[:, None, :] + 1e-7 * rng.normal(size=(3, per, dim))
    groups.append(near_orthogonal)
    return np.concatenate(groups, axis=1).astype("float32")


def lift(v):
    """[S, d] -> [S, 1, 1, d]: one query, one key pair per sample."""
    return v[:, None, None, :]


def test_triple_product_finite_values_and_gradients_on_degenerate_inputs():
    triples = degenerate_triples()
    assert triples.shape[1] == 10_000

    def loss(a, b, c):
        return keras.ops.sum(triple_product_logits(lift(a), lift(b), lift(c)))

    values = triple(*triples)
    assert np.all(np.isfinite(values)) and np.all(values >= 0)
    for grad in gradients(loss, list(triples)):
        assert np.all(np.isfinite(grad)), "non-finite gradient of the triple product"


def test_plain_square_root_gives_nan_gradient_where_epsilon_does_not():
    """sqrt_epsilon is what keeps the gradient finite at s = 0 (the code's plain sqrt is not)."""
    eye = np.eye(3, dtype="float32")
    a, b, c = eye[0:1], eye[1:2], eye[2:3]

    def loss_with(epsilon):
        def loss(a, b, c):
            return keras.ops.sum(triple_product_logits(lift(a), lift(b), lift(c), epsilon))
        return loss

    assert not all(np.all(np.isfinite(g)) for g in gradients(loss_with(0.0), [a, b, c]))
    assert all(np.all(np.isfinite(g)) for g in gradients(loss_with(1e-12), [a, b, c]))


# ---------------------------------------------------------------------------------------------
# The layer
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["virtual", "full"])
def test_matches_numpy_reference(mode):
    x = entities(5, count=N + M if mode == "virtual" else N)
    layer = make_layer(mode)
    outputs, weights = layer(x, return_attention_scores=True)
    expected, expected_weights = reference_simplicial(
        x, layer.kernel.numpy(), layer.bilinear_kernel.numpy(), HEADS, DK, DV, mode, M)
    assert tuple(outputs.shape) == (B, x.shape[1], HEADS * DV)
    pairs = (M, M) if mode == "virtual" else (N, N)
    assert tuple(weights.shape) == (B, HEADS, N, *pairs)
    np.testing.assert_allclose(np.asarray(weights), expected_weights, atol=1e-5)
    np.testing.assert_allclose(np.asarray(outputs), expected, atol=1e-5)
    # The joint softmax: every query's weights over all pairs sum to 1 (not per row).
    np.testing.assert_allclose(np.asarray(weights).sum(axis=(-1, -2)), 1.0, atol=1e-6)


def test_full_mode_equals_brute_force_triple_loop():
    x = entities(6, batch=2, count=4)
    layer = make_layer("full")
    outputs = np.asarray(layer(x))
    expected = brute_force_full(x, layer.kernel.numpy(), layer.bilinear_kernel.numpy(), HEADS,
                                DK, DV)
    np.testing.assert_allclose(outputs, expected, atol=1e-5)


def test_virtual_rows_are_own_values_and_zero_query_is_uniform():
    x = entities(7)
    layer = built(make_layer(), x)
    kernel = layer.kernel.numpy()
    _, _, _, u = split_projection(x.astype(np.float64), kernel, HEADS, DK, DV)
    own = u[:, :, -M:].transpose(0, 2, 1, 3).reshape(B, M, HEADS * DV)
    np.testing.assert_allclose(np.asarray(layer(x))[:, -M:], own, atol=1e-6)  # eq. (14)
    # W^P = 0: all logits 0, uniform weights, output W_B(u_bar (x) u_bar) (bilinearity).
    kernel[:, : HEADS * DK] = 0.0
    layer.kernel.assign(kernel)
    outputs, weights = layer(x, return_attention_scores=True)
    np.testing.assert_allclose(np.asarray(weights), 1.0 / M**2, atol=1e-6)
    u_bar = u[:, :, -M:].mean(axis=2)  # [B, H, dv]
    expected = np.einsum("hqrs,bhr,bhs->bhq", layer.bilinear_kernel.numpy(), u_bar, u_bar)
    np.testing.assert_allclose(np.asarray(outputs)[:, :N],
                               np.repeat(expected.reshape(B, 1, HEADS * DV), N, axis=1),
                               atol=1e-5)


def test_single_virtual_entity_gives_query_independent_output():
    x = entities(8, count=N + 1)
    layer = make_layer(num_virtual_entities=1)
    outputs = np.asarray(layer(x))
    _, _, _, u = split_projection(x.astype(np.float64), layer.kernel.numpy(), HEADS, DK, DV)
    v = u[:, :, -1]
    expected = np.einsum("hqrs,bhr,bhs->bhq", layer.bilinear_kernel.numpy(), v, v)
    np.testing.assert_allclose(outputs[:, :N], np.repeat(expected.reshape(B, 1, -1), N, 1),
                               atol=1e-5)


def test_swapping_keys_transposes_pairs_and_transposed_bilinear_restores_output():
    x = entities(9)
    layer = built(make_layer(), x)
    outputs, weights = (np.asarray(t) for t in layer(x, return_attention_scores=True))
    kernel = layer.kernel.numpy()
    width = HEADS * DK
    swapped = kernel.copy()
    swapped[:, width:2 * width], swapped[:, 2 * width:3 * width] = (
        kernel[:, 2 * width:3 * width], kernel[:, width:2 * width])
    layer.kernel.assign(swapped)
    layer.bilinear_kernel.assign(np.swapaxes(layer.bilinear_kernel.numpy(), -1, -2))
    new_outputs, new_weights = (np.asarray(t) for t in layer(x, return_attention_scores=True))
    np.testing.assert_allclose(new_weights, np.swapaxes(weights, -1, -2), atol=1e-6)
    np.testing.assert_allclose(new_outputs, outputs, atol=1e-5)


def test_permutation_equivariance_and_virtual_relabelling_invariance():
    x = entities(10)
    layer = built(make_layer(), x)
    outputs = np.asarray(layer(x))
    perm = np.random.RandomState(0).permutation(N)
    permuted = np.asarray(layer(np.concatenate([x[:, perm], x[:, N:]], axis=1)))
    np.testing.assert_allclose(permuted[:, :N], outputs[:, perm], atol=1e-5)
    np.testing.assert_allclose(permuted[:, N:], outputs[:, N:], atol=1e-6)
    relabelled = np.asarray(layer(np.concatenate([x[:, :N], x[:, N:][:, ::-1]], axis=1)))
    np.testing.assert_allclose(relabelled[:, :N], outputs[:, :N], atol=1e-5)
    np.testing.assert_allclose(relabelled[:, N:], outputs[:, N:][:, ::-1], atol=1e-6)
    # Full mode: equivariant over all N entities.
    full = built(make_layer("full"), x[:, :N])
    perm = np.random.RandomState(1).permutation(N)
    np.testing.assert_allclose(np.asarray(full(x[:, perm])), np.asarray(full(x[:, :N]))[:, perm],
                               atol=1e-5)


@pytest.mark.parametrize("mode", ["virtual", "full"])
def test_masking(mode):
    count = N + M if mode == "virtual" else N
    x = entities(11, count=count)
    layer = built(make_layer(mode), x)
    mask = np.ones((B, count), bool)
    mask[0, 1] = False  # a standard entity
    mask[1, -1] = False  # a virtual entity in virtual mode
    outputs, weights = (np.asarray(t) for t in layer(x, mask=mask, return_attention_scores=True))
    expected, _ = reference_simplicial(x, layer.kernel.numpy(), layer.bilinear_kernel.numpy(),
                                       HEADS, DK, DV, mode, M, mask=mask)
    np.testing.assert_allclose(outputs, expected, atol=1e-5)
    assert np.all(outputs[~mask] == 0.0)
    if mode == "full":
        assert np.all(weights[0, :, :, 1, :] == 0) and np.all(weights[0, :, :, :, 1] == 0)
    # Padding: changing a masked entity changes no unmasked output.
    changed = x.copy()
    changed[0, 1] = 100.0
    changed[1, -1] = -50.0
    np.testing.assert_allclose(np.asarray(layer(changed, mask=mask))[mask], outputs[mask],
                               atol=1e-5)
    # The Keras mask propagates through a functional model.
    inputs = keras.Input((count, F))
    masked = keras.layers.Masking(0.0)(inputs)
    model = keras.Model(inputs, layer(masked))
    zero_padded = x.copy()
    zero_padded[0, 1] = 0.0
    keras_mask = np.ones((B, count), bool)
    keras_mask[0, 1] = False
    np.testing.assert_allclose(model.predict(zero_padded, verbose=0),
                               np.asarray(layer(x, mask=keras_mask)), atol=1e-5)


def test_finite_outputs_and_gradients_on_10k_degenerate_inputs():
    rng = np.random.RandomState(12)
    count, features, per = 4 + 2, 4, 1250
    groups = [
        rng.normal(size=(per, count, features)),  # random
        np.zeros((per, count, features)),  # zeros
        rng.normal(size=(per, 1, features)) * rng.normal(size=(per, count, 1)),  # collinear
        np.repeat(rng.normal(size=(per, 1, features)), count, axis=1),  # identical entities
        rng.normal(size=(per, count, features)) * 1e6,  # huge
        rng.normal(size=(per, count, features)) * 1e-20,  # tiny
        np.concatenate([rng.normal(size=(per, count - 2, features)),
                        np.zeros((per, 2, features))], axis=1),  # zero virtual entities
        rng.normal(size=(per, count, features)) * rng.choice([0.0, 1e-20, 1.0, 1e5],
                                                             size=(per, count, 1)),
    ]
    x = np.concatenate(groups).astype("float32")
    assert x.shape[0] == 10_000
    for mode, data in (("virtual", x), ("full", x[:, :4])):
        layer = keras_relational.SimplicialAttention(num_heads=2, key_dim=3, value_dim=2,
                                                     mode=mode)
        layer(data[:2])
        weights = rng.normal(size=(data.shape[0], data.shape[1], 4)).astype("float32")

        def loss(inputs, kernel, bilinear, layer=layer, weights=weights):
            layer.kernel.assign(kernel)
            layer.bilinear_kernel.assign(bilinear)
            return keras.ops.sum(layer(inputs) * weights)

        outputs = np.asarray(layer(data))
        assert np.all(np.isfinite(outputs)), f"{mode}: non-finite outputs"
        if keras.backend.backend() != "tensorflow":
            pytest.skip("weight gradients through assign need the TensorFlow backend")
        import tensorflow as tf

        with tf.GradientTape() as tape:
            data_var = tf.Variable(data)
            value = keras.ops.sum(layer(data_var) * weights)
        grads = tape.gradient(value, [data_var, layer.kernel, layer.bilinear_kernel])
        for name, grad in zip(("inputs", "kernel", "bilinear_kernel"), grads, strict=True):
            assert np.all(np.isfinite(np.asarray(grad))), f"{mode}: non-finite d/d{name}"


def test_float64_gradient_matches_finite_differences():
    x = entities(13, batch=1, count=3 + 2, features=3).astype("float64")
    layer = keras_relational.SimplicialAttention(num_heads=1, key_dim=3, value_dim=2,
                                                 dtype="float64")
    layer(x)
    direction = np.random.RandomState(0).normal(size=x.shape)
    weights = np.random.RandomState(1).normal(size=(1, 5, 2))

    def loss(inputs):
        return keras.ops.sum(layer(inputs) * weights)

    (grad,) = gradients(loss, [x])
    step = 1e-6
    numeric = (float(loss(x + step * direction)) - float(loss(x - step * direction))) / (2 * step)
    np.testing.assert_allclose((grad * direction).sum(), numeric, rtol=1e-5)


def test_mixed_precision_policy_runs_finite():
    x = entities(14)
    layer = make_layer(dtype="mixed_bfloat16")
    outputs, weights = layer(x, return_attention_scores=True)
    assert keras.backend.standardize_dtype(outputs.dtype) == "bfloat16"
    assert np.all(np.isfinite(np.asarray(keras.ops.cast(outputs, "float32"))))
    np.testing.assert_allclose(np.asarray(keras.ops.cast(weights, "float32")).sum((-1, -2)), 1.0,
                               atol=2e-2)


def test_symbolic_scores_shapes():
    inputs = keras.Input((N + M, F))
    outputs, weights = make_layer()(inputs, return_attention_scores=True)
    assert tuple(outputs.shape) == (None, N + M, HEADS * DV)
    assert tuple(weights.shape) == (None, HEADS, N, M, M)
    outputs, weights = make_layer("full")(keras.Input((N, F)), return_attention_scores=True)
    assert tuple(weights.shape) == (None, HEADS, N, N, N)


def test_docstring_example_runs():
    import doctest

    globs = {"np": np, "keras_relational": keras_relational}
    runner = doctest.DocTestRunner()
    for test in doctest.DocTestFinder().find(keras_relational.SimplicialAttention, globs=globs):
        runner.run(test)
    assert runner.tries > 0 and runner.failures == 0


def test_errors_name_the_argument():
    attention = keras_relational.SimplicialAttention
    with pytest.raises(ValueError, match="num_heads.*received num_heads=0"):
        attention(num_heads=0, key_dim=4)
    with pytest.raises(ValueError, match="mode.*'sparse'"):
        attention(1, 4, mode="sparse")
    with pytest.raises(ValueError, match="num_virtual_entities.*received num_virtual_entities=0"):
        attention(1, 4, num_virtual_entities=0)
    with pytest.raises(ValueError, match="num_virtual_entities.*mode='full'.*=2"):
        attention(1, 4, mode="full", num_virtual_entities=2)
    with pytest.raises(ValueError, match="logit_scale.*received logit_scale=-1"):
        attention(1, 4, logit_scale=-1.0)
    with pytest.raises(ValueError, match="sqrt_epsilon.*received sqrt_epsilon=nan"):
        attention(1, 4, sqrt_epsilon=float("nan"))
    with pytest.raises(ValueError, match=r"rank 3.*received shape \(2, 3\)"):
        attention(1, 4)(np.zeros((2, 3), "float32"))
    with pytest.raises(ValueError, match=r"more than num_virtual_entities=2.*\(1, 2, 3\)"):
        attention(1, 4)(np.zeros((1, 2, 3), "float32"))


@pytest.mark.slow
@pytest.mark.subprocess
def test_layer_contract(tmp_path):
    run_layer_contract(make_layer, entities(15), tmp_path)


def test_layer_contract_full_mode(tmp_path):
    run_layer_contract(lambda: make_layer("full", use_bias=True, logit_scale=0.5),
                       entities(16, count=N), tmp_path, fresh_process=False)


@pytest.mark.subprocess
def test_full_mode_fit_does_not_crash_tensorflow(tmp_path):
    """Regression: full mode once used matmuls with broadcast batch dimensions, on which
    TensorFlow's oneDNN batch matmul segfaulted (batch 32, N = 16)."""
    import os
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import numpy as np, keras, keras_relational
        x = np.random.rand(32, 16, 24).astype("float32")
        inputs = keras.Input((16, 24))
        attended = keras_relational.SimplicialAttention(num_heads=1, key_dim=8, mode="full")(
            inputs)
        outputs = keras.layers.Dense(2)(keras.layers.GlobalAveragePooling1D()(attended))
        model = keras.Model(inputs, outputs)
        model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        model.fit(x, np.zeros(32, "int32"), epochs=1, verbose=0)
        print("fit ok")
    """)
    env = {k: v for k, v in os.environ.items() if k != "TF_ENABLE_ONEDNN_OPTS"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=300, env=env, cwd=str(tmp_path))
    assert result.returncode == 0, (result.returncode, result.stderr[-2000:])
    assert "fit ok" in result.stdout
