import keras
import numpy as np
import pytest
from layer_contract import run_layer_contract

import keras_relational

B, N, M, F = 2, 4, 2, 8
CONFIG = dict(num_heads=2, key_dim=3, simplicial_num_heads=2, simplicial_key_dim=3,
              mlp_hidden_units=(5,))

# ---------------------------------------------------------------------------------------------
# NumPy reference (float64) of Clift et al. eqs. (7)-(14) and the Sec. 4 block pseudo-code.
# ---------------------------------------------------------------------------------------------


def layer_norm(x, gain, bias, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return gain * (x - mu) / np.sqrt(var + eps) + bias


def softmax(z, axis=-1):
    z = z - z.max(axis=axis, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=axis, keepdims=True)


def heads(x, count):
    b, t, width = x.shape
    return x.reshape(b, t, count, width // count).transpose(0, 2, 1, 3)  # [B, H, T, d]


def one_simplicial(x, kernel, num_heads, num_standard, key_mask):
    """Eq. (2) with the code's 1/sqrt(d), routing of eqs. (13)-(14): [B, T, H*d], [B, H, T, T]."""
    t = x.shape[1]
    q, k, v = (heads(part, num_heads) for part in np.split(x @ kernel, 3, axis=-1))
    logits = np.einsum("bhid,bhjd->bhij", q, k) / np.sqrt(q.shape[-1])
    allowed = np.ones((t, t), bool)
    allowed[:num_standard, num_standard:] = False
    allowed = allowed[None, None] & key_mask[:, None, None, :]
    weights = softmax(np.where(allowed, logits, -1e9))
    out = np.einsum("bhij,bhjd->bhid", weights, v).transpose(0, 2, 1, 3)
    return out.reshape(x.shape[0], t, -1), weights


def two_simplicial(x, kernel, bilinear, num_heads, num_virtual, key_mask):
    """Eqs. (7), (8), (10), (13), (14); virtual pairs if num_virtual else all pairs."""
    p, l1, l2, u = (heads(part, num_heads) for part in np.split(x @ kernel, 4, axis=-1))
    m = num_virtual
    if m:
        p, l1, l2, u_keys, key_mask = p[:, :, :-m], l1[:, :, -m:], l2[:, :, -m:], u[:, :, -m:], \
            key_mask[:, -m:]
    else:
        u_keys = u
    pl1 = np.einsum("bhid,bhjd->bhij", p, l1)[..., :, :, None]
    pl2 = np.einsum("bhid,bhkd->bhik", p, l2)[..., :, None, :]
    l12 = np.einsum("bhjd,bhkd->bhjk", l1, l2)[..., None, :, :]
    pp = (p * p).sum(-1)[..., :, None, None]
    n1 = (l1 * l1).sum(-1)[..., None, :, None]
    n2 = (l2 * l2).sum(-1)[..., None, None, :]
    logits = np.sqrt(np.maximum(pl1**2 * n2 + l12**2 * pp + pl2**2 * n1 - 2 * pl1 * pl2 * l12, 0))
    pair_ok = key_mask[:, None, None, :, None] & key_mask[:, None, None, None, :]
    logits = np.where(pair_ok, logits, -np.inf)
    b, h, i, j, k = logits.shape
    weights = softmax(logits.reshape(b, h, i, j * k)).reshape(logits.shape)
    messages = np.einsum("hqrs,bhjr,bhks->bhjkq", bilinear, u_keys, u_keys)
    out = np.einsum("bhijk,bhjkq->bihq", weights, messages).reshape(b, i, -1)
    if m:
        own = u[:, :, -m:].transpose(0, 2, 1, 3).reshape(b, m, -1)
        out = np.concatenate([out, own], axis=1)
    return out, weights


def weights_by_path(block):
    return {w.path.split("/", 1)[1]: np.asarray(w, np.float64) for w in block.weights}


def reference_block(block, e, mask=None):
    """The block's forward pass from its own weights (read by path), in float64."""
    w = weights_by_path(block)
    e = np.asarray(e, np.float64)
    b, n, _ = e.shape
    m = block._num_virtual
    mask = np.ones((b, n), bool) if mask is None else mask
    if m:
        e = np.concatenate([e, np.broadcast_to(w["virtual_entities"][None], (b, m, F))], axis=1)
        mask = np.concatenate([mask, np.ones((b, m), bool)], axis=1)
    scores = []
    for i in range(block.num_iterations):
        s = "" if block.share_weights else f"_{i}"
        ln = "" if block.share_layer_norms else f"_{i}"
        x = layer_norm(e, w[f"input_layer_norm{ln}/gamma"], w[f"input_layer_norm{ln}/beta"])
        a, one_weights = one_simplicial(x, w[f"attention{s}/qkv_projection/kernel"],
                                        block.num_heads, n, mask)
        if block.use_simplicial:
            a2, two_weights = two_simplicial(x, w[f"simplicial_attention{s}/kernel"],
                                             w[f"simplicial_attention{s}/bilinear_kernel"],
                                             block.simplicial_num_heads, m, mask)
            a2 = np.where(mask[:, :, None], a2, 0.0)
            a = np.concatenate([a, layer_norm(a2, w[f"simplicial_layer_norm{ln}/gamma"],
                                              w[f"simplicial_layer_norm{ln}/beta"])], axis=-1)
        hidden = np.maximum(a @ w[f"mlp{s}_0/kernel"] + w[f"mlp{s}_0/bias"], 0)
        update = hidden @ w[f"mlp{s}_1/kernel"] + w[f"mlp{s}_1/bias"]
        e = layer_norm(e + update, w[f"output_layer_norm{ln}/gamma"],
                       w[f"output_layer_norm{ln}/beta"])
        scores.append((one_weights, two_weights if block.use_simplicial else None))
    if m and not block.return_virtual_entities:
        e = e[:, :n]
    return e, scores


def make_block(**kwargs):
    return keras_relational.SimplicialTransformerBlock(**{**CONFIG, **kwargs})


def entities(seed=0, batch=B, count=N):
    return np.random.RandomState(seed).normal(size=(batch, count, F)).astype("float32")


# ---------------------------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs", [
    {},
    {"share_weights": False, "return_virtual_entities": True},
    {"share_layer_norms": True, "num_iterations": 3, "num_virtual_entities": 3},
    {"simplicial_mode": "full"},
    {"use_simplicial": False},
], ids=["default", "unshared", "shared_ln", "full", "relational"])
def test_matches_numpy_reference(kwargs):
    x = entities(1)
    block = make_block(**kwargs)
    outputs, scores = block(x, return_attention_scores=True)
    expected, expected_scores = reference_block(block, x)
    np.testing.assert_allclose(np.asarray(outputs), expected, atol=1e-5)
    assert len(scores) == block.num_iterations
    for got, (one, two) in zip(scores, expected_scores, strict=True):
        np.testing.assert_allclose(np.asarray(got["one_simplicial"]), one, atol=1e-5)
        if two is None:
            assert "two_simplicial" not in got
        else:
            np.testing.assert_allclose(np.asarray(got["two_simplicial"]), two, atol=1e-5)


