import keras
import numpy as np
import pytest
from layer_contract import (
    check_fresh_process,
    check_keras_file_round_trip,
    functional_model,
    run_layer_contract,
)
from reference_tpr_memory import chained_reads, memory_from_parts, outer, unbind

import keras_relational

E, R, H, D = 6, 4, 8, 10


def mlp(layer, name, x):
    w1, b1 = (np.asarray(v) for v in layer.mlp_layers[f"{name}_1"].weights)
    w2, b2 = (np.asarray(v) for v in layer.mlp_layers[f"{name}_2"].weights)
    return np.tanh(np.tanh(x @ w1 + b1) @ w2 + b2)


def reference(layer, sentences, question, mask):
    """Schlag & Schmidhuber 2018, eqs. (6)-(20), with the layer's own weights, float64, the
    literal six outer products."""
    sentences, question = sentences.astype("float64"), question.astype("float64")
    parts = {n: mlp(layer, n, sentences) for n in layer.update_names}
    memory = memory_from_parts(parts, mask, layer.use_move, layer.use_backlink)
    cues = {n: mlp(layer, n, question) for n in layer.inference_names}
    total = chained_reads(memory, cues, np.asarray(layer.ln_gain), np.asarray(layer.ln_bias),
                          layer.layer_norm_epsilon)
    return total, memory


def random_inputs(seed=0, batch=3, steps=5):
    rng = np.random.RandomState(seed)
    sentences = rng.normal(size=(batch, steps, D)).astype("float32")
    question = rng.normal(size=(batch, D)).astype("float32")
    lengths = np.array([steps, 3, 1][:batch])
    mask = np.arange(steps)[None, :] < lengths[:, None]
    return sentences, question, mask


def make(implementation="factored", dtype="float32", **kwargs):
    layer = keras_relational.TPRMemory(E, R, H, implementation=implementation, dtype=dtype,
                                       **kwargs)
    sentences, question, _ = random_inputs()
    layer([sentences.astype(dtype), question.astype(dtype)])
    rng = np.random.RandomState(7)  # non-trivial LN scalars
    layer.ln_gain.assign(rng.uniform(0.5, 1.5, 3).astype(dtype))
    layer.ln_bias.assign(rng.uniform(-0.2, 0.2, 3).astype(dtype))
    return layer


ABLATIONS = [(True, True), (True, False), (False, True), (False, False)]


@pytest.mark.parametrize("implementation", ["factored", "dense"])
@pytest.mark.parametrize("use_move,use_backlink", ABLATIONS)
def test_matches_numpy_reference(implementation, use_move, use_backlink):
    # float64, so that the comparison checks the equations rather than float32 rounding, which
    # the three scalar layer norms amplify to ~1e-5 on O(1) outputs on some CPUs.
    layer = make(implementation, dtype="float64", use_move=use_move, use_backlink=use_backlink)
    sentences, question, mask = random_inputs()
    output, internals = layer([sentences.astype("float64"), question.astype("float64")],
                              mask=mask, return_internals=True)
    expected, memory = reference(layer, sentences, question, mask)
    np.testing.assert_allclose(np.asarray(internals["memory"]), memory, atol=1e-5)
    np.testing.assert_allclose(np.asarray(output), expected, atol=1e-5)


def test_one_update_step_matches_reference():
    layer = make("factored")
    sentences, question, _ = random_inputs(seed=3, steps=1)
    output, internals = layer([sentences, question], return_internals=True)
    expected, memory = reference(layer, sentences, question, np.ones((3, 1)))
    np.testing.assert_allclose(np.asarray(internals["memory"]), memory, atol=1e-5)
    np.testing.assert_allclose(np.asarray(output), expected, atol=1e-5)


def test_ablation_drops_unused_mlps():
    full = make(use_move=True, use_backlink=True)
    write_only = make(use_move=False, use_backlink=False)
    assert set(full.update_names) == {"e1", "e2", "r1", "r2", "r3"}
    assert set(write_only.update_names) == {"e1", "e2", "r1"}
    assert len(full.trainable_weights) - len(write_only.trainable_weights) == 8


