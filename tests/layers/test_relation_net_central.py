import numpy as np
import pytest
from layer_contract import run_layer_contract
from reference_relational import relations_game_entities as make_entities
from reference_relational import relu

from keras_relational.layers.relation_net_central import RelationNetCentral


def rn_reference(entities, w1, w2):
    b, n, m = entities.shape
    s = np.repeat(entities, n, axis=1)
    r = np.tile(entities, (1, n, 1))
    assert s.shape[1] == n * n  # every ordered pair, self-pairs included
    h = relu(relu(np.concatenate([s, r], -1) @ w1) @ w2)
    return h.mean(axis=1)


def test_relation_net_matches_reference_and_is_permutation_invariant():
    entities = make_entities(4, n=9, m=6)
    layer = RelationNetCentral(hidden_units=11, output_dim=7)
    out = np.asarray(layer(entities))
    expected = rn_reference(entities.astype(np.float64), np.asarray(layer.pair_kernel),
                            np.asarray(layer.output_kernel))
    np.testing.assert_allclose(out, expected, atol=1e-5)
    perm = np.random.RandomState(0).permutation(9)
    np.testing.assert_allclose(np.asarray(layer(entities[:, perm])), out, atol=1e-5)
    assert len(layer.trainable_weights) == 2  # no biases



def test_errors_name_the_argument():
    with pytest.raises(ValueError, match=r"output_dim.*received output_dim=0"):
        RelationNetCentral(output_dim=0)
    with pytest.raises(ValueError, match=r"hidden_units.*received hidden_units=2.5"):
        RelationNetCentral(hidden_units=2.5)
    with pytest.raises(ValueError, match=r"rank 3.*received shape \(2, 5\)"):
        RelationNetCentral()(np.zeros((2, 5), "float32"))


@pytest.mark.subprocess
def test_layer_contract(tmp_path):
    run_layer_contract(lambda: RelationNetCentral(hidden_units=4, output_dim=3),
                       make_entities(7, n=9, m=6), tmp_path)