def test_masked_matches_reference_and_padding_has_no_effect():
    x = entities(2, batch=3)
    mask = np.ones((3, N), bool)
    mask[0, 1] = False
    mask[1, [0, 3]] = False
    for kwargs in ({}, {"simplicial_mode": "full"}):
        block = make_block(**kwargs)
        outputs = np.asarray(block(x, mask=mask))
        expected, _ = reference_block(block, x, mask)
        np.testing.assert_allclose(outputs[mask], expected[mask], atol=1e-5)
        padded = x.copy()
        padded[~mask] = 1e3 * np.random.RandomState(0).normal(size=padded[~mask].shape)
        np.testing.assert_allclose(np.asarray(block(padded, mask=mask))[mask], outputs[mask],
                                   atol=1e-5)
    # The Keras mask flows in from Masking and out to the next layer.
    inputs = keras.Input((N, F))
    masked = keras.layers.Masking(0.0)(inputs)
    out = make_block()(masked)
    zeroed = x.copy()
    zeroed[~mask] = 0.0
    model = keras.Model(inputs, out)
    block = model.layers[-1]
    np.testing.assert_allclose(model.predict(zeroed, verbose=0)[mask],
                               np.asarray(block(x, mask=mask))[mask], atol=1e-5)
    np.testing.assert_array_equal(np.asarray(block.compute_mask(x, mask)), mask)
    with_virtual = make_block(return_virtual_entities=True)
    np.testing.assert_array_equal(np.asarray(with_virtual.compute_mask(x, mask)),
                                  np.concatenate([mask, np.ones((3, M), bool)], axis=1))


