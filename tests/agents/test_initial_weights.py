"""``CompiledConfig.initial_weights``: a new compiled run starts from a Keras model file's weights
(a smaller room's agent on a larger room: a curriculum); a resumed run restores its checkpoint."""

import os

import keras
import numpy as np
import pytest

from keras_relational.agents.compiled import train_eval as compiled_train_eval
from keras_relational.agents.compiled.config import CompiledConfig
from keras_relational.agents.networks import agent_model_fn

_MODEL = dict(key_dim=8, mlp_hidden_units=(8,), head_units=(8,), conv_filters=(8, 8))
_LEVELS = dict(goal_length=1, num_distractors=0, observation_type="one_hot")


def _saved_agent(path, room_size, **model):
    """A relational agent for ``room_size`` (one-hot cells), saved as a .keras file."""
    channels = compiled_train_eval.tensor_environment(
        compiled_train_eval.make_config(env_kwargs=dict(_LEVELS, room_size=room_size)).environment
    ).observation_spec().shape
    keras.utils.set_random_seed(7)
    agent = agent_model_fn("relational", channels, 4, **dict(_MODEL, **model))()
    agent.save(path)
    return [np.asarray(w) for w in agent.get_weights()]


def test_a_smaller_rooms_agent_starts_a_larger_rooms_run_and_a_resume_does_not_read_it(
        tmp_path):
    source = str(tmp_path / "room5.keras")
    weights = _saved_agent(source, room_size=5)
    root = str(tmp_path / "room7")
    settings = dict(env_kwargs=dict(_LEVELS, room_size=7), num_envs=2, unroll_length=3,
                    log_interval=1, checkpoint_interval=1, eval_episodes=0,
                    model_kwargs=_MODEL, learning_rate=1e-12, initial_weights=source)
    lines = []
    result = compiled_train_eval.train_eval(root, num_iterations=1, print_fn=lines.append,
                                            **settings)
    assert f"Initial weights from {source}" in lines, lines
    # One update at a learning rate of 1e-12 leaves the initial weights: the file's (the room-7
    # network has the room-5 network's shapes).
    trained = keras.saving.load_model(result["keras_file"]).get_weights()
    assert len(trained) == len(weights)
    for got, want in zip(trained, weights, strict=True):
        np.testing.assert_allclose(got, want, atol=1e-6)
    # A resume restores its checkpoint: the file is not read again (here it is gone).
    os.remove(source)
    lines = []
    compiled_train_eval.train_eval(root, num_iterations=1, print_fn=lines.append, **settings)
    assert not any(line.startswith("Initial weights") for line in lines), lines


def test_weights_of_another_architecture_or_a_missing_file_are_refused_naming_the_flag(
        tmp_path):
    other = str(tmp_path / "wider.keras")
    _saved_agent(other, room_size=5, key_dim=16)
    channels = compiled_train_eval.tensor_environment(compiled_train_eval.make_config(
        env_kwargs=dict(_LEVELS, room_size=5)).environment).observation_spec().shape
    model = agent_model_fn("relational", channels, 4, **_MODEL)()
    with pytest.raises(ValueError, match=r"`initial_weights` \(--initial_weights\): weight \d+ "
                                         r"of .*wider\.keras .* has shape"):
        compiled_train_eval.load_initial_weights(model, other)
    with pytest.raises(FileNotFoundError, match=r"`initial_weights` \(--initial_weights\): no "
                                                r"file .*missing\.keras"):
        compiled_train_eval.load_initial_weights(model, str(tmp_path / "missing.keras"))
    with pytest.raises(ValueError, match=r"`initial_weights` \(--initial_weights\) to be None or "
                                         r"the path of a \.keras model file, received 'w\.h5'"):
        CompiledConfig(initial_weights="w.h5")
