"""A curriculum of compiled-trainer runs (agents/compiled/curriculum.py) and the stop at a solve
rate (CompiledConfig.stop_solve_rate) that ends its stages."""

import json
import os

import pytest

from keras_relational.agents import curves, presets
from keras_relational.agents.compiled.config import CompiledConfig
from keras_relational.agents.compiled.curriculum import stage_dir, train_curriculum
from keras_relational.agents.config import environment_config

# benchmarks/frames_to_solve.py's network: its first policy acts near-uniformly (narrower heads
# start far from it: no episode solved, no box opened, in 60 episodes).
_MODEL = dict(key_dim=32, head_units=(64,) * 4)
# Room 5, goal length 1, 20 steps: a random policy solves ~3 % of the levels, so a stage asking
# for 0.1 % over 50 episodes stops at one of its first counted lines.
_LEVELS = dict(room_size=5, goal_length=(1,), num_distractors=(0,), max_steps=20,
               observation_type="one_hot")


def _stage(**fields):
    return CompiledConfig(environment=environment_config("original", **_LEVELS),
                          model_kwargs=_MODEL, num_envs=8, unroll_length=20, log_interval=8,
                          checkpoint_interval=8, eval_episodes=0, **fields)


@pytest.mark.slow  # two stages compiled
def test_a_curriculum_stops_its_stage_at_the_solve_rate_and_starts_the_next_from_its_agent(
        tmp_path):
    root = str(tmp_path)
    stages = (_stage(num_iterations=80, stop_solve_rate=0.001), _stage(num_iterations=2))
    lines = []
    summary = train_curriculum(root, stages, print_fn=lines.append)

    first, second = summary["stages"]
    with open(os.path.join(stage_dir(root, 1), "result.json")) as f:
        stopped = json.load(f)
    rows = curves.read_curve(stage_dir(root, 1))
    reached = [row for row in curves.counted_rows(rows) if row["solve_rate"] >= 0.001]
    # The first stage stopped at the first counted line that reached the rate, short of its
    # updates; its result says where.
    assert reached and rows[-1] == reached[0], rows
    assert stopped["stopped_at_solve_rate"] == reached[0]["frames"] == first["frames"]
    assert first["train_step"] == reached[0]["step"] < 80 and first["finished"]
    assert any(line.startswith("[stage 1] stop_solve_rate 0.001 reached at step")
               for line in lines), lines
    # The second started from the first's exported agent and trained its own updates.
    keras_file = os.path.join(stage_dir(root, 1), "keras_model.keras")
    assert f"[stage 2] Initial weights from {keras_file}" in lines, lines
    assert second["train_step"] == 2 and second["stopped_at_solve_rate"] is None
    assert summary["frames"] == first["frames"] + 2 * 8 * 20 and summary["finished"]
    assert summary["result"]["train_step"] == 2
    with open(os.path.join(root, "curriculum.json")) as f:
        assert json.load(f)["frames"] == summary["frames"]

    # Re-running trains neither stage again.
    lines = []
    again = train_curriculum(root, stages, print_fn=lines.append)
    assert lines == [] and again["stages"] == summary["stages"], lines
    # A stopped run resumed on its own trains no more either.
    from keras_relational.agents.compiled import train_eval

    lines = []
    resumed = train_eval.train_eval(stage_dir(root, 1), stages[0], print_fn=lines.append)
    assert resumed["train_step"] == first["train_step"], lines
    assert not any(line.startswith("step ") for line in lines), lines


def test_curriculum_arguments_are_checked_naming_them(tmp_path):
    with pytest.raises(ValueError, match="at least one CompiledConfig"):
        train_curriculum(str(tmp_path), ())
    with pytest.raises(ValueError, match="CompiledConfig, received TFAgentsConfig at stage 1"):
        train_curriculum(str(tmp_path), (presets.train_config("cpu_curve_relational"),))
    with pytest.raises(ValueError, match="stage 2 .* `initial_weights` must be None"):
        train_curriculum(str(tmp_path), (_stage(), _stage(initial_weights="a.keras")))
    with pytest.raises(ValueError, match="max_seconds"):
        train_curriculum(str(tmp_path), (_stage(),), max_seconds=0)
    for bad in (0.0, 1.5, float("nan")):
        with pytest.raises(ValueError, match="stop_solve_rate"):
            _stage(stop_solve_rate=bad)


def test_the_curriculum_preset_is_its_stages_then_itself():
    name = "cpu_room12_relational_curriculum"
    first, last = presets.curriculum_configs(name)
    assert last == presets.train_config(name, trainer="compiled")
    assert (last.environment.room_size, last.environment.goal_length,
            last.environment.num_distractors, last.num_envs) == (12, (1,), (0,), 64)
    # The demo's levels and environments first (benchmarks/demo_flags.txt), 1.6e6 frames.
    assert (first.environment.room_size, first.num_envs, first.num_iterations) == (6, 32, 2500)
    assert first.stop_solve_rate is None and first.frames_per_step * 2500 == 1_600_000
    assert first.model_kwargs == last.model_kwargs and first.agent == last.agent
    # The arguments win over every stage; a preset without a curriculum is itself.
    tiny = presets.curriculum_configs(name, level=dict(max_steps=10), num_iterations=2)
    assert [(c.num_iterations, c.environment.max_steps) for c in tiny] == [(2, 10)] * 2
    assert presets.curriculum_configs("cpu_curve_relational") == (
        presets.train_config("cpu_curve_relational", trainer="compiled"),)


def test_the_binary_runs_a_curriculum_preset_with_the_compiled_trainer_only(import_binary):
    from absl import app, flags
    from absl.testing import flagsaver

    train_boxworld = import_binary("train_boxworld")
    was_parsed = flags.FLAGS.is_parsed()
    with flagsaver.as_parsed(preset="cpu_room12_relational_curriculum", root_dir="/nowhere"):
        flags.FLAGS.mark_as_parsed()
        try:
            with pytest.raises(app.UsageError, match="runs with --trainer=compiled, received "
                                                     "--trainer=tf_agents"):
                train_boxworld.main([])
        finally:
            if not was_parsed:
                flags.FLAGS.unparse_flags()
