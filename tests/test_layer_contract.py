"""The contract helpers must catch the defects they exist for."""

import keras
import numpy as np
import pytest
from contract_fixtures import BackendDependent
from layer_contract import check_config_round_trip, check_fresh_process, functional_model


class _ForgetsItsConfig(keras.layers.Layer):
    def __init__(self, scale=1.0, **kwargs):
        super().__init__(**kwargs)
        self.scale = scale

    def call(self, inputs):
        return inputs * self.scale

    def get_config(self):
        config = super().get_config()
        config.pop("scale", None)  # the defect: an __init__ argument missing from the config
        return config


def test_config_check_catches_a_missing_argument():
    x = np.ones((2, 3), "float32")
    with pytest.raises(AssertionError):
        check_config_round_trip(_ForgetsItsConfig(scale=2.0), x)


@pytest.mark.subprocess
def test_fresh_process_check_catches_a_jax_mismatch(tmp_path):
    x = np.ones((2, 3), "float32")
    model = functional_model(BackendDependent(), x)
    with pytest.raises(AssertionError, match="jax .fresh process. outputs"):
        check_fresh_process(model, x, tmp_path, extra_imports=["contract_fixtures"])
