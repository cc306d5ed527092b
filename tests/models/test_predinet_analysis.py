"""Per-head PCA (Shanahan et al. 2020, Fig. 6b) and head ablation (Fig. 6c) on tiny models."""

import os

import keras
import numpy as np
import pytest

from keras_relational.analysis import predinet_ablation, predinet_pca
from keras_relational.models import relations_game as rg

HEADS, RELATIONS = 4, 3


@pytest.fixture(scope="module")
def model():
    keras.utils.set_random_seed(0)
    return rg.build_model("predinet", num_classes=4, central_kwargs={
        "num_heads": HEADS, "key_dim": 3, "num_relations": RELATIONS})


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    return {"images": rng.integers(0, 256, size=(24, 36, 36, 3)).astype("uint8"),
            "tasks": rng.integers(0, 5, size=24), "labels": rng.integers(0, 4, size=24)}


def full_accuracy(model, data):
    logits = model({"image": data["images"].astype("float32"),
                    "task": np.eye(5, dtype="float32")[data["tasks"]]})
    return float(np.mean(np.argmax(np.asarray(logits), -1) == data["labels"]))


def test_head_outputs_split_the_central_output(model, data):
    heads = predinet_pca.head_outputs(model, data["images"], batch_size=10)
    assert heads.shape == (24, HEADS, RELATIONS + 4)
    outputs = np.asarray(rg.central_model(model)(data["images"].astype("float32")))
    np.testing.assert_allclose(heads.reshape(24, -1), outputs, atol=1e-6)
    with pytest.raises(ValueError, match=r"`model`: expected .*heads.*MLPCentral"):
        predinet_pca.head_outputs(rg.build_model("mlp1"), data["images"][:2])


def test_head_pca_components_and_explained_variance(model, data):
    heads = predinet_pca.head_outputs(model, data["images"])
    dims = heads.shape[-1]
    full = predinet_pca.fit_head_pca(heads, num_components=dims)
    np.testing.assert_allclose(full.explained_variance_ratio.sum(-1), 1.0, atol=1e-9)
    assert np.all(np.diff(full.explained_variance_ratio, axis=-1) <= 1e-12)  # largest first
    gram = np.einsum("hcd,hed->hce", full.components, full.components)
    np.testing.assert_allclose(gram, np.broadcast_to(np.eye(dims), gram.shape), atol=1e-9)
    points = predinet_pca.project_heads(full, heads)
    rebuilt = full.mean + np.einsum("bhc,hcd->bhd", points, full.components)
    np.testing.assert_allclose(rebuilt, heads, atol=1e-5)
    two = predinet_pca.fit_head_pca(heads, num_components=2)
    assert two.components.shape == (HEADS, 2, dims)
    assert np.all(two.explained_variance_ratio.sum(-1) <= 1.0 + 1e-12)
    np.testing.assert_allclose(two.explained_variance_ratio, full.explained_variance_ratio[:, :2])
    # Held-out images are projected with the components fitted on the first set.
    assert predinet_pca.project_heads(two, heads[:5]).shape == (5, HEADS, 2)
    with pytest.raises(ValueError, match=r"`num_components`: expected an integer in \[1, 7\]"):
        predinet_pca.fit_head_pca(heads, num_components=8)


def test_ablation_all_heads_none_and_each(model, data):
    args = (model, data["images"], data["tasks"], data["labels"])
    everything = predinet_ablation.ablation_accuracy(*args, keep_heads=range(HEADS))
    assert everything == full_accuracy(model, data)
    nothing = predinet_ablation.ablation_accuracy(*args, keep_heads=[])
    zeros = rg.readout_model(model)({"central": np.zeros((24, HEADS * (RELATIONS + 4)),
                                                         "float32"),
                                     "task": np.eye(5, dtype="float32")[data["tasks"]]})
    assert nothing == float(np.mean(np.argmax(np.asarray(zeros), -1) == data["labels"]))
    per_head = predinet_ablation.head_ablation(*args, batch_size=7)
    assert per_head.shape == (HEADS,)
    assert per_head[1] == predinet_ablation.ablation_accuracy(*args, keep_heads=[0, 2, 3])
    curve = predinet_ablation.pruning_curve(*args, num_samples=3, seed=1)
    np.testing.assert_array_equal(curve["num_kept"], np.arange(HEADS + 1))
    assert curve["accuracies"].shape == (HEADS + 1, 3)
    np.testing.assert_array_equal(curve["accuracies"][0], nothing)
    np.testing.assert_array_equal(curve["accuracies"][-1], everything)
    star = predinet_ablation.pruning_curve(*args, num_kept=[2], num_samples=2,
                                           candidate_heads=[0, 3])
    assert star["accuracies"][0, 0] == predinet_ablation.ablation_accuracy(*args, [0, 3])
    with pytest.raises(ValueError, match=r"`num_kept`: expected sizes in \[0, 2\]"):
        predinet_ablation.pruning_curve(*args, num_kept=[3], candidate_heads=[0, 3])


def test_plots_are_written(model, data, tmp_path):
    heads = predinet_pca.head_outputs(model, data["images"])
    points = predinet_pca.project_heads(predinet_pca.fit_head_pca(heads), heads)
    path = str(tmp_path / "pca.png")
    predinet_pca.plot_head_pca(points, data["labels"], heads=(0, 1, 2), columns=2, path=path)
    assert os.path.getsize(path) > 1000
    curve = {"num_kept": np.arange(3), "accuracies": np.full((3, 2), 0.5)}
    path = str(tmp_path / "pruning.png")
    predinet_ablation.plot_pruning_curves({"PrediNet": curve}, chance=0.25, path=path)
    assert os.path.getsize(path) > 1000


def test_propositions_cluster_masks_into_objects():
    from keras_relational.analysis import predinet_propositions as props

    one_hot = np.eye(25)
    # Head 0 attends to cells 0 and 12, head 1 to (nearly) 12 and 24, head 2 to 0 and 0.
    first = np.stack([one_hot[0], 0.9 * one_hot[12] + 0.1 * one_hot[11], one_hot[0]])
    second = np.stack([one_hot[12], one_hot[24], one_hot[0]])
    values = np.arange(6, dtype="float64").reshape(3, 2) / 10
    objects, facts = props.propositions(first, second.reshape(3, 5, 5), values)
    np.testing.assert_array_equal(objects, [[1, 2], [2, 3], [1, 1]])
    assert len(facts) == 3 * 2
    assert facts[0] == ("r_1", "ob_1", "ob_2", 0.0)
    assert facts[3] == ("r_2", "ob_2", "ob_3", 0.3)
    text = props.to_prolog(facts)
    assert text.splitlines()[3] == "rel(r_2, ob_2, ob_3, 0.300000)."
    # A tiny bandwidth keeps near-identical masks apart.
    assert props.mean_shift(np.stack([one_hot[12], first[1]]), bandwidth=0.01).tolist() == [0, 1]
    with pytest.raises(ValueError, match=r"`bandwidth`: expected a positive number"):
        props.mean_shift(first, bandwidth=0)
