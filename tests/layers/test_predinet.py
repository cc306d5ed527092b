import keras
import numpy as np
import pytest
from layer_contract import run_layer_contract

import keras_relational

B, N, M, H, G, J = 3, 25, 34, 4, 5, 6


def softmax(x, axis=-1):
    x = x - x.max(axis=axis, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)


def grid_coords(h, w):
    r, c = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
    return np.stack([c / w, r / h], -1).reshape(h * w, 2).astype(np.float32)


def reference(entities, wk, wq1, wq2, ws, heads, key_dim):
    """NumPy reference of Shanahan et al. 2020, Sec. 2, Eqs. 1-6, in float64."""
    entities = entities.astype(np.float64)
    b, n, m = entities.shape
    keys = np.einsum("bnm,mg->bng", entities, wk)
    flat = entities.reshape(b, n * m)
    q1 = (flat @ wq1).reshape(b, heads, key_dim)
    q2 = (flat @ wq2).reshape(b, heads, key_dim)
    a1 = softmax(np.einsum("bhg,bng->bhn", q1, keys))
    a2 = softmax(np.einsum("bhg,bng->bhn", q2, keys))
    e1 = np.einsum("bhn,bnm->bhm", a1, entities)
    e2 = np.einsum("bhn,bnm->bhm", a2, entities)
    d = e1 @ ws - e2 @ ws
    r = np.concatenate([d, e1[..., -2:], e2[..., -2:]], axis=-1)
    return r.reshape(b, -1), a1, a2


def make_entities(seed=0, batch=B):
    rng = np.random.RandomState(seed)
    features = rng.uniform(0, 1, size=(batch, N, M - 2))
    coords = np.broadcast_to(grid_coords(5, 5), (batch, N, 2))
    return np.concatenate([features, coords], -1).astype("float32")


def make_layer(entities, **kwargs):
    kwargs = {"num_heads": H, "key_dim": G, "num_relations": J, **kwargs}
    layer = keras_relational.PrediNet(**kwargs)
    layer(entities)
    return layer


def weights(layer):
    return [np.asarray(w, np.float64) for w in (layer.key_kernel, layer.query_kernel_1,
                                                 layer.query_kernel_2, layer.relation_kernel)]


def run(layer, entities):
    out, a1, a2 = layer(entities, return_attention_scores=True)
    return np.asarray(out), np.asarray(a1), np.asarray(a2)


@pytest.mark.parametrize("heads,batch", [(H, B), (1, 1), (32, 2)])
def test_matches_numpy_reference(heads, batch):
    entities = make_entities(1, batch)
    layer = make_layer(entities, num_heads=heads)
    out, a1, a2 = run(layer, entities)
    ref_out, ref_a1, ref_a2 = reference(entities, *weights(layer), heads, G)
    np.testing.assert_allclose(out, ref_out, atol=1e-5)
    np.testing.assert_allclose(a1, ref_a1, atol=1e-5)
    np.testing.assert_allclose(a2, ref_a2, atol=1e-5)
    assert out.shape == (batch, heads * (J + 4))


def test_paper_sizes_and_parameter_count():
    entities = make_entities(2, 2)
    layer = keras_relational.PrediNet()
    out = layer(entities)
    assert tuple(out.shape) == (2, 640)
    assert layer.count_params() == 871_488  # Shanahan et al. 2020, Table S2 sizes
    assert len(layer.trainable_weights) == 4
    assert sorted(tuple(w.shape) for w in layer.trainable_weights) == sorted(
        [(34, 16), (850, 512), (850, 512), (34, 16)])


def test_attention_is_a_distribution_and_positions_in_range():
    entities = make_entities(3)
    out, a1, a2 = run(make_layer(entities), entities)
    for a in (a1, a2):
        assert a.shape == (B, H, N) and (a >= 0).all()
        np.testing.assert_allclose(a.sum(-1), 1.0, atol=1e-5)
    per_head = out.reshape(B, H, J + 4)
    positions = per_head[..., J:]
    assert (positions >= -1e-6).all() and (positions <= 0.8 + 1e-6).all()


