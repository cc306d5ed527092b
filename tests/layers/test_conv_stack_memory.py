import json

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import ops
from layer_contract import (
    check_fresh_process,
    check_jit_fit_step,
    run_fresh_process,
    run_layer_contract,
)

import keras_relational
from keras_relational.environments import palindromes
from keras_relational.layers.conv_stack_memory_cell import (
    ConvStackMemoryCell,
    GlorotUniformBias,
    stack_update,
)
from keras_relational.models import symmetry

B, D, N = 3, 6, 4
PUSH, STAY, POP = np.eye(3, dtype="float32")


def update(memory, taps, write=None, push_write=None):
    """stack_update with NumPy in and out; ``taps`` is one (push, stay, pop) for every stack."""
    memory = np.asarray(memory, "float32")
    filters = np.broadcast_to(np.asarray(taps, "float32"), (memory.shape[0], memory.shape[2], 3))
    def as_tensor(v):
        return None if v is None else ops.convert_to_tensor(np.asarray(v, "float32"))

    return np.asarray(stack_update(ops.convert_to_tensor(memory),
                                   ops.convert_to_tensor(filters.copy()),
                                   as_tensor(write), as_tensor(push_write)))


def reference_step(memory, filters, write):
    """Mitchell & Bowers, App. B, eqs. (5)-(6) in NumPy with per-stack filters."""
    zero = np.zeros_like(memory[:, :1])
    up = np.concatenate([zero, memory[:, :-1]], 1)
    down = np.concatenate([memory[:, 1:], zero], 1)
    new = filters[:, None, :, 0] * up + filters[:, None, :, 1] * memory \
        + filters[:, None, :, 2] * down
    new[:, 0] += write
    return new


@pytest.fixture
def memory():
    return np.random.RandomState(0).normal(size=(B, D, N)).astype("float32")


def test_stay_leaves_memory_unchanged(memory):
    np.testing.assert_array_equal(update(memory, STAY), memory)


def test_push(memory):
    v = np.random.RandomState(1).normal(size=(B, N)).astype("float32")
    new = update(memory, PUSH, write=v)
    np.testing.assert_allclose(new[:, 0], v)
    np.testing.assert_array_equal(new[:, 1:], memory[:, :-1])  # old C[D-1] is lost


def test_pop(memory):
    new = update(memory, POP)
    np.testing.assert_array_equal(new[:, :-1], memory[:, 1:])  # old C[0] is lost
    np.testing.assert_array_equal(new[:, -1], 0.0)


def test_push_then_pop_is_lifo():
    values = np.random.RandomState(2).normal(size=(D, B, N)).astype("float32")
    memory = np.zeros((B, D, N), "float32")
    for v in values:
        memory = update(memory, PUSH, write=v)
        np.testing.assert_allclose(memory[:, 0], v)
    reads = []
    for _ in range(D):
        reads.append(memory[:, 0])
        memory = update(memory, POP)
    np.testing.assert_allclose(np.stack(reads), values[::-1], atol=1e-6)
    np.testing.assert_array_equal(memory, 0.0)  # empty once everything is popped


def test_embedding_on_push_writes_only_with_the_push_tap(memory):
    x = np.random.RandomState(3).normal(size=(B, N)).astype("float32")
    taps = np.array([0.25, 0.5, 0.25], "float32")
    np.testing.assert_allclose(update(memory, taps, push_write=x)[:, 0],
                               update(memory, taps)[:, 0] + 0.25 * x, atol=1e-6)
    np.testing.assert_allclose(update(memory, STAY, push_write=x), memory)


def test_matches_reference_mass_identity_and_non_expansion(memory):
    rng = np.random.RandomState(4)
    logits = rng.normal(size=(B, N, 3)).astype("float32")
    filters = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    write = np.tanh(rng.normal(size=(B, N))).astype("float32")
    new = np.asarray(stack_update(memory, filters, write=write))
    np.testing.assert_allclose(new, reference_step(memory, filters, write), atol=1e-6)
    mass = memory.sum(1) - filters[..., 0] * memory[:, -1] - filters[..., 2] * memory[:, 0] + write
    np.testing.assert_allclose(new.sum(1), mass, atol=1e-5)
    assert np.abs(new).max() <= np.abs(memory).max() + np.abs(write).max() + 1e-6


