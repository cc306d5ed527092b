import numpy as np
import pytest
from layer_contract import run_layer_contract
from reference_relational import relations_game_entities as make_entities
from reference_relational import relu

from keras_relational.layers.mlp_central import MLPCentral


def test_mlp_matches_numpy_reference():
    entities = make_entities(3)
    layer = MLPCentral(hidden_units=(7, 5))
    out = np.asarray(layer(entities))
    h = entities.reshape(2, -1).astype(np.float64)
    for kernel, bias in layer.dense_weights:
        h = relu(h @ np.asarray(kernel) + np.asarray(bias))
    np.testing.assert_allclose(out, h, atol=1e-5)
    assert out.shape == (2, 5)



def test_mlp2_defaults_and_initialisers():
    layer = MLPCentral(hidden_units=(1024, 640))
    layer.build((None, 25, 34))
    assert layer.count_params() == 850 * 1024 + 1024 + 1024 * 640 + 640
    for kernel, bias in layer.dense_weights:
        assert np.abs(np.asarray(kernel)).max() <= 0.2 + 1e-6  # truncated at 2 sigma
        np.testing.assert_array_equal(np.asarray(bias), np.float32(0.1))


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match=r"hidden_units.*received hidden_units=\(\)"):
        MLPCentral(hidden_units=())
    with pytest.raises(ValueError, match=r"hidden_units.*received hidden_units=0"):
        MLPCentral(hidden_units=(8, 0))
    with pytest.raises(ValueError, match=r"number of entities N.*\(None, None, 6\)"):
        MLPCentral().build((None, None, 6))


@pytest.mark.subprocess
def test_layer_contract(tmp_path):
    run_layer_contract(lambda: MLPCentral(hidden_units=(6, 5)), make_entities(7, n=9, m=6),
                       tmp_path)
