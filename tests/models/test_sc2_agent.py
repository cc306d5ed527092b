import numpy as np
import pytest

from keras_relational.models import sc2_agent as sc2

# Tiny inputs (8x8 screen, 2 feature layers each, 10 functions) keep the test fast; the core sizes
# are the paper's (Zambaldi et al. 2019, Tables 2-3), whose parameter counts do not depend on them.
TINY = dict(screen_size=8, screen_layers=(0, 5), minimap_layers=(3, 0), num_functions=10)


def _inputs(model, batch=2, seed=0):
    rng = np.random.default_rng(seed)
    inputs = {key: rng.integers(0, 3, (batch,) + tuple(spec.shape[1:])).astype(spec.dtype)
              for key, spec in model.input.items()}
    inputs["available_actions"][:] = 0
    inputs["available_actions"][:, [0, 3]] = 1
    return inputs


def _params(model, name):
    return model.get_layer("sc2_trunk").get_layer(name).count_params()


@pytest.fixture(scope="module")
def relational():
    return sc2.sc2_agent(num_blocks=3, **TINY)


def test_relational_parameter_counts_follow_the_paper_sizes(relational):
    # The paper states no totals, so each part is checked against the count its sizes imply.
    # ConvLSTM, 96 channels, 3x3, input 2 * 32 stem channels: 4 gates x (3*3*(64 + 96) + bias).
    assert _params(relational, "conv_lstm") == 4 * 96 * (9 * (64 + 96)) + 4 * 96
    # Relational module, H = 3, d = 32 (width 96), g_theta hidden 384, shared over the 3 blocks:
    width = 3 * 32
    expected = ((96 + 2) * width + width  # projection of the 96 + 2 coordinate channels
                + width * 3 * width + 3 * width + 2 * 3 * width  # Q/K/V and their joint LN
                + width * 384 + 384 + 384 * width + width  # g_theta
                + 2 * width)  # output LN
    assert _params(relational, "relational_module") == expected
    heads = relational.get_layer("sc2_argument_heads")
    # Conv2DTranspose 16 channels 4x4 stride 2 (Table 2): 2 -> 4 -> 8.
    assert heads.get_layer("upsample2").count_params() == 4 * 4 * 96 * 16 + 16
    assert heads.get_layer("upsample4").count_params() == 4 * 4 * 16 * 16 + 16
    assert heads.get_layer("screen_logits").count_params() == (16 + 16) + 1
    assert _params(relational, "nonspatial_fc1") == 512 * 512 + 512
    assert _params(relational, "policy_fc0") == (64 + 512) * 256 + 256


def test_shared_blocks_do_not_add_parameters(relational):
    assert sc2.sc2_agent(num_blocks=1, **TINY).count_params() == relational.count_params()


def test_forward_pass_masks_unavailable_functions(relational):
    h, c = sc2.initial_state(relational, 2)
    inputs = _inputs(relational)
    inputs["state_h"], inputs["state_c"] = np.asarray(h), np.asarray(c)
    outputs = relational(inputs)
    logits = np.asarray(outputs["function_logits"])
    assert logits.shape == (2, 10) and logits.dtype == np.float32
    assert np.all(logits[:, [1, 2, 4]] <= sc2.MASKED_LOGIT)
    assert np.all(np.abs(logits[:, [0, 3]]) < 1e3)
    assert tuple(outputs["value"].shape) == (2,)
    assert tuple(outputs["state_h"].shape) == (2, 2, 2, 96)
    assert tuple(outputs["screen"].shape) == (2, 64)
    for name, size in sc2.NON_SPATIAL_ARGUMENTS:
        assert tuple(outputs[name].shape) == (2, size)
    # The trunk alone gives the same function logits (the actor's first stage).
    trunk = relational.get_layer("sc2_trunk")
    trunk_out = trunk({k: inputs[k] for k in trunk.input})
    np.testing.assert_allclose(np.asarray(trunk_out["function_logits"]), logits, rtol=1e-5)


