import numpy as np
import pytest
from layer_contract import run_layer_contract

import keras_relational


def _entities(seed=0):
    return np.random.RandomState(seed).normal(size=(3, 7, 4)).astype("float32")


def test_feature_wise_max_and_permutation_invariance():
    x = _entities()
    pooled = np.asarray(keras_relational.EntityMaxPool()(x))
    np.testing.assert_array_equal(pooled, x.max(axis=1))
    perm = np.random.RandomState(1).permutation(7)
    np.testing.assert_array_equal(np.asarray(keras_relational.EntityMaxPool()(x[:, perm])), pooled)


def test_mask_ignores_entities_and_empty_sets_pool_to_zero():
    x = _entities()
    x[0, 5:] = 1e6  # would win the max if not masked
    mask = np.ones((3, 7), bool)
    mask[0, 5:] = False
    mask[2] = False
    pooled = np.asarray(keras_relational.EntityMaxPool()(x, mask=mask))
    np.testing.assert_array_equal(pooled[0], x[0, :5].max(axis=0))
    np.testing.assert_array_equal(pooled[1], x[1].max(axis=0))
    np.testing.assert_array_equal(pooled[2], 0.0)


def test_wrong_rank_is_a_clear_error():
    with pytest.raises(ValueError, match=r"EntityMaxPool expects `entities` of rank 3"):
        keras_relational.EntityMaxPool()(np.zeros((2, 3), "float32"))


@pytest.mark.subprocess
def test_layer_contract(tmp_path):
    run_layer_contract(keras_relational.EntityMaxPool, _entities(), tmp_path, fit=False)
