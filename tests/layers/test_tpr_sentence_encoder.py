import numpy as np
import pytest
from layer_contract import run_layer_contract

import keras_relational
from keras_relational.layers.tpr_sentence_encoder import TPRSentenceEncoder

V, W = 12, 5


def _ids(seed=0, shape=(2, 3, W)):
    ids = np.random.RandomState(seed).randint(1, V, size=shape).astype("int32")
    ids[..., -2:] = 0  # PAD at the end of every sentence
    return ids


def reference(ids, embeddings, positions, mask_pad_words):
    """Eq. (5): ``s = sum_i Emb[w_i] * p_i``, with the stored positions divided by W."""
    vectors = embeddings.astype("float64")[ids]  # [..., W, D]
    if mask_pad_words:
        vectors = vectors * (ids != 0)[..., None]
    return (vectors * positions / positions.shape[0]).sum(-2)


@pytest.mark.parametrize("mask_pad_words", [True, False])
def test_matches_numpy_reference(mask_pad_words):
    ids = _ids()
    layer = TPRSentenceEncoder(V, symbol_dim=7, mask_pad_words=mask_pad_words)
    layer(ids)
    rng = np.random.RandomState(1)
    layer.positions.assign(rng.normal(size=(W, 7)).astype("float32"))
    outputs = np.asarray(layer(ids))
    expected = reference(ids, np.asarray(layer.embeddings), np.asarray(layer.positions),
                         mask_pad_words)
    np.testing.assert_allclose(outputs, expected, atol=1e-5)
    assert outputs.shape == (2, 3, 7)


def test_default_symbol_dim_is_the_vocabulary_and_questions_share_the_weights():
    layer = keras_relational.TPRSentenceEncoder(V)
    stories, question = _ids(2), _ids(3, shape=(2, W))
    assert tuple(layer(stories).shape) == (2, 3, V)
    np.testing.assert_allclose(np.asarray(layer(question)),
                               np.asarray(layer(question[:, None]))[:, 0], atol=1e-6)
    assert len(layer.weights) == 2


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match=r"symbol_dim.*received symbol_dim=0"):
        TPRSentenceEncoder(V, symbol_dim=0)
    with pytest.raises(ValueError, match=r"number of words W.*known"):
        TPRSentenceEncoder(V).build((None, None))


@pytest.mark.subprocess
def test_layer_contract(tmp_path):
    run_layer_contract(lambda: TPRSentenceEncoder(V, symbol_dim=6, mask_pad_words=False),
                       _ids(4), tmp_path)
