import numpy as np
import pytest
from layer_contract import run_layer_contract

import keras_relational


def reference_entities(feature_map, mode):
    """NumPy reference of Zambaldi et al. Sec. 2.2 / PrediNet's coordinates."""
    b, h, w, _ = feature_map.shape
    if mode == "symmetric":
        xs, ys = np.linspace(-1.0, 1.0, w), np.linspace(-1.0, 1.0, h)
    else:
        xs, ys = np.arange(w) / w, np.arange(h) / h
    x = np.broadcast_to(xs[None, None, :, None], (b, h, w, 1))
    y = np.broadcast_to(ys[None, :, None, None], (b, h, w, 1))
    return np.concatenate([feature_map, x, y], axis=-1).reshape(b, h * w, -1)


@pytest.mark.parametrize("mode", ["symmetric", "unit"])
@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (1, 1, 1, 2), (3, 7, 2, 1)])
def test_matches_numpy_reference(mode, shape):
    feature_map = np.random.RandomState(0).normal(size=shape).astype("float32")
    entities = keras_relational.SpatialEntities(coordinate_mode=mode)(feature_map)
    np.testing.assert_allclose(np.asarray(entities), reference_entities(feature_map, mode),
                               atol=1e-6)


def test_corners_and_index_map():
    layer = keras_relational.SpatialEntities()
    entities = np.asarray(layer(np.zeros((1, 5, 6, 1), "float32")))
    assert tuple(entities[0, 0, 1:]) == (-1.0, -1.0)
    assert tuple(entities[0, -1, 1:]) == (1.0, 1.0)
    index = layer.entity_index(2, 3, width=6)
    assert index == 15 and layer.cell_of_entity(index, width=6) == (2, 3)
    # Entity 15 carries the coordinates of cell (row 2, col 3).
    np.testing.assert_allclose(entities[0, index, 1:], [-1 + 2 * 3 / 5, -1 + 2 * 2 / 4], atol=1e-6)


def test_coordinates_do_not_depend_on_content():
    layer = keras_relational.SpatialEntities()
    rng = np.random.RandomState(1)
    a = np.asarray(layer(rng.normal(size=(2, 3, 3, 4)).astype("float32")))
    b = np.asarray(layer(rng.normal(size=(2, 3, 3, 4)).astype("float32")))
    np.testing.assert_array_equal(a[..., -2:], b[..., -2:])


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match="coordinate_mode.*'polar'"):
        keras_relational.SpatialEntities(coordinate_mode="polar")
    with pytest.raises(ValueError, match=r"rank 4.*received shape \(2, 3, 4\)"):
        keras_relational.SpatialEntities()(np.zeros((2, 3, 4), "float32"))


@pytest.mark.subprocess
def test_layer_contract(tmp_path):
    feature_map = np.random.RandomState(2).normal(size=(2, 3, 4, 5)).astype("float32")
    # No weights: the fit step is not applicable; everything else is checked.
    run_layer_contract(lambda: keras_relational.SpatialEntities(coordinate_mode="unit"),
                       feature_map, tmp_path, fit=False)
