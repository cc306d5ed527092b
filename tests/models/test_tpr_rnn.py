import keras
import numpy as np
import pytest

from keras_relational.models.tpr_rnn import TPRSentenceEncoder, tpr_rnn

V, S, W, E, R, H = 13, 4, 5, 6, 4, 8


def mlp(x, layer, name):
    w1, b1 = (np.asarray(v, "float64") for v in layer.mlp_layers[f"{name}_1"].weights)
    w2, b2 = (np.asarray(v, "float64") for v in layer.mlp_layers[f"{name}_2"].weights)
    return np.tanh(np.tanh(x @ w1 + b1) @ w2 + b2)


def unbind(memory, x, y):
    return np.einsum("be,br,berf->bf", x, y, memory)


def reference_forward(model, story, query, mask_pad):
    """Schlag & Schmidhuber 2018, eqs. (5)-(20), float64, with the model's own weights."""
    encoder = model.get_layer("sentence_encoder")
    memory_layer = model.get_layer("tpr_memory")
    emb = np.asarray(encoder.embeddings, "float64")
    pos = np.asarray(encoder.positions, "float64")

    def encode(ids):
        d = emb[ids]
        if mask_pad:
            d = d * (ids != 0)[..., None]
        return np.einsum("...wd,wd->...d", d, pos / pos.shape[0])

    s, q = encode(story), encode(query)
    e1, e2 = mlp(s, memory_layer, "e1"), mlp(s, memory_layer, "e2")
    r1, r2, r3 = (mlp(s, memory_layer, k) for k in ("r1", "r2", "r3"))
    story_len = (story != 0).any(-1).sum(-1)
    memory = np.zeros((story.shape[0], E, R, E))
    for t in range(story.shape[1]):
        a1, a2 = e1[:, t], e2[:, t]
        w_hat = unbind(memory, a1, r1[:, t])
        m_hat = unbind(memory, a1, r2[:, t])
        b_hat = unbind(memory, a2, r3[:, t])
        delta = (np.einsum("be,br,bf->berf", a1, r1[:, t], a2 - w_hat)
                 + np.einsum("be,br,bf->berf", a1, r2[:, t], w_hat - m_hat)
                 + np.einsum("be,br,bf->berf", a2, r3[:, t], a1 - b_hat))
        memory = memory + (t < story_len)[:, None, None, None] * delta
    gains, biases = np.asarray(memory_layer.ln_gain), np.asarray(memory_layer.ln_bias)
    entity, total = mlp(q, memory_layer, "n"), 0.0
    for step in range(3):
        x = unbind(memory, entity, mlp(q, memory_layer, f"l{step + 1}"))
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        entity = gains[step] * (x - mu) / np.sqrt(var + 1e-7) + biases[step]
        total = total + entity
    z = np.asarray(model.get_layer("output_projection").kernel, "float64")
    return total @ z


def random_batch(seed=0, batch=3, sentences=S):
    rng = np.random.RandomState(seed)
    story = rng.randint(1, V, size=(batch, sentences, W)).astype("int32")
    story[:, :, 3:] = 0  # padded words
    lengths = np.array([sentences, 2, 1][:batch])
    story[np.arange(sentences)[None, :] >= lengths[:, None]] = 0  # padded sentences
    query = rng.randint(1, V, size=(batch, W)).astype("int32")
    query[:, 4:] = 0
    return {"story": story, "query": query}


def build(mask_pad=True, sentences=S, implementation="factored"):
    model = tpr_rnn(V, sentences, W, entity_dim=E, relation_dim=R, hidden_dim=H,
                    mask_pad_words=mask_pad, implementation=implementation)
    memory = model.get_layer("tpr_memory")
    memory.ln_gain.assign(np.array([1.2, 0.8, 1.1], "float32"))
    memory.ln_bias.assign(np.array([0.1, -0.05, 0.02], "float32"))
    encoder = model.get_layer("sentence_encoder")
    rng = np.random.RandomState(3)  # positions away from their all-ones start
    encoder.positions.assign(rng.uniform(0.5, 1.5, (W, V)).astype("float32"))
    return model