def test_translation_equivariance_along_depth():
    rng = np.random.RandomState(5)
    memory = np.zeros((B, D, N), "float32")
    memory[:, 1:D - 2] = rng.normal(size=(B, D - 3, N))
    filters = rng.dirichlet(np.ones(3), size=(B, N)).astype("float32")
    shifted = np.roll(memory, 1, axis=1)
    np.testing.assert_allclose(np.asarray(stack_update(shifted, filters)),
                               np.roll(np.asarray(stack_update(memory, filters)), 1, axis=1),
                               atol=1e-6)


def test_equals_depthwise_conv1d_with_identity_kernels(memory):
    """The authors' implementation: three tf.nn.conv1d calls with (3, N, N) kernels."""
    filters = np.random.RandomState(6).dirichlet(np.ones(3), size=(B, N)).astype("float32")
    eye = np.eye(N, dtype="float32")
    expected = []
    for b in range(B):
        out = 0.0
        for tap in range(3):
            kernel = np.zeros((3, N, N), "float32")
            kernel[tap] = eye
            shifted = tf.nn.conv1d(memory[b:b + 1], kernel, stride=1, padding="SAME")
            out = out + filters[b, :, tap] * shifted.numpy()[0]
        expected.append(out)
    np.testing.assert_allclose(np.asarray(stack_update(memory, filters)), np.stack(expected),
                               atol=1e-6)


def test_scripted_controller_recalls_palindromes():
    """Push a 2-bit code of a..d before `o`, stay at `o`, pop after: cell 0 spells w reversed."""
    code = {s: np.array([1 if s in (1, 2) else -1, 1 if s in (1, 3) else -1], "float32")
            for s in (1, 2, 3, 4)}
    for k in (1, 5, D):
        w = np.random.RandomState(k).randint(1, 5, size=k)
        memory = np.zeros((1, D, 2), "float32")
        for s in w:
            memory = update(memory, PUSH, write=code[s][None])
        reads = []
        for _ in range(k + 1):  # at `o` and at each second-half symbol
            reads.append(memory[0, 0].copy())
            memory = update(memory, POP)
        decoded = [next(s for s, c in code.items() if np.array_equal(c, r)) for r in reads[:k]]
        assert decoded == list(w[::-1])
        np.testing.assert_array_equal(reads[k], 0.0)  # empty stack -> end of string


@pytest.mark.parametrize("write_mode,straight_through", [
    ("gated", False), ("embedding_on_push", False), ("gated", True), ("embedding_on_push", True)])
def test_cell_matches_numpy_reference(write_mode, straight_through):
    """Mitchell & Bowers, App. B, eqs. (1)-(8) forward pass, with the layer's own weights (with
    ``straight_through``, the same with one-hot argmax filters)."""
    rng = np.random.RandomState(7)
    x = rng.normal(size=(B, 5, N)).astype("float32")
    layer = keras_relational.ConvStackMemory(N, stack_depth=D, write_mode=write_mode,
                                             return_sequences=True,
                                             straight_through=straight_through)
    out = np.asarray(layer(x))
    cell = layer.cell
    p = {name: np.asarray(getattr(cell, name)) for name in
         ["filter_kernel", "filter_bias", "output_kernel", "output_bias"]}
    if write_mode == "gated":
        p.update({name: np.asarray(getattr(cell, name)) for name in
                  ["input_kernel", "input_bias", "candidate_kernel", "candidate_bias"]})
    else:
        assert not hasattr(cell, "input_kernel")  # W_i, W_c are not created in this mode
        assert len(cell.weights) == 4
    sig = lambda z: 1 / (1 + np.exp(-z))  # noqa: E731
    h, c = np.zeros((B, N), "float32"), np.zeros((B, D, N), "float32")
    expected = []
    for t in range(x.shape[1]):
        g = np.concatenate([h, x[:, t]], -1)
        f = (g @ p["filter_kernel"] + p["filter_bias"]).reshape(B, N, 3)
        f = np.exp(f) / np.exp(f).sum(-1, keepdims=True)
        if straight_through:
            f = np.eye(3, dtype="float32")[f.argmax(-1)]
        o = sig(g @ p["output_kernel"] + p["output_bias"])
        if write_mode == "gated":
            i = sig(g @ p["input_kernel"] + p["input_bias"]) * np.tanh(
                g @ p["candidate_kernel"] + p["candidate_bias"])
            c = reference_step(c, f, i)
        else:
            zero = np.zeros_like(c[:, :1])
            up = np.concatenate([zero, c[:, :-1]], 1)
            up[:, 0] += x[:, t]
            down = np.concatenate([c[:, 1:], zero], 1)
            c = f[:, None, :, 0] * up + f[:, None, :, 1] * c + f[:, None, :, 2] * down
        h = o * np.tanh(c[:, 0])
        expected.append(h)
    np.testing.assert_allclose(out, np.stack(expected, 1), atol=1e-5)