@pytest.mark.parametrize("implementation", ["factored", "dense"])
def test_padded_sentences_never_write(implementation):
    layer = make(implementation)
    sentences, question, mask = random_inputs(seed=1)
    changed = np.where(mask[..., None], sentences, 100.0 * np.random.RandomState(5).normal(
        size=sentences.shape)).astype("float32")
    a = np.asarray(layer([sentences, question], mask=mask))
    b = np.asarray(layer([changed, question], mask=mask))
    np.testing.assert_array_equal(a, b)
    # Truncating the padded tail entirely gives the same result too.
    short = np.asarray(layer([sentences[1:2, :3], question[1:2]], mask=mask[1:2, :3]))
    np.testing.assert_allclose(short[0], a[1], atol=1e-5)


def test_masked_sentences_get_no_gradient():
    import tensorflow as tf

    layer = make("factored")
    sentences, question, mask = random_inputs(seed=2)
    x = tf.constant(sentences)
    with tf.GradientTape() as tape:
        tape.watch(x)
        loss = tf.reduce_sum(layer([x, question], mask=mask) ** 2)
    grad = tape.gradient(loss, x).numpy()
    assert np.all(grad[~mask] == 0.0)
    assert np.any(grad[mask] != 0.0)


def test_empty_story_gives_ln_biases():
    layer = make()
    sentences, question, _ = random_inputs()
    output = np.asarray(layer([sentences, question], mask=np.zeros((3, 5), bool)))
    np.testing.assert_allclose(output, np.full((3, E), np.sum(np.asarray(layer.ln_bias))),
                               atol=1e-6)


def test_batch_independence():
    layer = make()
    sentences, question, mask = random_inputs(seed=4)
    full = np.asarray(layer([sentences, question], mask=mask))
    one = np.asarray(layer([sentences[2:], question[2:]], mask=mask[2:]))
    np.testing.assert_allclose(one[0], full[2], atol=1e-6)


# --- the cell: algebra of the update (Schlag & Schmidhuber 2018, Sec. 4) ------------------


def cell_update(memory, e1, e2, r1, r2=None, r3=None, **kwargs):
    cell = keras_relational.TPRMemoryCell(memory.shape[1], memory.shape[2], **kwargs)
    vecs = [v[None].astype("float32") if v is not None else None for v in (e1, e2, r1, r2, r3)]
    return np.asarray(cell.update(memory.astype("float32"), *vecs))


def test_retrieval_identity_orthonormal_keys():
    rng = np.random.RandomState(0)
    q_e, _ = np.linalg.qr(rng.normal(size=(E, E)))
    q_r, _ = np.linalg.qr(rng.normal(size=(R, R)))
    memory = rng.normal(size=(1, E, R, E))
    e1, other = q_e[:, 0], q_e[:, 1]
    r1, r2, r3 = q_r[:, 0], q_r[:, 1], q_r[:, 2]
    e2 = rng.normal(size=E)
    new = cell_update(memory, e1, e2, r1, r2, r3)
    np.testing.assert_allclose(unbind(new, e1[None], r1[None])[0], e2, atol=1e-5)
    # The old target of (e1, r1) has been moved to (e1, r2).
    old = unbind(memory, e1[None], r1[None])[0]
    np.testing.assert_allclose(unbind(new, e1[None], r2[None])[0], old, atol=1e-5)
    # Another source entity is untouched (its backlink weight is (e2.other)(r3.r1) = 0).
    np.testing.assert_allclose(unbind(new, other[None], r1[None]),
                               unbind(memory, other[None], r1[None]), atol=1e-5)


def test_retrieval_identity_general_vectors():
    rng = np.random.RandomState(1)
    memory = rng.normal(size=(1, E, R, E))
    e1, e2 = rng.normal(size=E), rng.normal(size=E)
    r1, r2, r3 = rng.normal(size=R), rng.normal(size=R), rng.normal(size=R)
    w, m, b = (unbind(memory, x[None], y[None])[0] for x, y in ((e1, r1), (e1, r2), (e2, r3)))
    new = cell_update(memory, e1, e2, r1, r2, r3)
    expected = (w + (e1 @ e1) * (r1 @ r1) * (e2 - w) + (e1 @ e1) * (r1 @ r2) * (w - m)
                + (e1 @ e2) * (r1 @ r3) * (e1 - b))
    np.testing.assert_allclose(unbind(new, e1[None], r1[None])[0], expected, rtol=1e-4,
                               atol=1e-4)