@pytest.mark.parametrize("mask_pad", [True, False])
@pytest.mark.parametrize("implementation", ["factored", "dense"])
def test_matches_numpy_reference(mask_pad, implementation):
    model = build(mask_pad, implementation=implementation)
    batch = random_batch()
    logits = np.asarray(model(batch))
    expected = reference_forward(model, batch["story"], batch["query"], mask_pad)
    np.testing.assert_allclose(logits, expected, atol=1e-5)


def test_shapes_and_defaults():
    model = tpr_rnn(30, 7, 6)
    memory = model.get_layer("tpr_memory")
    assert (memory.entity_dim, memory.relation_dim, memory.hidden_dim) == (15, 10, 40)
    assert model.get_layer("sentence_encoder").embeddings.shape == (30, 30)  # D = V
    assert model.get_layer("output_projection").kernel.shape == (15, 30)
    assert model.get_layer("output_projection").bias is None
    assert tuple(model.output.shape) == (None, 30)


def test_encoder_pad_modes():
    ids = np.array([[3, 4, 0, 0, 0]], "int32")
    masked, unmasked = TPRSentenceEncoder(V), TPRSentenceEncoder(V, mask_pad_words=False)
    masked(ids)
    unmasked(ids)
    unmasked.set_weights(masked.get_weights())
    emb = np.asarray(masked.embeddings)
    np.testing.assert_allclose(np.asarray(masked(ids))[0], (emb[3] + emb[4]) / W, atol=1e-6)
    np.testing.assert_allclose(np.asarray(unmasked(ids))[0], (emb[3] + emb[4] + 3 * emb[0]) / W,
                               atol=1e-6)


def test_story_padding_invariance():
    short, long = build(sentences=S), build(sentences=S + 3)
    long.set_weights(short.get_weights())  # no weight depends on S
    batch = random_batch(seed=1)
    padded = dict(batch, story=np.concatenate(
        [batch["story"], np.zeros((3, 3, W), "int32")], axis=1))
    np.testing.assert_array_equal(np.asarray(short(batch)), np.asarray(long(padded)))


def test_vocabulary_relabelling_equivariance():
    model, relabelled = build(), build()
    perm = np.concatenate([[0], 1 + np.random.RandomState(0).permutation(V - 1)])
    inverse = np.argsort(perm)
    relabelled.set_weights(model.get_weights())
    encoder = relabelled.get_layer("sentence_encoder")
    encoder.embeddings.assign(np.asarray(model.get_layer("sentence_encoder").embeddings)[inverse])
    z = np.asarray(model.get_layer("output_projection").kernel)
    relabelled.get_layer("output_projection").kernel.assign(z[:, inverse])
    batch = random_batch(seed=2)
    moved = {k: perm[v].astype("int32") for k, v in batch.items()}
    np.testing.assert_allclose(np.asarray(relabelled(moved))[:, perm], np.asarray(model(batch)),
                               atol=1e-5)


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match=r"max_sentences.*received max_sentences=0"):
        tpr_rnn(V, 0, W)
    with pytest.raises(ValueError, match=r"mask_pad_words.*'no'"):
        TPRSentenceEncoder(V, mask_pad_words="no")
    with pytest.raises(ValueError, match=r"vocab_size.*received vocab_size=-3"):
        TPRSentenceEncoder(-3)


@pytest.mark.slow
def test_overfits_a_few_generated_task_1_stories():
    from keras_relational.environments import babi

    examples = babi.generate_task(1, 32, seed=0)
    vocab = babi.Vocabulary.from_examples(examples)
    dims = babi.dimensions(examples)
    arrays = babi.vectorize(examples, vocab, *dims)
    keras.utils.set_random_seed(0)
    model = tpr_rnn(len(vocab), *dims)
    model.compile(keras.optimizers.Nadam(1e-2, global_clipnorm=5.0),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"], jit_compile=False)
    inputs = {"story": arrays["story"], "query": arrays["query"]}
    assert len(arrays["answer"]) == 32  # one batch
    # 150 full-batch epochs as one pass over 150 copies (one dataset iterator, not 150; a batch
    # is the whole set either way, so the updates are those of fit(..., epochs=150)).
    repeated = {name: np.concatenate([value] * 150) for name, value in inputs.items()}
    model.fit(repeated, np.concatenate([arrays["answer"]] * 150), batch_size=32, epochs=1,
              shuffle=False, verbose=0)
    _, accuracy = model.evaluate(inputs, arrays["answer"], verbose=0)
    assert accuracy == 1.0