def test_equal_queries_give_zero_difference():
    entities = make_entities(4)
    layer = make_layer(entities)
    layer.query_kernel_2.assign(layer.query_kernel_1)
    per_head = run(layer, entities)[0].reshape(B, H, J + 4)
    np.testing.assert_allclose(per_head[..., :J], 0.0, atol=1e-6)
    np.testing.assert_allclose(per_head[..., J:J + 2], per_head[..., J + 2:], atol=1e-6)


def test_swapping_queries_is_antisymmetric():
    entities = make_entities(5)
    layer = make_layer(entities)
    before = run(layer, entities)[0].reshape(B, H, J + 4)
    q1, q2 = np.asarray(layer.query_kernel_1), np.asarray(layer.query_kernel_2)
    layer.query_kernel_1.assign(q2)
    layer.query_kernel_2.assign(q1)
    after = run(layer, entities)[0].reshape(B, H, J + 4)
    np.testing.assert_allclose(after[..., :J], -before[..., :J], atol=1e-5)
    np.testing.assert_allclose(after[..., J:J + 2], before[..., J + 2:], atol=1e-6)
    np.testing.assert_allclose(after[..., J + 2:], before[..., J:J + 2], atol=1e-6)


def test_zero_keys_give_uniform_attention():
    entities = make_entities(6)
    layer = make_layer(entities)
    layer.key_kernel.assign(np.zeros((M, G), "float32"))
    out, a1, a2 = run(layer, entities)
    np.testing.assert_allclose(a1, 1.0 / N, atol=1e-6)
    np.testing.assert_allclose(a2, 1.0 / N, atol=1e-6)
    per_head = out.reshape(B, H, J + 4)
    np.testing.assert_allclose(per_head[..., :J], 0.0, atol=1e-5)
    np.testing.assert_allclose(per_head[..., J:], 0.4, atol=1e-5)


def test_sharp_queries_select_one_entity():
    # Feature 0 is 1 on entity 0 only, so the flattened input's first element is 1 and a query
    # weight on that row acts as a constant query. Keys grow with the entity index (feature 1 =
    # n / N), so a large positive query picks the last entity and a large negative one the first.
    entities = make_entities(7)
    entities[:, :, 0] = 0.0
    entities[:, 0, 0] = 1.0
    entities[:, :, 1] = np.arange(N) / N
    layer = make_layer(entities)
    wk = np.zeros((M, G), "float32")
    wk[1, 0] = 1.0
    layer.key_kernel.assign(wk)
    wq = np.zeros((N * M, H * G), "float32")
    wq[0, 0 * G] = 1000.0  # head 0 -> entity N - 1
    wq[0, 1 * G] = -1000.0  # head 1 -> entity 0
    layer.query_kernel_1.assign(wq)
    out, a1, _ = run(layer, entities)
    np.testing.assert_allclose(a1[:, 0, N - 1], 1.0, atol=1e-5)
    np.testing.assert_allclose(a1[:, 1, 0], 1.0, atol=1e-5)
    per_head = out.reshape(B, H, J + 4)
    np.testing.assert_allclose(per_head[:, 0, J:J + 2], entities[:, N - 1, -2:], atol=1e-5)
    np.testing.assert_allclose(per_head[:, 1, J:J + 2], entities[:, 0, -2:], atol=1e-5)


def test_joint_permutation_is_invariant_but_entity_order_matters():
    entities = make_entities(8)
    layer = make_layer(entities)
    out, a1, a2 = run(layer, entities)
    perm = np.random.RandomState(0).permutation(N)
    permuted = entities[:, perm]
    # Changing only the entity order changes the output (position-specific queries).
    assert not np.allclose(run(layer, permuted)[0], out, atol=1e-4)
    for kernel in (layer.query_kernel_1, layer.query_kernel_2):
        blocks = np.asarray(kernel).reshape(N, M, H * G)
        kernel.assign(blocks[perm].reshape(N * M, H * G))
    out_p, a1_p, a2_p = run(layer, permuted)
    np.testing.assert_allclose(out_p, out, atol=1e-5)
    np.testing.assert_allclose(a1_p, a1[:, :, perm], atol=1e-6)
    np.testing.assert_allclose(a2_p, a2[:, :, perm], atol=1e-6)


