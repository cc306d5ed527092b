"""The pictures: learning curves of any run, and the agents' attention over a frame."""

import os

import numpy as np
import pytest

from keras_relational.experiments import plots_lib


def _is_png(path):
    with open(path, "rb") as f:
        return f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_the_simplicial_agents_pair_attention_over_a_bridge_frame(tmp_path):
    from keras_relational.analysis import simplicial_attention
    from keras_relational.models import boxworld_agents

    model = boxworld_agents.simplicial_agent(key_dim=4, simplicial_key_dim=4, model_dim=8,
                                             mlp_hidden_units=(8,), head_units=(8,))
    path = plots_lib.plot_agent_attention(model, str(tmp_path / "pairs.png"), steps=1)
    assert _is_png(path)
    frames = np.zeros((2, 7, 10, 3), "uint8")
    scores = simplicial_attention.attention_maps(model, frames)
    assert len(scores) == 2  # Clift et al.'s two iterations
    assert scores[0]["one_simplicial"].shape == (2, 2, 42, 42)
    two = scores[-1]["two_simplicial"]
    assert two.shape == (2, 1, 40, 2, 2)
    np.testing.assert_allclose(two.sum(axis=(-1, -2)), 1.0, rtol=1e-5)
    # Fig. 7's layout: rows the pairs (1,1), (1,2), (2,1), (2,2), columns the queries.
    matrix = simplicial_attention.pair_matrix(two[0])
    assert matrix.shape == (1, 4, 40)
    np.testing.assert_array_equal(matrix[0, 1], two[0, 0, :, 0, 1])
    with pytest.raises(ValueError, match="`query_entity` must be in \\[0, 40\\), received 40"):
        simplicial_attention.plot_simplicial_attention(frames[0], scores, query_entity=40)


def test_a_baseline_agent_has_no_attention_to_draw(tmp_path):
    from keras_relational.models import boxworld_agents

    model = boxworld_agents.baseline_agent(observation_shape=(8, 8, 3), num_residual_blocks=1,
                                           head_units=(8,))
    with pytest.raises(ValueError, match="no attention to draw"):
        plots_lib.plot_agent_attention(model, str(tmp_path / "none.png"))


def test_plot_results_draws_any_runs_scalars_and_names_an_empty_directory(tmp_path):
    import tensorflow as tf

    writer = tf.summary.create_file_writer(str(tmp_path / "run" / "train"))
    with writer.as_default():
        for step in range(3):
            tf.summary.scalar("epoch_loss", 1.0 / (step + 1), step=step)
    writer.flush()
    runs = plots_lib.read_scalars(str(tmp_path / "run"))
    steps, values, _ = runs["train"]["epoch_loss"]
    assert list(steps) == [0, 1, 2] and np.allclose(values, [1.0, 0.5, 1 / 3])
    path = plots_lib.plot_learning_curves(str(tmp_path / "run"))
    assert path == os.path.join(tmp_path, "run", "learning_curves.png") and _is_png(path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="No TensorBoard scalars or result.json"):
        plots_lib.plot_learning_curves(str(tmp_path / "empty"))


def test_plot_transfer_curves_draws_a_panel_per_architecture_and_rejects_none(tmp_path):
    curves = {"PrediNet": {"stage 1": [(5000, 0.5), (10000, 0.9)], "stage 3": [(5000, 0.95)]},
              "MHA": {"stage 1": [], "stage 3": [(5000, 0.6)]}}
    path = plots_lib.plot_transfer_curves(curves, str(tmp_path / "a" / "curves.png"), title="A")
    with open(path, "rb") as f:
        assert f.read(4) == b"\x89PNG"
    with pytest.raises(ValueError, match="`curves`: expected at least one architecture"):
        plots_lib.plot_transfer_curves({}, str(tmp_path / "none.png"))
