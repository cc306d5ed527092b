"""The fast presets (not the papers' hyperparameters) and the faithful ones they must not touch."""

import os
import sys

import pytest

from keras_relational import environments
from keras_relational.agents import presets

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_presets import _TINY_MODEL  # noqa: E402  (the tiny sizes of every preset's agent)

FAST = ("zambaldi_fig3_relational_fast", "zambaldi_fig3_baseline_fast",
        "zambaldi_fig5_heldout_relational_fast", "clift_fig6_simplicial_fast",
        "clift_fig6_relational_fast")
# The papers' settings: Zambaldi et al. 2019, App. B; Clift et al. 2020, Table 1.
PAPERS = dict(optimizer="rmsprop", learning_rate=2e-4, num_envs=32, unroll_length=40,
              discount=0.99, entropy_cost=0.005)
FAITHFUL = {
    "zambaldi_fig3_relational": ("train", dict(num_blocks=1)),
    "zambaldi_fig3_baseline": ("train", dict(num_residual_blocks=3)),
    "zambaldi_fig3_relational_long": ("train_long", dict(num_blocks=2)),
    "zambaldi_fig3_baseline_long": ("train_long", dict(num_residual_blocks=6)),
    "zambaldi_fig5_heldout_relational": ("train_heldout", dict(num_blocks=1)),
    "zambaldi_fig5_heldout_baseline": ("train_heldout", dict(num_residual_blocks=3)),
    "zambaldi_fig8_backward_relational": ("backward", dict(num_blocks=1)),
    "zambaldi_fig8_backward_baseline": ("backward", dict(num_residual_blocks=3)),
    "clift_fig6_simplicial": (None, dict(num_blocks=2, num_virtual_entities=2)),
    "clift_fig6_relational": (None, dict(num_blocks=2)),
}


@pytest.mark.parametrize("name", sorted(FAITHFUL))
def test_faithful_presets_keep_the_papers_settings(name):
    preset = presets.PRESETS[name]
    level_preset, model = FAITHFUL[name]
    assert {k: preset["config"][k] for k in PAPERS} == PAPERS
    assert "reward_scale" not in preset["config"]  # unscaled rewards (the TrainConfig default 1)
    assert preset["model"] == model
    if level_preset is None:
        assert preset["env"] == "bridge" and preset["level"] == {}
    else:
        assert preset["level"] == dict(environments.PRESETS[level_preset], room_size=12,
                                       observation_type="rgb")
    config = presets.train_config(name)
    assert config.reward_scale == 1.0 and config.gradient_clip_norm == 40.0
    assert config.baseline_cost == 0.5 and config.environment.observation_type == "rgb"
    assert config.trainer == "tf_agents" and config.dtype_policy == "float32"


@pytest.mark.parametrize("name", FAST)
def test_fast_presets_say_they_are_not_the_papers_and_keep_levels_and_networks(name):
    preset = presets.PRESETS[name]
    faithful = presets.PRESETS[name[:-len("_fast")]]
    assert "NOT the paper's hyperparameters" in preset["paper"]
    assert "NOT the paper's hyperparameters" in presets.describe(name)
    assert preset["env"] == faithful["env"] and preset["model"] == faithful["model"]
    assert preset["config"]["agent"] == faithful["config"]["agent"]
    assert dict(preset["level"], observation_type="rgb") == dict(
        faithful["level"], observation_type="rgb")  # the papers' levels, one-hot cells
    config = presets.train_config(name)
    assert (config.optimizer, config.reward_scale, config.environment.observation_type) == (
        "adam", 0.1, "one_hot")
    assert config.test_presets == faithful["config"].get("test_presets", ())


@pytest.mark.slow  # compiles one update per preset
@pytest.mark.parametrize("name", FAST)
def test_fast_presets_train_one_tiny_update_with_the_compiled_trainer(tmp_path, name,
                                                                       no_compiled_exports):
    from keras_relational.agents.compiled import train_eval as compiled_train_eval

    preset = presets.PRESETS[name]
    # The paper's room: the zero-shot test levels (goal length up to 10) must fit it too.
    small = (dict(room_size=12, goal_length=(1,), num_distractors=(0,), max_steps=10)
             if preset["env"] == "original" else dict(max_steps=10))
    config = presets.train_config(name, level=small,
                                  model=_TINY_MODEL[preset["config"]["agent"]], trainer="compiled",
                                  num_envs=2, unroll_length=3, num_iterations=1,
                                  eval_episodes=1, eval_num_envs=1, log_interval=1)
    result = compiled_train_eval.train_eval(str(tmp_path / name), config,
                                            print_fn=lambda line: None)
    assert result["train_step"] == 1
    assert set(result["test_solve_rates"]) == set(preset["config"].get("test_presets", ()))
    losses = result["history"][-1]["losses"]
    assert losses["reward_max"] <= 1.0  # rewards x 0.1: the gem's 10 is 1