def test_heads_are_independent_and_shared_weights_reach_all_heads():
    entities = make_entities(9)
    layer = make_layer(entities)
    before = run(layer, entities)[0].reshape(B, H, J + 4)
    wq = np.asarray(layer.query_kernel_1).copy()
    wq[:, 2 * G:3 * G] += 1.0  # head 2's query columns only
    layer.query_kernel_1.assign(wq)
    after = run(layer, entities)[0].reshape(B, H, J + 4)
    others = [0, 1, 3]
    np.testing.assert_allclose(after[:, others], before[:, others], atol=1e-6)
    assert not np.allclose(after[:, 2], before[:, 2], atol=1e-4)
    layer.relation_kernel.assign(np.asarray(layer.relation_kernel) + 0.5)
    changed = run(layer, entities)[0].reshape(B, H, J + 4)
    for h in range(H):
        assert not np.allclose(changed[:, h, :J], after[:, h, :J], atol=1e-5)


def test_linear_in_relation_kernel():
    entities = make_entities(10)
    layer = make_layer(entities)
    out, a1, a2 = run(layer, entities)
    d = out.reshape(B, H, J + 4)[..., :J]
    e1 = np.einsum("bhn,bnm->bhm", a1, entities)
    e2 = np.einsum("bhn,bnm->bhm", a2, entities)
    np.testing.assert_allclose(d, (e1 - e2) @ np.asarray(layer.relation_kernel), atol=1e-5)
    layer.relation_kernel.assign(3.0 * np.asarray(layer.relation_kernel))
    d3 = run(layer, entities)[0].reshape(B, H, J + 4)[..., :J]
    np.testing.assert_allclose(d3, 3.0 * d, atol=1e-5)


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="uses tf.GradientTape")
def test_gradients_match_finite_differences():
    import tensorflow as tf

    entities = make_entities(11, 2)
    layer = make_layer(entities)
    rng = np.random.RandomState(0)
    probe = rng.normal(size=(2, H * (J + 4)))
    wk, wq1, wq2, ws = weights(layer)

    def loss(params):
        return float((reference(entities, *params, H, G)[0] * probe).sum())

    with tf.GradientTape() as tape:
        value = tf.reduce_sum(layer(entities) * probe.astype("float32"))
    grads = tape.gradient(value, [layer.key_kernel, layer.query_kernel_1,
                                  layer.query_kernel_2, layer.relation_kernel])
    params = [wk, wq1, wq2, ws]
    for i, grad in enumerate(grads):
        grad = np.asarray(grad)
        assert np.abs(grad).max() > 0, f"zero gradient for weight {i}"
        for _ in range(3):
            index = tuple(rng.randint(s) for s in params[i].shape)
            eps = 1e-4
            plus = [p.copy() for p in params]
            minus = [p.copy() for p in params]
            plus[i][index] += eps
            minus[i][index] -= eps
            numeric = (loss(plus) - loss(minus)) / (2 * eps)
            np.testing.assert_allclose(grad[index], numeric, atol=2e-3, rtol=2e-2)


def test_default_initialiser_is_truncated_normal_01():
    layer = keras_relational.PrediNet()
    layer.build((None, 25, 34))
    w = np.asarray(layer.query_kernel_1)
    assert np.abs(w).max() <= 0.2 + 1e-6
    assert 0.08 < w.std() < 0.095  # 0.1 * 0.88 after truncation at 2 sigma
    assert not np.array_equal(np.asarray(layer.query_kernel_1), np.asarray(layer.query_kernel_2))


def test_without_positions():
    entities = make_entities(12)
    layer = make_layer(entities, position_dims=0)
    out = np.asarray(layer(entities))
    assert out.shape == (B, H * J)
    full = reference(entities, *weights(layer), H, G)[0].reshape(B, H, J + 4)
    np.testing.assert_allclose(out.reshape(B, H, J), full[..., :J], atol=1e-5)