def test_parameter_counts_and_sharing():
    x = np.zeros((1, 40, 64), "float32")
    # Clift et al.'s simplicial and relational agents (their Sec. 4 sizes: 365,513 and 239,241;
    # both share the same 218,121 torso and head parameters outside the blocks).
    simplicial = keras_relational.SimplicialTransformerBlock()
    simplicial(x)
    relational = keras_relational.SimplicialTransformerBlock(use_simplicial=False)
    relational(x)
    assert simplicial.count_params() == 365_513 - 218_121 == 147_392
    assert relational.count_params() == 239_241 - 218_121 == 21_120
    bilinear = [w for w in simplicial.weights if "bilinear" in w.path]
    assert len(bilinear) == 1 and int(np.prod(bilinear[0].shape)) == 110_592
    layer_norms = [w for w in simplicial.weights if "layer_norm" in w.path]
    assert len(layer_norms) == 2 * 3 * 2  # two iterations x three LNs x (gain, bias)
    unshared = keras_relational.SimplicialTransformerBlock(share_weights=False)
    unshared(x)
    assert unshared.count_params() == 2 * (147_392 - 128 - 704) + 704 + 128
    shared_ln = keras_relational.SimplicialTransformerBlock(share_layer_norms=True)
    shared_ln(x)
    assert shared_ln.count_params() == 147_392 - 352


def test_virtual_routing():
    x = entities(3)
    block = make_block(return_virtual_entities=True)
    outputs, scores = block(x, return_attention_scores=True)
    assert tuple(outputs.shape) == (B, N + M, F)
    for iteration in scores:
        one = np.asarray(iteration["one_simplicial"])
        assert one.shape == (B, 2, N + M, N + M)
        assert np.all(one[:, :, :N, N:] == 0.0)  # standard queries never see virtual keys
        assert np.all(one[:, :, N:, :N].sum(-1) > 0)  # virtual queries see standard keys
        assert np.asarray(iteration["two_simplicial"]).shape == (B, 2, N, M, M)
    # The learned virtual entities matter to the standard outputs (through the 2-simplicial
    # branch only): changing them changes the outputs, unlike in the relational block.
    changed = make_block()
    changed(x)
    changed.set_weights(block.get_weights())
    before = np.asarray(changed(x))
    changed.virtual_entities.assign(np.random.RandomState(1).normal(size=(M, F)))
    assert not np.allclose(np.asarray(changed(x)), before, atol=1e-4)


def test_equivariance_and_virtual_relabelling_invariance():
    x = entities(4)
    block = make_block(return_virtual_entities=True)
    outputs = np.asarray(block(x))
    perm = np.random.RandomState(0).permutation(N)
    permuted = np.asarray(block(x[:, perm]))
    np.testing.assert_allclose(permuted[:, :N], outputs[:, perm], atol=1e-5)
    np.testing.assert_allclose(permuted[:, N:], outputs[:, N:], atol=1e-5)
    block.virtual_entities.assign(block.virtual_entities.numpy()[::-1])
    relabelled = np.asarray(block(x))
    np.testing.assert_allclose(relabelled[:, :N], outputs[:, :N], atol=1e-5)
    np.testing.assert_allclose(relabelled[:, N:], outputs[:, N:][:, ::-1], atol=1e-5)
    full = make_block(simplicial_mode="full")
    np.testing.assert_allclose(np.asarray(full(x[:, perm])), np.asarray(full(x))[:, perm],
                               atol=1e-5)


