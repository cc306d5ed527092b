"""The papers' presets: each trains end to end at tiny scale; overrides win; pieces resume."""

import json
import os

import pytest

from keras_relational.agents import curves, presets
from keras_relational.agents.tf_agents.train_eval import train_eval

# Grappler off: its passes over each new function cost these tiny runs more than they save.
pytestmark = pytest.mark.usefixtures("no_graph_optimizer")

# Tiny sizes over every preset (the preset's levels, agent, optimizer and observations stay);
# Clift et al.'s agents iterate one block, not their two (the same weights again; the layers'
# tests check several iterations).
_TINY = dict(num_envs=2, unroll_length=3, num_iterations=1, eval_episodes=1, eval_num_envs=1,
             log_interval=1, jit_compile=False, actor_jit_compile=False)
_TINY_MODEL = {
    "relational": dict(key_dim=4, mlp_hidden_units=(8,), head_units=(8,)),
    "baseline": dict(num_residual_blocks=1, head_units=(8,)),
    "simplicial": dict(num_blocks=1, key_dim=4, simplicial_key_dim=4, mlp_hidden_units=(8,),
                       head_units=(8,)),
    "clift_relational": dict(num_blocks=1, key_dim=4, mlp_hidden_units=(8,), head_units=(8,)),
}


def _tiny_config(name, **overrides):
    preset = presets.PRESETS[name]
    level = dict(max_steps=10)
    return presets.train_config(name, level=level, model=_TINY_MODEL[preset["config"]["agent"]],
                                **dict(_TINY, **overrides))


@pytest.mark.parametrize("name", sorted(presets.PRESETS))
def test_every_preset_trains_end_to_end_at_tiny_scale(tmp_path, name, no_exports):
    preset = presets.PRESETS[name]
    config = _tiny_config(name)
    # The preset's own settings survive the tiny overrides.
    assert config.agent == preset["config"]["agent"] and config.env_name == preset["env"]
    assert config.optimizer == preset["config"]["optimizer"]
    for field, value in preset["level"].items():
        assert getattr(config.environment, field) == value, field
    result = train_eval(str(tmp_path / name), config, print_fn=lambda line: None)
    assert result["train_step"] == 1
    assert set(result["test_solve_rates"]) == set(preset["config"].get("test_presets", ()))
    assert [row["step"] for row in curves.read_curve(str(tmp_path / name))] == [1]


def test_overrides_win_over_the_preset():
    config = presets.train_config("zambaldi_fig3_relational", level=dict(room_size=14),
                                  model=dict(num_blocks=3), learning_rate=1e-4)
    assert config.learning_rate == 1e-4 and config.environment.room_size == 14
    assert config.model_kwargs == dict(num_blocks=3)
    assert config.environment.goal_length == (1, 2, 3, 4)  # the preset's, not overridden
    assert config.optimizer_name() == "rmsprop" and config.unroll_length == 40
    with pytest.raises(ValueError, match="preset.*'zambaldi_fig9'"):
        presets.train_config("zambaldi_fig9")
    assert "Fig. 6" in presets.describe("clift_fig6_relational")


def test_binary_flags_win_over_the_preset(import_binary):
    """Only the flags given on the command line override ``--preset``'s settings."""
    from absl import flags
    from absl.testing import flagsaver

    train_boxworld = import_binary("train_boxworld")

    was_parsed = flags.FLAGS.is_parsed()
    with flagsaver.as_parsed(preset="clift_fig6_relational", num_envs="4", num_blocks="1"):
        flags.FLAGS.mark_as_parsed()
        try:
            config = train_boxworld.config_from_flags()
        finally:
            if not was_parsed:
                flags.FLAGS.unparse_flags()
    assert config.agent == "clift_relational" and config.env_name == "bridge"
    assert config.num_envs == 4 and config.unroll_length == 40  # given flag vs the preset's
    assert config.model_kwargs == dict(num_blocks=1)
    assert config.optimizer == "rmsprop" and config.learning_rate == 2e-4


def test_a_run_stopped_by_max_seconds_continues_with_the_same_call(tmp_path, no_exports):
    """Two pieces: the first stops at its first progress line (a one-microsecond budget), says
    how to go on and keeps its checkpoint; the same call continues it; the curve spans both
    pieces."""
    root = str(tmp_path / "pieces")
    config = _tiny_config("cpu_curve_relational", num_iterations=3, max_seconds=1e-6,
                          checkpoint_interval=1000, eval_episodes=0)
    first_lines, second_lines = [], []
    first = train_eval(root, config, print_fn=first_lines.append)
    assert first["train_step"] == 1
    assert any(line.startswith("Stopped at train step 1 of 3") and "run the same command"
               in line for line in first_lines), first_lines
    second = train_eval(root, config, print_fn=second_lines.append)
    assert second["train_step"] == 2 and "Resuming from" in second_lines[0]
    rows = curves.read_curve(root)
    assert [row["step"] for row in rows] == [1, 2]
    assert rows[1]["wall_seconds"] >= rows[0]["wall_seconds"]
    with open(os.path.join(root, "result.json")) as f:
        assert json.load(f)["train_step"] == 2
