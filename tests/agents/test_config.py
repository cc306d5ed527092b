"""TrainConfig: one source of the defaults, environment config objects, test-preset levels."""

import dataclasses
import subprocess
import sys

import pytest

from keras_relational import environments
from keras_relational.agents.compiled.config import CompiledConfig
from keras_relational.agents.config import TrainConfig, environment_config, preset_environment
from keras_relational.agents.tf_agents.train_eval import make_config


def test_test_presets_keep_the_training_observations_and_room():
    """A policy trained on one-hot 6x6 levels is evaluated on one-hot 6x6 preset levels."""
    training = environments.BoxWorldConfig(goal_length=1, num_distractors=0, room_size=10,
                                           observation_type="one_hot", max_steps=50)
    config = TrainConfig(environment=training, test_presets=("test_length_6",))
    preset = preset_environment(config.environment, "test_length_6")
    assert preset.observation_type == "one_hot"
    assert (preset.room_size, preset.max_steps) == (10, 50)
    assert preset.goal_length == (6,)
    assert preset.num_distractors == environments.BoxWorldConfig(
        **environments.PRESETS["test_length_6"]).num_distractors
    assert preset.observation_spec() == training.observation_spec()


def test_test_presets_need_the_original_boxworld():
    with pytest.raises(ValueError, match="test_presets.*original BoxWorld.*'bridge'"):
        TrainConfig(environment=environments.BridgeConfig(), test_presets=("test_length_6",))


def test_env_kwargs_become_environment_config_objects():
    config = make_config(env_name="bridge", env_kwargs=dict(max_steps=30))
    assert config.environment == environments.BridgeConfig(max_steps=30)
    assert config.env_name == "bridge" and config.evaluation_environment == config.environment
    config = make_config(env_kwargs=dict(goal_length=1), eval_env_kwargs=dict(goal_length=2))
    assert config.environment == environment_config("original", goal_length=1)
    assert config.evaluation_environment.goal_length == (2,)
    assert TrainConfig().environment == environments.BoxWorldConfig()
    with pytest.raises(ValueError, match="eval_environment.*'original'.*BridgeConfig"):
        TrainConfig(eval_environment=environments.BridgeConfig())


def test_actor_jit_compile_defaults_per_algorithm():
    assert TrainConfig().actors_jit_compile is True
    assert TrainConfig(algorithm="ppo").actors_jit_compile is False
    assert TrainConfig(actor_jit_compile=False).actors_jit_compile is False
    # A config's resolved defaults do not leak into a changed copy.
    assert make_config(TrainConfig(), algorithm="ppo").actors_jit_compile is False
    bridge = make_config(TrainConfig(), env_name="bridge")
    assert bridge.environment == environments.BridgeConfig()


def test_the_binary_flags_default_to_the_config():
    """Every training flag of the binary has the TrainConfig default, every level flag the
    BoxWorldConfig one (the defaults live in one place)."""
    code = (
        "import dataclasses\n"
        "from keras_relational import environments\n"
        "from keras_relational.agents import config\n"
        "from keras_relational.experiments import train_boxworld as binary\n"
        "binary.FLAGS(['train_boxworld'])\n"
        "for f in config.flag_fields():\n"
        "    value = binary.FLAGS[f.name].value\n"
        "    value = tuple(value) if isinstance(value, list) else value\n"
        "    assert value == f.default, (f.name, value, f.default)\n"
        "levels = {f.name: f.default for f in dataclasses.fields(environments.BoxWorldConfig)}\n"
        "for name in ('distractor_length', 'room_size', 'observation_type'):\n"
        "    assert binary.FLAGS[name].value == levels[name], name\n"
        "for name in ('goal_length', 'num_distractors'):\n"
        "    assert tuple(int(v) for v in binary.FLAGS[name].value) == levels[name], name\n"
        "flag_config = binary.config_from_flags()\n"
        "default = config.TrainConfig()\n"
        "for f in dataclasses.fields(default):\n"
        "    if f.name != 'model_kwargs':\n"
        "        assert getattr(flag_config, f.name) == getattr(default, f.name), f.name\n"
        "assert flag_config.model_kwargs == {}, flag_config.model_kwargs  # the network's own\n"
        "print('ok')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "ok" in done.stdout
    assert not [f for f in dataclasses.fields(TrainConfig) if "help" not in f.metadata]


def test_config_validation_and_trainer_flag():
    assert CompiledConfig.from_train_config(TrainConfig(num_envs=5)).num_envs == 5
    with pytest.raises(ValueError, match="trainer='compiled'.*algorithm"):
        TrainConfig(trainer="compiled", algorithm="ppo")
    with pytest.raises(ValueError, match="trainer"):
        TrainConfig(trainer="anakin")
    with pytest.raises(ValueError, match="level_bank_size"):
        CompiledConfig(num_envs=4, unroll_length=4, level_bank_size=5)
    with pytest.raises(ValueError, match="`level_source` to be one of.*level_source=.gpu."):
        CompiledConfig(level_source="gpu")
    with pytest.raises(ValueError, match="`level_source` must be 'numpy' with trainer='tf_agents'"):
        TrainConfig(level_source="device")
