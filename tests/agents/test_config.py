"""The configs: TrainConfig (the shared settings, one source of their defaults) and one per
trainer (TFAgentsConfig, CompiledConfig); environment configs, test-preset levels, old runs."""

import dataclasses
import subprocess
import sys

import pytest

from keras_relational import environments, run_settings
from keras_relational.agents import presets
from keras_relational.agents.compiled.config import CompiledConfig
from keras_relational.agents.config import (
    RESUME_INTRODUCED,
    RESUME_RETIRED,
    TFAgentsConfig,
    TrainConfig,
    environment_config,
    preset_environment,
    resume_settings,
)
from keras_relational.agents.tf_agents.train_eval import make_config


def test_test_presets_keep_the_training_observations_and_room():
    """A policy trained on one-hot 6x6 levels is evaluated on one-hot 6x6 preset levels."""
    training = environments.BoxWorldConfig(goal_length=1, num_distractors=0, room_size=10,
                                           observation_type="one_hot", max_steps=50)
    config = TFAgentsConfig(environment=training, test_presets=("test_length_6",))
    preset = preset_environment(config.environment, "test_length_6")
    assert preset.observation_type == "one_hot"
    assert (preset.room_size, preset.max_steps) == (10, 50)
    assert preset.goal_length == (6,)
    assert preset.num_distractors == environments.BoxWorldConfig(
        **environments.PRESETS["test_length_6"]).num_distractors
    assert preset.observation_spec() == training.observation_spec()


def test_test_presets_need_the_original_boxworld():
    with pytest.raises(ValueError, match="test_presets.*original BoxWorld.*'bridge'"):
        CompiledConfig(environment=environments.BridgeConfig(), test_presets=("test_length_6",))


def test_env_kwargs_become_environment_config_objects():
    config = make_config(env_name="bridge", env_kwargs=dict(max_steps=30))
    assert config.environment == environments.BridgeConfig(max_steps=30)
    assert config.env_name == "bridge" and config.evaluation_environment == config.environment
    config = make_config(env_kwargs=dict(goal_length=1), eval_env_kwargs=dict(goal_length=2))
    assert config.environment == environment_config("original", goal_length=1)
    assert config.evaluation_environment.goal_length == (2,)
    assert TFAgentsConfig().environment == environments.BoxWorldConfig()
    with pytest.raises(ValueError, match="eval_environment.*'original'.*BridgeConfig"):
        CompiledConfig(eval_environment=environments.BridgeConfig())


def test_actor_jit_compile_defaults_per_algorithm():
    assert TFAgentsConfig().actors_jit_compile is True
    assert TFAgentsConfig(algorithm="ppo").actors_jit_compile is False
    assert TFAgentsConfig(actor_jit_compile=False).actors_jit_compile is False
    # A config's resolved defaults do not leak into a changed copy.
    assert make_config(TFAgentsConfig(), algorithm="ppo").actors_jit_compile is False
    bridge = make_config(TFAgentsConfig(), env_name="bridge")
    assert bridge.environment == environments.BridgeConfig()