def test_finite_outputs_and_gradients_on_degenerate_inputs():
    import tensorflow as tf

    if keras.backend.backend() != "tensorflow":
        pytest.skip("uses tf.GradientTape")
    rng = np.random.RandomState(5)
    per = 2000
    x = np.concatenate([
        rng.normal(size=(per, N, F)),
        np.zeros((per, N, F)),
        rng.normal(size=(per, 1, F)) * rng.normal(size=(per, N, 1)),  # collinear
        rng.normal(size=(per, N, F)) * 1e6,
        rng.normal(size=(per, N, F)) * 1e-20,
    ]).astype("float32")
    block = make_block()
    block(x[:1])
    target = rng.normal(size=x.shape).astype("float32")
    with tf.GradientTape() as tape:
        inputs = tf.Variable(x)
        outputs = block(inputs)
        loss = tf.reduce_sum(outputs * target)
    grads = tape.gradient(loss, [inputs, *block.trainable_weights])
    assert np.all(np.isfinite(np.asarray(outputs)))
    for weight, grad in zip(["inputs", *block.trainable_weights], grads, strict=True):
        assert np.all(np.isfinite(np.asarray(grad))), f"non-finite gradient for {weight}"


def test_symbolic_scores_and_output_shapes():
    inputs = keras.Input((N, F))
    outputs, scores = make_block()(inputs, return_attention_scores=True)
    assert tuple(outputs.shape) == (None, N, F)
    assert tuple(scores[1]["one_simplicial"].shape) == (None, 2, N + M, N + M)
    assert tuple(scores[1]["two_simplicial"].shape) == (None, 2, N, M, M)
    block = make_block(return_virtual_entities=True)
    assert block.compute_output_shape((None, N, F)) == (None, N + M, F)


def test_docstring_example_runs():
    import doctest

    globs = {"np": np, "keras_relational": keras_relational}
    runner = doctest.DocTestRunner()
    block = keras_relational.SimplicialTransformerBlock
    for test in doctest.DocTestFinder().find(block, globs=globs):
        runner.run(test)
    assert runner.tries > 0 and runner.failures == 0


def test_errors_name_the_argument():
    block = keras_relational.SimplicialTransformerBlock
    with pytest.raises(ValueError, match="num_iterations.*received num_iterations=0"):
        block(num_iterations=0)
    with pytest.raises(ValueError, match="simplicial_mode.*'sparse'"):
        block(simplicial_mode="sparse")
    with pytest.raises(ValueError, match="num_virtual_entities.*=2.*use_simplicial=False"):
        block(use_simplicial=False, num_virtual_entities=2)
    with pytest.raises(ValueError, match="num_virtual_entities.*=3.*simplicial_mode='full'"):
        block(simplicial_mode="full", num_virtual_entities=3)
    with pytest.raises(ValueError, match="simplicial_key_dim.*received simplicial_key_dim=0"):
        block(simplicial_key_dim=0)
    with pytest.raises(ValueError, match="attention_scale.*'rms'"):
        block(attention_scale="rms")
    with pytest.raises(ValueError, match="logit_scale.*received logit_scale=0"):
        block(logit_scale=0)
    with pytest.raises(ValueError, match=r"rank 3.*received shape \(2, 8\)"):
        block()(np.zeros((2, 8), "float32"))


@pytest.mark.slow
@pytest.mark.subprocess
def test_layer_contract(tmp_path):
    run_layer_contract(make_block, entities(6), tmp_path)


def test_layer_contract_unshared_full(tmp_path):
    run_layer_contract(
        lambda: make_block(share_weights=False, simplicial_mode="full", num_iterations=1),
        entities(7), tmp_path, fresh_process=False)


def test_outputs_and_gradients_are_finite_up_to_float32_extremes():
    """Issue 48. Measured before: at inputs near -1e38 (and 1e37) the outputs were finite but
    the input gradients were not (keras.layers.LayerNormalization's variance overflows; its
    rows then come out as beta). The block's layer norms now take moments of scaled rows."""
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    block = keras_relational.SimplicialTransformerBlock(**CONFIG, num_iterations=1)
    unit = np.random.RandomState(0).uniform(-1.0, 1.0, size=(B, N, F)).astype("float32")
    for scale in (1e37, 1e38):
        x = tf.constant(scale * unit)
        with tf.GradientTape() as tape:
            tape.watch(x)
            outputs = block(x)
            loss = tf.reduce_sum(outputs * np.linspace(-1.0, 1.0, F, dtype="float32"))
        gradient = tape.gradient(loss, x)
        assert np.all(np.isfinite(np.asarray(outputs))), scale
        assert np.all(np.isfinite(np.asarray(gradient))), scale
        # Not collapsed to the layer norms' beta: LN_out of the residual keeps unit variance.
        assert np.all(np.asarray(outputs).std(-1) > 0.5), scale