def test_symbolic_call_with_attention():
    inputs = keras.Input((N, M))
    out, a1, a2 = keras_relational.PrediNet(num_heads=H, key_dim=G, num_relations=J)(
        inputs, return_attention_scores=True)
    assert tuple(out.shape) == (None, H * (J + 4))
    assert tuple(a1.shape) == tuple(a2.shape) == (None, H, N)


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match=r"num_heads.*received num_heads=0"):
        keras_relational.PrediNet(num_heads=0)
    with pytest.raises(ValueError, match=r"key_dim.*received key_dim=2\.5"):
        keras_relational.PrediNet(key_dim=2.5)
    with pytest.raises(ValueError, match=r"num_relations.*received num_relations=-1"):
        keras_relational.PrediNet(num_relations=-1)
    with pytest.raises(ValueError, match=r"position_dims.*received position_dims=-2"):
        keras_relational.PrediNet(position_dims=-2)
    with pytest.raises(ValueError, match=r"rank 3.*received shape \(2, 25\)"):
        keras_relational.PrediNet()(np.zeros((2, 25), "float32"))
    with pytest.raises(ValueError, match=r"number of entities N.*\(None, None, 34\)"):
        keras_relational.PrediNet().build((None, None, 34))
    with pytest.raises(ValueError, match=r"position_dims=2.*\(None, 25, 1\)"):
        keras_relational.PrediNet().build((None, 25, 1))


@pytest.mark.subprocess
def test_layer_contract(tmp_path):
    entities = make_entities(13, 2)
    run_layer_contract(
        lambda: keras_relational.PrediNet(num_heads=2, key_dim=3, num_relations=4),
        entities, tmp_path)


def _query_cnn():
    return keras.Sequential([keras.Input((N, M)), keras.layers.Reshape((5, 5, M)),
                             keras.layers.Conv2D(3, 3, strides=2, activation="relu"),
                             keras.layers.Flatten()])


def test_query_network_replaces_the_flattened_input(tmp_path):
    # Shanahan et al. 2020, S11: the Atari agent computes the queries with a CNN.
    entities = make_entities(4)
    layer = make_layer(entities, query_network=_query_cnn())
    assert tuple(layer.query_kernel_1.shape) == (2 * 2 * 3, H * G)
    out, a1, a2 = run(layer, entities)
    queries = np.asarray(layer.query_network(entities), np.float64)  # [B, 12]
    wk, wq1, wq2, ws = weights(layer)
    keys = np.einsum("bnm,mg->bng", entities.astype(np.float64), wk)
    expected_a1 = softmax(np.einsum("bhg,bng->bhn", (queries @ wq1).reshape(B, H, G), keys))
    np.testing.assert_allclose(a1, expected_a1, atol=1e-5)
    e1 = np.einsum("bhn,bnm->bhm", a1, entities)
    e2 = np.einsum("bhn,bnm->bhm", a2, entities)
    np.testing.assert_allclose(out.reshape(B, H, -1)[..., :J], e1 @ ws - e2 @ ws, atol=1e-4)
    # The query network is part of the config and of the saved model.
    clone = keras_relational.PrediNet.from_config(layer.get_config())
    assert isinstance(clone.query_network, keras.Sequential)
    model = keras.Sequential([keras.Input((N, M)), layer])
    path = str(tmp_path / "predinet_query_cnn.keras")
    model.save(path)
    np.testing.assert_allclose(np.asarray(keras.saving.load_model(path)(entities)), out,
                               atol=1e-6)
    with pytest.raises(ValueError, match=r"`query_network` to be None or a Keras layer, "
                                         r"received query_network='flatten'"):
        keras_relational.PrediNet(query_network="flatten")
    with pytest.raises(ValueError, match=r"`query_network` to map `inputs` to a vector"):
        keras_relational.PrediNet(query_network=keras.layers.Dense(3)).build((None, N, M))
