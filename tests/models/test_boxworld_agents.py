import numpy as np
import pytest

from keras_relational.models import boxworld_agents


@pytest.mark.parametrize("builder, kwargs, expected", [
    # Zambaldi et al. 2019, App. B sizes with H = 2, K = 1, SAME padding -> 257,799.
    (boxworld_agents.relational_agent, {}, 257_799),
    # Clift et al. 2020, Sec. 4 sizes: simplicial 365,513, their relational agent 239,241.
    (boxworld_agents.simplicial_agent, {}, 365_513),
    (boxworld_agents.simplicial_agent, {"use_simplicial": False}, 239_241),
])
def test_parameter_counts_match_the_specs(builder, kwargs, expected):
    assert builder(**kwargs).count_params() == expected


def test_shared_blocks_do_not_add_parameters():
    one = boxworld_agents.relational_agent(num_blocks=1).count_params()
    assert boxworld_agents.relational_agent(num_blocks=4).count_params() == one
    assert boxworld_agents.relational_agent(num_blocks=2, share_weights=False).count_params() > one


@pytest.mark.parametrize("builder, shape", [
    (boxworld_agents.relational_agent, (14, 14, 3)),
    (boxworld_agents.baseline_agent, (14, 14, 3)),
    (boxworld_agents.simplicial_agent, (7, 10, 3)),
])
def test_outputs_and_pixel_scaling(builder, shape):
    model = builder(observation_shape=shape)
    frames = np.random.RandomState(0).randint(0, 256, size=(3, *shape)).astype("uint8")
    logits, value = model(frames)
    assert tuple(logits.shape) == (3, 4) and tuple(value.shape) == (3,)
    # uint8 frames and the same frames as floats give the same outputs (scaling is inside).
    float_logits, _ = model(frames.astype("float32"))
    np.testing.assert_allclose(np.asarray(logits), np.asarray(float_logits), atol=1e-5)


def test_attention_outputs_for_analysis():
    model = boxworld_agents.relational_agent(num_blocks=2, return_attention_scores=True)
    _, _, attention = model(np.zeros((2, 14, 14, 3), "uint8"))
    assert tuple(attention.shape) == (2, 2, 2, 196, 196)
    np.testing.assert_allclose(np.asarray(attention).sum(-1), 1.0, atol=1e-5)


def test_baseline_readout_is_validated():
    with pytest.raises(ValueError, match="readout.*'mean'"):
        boxworld_agents.baseline_agent(readout="mean")


def test_attention_maps_of_a_model_without_attention_outputs(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    from keras_relational.analysis import boxworld_attention as attention_analysis

    model = boxworld_agents.relational_agent(num_blocks=2, key_dim=8)
    frames = np.random.RandomState(1).randint(0, 256, size=(2, 14, 14, 3)).astype("uint8")
    weights = attention_analysis.attention_maps(model, frames)
    assert weights.shape == (2, 2, 2, 196, 196)
    with_scores = boxworld_agents.relational_agent(num_blocks=2, key_dim=8,
                                                   return_attention_scores=True)
    with_scores.set_weights(model.get_weights())
    np.testing.assert_allclose(weights, np.asarray(with_scores(frames)[2]), atol=1e-5)
    top = attention_analysis.top_attended(weights[0, -1, 0, 30], k=3)
    assert len(top) == 3 and top[0][1] >= top[1][1] >= top[2][1]
    figure = attention_analysis.plot_attention(frames[0], weights[0, -1], source_entity=30)
    figure.savefig(tmp_path / "attention.png")
    assert (tmp_path / "attention.png").stat().st_size > 1000
    centres = attention_analysis.entity_centres((14, 14), (14, 14))
    np.testing.assert_allclose(centres[30], [2 + 1.0, 2 + 1.0])  # entity 30 = cell (2, 2)
    with np.testing.assert_raises(ValueError):
        attention_analysis.plot_attention(frames[0], weights[0, -1], source_entity=500)