def test_shapes_states_and_gate_ranges():
    x = np.random.RandomState(8).normal(size=(2, 7, 3)).astype("float32")
    layer = keras_relational.ConvStackMemory(N, stack_depth=D, return_sequences=True,
                                             return_state=True, return_filters=True,
                                             return_memory=True)
    seq, h, c = layer(x)
    assert tuple(seq.shape) == (2, 7, N + 3 * N + D * N)
    assert tuple(h.shape) == (2, N) and tuple(c.shape) == (2, D * N)
    seq = np.asarray(seq)
    np.testing.assert_allclose(seq[:, -1, :N], np.asarray(h), atol=1e-6)
    np.testing.assert_allclose(seq[:, -1, 4 * N:], np.asarray(c), atol=1e-6)
    filters = seq[..., N:4 * N].reshape(2, 7, N, 3)
    assert (filters >= 0).all()
    np.testing.assert_allclose(filters.sum(-1), 1.0, atol=1e-5)
    assert (np.abs(seq[..., :N]) < 1).all()
    last = keras_relational.ConvStackMemory(N, stack_depth=D)(x)
    assert tuple(last.shape) == (2, N)


def test_causality_right_padding_is_safe():
    keras.utils.set_random_seed(0)
    model = symmetry.conv_stack_lstm(write_mode="gated")
    tokens = palindromes.encode(np.array([[1, 2, 3]]), max_len=12)["inputs"]
    altered = tokens.copy()
    altered[0, 5:] = 4
    a, b = np.asarray(model(tokens)), np.asarray(model(altered))
    np.testing.assert_allclose(a[:, :5], b[:, :5], atol=1e-6)


def test_parameter_counts_and_gradients():
    keras.utils.set_random_seed(1)
    gated = symmetry.conv_stack_lstm(write_mode="gated")
    assert gated.count_params() == 1407  # Mitchell & Bowers, Table II sizes
    assert symmetry.conv_stack_lstm(write_mode="embedding_on_push").count_params() == 987
    assert symmetry.standard_lstm().count_params() == 45177
    data = palindromes.encode(np.array([[1, 2, 3, 4]]))
    with tf.GradientTape() as tape:
        logits = gated(data["inputs"])
        loss = keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction="mean_with_sample_weight")(
                data["targets"], logits, sample_weight=data["mask"])
    grads = tape.gradient(loss, [v.value for v in gated.trainable_variables])
    for variable, grad in zip(gated.trainable_variables, grads, strict=True):
        assert grad is not None, variable.path
        grad = np.asarray(tf.convert_to_tensor(grad))
        assert np.isfinite(grad).all() and np.abs(grad).max() > 0, variable.path