def test_one_hot_symbolic_behaviour():
    eye_e, eye_r = np.eye(E), np.eye(R)
    a, b, c = eye_e[0], eye_e[1], eye_e[2]
    r0, r1, r2 = eye_r[0], eye_r[1], eye_r[2]

    def read(f, x, y):
        return unbind(f, x[None], y[None])[0]

    memory = cell_update(np.zeros((1, E, R, E)), a, b, r0, r1, r2)
    np.testing.assert_allclose(read(memory, a, r0), b, atol=1e-6)
    np.testing.assert_allclose(read(memory, b, r2), a, atol=1e-6)
    np.testing.assert_allclose(read(memory, a, r1), 0 * a, atol=1e-6)
    memory = cell_update(memory, a, c, r0, r1, r2)
    np.testing.assert_allclose(read(memory, a, r0), c, atol=1e-6)  # b erased
    np.testing.assert_allclose(read(memory, a, r1), b, atol=1e-6)  # b moved
    np.testing.assert_allclose(read(memory, c, r2), a, atol=1e-6)
    np.testing.assert_allclose(read(memory, b, r2), a, atol=1e-6)  # backlinks are not erased
    # Last write wins: the reverse order retrieves b.
    reverse = cell_update(cell_update(np.zeros((1, E, R, E)), a, c, r0, r1, r2), a, b, r0, r1, r2)
    np.testing.assert_allclose(read(reverse, a, r0), b, atol=1e-6)


def test_write_only_cell_update():
    rng = np.random.RandomState(2)
    memory = rng.normal(size=(1, E, R, E))
    e1, e2, r1 = rng.normal(size=E), rng.normal(size=E), rng.normal(size=R)
    new = cell_update(memory, e1, e2, r1, use_move=False, use_backlink=False)
    w = unbind(memory, e1[None], r1[None])
    np.testing.assert_allclose(new - memory, outer(e1[None], r1[None], e2[None] - w), atol=1e-5)


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match=r"entity_dim.*received entity_dim=0"):
        keras_relational.TPRMemory(entity_dim=0)
    with pytest.raises(ValueError, match=r"implementation.*'sparse'"):
        keras_relational.TPRMemory(implementation="sparse")
    with pytest.raises(ValueError, match=r"use_move.*'yes'"):
        keras_relational.TPRMemory(use_move="yes")
    with pytest.raises(ValueError, match=r"layer_norm_epsilon.*-1"):
        keras_relational.TPRMemory(layer_norm_epsilon=-1)
    with pytest.raises(ValueError, match=r"relation_dim.*received relation_dim=2.5"):
        keras_relational.TPRMemoryCell(4, 2.5)
    with pytest.raises(ValueError, match=r"rank 3.*received shape \(2, 10\)"):
        keras_relational.TPRMemory(E, R, H)([np.zeros((2, 10)), np.zeros((2, 10))])
    with pytest.raises(ValueError, match=r"list \[sentences"):
        keras_relational.TPRMemory(E, R, H)(np.zeros((2, 3, 10)))
    with pytest.raises(ValueError, match=r"last dimension .* = 17, received shape"):
        keras.layers.RNN(keras_relational.TPRMemoryCell(4, 3))(np.zeros((2, 3, 5), "float32"))


@pytest.mark.subprocess
@pytest.mark.parametrize(
    "implementation", ["factored", pytest.param("dense", marks=pytest.mark.slow)]
)
def test_layer_contract(tmp_path, implementation):
    sentences, question, _ = random_inputs(seed=6, batch=2, steps=4)
    run_layer_contract(
        lambda: keras_relational.TPRMemory(E, R, H, implementation=implementation),
        [sentences, question], tmp_path)


@pytest.mark.subprocess
def test_cell_contract_inside_rnn(tmp_path):
    steps = np.random.RandomState(8).normal(size=(2, 3, 2 * 4 + 3 * 3)).astype("float32") * 0.5
    # keras.layers.RNN.from_config pops "cell" out of the config dict it is given, so the
    # config-equality step of run_layer_contract cannot apply to any RNN; the rest can. The cell
    # has no weights (no fit step); TPRMemory(implementation="dense") is trained in the tests above.
    cell = keras_relational.TPRMemoryCell(4, 3)
    clone = keras_relational.TPRMemoryCell.from_config(cell.get_config())
    assert clone.get_config() == cell.get_config()
    model = functional_model(keras.layers.RNN(cell), steps)
    check_keras_file_round_trip(model, steps, str(tmp_path / "cell.keras"))
    check_fresh_process(model, steps, tmp_path)
