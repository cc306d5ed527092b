"""The Atari agents of Shanahan et al. 2020, Supplement S11: Table S3's parameter totals."""

import numpy as np
import pytest

from keras_relational.models import atari_agents


def count(model, prefix):
    return sum(int(np.prod(w.shape)) for w in model.weights if w.path.startswith(prefix))


@pytest.mark.parametrize("builder, total", [
    (atari_agents.atari_baseline_agent, 5_098_515),  # Table S3, baseline agent
    (atari_agents.atari_predinet_agent, 1_590_355),  # Table S3, PrediNet agent
])
def test_parameter_totals_match_table_s3(builder, total):
    # Full 210x160x3 frames, 18 actions, LSTM(256) fed by the torso output and 1 extra scalar,
    # value MLP [128, 1], policy MLP [64, 18].
    model = builder()
    assert model.count_params() == total
    torso = model.get_layer("torso").layer
    vision = sum(int(np.prod(w.shape)) for layer in torso.layers
                 if layer.name.startswith("vision") for w in layer.weights)
    assert vision == 97_600
    assert model.get_layer("lstm").count_params() == (
        (1088 if "predinet" in model.name else 256) + 1 + 256) * 1024 + 1024


def test_predinet_agent_central_module_and_shapes():
    model = atari_agents.atari_predinet_agent()
    central = model.get_layer("torso").layer.get_layer("predinet")
    assert central.count_params() == 63_808  # query CNN 28,320 + 2 x 64x256 + W_K + W_S
    assert central.num_entities == 27 * 20 and central.features == 34
    assert tuple(central.query_kernel_1.shape) == (64, 16 * 16)
    frames = np.random.default_rng(0).integers(0, 256, (1, 2, 210, 160, 3)).astype("uint8")
    logits, value = model({"frames": frames, "reward": np.zeros((1, 2), "float32")})
    assert tuple(logits.shape) == (1, 2, 18) and tuple(value.shape) == (1, 2)


def test_feed_forward_variant():
    model = atari_agents.atari_predinet_agent(recurrent=False, num_actions=6)
    logits, value = model(np.zeros((2, 210, 160, 3), "uint8"))
    assert tuple(logits.shape) == (2, 6) and tuple(value.shape) == (2,)