def test_straight_through_moves_stacks_by_whole_cells_and_trains_the_filters():
    keras.utils.set_random_seed(2)
    x = np.random.RandomState(3).normal(size=(2, 6, N)).astype("float32")
    layer = keras_relational.ConvStackMemory(N, stack_depth=D, return_sequences=True,
                                             return_filters=True, return_memory=True,
                                             straight_through=True)
    with tf.GradientTape() as tape:
        out = layer(x)
        loss = ops.sum(ops.square(out[..., :N]))
    filters = np.asarray(out[..., N:4 * N]).reshape(2, 6, N, 3)
    np.testing.assert_array_equal(np.sort(filters, -1), np.broadcast_to([0, 0, 1], filters.shape))
    kernel = layer.cell.filter_kernel
    grad = np.asarray(tf.convert_to_tensor(tape.gradient(loss, kernel.value)))
    assert np.isfinite(grad).all() and np.abs(grad).max() > 0  # the softmax's gradient
    soft = keras_relational.ConvStackMemory.from_config(
        dict(layer.get_config(), straight_through=False))
    soft(x)
    soft.set_weights(layer.get_weights())
    assert not np.allclose(np.asarray(soft(x)), np.asarray(out))  # the hard path differs
    assert layer.get_config()["straight_through"] is True


def test_glorot_uniform_bias_limit():
    values = np.asarray(GlorotUniformBias(seed=0)((30,)))
    limit = np.sqrt(6 / 31)
    assert np.abs(values).max() <= limit and np.abs(values).max() > 0.8 * limit


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match="write_mode.*'always'"):
        keras_relational.ConvStackMemory(4, write_mode="always")
    with pytest.raises(ValueError, match="stack_depth"):
        ConvStackMemoryCell(4, stack_depth=0)
    with pytest.raises(ValueError, match="M == units"):
        keras_relational.ConvStackMemory(4, write_mode="embedding_on_push")(
            np.zeros((1, 2, 3), "float32"))


@pytest.mark.subprocess
@pytest.mark.parametrize("write_mode,straight_through", [
    ("gated", False), ("embedding_on_push", False), ("gated", True)])
def test_layer_contract(tmp_path, write_mode, straight_through):
    x = np.random.RandomState(9).normal(size=(2, 5, 4)).astype("float32")
    run_layer_contract(
        lambda: keras_relational.ConvStackMemory(4, stack_depth=6, write_mode=write_mode,
                                                 return_sequences=True,
                                                 straight_through=straight_through),
        x, tmp_path)


def test_shift_entropy_penalty_is_the_masked_mean_filter_entropy(tmp_path):
    keras.utils.set_random_seed(3)
    penalised = symmetry.conv_stack_lstm(write_mode="embedding_on_push", shift_entropy_cost=0.25)
    plain = symmetry.conv_stack_lstm(write_mode="embedding_on_push")
    assert penalised.count_params() == plain.count_params() == 987
    plain.set_weights(penalised.get_weights())
    tokens = np.concatenate([palindromes.encode(np.array([half]), max_len=12)["inputs"]
                             for half in ([1, 2, 3], [4, 1])])
    # Same outputs; the penalty only adds a loss.
    np.testing.assert_allclose(np.asarray(penalised(tokens)), np.asarray(plain(tokens)),
                               atol=1e-6)
    assert not plain.losses
    (loss,) = penalised.losses
    # NumPy reference from the layer's own filters: entropy per stack and step, mean over the
    # non-padding steps (token id != 0) and the stacks, times the cost.
    probe = keras.Model(penalised.input, penalised.get_layer("conv_stack_memory").output)
    filters = np.asarray(probe(tokens))[..., 10:].reshape(*tokens.shape, 10, 3)
    entropy = -(filters * np.log(filters)).sum(-1)
    valid = tokens != 0
    np.testing.assert_allclose(float(loss), 0.25 * entropy[valid].mean(), rtol=1e-5)
    # More padding does not change it.
    longer = np.concatenate([tokens, np.zeros((2, 5), tokens.dtype)], axis=1)
    penalised(longer)
    np.testing.assert_allclose(float(penalised.losses[0]), float(loss), rtol=1e-5)
    # It is part of the training loss and survives a .keras round trip.
    penalised.save(tmp_path / "penalised.keras")
    reloaded = keras.saving.load_model(tmp_path / "penalised.keras")
    reloaded(tokens)
    np.testing.assert_allclose(float(reloaded.losses[0]), float(loss), rtol=1e-5)
    with pytest.raises(ValueError, match="cost"):
        symmetry.ShiftEntropyPenalty(-1.0)
    with pytest.raises(ValueError, match="cost=-0.1"):  # not silently trained without it
        symmetry.conv_stack_lstm(write_mode="embedding_on_push", shift_entropy_cost=-0.1)