def test_control_agent_builds_and_runs():
    model = sc2.sc2_agent(core="control", **TINY)
    outputs = model(_inputs(model))
    assert tuple(outputs["minimap"].shape) == (2, 64)
    trunk = model.get_layer("sc2_trunk")
    # Zambaldi et al. 2019, App. C: 4 blocks x 3 convs, 32 channels, first 4x4.
    assert trunk.get_layer("control_block0_conv0").count_params() == 4 * 4 * 96 * 32 + 32
    assert trunk.get_layer("control_block3_conv2").count_params() == 3 * 3 * 32 * 32 + 32


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="core"):
        sc2.sc2_agent(core="fully_conv", **TINY)
    with pytest.raises(ValueError, match="screen_size"):
        sc2.sc2_agent(screen_size=10)


def test_composite_log_prob_counts_only_used_arguments(relational):
    outputs = relational(_inputs(relational))
    names = sc2.SPATIAL_ARGUMENTS + tuple(name for name, _ in sc2.NON_SPATIAL_ARGUMENTS)
    mask = np.zeros((10, len(names)), "float32")
    mask[3, names.index("screen")] = mask[3, names.index("queued")] = 1.0
    action = {name: np.array([1, 1], "int32") for name in names}
    action["function"] = np.array([3, 0], "int32")
    log_prob, entropy = sc2.composite_log_prob_and_entropy(outputs, action, mask)

    def log_softmax(x):
        x = np.asarray(x, "float64")
        return x - x.max(-1, keepdims=True) - np.log(np.exp(x - x.max(-1, keepdims=True))
                                                     .sum(-1, keepdims=True))

    fn = log_softmax(outputs["function_logits"])
    expected = [fn[0, 3] + log_softmax(outputs["screen"])[0, 1]
                + log_softmax(outputs["queued"])[0, 1], fn[1, 0]]
    np.testing.assert_allclose(np.asarray(log_prob), expected, rtol=1e-5, atol=1e-5)
    p = np.exp(fn[1])
    np.testing.assert_allclose(np.asarray(entropy)[1], -(p * np.where(p > 0, fn[1], 0)).sum(),
                               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("core", ["relational", "control"])
def test_keras_file_round_trip(tmp_path, core):
    # The stem's per-layer index bounds live in a serialisable layer (CategoricalIndices), so the
    # whole agent, with its two sub-models, saves and reloads as a .keras file.
    import keras

    model = sc2.sc2_agent(core=core, stem_channels=4, lstm_channels=8, key_dim=8,
                          mlp_units=(16,), num_blocks=1, num_heads=1, **TINY)
    path = str(tmp_path / "sc2_agent.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    inputs = _inputs(model)
    inputs["screen"][..., 1] = 7  # beyond the 5 values of layer 1: clipped to 4 in both
    expected, got = model(inputs), loaded(inputs)
    assert set(got) == set(expected)
    for key in expected:
        np.testing.assert_array_equal(np.asarray(got[key]), np.asarray(expected[key]), key)
    trunk = loaded.get_layer("sc2_trunk")
    np.testing.assert_array_equal(
        np.asarray(trunk({k: inputs[k] for k in trunk.input})["value"]),
        np.asarray(expected["value"]))


def test_categorical_indices_clip_and_offset_each_layer():
    layer = sc2.CategoricalIndices([0, 2], [3, 5])
    features = np.array([[[-1.0, 9.0, 7.0], [2.0, 0.0, 4.0]]], np.float32)
    np.testing.assert_array_equal(np.asarray(layer(features)), [[[0, 3 + 4], [2, 3 + 4]]])
    assert layer.compute_output_shape((None, 8, 8, 3)) == (None, 8, 8, 2)
    restored = sc2.CategoricalIndices.from_config(layer.get_config())
    assert (restored.channels, restored.sizes) == ([0, 2], [3, 5])
    with pytest.raises(ValueError, match="one size per channel"):
        sc2.CategoricalIndices([0, 1], [3])