def test_the_binary_flags_default_to_the_config():
    """Every training flag of the binary has its config's default (the shared ones
    TrainConfig's, each trainer's own its config's), every level flag the BoxWorldConfig one
    (the defaults live in one place); the flags build each trainer's default config."""
    code = (
        "import dataclasses\n"
        "from keras_relational import environments\n"
        "from keras_relational.agents import config\n"
        "from keras_relational.experiments import train_boxworld as binary\n"
        "binary.FLAGS(['train_boxworld'])\n"
        "from keras_relational.agents import presets\n"
        "fields = config.flag_fields()\n"
        "for trainer in config.TRAINERS:\n"
        "    fields += config.flag_fields(presets.config_class(trainer))\n"
        "for f in fields:\n"
        "    value = binary.FLAGS[f.name].value\n"
        "    value = tuple(value) if isinstance(value, list) else value\n"
        "    assert value == f.default, (f.name, value, f.default)\n"
        "levels = {f.name: f.default for f in dataclasses.fields(environments.BoxWorldConfig)}\n"
        "for name in ('distractor_length', 'room_size', 'observation_type'):\n"
        "    assert binary.FLAGS[name].value == levels[name], name\n"
        "for name in ('goal_length', 'num_distractors'):\n"
        "    assert tuple(int(v) for v in binary.FLAGS[name].value) == levels[name], name\n"
        "for trainer in config.TRAINERS:\n"
        "    binary.FLAGS.unparse_flags()\n"
        "    binary.FLAGS(['train_boxworld', '--trainer=' + trainer])\n"
        "    flag_config = binary.config_from_flags()\n"
        "    default = presets.config_class(trainer)()\n"
        "    assert type(flag_config) is type(default), (trainer, flag_config)\n"
        "    for f in dataclasses.fields(default):\n"
        "        if f.name != 'model_kwargs':\n"
        "            assert getattr(flag_config, f.name) == getattr(default, f.name), f.name\n"
        "    assert flag_config.model_kwargs == {}, flag_config.model_kwargs  # the network's\n"
        "print('ok')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "ok" in done.stdout
    assert not [f for c in (TFAgentsConfig, CompiledConfig) for f in dataclasses.fields(c)
                if f.init and "help" not in f.metadata]


def test_config_validation_and_trainer_flag():
    assert CompiledConfig.from_config(TFAgentsConfig(num_envs=5)).num_envs == 5
    assert TFAgentsConfig.from_config(CompiledConfig(num_envs=5)).num_envs == 5
    # A setting the other trainer does not have is refused, not dropped.
    with pytest.raises(ValueError, match=r"CompiledConfig \(trainer='compiled'\) has no "
                                         r"\['algorithm'\].*'algorithm': 'ppo'"):
        CompiledConfig.from_config(TFAgentsConfig(algorithm="ppo"))
    with pytest.raises(ValueError, match=r"has no \['level_source'\].*'device'"):
        TFAgentsConfig.from_config(CompiledConfig(level_source="device"))
    with pytest.raises(TypeError, match="TrainConfig holds the settings both trainers share"):
        TrainConfig()
    with pytest.raises(TypeError, match="trainer"):
        CompiledConfig(trainer="tf_agents")  # the class is the trainer
    with pytest.raises(ValueError, match="level_bank_size"):
        CompiledConfig(num_envs=4, unroll_length=4, level_bank_size=5)
    with pytest.raises(ValueError, match="`level_source` to be one of.*level_source=.gpu."):
        CompiledConfig(level_source="gpu")
    with pytest.raises(TypeError, match="level_source"):
        TFAgentsConfig(level_source="device")
    with pytest.raises(TypeError, match="algorithm"):
        CompiledConfig(algorithm="vtrace")


def test_each_setting_has_one_config_and_the_presets_run_under_both_trainers():
    """A field is shared (TrainConfig) or one trainer's own, never both; a preset sets shared
    fields only, so every preset builds either trainer's config."""
    shared = {f.name for f in dataclasses.fields(TrainConfig)}
    own = {trainer: {f.name for f in presets.config_class(trainer).own_fields()}
           for trainer in ("tf_agents", "compiled")}
    assert own["tf_agents"] and own["compiled"]
    assert not own["tf_agents"] & own["compiled"]
    assert not (own["tf_agents"] | own["compiled"]) & shared
    for name, preset in presets.PRESETS.items():
        assert set(preset["config"]) <= shared, (name, set(preset["config"]) - shared)
        for trainer in ("tf_agents", "compiled"):
            config = presets.train_config(name, trainer=trainer)
            assert config.trainer == trainer
            assert type(config) is presets.config_class(trainer)
    with pytest.raises(ValueError, match="`trainer` to be one of.*'anakin'"):
        presets.train_config("zambaldi_fig3_relational", trainer="anakin")


@pytest.mark.parametrize("trainer", ["tf_agents", "compiled"])
def test_a_run_recorded_before_the_split_resumes(tmp_path, trainer):
    """A run started when one config held every field recorded the other trainer's fields too:
    its resume does not compare them (they meant nothing to this trainer), and compares the
    rest as before."""
    config = presets.config_class(trainer)(num_envs=4)
    settings = resume_settings(config)
    old_record = dict(settings, trainer=trainer, level_source="numpy", algorithm="vtrace",
                      env_backend="numpy", ppo_epochs=4, jit_compile=True,
                      actor_jit_compile=None, policy_save_interval=1000, num_ray_actors=0,
                      ray_address=None, weight_sync_interval=1)
    run_settings.check_and_record(str(tmp_path), old_record)
    retired = RESUME_RETIRED[trainer]
    assert set(old_record) - set(settings) <= set(retired)
    run_settings.check_and_record(str(tmp_path), settings, retired=retired)
    changed = resume_settings(dataclasses.replace(config, num_envs=8))
    with pytest.raises(run_settings.SettingsError, match="--num_envs: 4 in the run, 8 now"):
        run_settings.check_and_record(str(tmp_path), changed, retired=retired)


@pytest.mark.parametrize("trainer", ["tf_agents", "compiled"])
def test_a_run_recorded_before_an_option_existed_resumes_with_its_default(tmp_path, trainer):
    """A run started before an option existed did not record it: it resumes where the option
    has the value those runs trained with (its default), and refuses another, naming it."""
    introduced = RESUME_INTRODUCED[trainer]
    config_class = presets.config_class(trainer)
    defaults = {f.name: f.default for f in dataclasses.fields(config_class)}
    for name, value in introduced.items():
        assert defaults[name] == value, (name, defaults[name], value)
    if not introduced:
        return
    config = config_class(num_envs=4)
    settings = resume_settings(config)
    old_record = {k: v for k, v in settings.items() if k not in introduced}
    run_settings.check_and_record(str(tmp_path / "run"), old_record)
    run_settings.check_and_record(str(tmp_path / "run"), settings, introduced=introduced)
    name = next(iter(introduced))
    other = resume_settings(dataclasses.replace(config, **{name: introduced[name] + 1}))
    run_settings.check_and_record(str(tmp_path / "other"), old_record)
    with pytest.raises(run_settings.SettingsError,
                       match=f"--{name}: {introduced[name]} in the run, "
                             f"{introduced[name] + 1} now"):
        run_settings.check_and_record(str(tmp_path / "other"), other, introduced=introduced)
    # Without the mapping the option looks changed (null in the run): what it fixes.
    run_settings.check_and_record(str(tmp_path / "third"), old_record)
    with pytest.raises(run_settings.SettingsError, match=f"--{name}: null in the run"):
        run_settings.check_and_record(str(tmp_path / "third"), settings)
