"""UnrollQueue's unroll check: the structure, dtypes and shapes of ``[B, T+1] + data_spec``."""

import numpy as np
import pytest
import tensorflow as tf

from keras_relational.agents.tf_agents.unroll_queue import check_unroll

_SPEC = {"observation": tf.TensorSpec([3], tf.uint8), "reward": tf.TensorSpec([], tf.float32)}


def test_check_unroll_names_the_field_expected_and_received():
    good = {"observation": np.zeros((2, 4, 3), np.uint8), "reward": np.zeros((2, 4), np.float32)}
    check_unroll(good, _SPEC, (2, 4))
    bad = dict(good, reward=np.zeros((2, 4), np.float64))
    with pytest.raises(ValueError, match=r"An actor's unroll field reward must be "
                                         r"float32\[2, 4\].*received float64\[2, 4\]"):
        check_unroll(bad, _SPEC, (2, 4), "An actor's unroll")
    with pytest.raises(ValueError, match="does not have the structure"):
        check_unroll({"observation": good["observation"]}, _SPEC, (2, 4))
