import os

import keras
import numpy as np
import pytest

from keras_relational.analysis import predinet_attention as predinet_analysis
from keras_relational.models import relations_game as rg


def softmax(x, axis=-1):
    x = x - x.max(axis=axis, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)


def grid_coords(h, w):
    r, c = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
    return np.stack([c / w, r / h], -1).reshape(h * w, 2).astype(np.float32)


def reference(entities, wk, wq1, wq2, ws, heads, key_dim):
    """PrediNet, Shanahan et al. 2020, Sec. 2."""
    b, n, m = entities.shape
    keys = np.einsum("bnm,mg->bng", entities, wk)
    flat = entities.reshape(b, n * m)
    a1 = softmax(np.einsum("bhg,bng->bhn", (flat @ wq1).reshape(b, heads, key_dim), keys))
    a2 = softmax(np.einsum("bhg,bng->bhn", (flat @ wq2).reshape(b, heads, key_dim), keys))
    e1 = np.einsum("bhn,bnm->bhm", a1, entities)
    e2 = np.einsum("bhn,bnm->bhm", a2, entities)
    r = np.concatenate([e1 @ ws - e2 @ ws, e1[..., -2:], e2[..., -2:]], axis=-1)
    return r.reshape(b, -1), a1, a2


def relu(x):
    return np.maximum(x, 0.0)


def inputs(seed=0, batch=2, num_tasks=5):
    rng = np.random.RandomState(seed)
    images = rng.randint(0, 256, size=(batch, 36, 36, 3)).astype("float32")
    task = np.eye(num_tasks, dtype="float32")[rng.randint(num_tasks, size=batch)]
    return {"image": images, "task": task}


@pytest.mark.parametrize("central,expected", [
    ("predinet", 890_530), ("mha", 76_418), ("relation_net", 200_290), ("mlp1", 563_682),
    ("mlp2", 1_546_466)])
def test_parameter_counts_match_the_spec(central, expected):
    model = rg.build_model(central)
    assert model.count_params() == expected  # Shanahan et al. 2020, Table S2 sizes
    assert model.output_shape == (None, 2)


def test_four_class_output_mlp():
    model = rg.build_model("predinet", num_classes=4)
    assert model.count_params() == 13_856 + 871_488 + 5_204  # Table S2 sizes, 4 classes


def conv_valid(x, w, b, stride):
    k = w.shape[0]
    out_side = (x.shape[1] - k) // stride + 1
    out = np.zeros((x.shape[0], out_side, out_side, w.shape[-1]))
    for r in range(out_side):
        for c in range(out_side):
            patch = x[:, r * stride:r * stride + k, c * stride:c * stride + k, :]
            out[:, r, c] = np.einsum("bijc,ijcf->bf", patch, w) + b
    return out


def test_whole_predinet_model_matches_numpy_reference():
    model = rg.build_model("predinet", central_kwargs={"num_heads": 4, "key_dim": 5,
                                                       "num_relations": 6})
    data = inputs(1, batch=3)
    logits = np.asarray(model(data))
    conv = model.get_layer(rg.INPUT_CNN)
    central = model.get_layer(rg.CENTRAL)
    f = relu(conv_valid(data["image"].astype(np.float64) / 256.0,
                        np.asarray(conv.kernel, np.float64), np.asarray(conv.bias), 6))
    entities = np.concatenate([f.reshape(3, 25, 32),
                               np.broadcast_to(grid_coords(5, 5), (3, 25, 2))], -1)
    weights = [np.asarray(w, np.float64) for w in (central.key_kernel, central.query_kernel_1,
                                                    central.query_kernel_2,
                                                    central.relation_kernel)]
    r = reference(entities, *weights, 4, 5)[0]
    hidden = model.get_layer(rg.OUTPUT_HIDDEN)
    out = model.get_layer(rg.OUTPUT_LOGITS)
    h = relu(np.concatenate([r, data["task"]], -1) @ np.asarray(hidden.kernel)
             + np.asarray(hidden.bias))
    expected = h @ np.asarray(out.kernel) + np.asarray(out.bias)
    np.testing.assert_allclose(logits, expected, atol=1e-5)


def test_entities_use_unit_coordinates_last():
    model = rg.build_model("mlp1")
    entities = np.asarray(rg.entity_model(model)(inputs(2)["image"]))
    assert entities.shape == (2, 25, 34)
    np.testing.assert_allclose(entities[0, :, -2:], grid_coords(5, 5), atol=1e-7)