_JAX_PENALTY_SCRIPT = """
import json, sys
import jax, keras, numpy as np
from keras_relational.models import symmetry  # noqa: F401  (registers ShiftEntropyPenalty)
model = keras.saving.load_model(sys.argv[1])
data = np.load(sys.argv[2])
tokens, targets = data["tokens"], data["targets"]
model(tokens)
losses = [float(x) for x in model.losses]
trainable = [v.value for v in model.trainable_variables]
non_trainable = [v.value for v in model.non_trainable_variables]
def total_loss(trainable):
    logits, _, penalties = model.stateless_call(trainable, non_trainable, tokens, training=True,
                                                return_losses=True)
    return keras.losses.sparse_categorical_crossentropy(targets, logits, from_logits=True).mean() \\
        + sum(penalties)
gradients = jax.grad(total_loss)(trainable)
np.savez(sys.argv[3], *[np.asarray(g) for g in gradients])
print(json.dumps({"backend": keras.backend.backend(), "losses": losses}))
"""


@pytest.mark.subprocess
def test_shift_entropy_penalty_contract(tmp_path):
    """The penalised model exports, reloads under JAX with the same penalty and gradients, fits."""
    keras.utils.set_random_seed(4)
    model = symmetry.conv_stack_lstm(write_mode="embedding_on_push", shift_entropy_cost=0.25)
    tokens = np.concatenate([palindromes.encode(np.array([half]), max_len=12)["inputs"]
                             for half in ([1, 2, 3], [4, 1])]).astype("int32")
    model(tokens)
    (tf_loss,) = (float(x) for x in model.losses)
    # SavedModel (serve endpoint) and JAX-backend logits in a fresh process.
    check_fresh_process(model, tokens, tmp_path, extra_imports=["keras_relational.models.symmetry"])
    # The penalty and the training gradients under JAX equal TensorFlow's (same weights): the
    # backends train the same model.
    targets = np.random.RandomState(0).randint(0, 7, size=tokens.shape)
    with tf.GradientTape() as tape:
        logits = model(tokens, training=True)
        total = ops.mean(keras.losses.sparse_categorical_crossentropy(
            targets, logits, from_logits=True)) + sum(model.losses)
    tf_gradients = [tf.convert_to_tensor(g).numpy()
                    for g in tape.gradient(total, model.trainable_variables)]
    np.savez(tmp_path / "data.npz", tokens=tokens, targets=targets)
    result = run_fresh_process(["-c", _JAX_PENALTY_SCRIPT, str(tmp_path / "contract_model.keras"),
                                str(tmp_path / "data.npz"), str(tmp_path / "jax_gradients.npz")],
                               backend="jax")
    produced = json.loads(result.stdout.strip().splitlines()[-1])
    assert produced["backend"] == "jax"
    np.testing.assert_allclose(produced["losses"], [tf_loss], rtol=1e-5)
    jax_gradients = np.load(tmp_path / "jax_gradients.npz")
    assert len(jax_gradients.files) == len(tf_gradients) == 7
    for i, (variable, expected) in enumerate(zip(model.trainable_variables, tf_gradients,
                                                 strict=True)):
        np.testing.assert_allclose(jax_gradients[f"arr_{i}"], expected, rtol=1e-4,
                                   atol=1e-6 * np.abs(expected).max(), err_msg=variable.path)
    # One jit_compile fit step trains with the penalty in the loss.
    check_jit_fit_step(model, tokens)
