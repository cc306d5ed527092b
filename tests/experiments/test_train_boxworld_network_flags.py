"""train_boxworld's network flags reach the network's layers, or are refused by name."""

import pytest


def _parse(import_binary, argv):
    """The config of ``train_boxworld <argv>`` (the flags parsed as on a command line)."""
    from absl import flags

    train_boxworld = import_binary("train_boxworld")
    was_parsed = flags.FLAGS.is_parsed()
    try:
        flags.FLAGS(["train_boxworld", *argv])
        return train_boxworld.config_from_flags()
    finally:
        if not was_parsed:
            flags.FLAGS.unparse_flags()


def _block_config(config, layer_name):
    from keras_relational.agents.networks import agent_model_fn

    model = agent_model_fn(config.agent, (7, 10, 3) if config.env_name == "bridge" else
                           (14, 14, 3), 4, **config.model_kwargs)()
    return model.get_layer(layer_name).get_config()


def test_simplicial_key_dim_and_blocks_reach_the_block(import_binary):
    config = _parse(import_binary, ["--agent=simplicial", "--key_dim=8", "--num_blocks=3",
                                    "--env=bridge"])
    assert config.model_kwargs == {"key_dim": 8, "num_blocks": 3}
    block = _block_config(config, "simplicial_block")
    assert block["key_dim"] == 8 and block["num_iterations"] == 3


def test_unset_network_flags_keep_each_networks_own_defaults(import_binary):
    """The simplicial agent keeps Clift et al.'s 2 iterations (no flag default overrides it)."""
    config = _parse(import_binary, ["--agent=simplicial", "--env=bridge"])
    assert config.model_kwargs == {}
    assert _block_config(config, "simplicial_block")["num_iterations"] == 2
    preset = _parse(import_binary, ["--preset=clift_fig6_simplicial", "--key_dim=16"])
    assert preset.agent == "simplicial" and preset.model_kwargs["key_dim"] == 16


@pytest.mark.parametrize("argv, flag", [
    (["--agent=baseline", "--key_dim=8"], "--key_dim"),
    (["--agent=baseline", "--num_blocks=2"], "--num_blocks"),
    (["--agent=relational", "--num_residual_blocks=4"], "--num_residual_blocks"),
    (["--preset=zambaldi_fig3_baseline", "--key_dim=8"], "--key_dim"),
])
def test_a_network_flag_the_agent_does_not_take_is_refused(import_binary, argv, flag):
    from absl import flags

    with pytest.raises(flags.IllegalFlagValueError, match=f"{flag}: expected only with "
                       "--agent="):
        _parse(import_binary, argv)


def test_the_compiled_loops_own_flags_reach_its_config(import_binary, tmp_path, monkeypatch):
    """--learner_minibatches, --num_devices, --level_bank_size and --updates_per_call reach
    CompiledConfig; a count that does not divide --num_envs (or --num_iterations) is refused
    naming the flag, before anything is written."""
    from absl import app, flags

    train_boxworld = import_binary("train_boxworld")
    received = {}
    monkeypatch.setattr("keras_relational.agents.compiled.train_eval.train_eval",
                        lambda root_dir, config, **kwargs: received.update(config=config))
    was_parsed = flags.FLAGS.is_parsed()
    try:
        flags.FLAGS(["train_boxworld", f"--root_dir={tmp_path / 'a'}", "--trainer=compiled",
                     "--num_envs=8", "--learner_minibatches=4", "--num_devices=1",
                     "--level_bank_size=500", "--updates_per_call=2"])
        train_boxworld.main([])
        config = received["config"]
        assert (config.learner_minibatches, config.num_devices, config.level_bank_size,
                config.updates_per_call) == (4, 1, 500, 2)
        flags.FLAGS.unparse_flags()
        flags.FLAGS(["train_boxworld", f"--root_dir={tmp_path / 'b'}", "--trainer=compiled",
                     "--num_envs=6", "--learner_minibatches=4"])
        with pytest.raises(app.UsageError, match="--learner_minibatches"):
            train_boxworld.main([])
        assert not (tmp_path / "b").exists()
        flags.FLAGS.unparse_flags()
        flags.FLAGS(["train_boxworld", f"--root_dir={tmp_path / 'c'}", "--trainer=compiled",
                     "--num_iterations=10", "--updates_per_call=3"])
        with pytest.raises(app.UsageError, match=r"--num_iterations.*--updates_per_call=3"):
            train_boxworld.main([])
        assert not (tmp_path / "c").exists()
        flags.FLAGS.unparse_flags()
        with pytest.raises(flags.IllegalFlagValueError, match="--learner_minibatches"):
            flags.FLAGS(["train_boxworld", "--learner_minibatches=2"])  # TF-Agents trainer
    finally:
        if not was_parsed:
            flags.FLAGS.unparse_flags()