def test_initialisers_and_reinitialize_restore_the_distribution():
    model = rg.build_model("mlp1")
    layers = [model.get_layer(rg.CENTRAL)] + [model.get_layer(n) for n in rg.OUTPUT_LAYERS]
    for layer in layers:
        for variable in layer.weights:
            variable.assign(np.zeros(variable.shape, "float32"))
    rg.reinitialize(layers, seed=3)
    kernel = np.asarray(model.get_layer(rg.CENTRAL).dense_weights[0][0])
    assert np.abs(kernel).max() <= 0.2 + 1e-6
    assert 0.085 < kernel.std() < 0.091  # truncated at 2 sigma: 0.1 * 0.880
    for layer in layers:
        for variable in layer.weights:
            if "bias" in variable.name:
                np.testing.assert_array_equal(np.asarray(variable), np.float32(0.1))
    conv = model.get_layer(rg.INPUT_CNN)
    np.testing.assert_array_equal(np.asarray(conv.bias), np.float32(0.1))
    assert np.abs(np.asarray(conv.kernel)).max() <= 0.2 + 1e-6


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match=r"central.*received central='lstm'"):
        rg.build_model("lstm")
    with pytest.raises(ValueError, match=r"num_classes.*received num_classes=0"):
        rg.build_model("mlp1", num_classes=0)
    with pytest.raises(ValueError, match=r"hidden_units.*received hidden_units=\(\)"):
        rg.MLPCentral(hidden_units=())
    with pytest.raises(ValueError, match=r"output_dim.*received output_dim=0"):
        rg.RelationNetCentral(output_dim=0)
    with pytest.raises(ValueError, match=r"value_dim.*received value_dim=-1"):
        rg.MultiHeadAttentionCentral(value_dim=-1)
    with pytest.raises(ValueError, match=r"rank 3.*received shape \(2, 5\)"):
        rg.MultiHeadAttentionCentral()(np.zeros((2, 5), "float32"))


def test_whole_model_keras_round_trip(tmp_path):
    model = rg.build_model("mha", central_kwargs={"num_heads": 2, "key_dim": 3, "value_dim": 4})
    data = inputs(6)
    path = str(tmp_path / "model.keras")
    model.save(path)
    reloaded = keras.saving.load_model(path)
    np.testing.assert_allclose(np.asarray(reloaded(data)), np.asarray(model(data)), atol=1e-6)


def test_attention_analysis(tmp_path):
    model = rg.build_model("predinet", central_kwargs={"num_heads": 3, "key_dim": 4,
                                                       "num_relations": 5})
    data = inputs(8, batch=2)
    a1, a2 = predinet_analysis.attention_maps(model, data["image"], batch_size=1)
    assert a1.shape == a2.shape == (2, 3, 5, 5)
    np.testing.assert_allclose(a1.sum((-1, -2)), 1.0, atol=1e-5)
    entities = rg.entity_model(model)(data["image"])
    _, expected_1, expected_2 = model.get_layer(rg.CENTRAL)(entities,
                                                            return_attention_scores=True)
    np.testing.assert_allclose(a1, np.asarray(expected_1).reshape(2, 3, 5, 5), atol=1e-6)
    np.testing.assert_allclose(a2, np.asarray(expected_2).reshape(2, 3, 5, 5), atol=1e-6)
    mask = np.full((2, 5, 5), 0.01)
    mask[0, 2, 4] = 0.76
    mask[1, 0, 1] = 0.76
    cells = predinet_analysis.attended_cells(mask)
    assert [(r, c) for r, c, _ in cells] == [(2, 4), (0, 1)]
    heat = predinet_analysis.to_image_space(np.pad([[1.0]], ((0, 4), (0, 4))))
    assert heat[:12, :12].min() == 1.0 and heat[12:].max() == 0.0 and heat[:, 12:].max() == 0.0
    outputs = np.asarray(model.get_layer(rg.CENTRAL)(entities))
    parts = predinet_analysis.split_propositions(outputs, num_heads=3, num_relations=5)
    assert parts["values"].shape == (2, 3, 5) and parts["pos2"].shape == (2, 3, 2)
    coords = np.asarray(entities)[:, :, -2:]
    np.testing.assert_allclose(parts["pos1"], np.einsum("bhn,bnc->bhc", a1.reshape(2, 3, 25),
                                                        coords), atol=1e-5)
    path = str(tmp_path / "attention.png")
    predinet_analysis.plot_attention(data["image"][0].astype("uint8"), a1[0], a2[0],
                                     heads=(0, 2), path=path)
    assert os.path.getsize(path) > 1000
