"""Bad inputs a new user can reach get a clear error at the earliest point (issue 29).

Every case asserts the error type and that the message names the argument, what was expected
and what was received: layers (construction, call and trace time), environments, data
generators and results files, the training configuration, the play library, and every binary's
flags (parsed in one subprocess, binary after binary, since their flags share names).
"""

import json
import math
import os
import re
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest

import keras_relational
from keras_relational import environments, json_files, validation
from keras_relational.environments import palindromes

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _raises(error_type, call, *fragments):
    """Runs ``call``; its error must be ``error_type`` and mention every fragment."""
    with pytest.raises(error_type) as caught:
        call()
    message = str(caught.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    return message


# Layers ------------------------------------------------------------------------------------

_ENTITIES = np.zeros((2, 5, 8), "float32")


@pytest.mark.parametrize("mask", [np.ones((2, 3), bool), np.ones((2, 5, 1), bool),
                                  np.ones((3, 5), bool)])
def test_simplicial_attention_checks_the_mask_shape(mask):
    layer = keras_relational.SimplicialAttention(num_heads=1, key_dim=4)
    _raises(ValueError, lambda: layer(_ENTITIES, mask=mask), "`mask`", "(2, 5)",
            f"received shape {mask.shape}")


def test_entity_max_pool_checks_the_mask_shape():
    _raises(ValueError, lambda: keras_relational.EntityMaxPool()(_ENTITIES,
                                                                 mask=np.ones((2, 4), bool)),
            "EntityMaxPool", "`mask`", "(2, 5)", "received shape (2, 4)")


@pytest.mark.parametrize("mode,count,expected", [
    ("virtual", 2, "more than num_virtual_entities=2"),
    ("virtual", 1, "more than num_virtual_entities=2"),
    ("full", 0, "at least 1 entity (axis 1) in mode='full'"),
])
def test_simplicial_attention_checks_the_entity_count_per_mode(mode, count, expected):
    layer = keras_relational.SimplicialAttention(num_heads=1, key_dim=4, mode=mode)
    message = _raises(ValueError, lambda: layer(np.zeros((2, count, 8), "float32")), expected,
                      f"received shape (2, {count}, 8)")
    if mode == "full":
        assert "virtual'" not in message


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="a tf.function trace")
def test_simplicial_attention_checks_a_dynamic_entity_count_when_run():
    import tensorflow as tf

    layer = keras_relational.SimplicialAttention(num_heads=1, key_dim=4)
    layer.build((None, None, 8))
    call = tf.function(layer, input_signature=[tf.TensorSpec((None, None, 8), tf.float32)])
    assert call(np.zeros((2, 5, 8), "float32")).shape == (2, 5, 4)
    _raises(tf.errors.InvalidArgumentError, lambda: call(np.zeros((2, 2, 8), "float32")),
            "more than num_virtual_entities=2", "dynamic entity count")


_EPSILON_LAYERS = {
    "MultiHeadDotProductAttention": dict(num_heads=1, key_dim=4),
    "RelationalBlock": dict(num_heads=1, key_dim=4),
    "RelationalModule": dict(num_heads=1, key_dim=4),
    "SimplicialTransformerBlock": dict(num_heads=1, key_dim=4),
    "TPRMemory": dict(),
}


@pytest.mark.parametrize("name", sorted(_EPSILON_LAYERS))
@pytest.mark.parametrize("epsilon", [-1.0, 0.0, None, float("nan"), "1e-6"])
def test_layer_norm_epsilon_is_a_positive_finite_number(name, epsilon):
    layer_class = getattr(keras_relational, name)
    _raises(ValueError, lambda: layer_class(layer_norm_epsilon=epsilon, **_EPSILON_LAYERS[name]),
            name, "`layer_norm_epsilon`", "finite positive number",
            f"received layer_norm_epsilon={epsilon!r}")


@pytest.mark.parametrize("shape", [(2, 6, 8), (2, 5, 9)])
def test_predinet_refuses_another_input_size_after_build(shape):
    layer = keras_relational.PrediNet(num_heads=2, key_dim=4, num_relations=3, position_dims=0)
    layer(_ENTITIES)
    _raises(ValueError, lambda: layer(np.zeros(shape, "float32")), "PrediNet", "`inputs`",
            "(None, 5, 8)", f"cannot be called on shape {shape}")


# Issue 48: another width after build, masks of another batch size or dtype, zero entities.

def _entity_layers():
    kr = keras_relational
    return {
        "MultiHeadDotProductAttention": lambda: kr.MultiHeadDotProductAttention(1, 4),
        "SimplicialAttention": lambda: kr.SimplicialAttention(1, 4),
        "SimplicialAttention[full]": lambda: kr.SimplicialAttention(1, 4, mode="full"),
        "SequenceSimplicialAttention": lambda: kr.SequenceSimplicialAttention(
            1, 4, window=(3, 2)),
        "RelationalBlock": lambda: kr.RelationalBlock(1, 4, mlp_hidden_units=(4,)),
        "RelationalModule": lambda: kr.RelationalModule(num_heads=1, key_dim=4,
                                                        mlp_hidden_units=(4,)),
        "SimplicialTransformerBlock": lambda: kr.SimplicialTransformerBlock(
            1, 4, simplicial_key_dim=4, mlp_hidden_units=(4,), num_iterations=1),
        "MultiHeadAttentionCentral": lambda: kr.MultiHeadAttentionCentral(2, 4, 4),
        "RelationNetCentral": lambda: kr.RelationNetCentral(hidden_units=4, output_dim=3),
        "MLPCentral": lambda: kr.MLPCentral(hidden_units=(4,)),
        "PrediNet": lambda: kr.PrediNet(num_heads=2, key_dim=4, num_relations=3,
                                        position_dims=0),
    }


_ARGUMENT = {"SequenceSimplicialAttention": "`inputs`", "MultiHeadAttentionCentral": "`inputs`",
             "RelationNetCentral": "`inputs`", "MLPCentral": "`inputs`", "PrediNet": "`inputs`"}
_MASKED = ["MultiHeadDotProductAttention", "SimplicialAttention", "SimplicialAttention[full]",
           "SequenceSimplicialAttention", "RelationalBlock", "RelationalModule",
           "SimplicialTransformerBlock"]
_ATTENTION_MASKED = ["MultiHeadDotProductAttention", "RelationalBlock", "RelationalModule"]


@pytest.mark.parametrize("name", sorted(_entity_layers()))
@pytest.mark.parametrize("symbolic", [False, True], ids=["eager", "symbolic"])
def test_another_feature_width_after_build_is_refused(name, symbolic):
    """Measured before: TF MatMul / BroadcastTo / Reshape errors, or a Keras error naming an
    internal sub-layer (MHDPA's `qkv_projection`); symbolic calls went through unchecked."""
    layer = _entity_layers()[name]()
    layer(_ENTITIES)
    other = keras.Input((5, 9), batch_size=2) if symbolic else np.zeros((2, 5, 9), "float32")
    _raises(ValueError, lambda: layer(other), name.split("[")[0], _ARGUMENT.get(name, "`entities`"),
            "8)", "cannot be called on shape (2, 5, 9)")


@pytest.mark.parametrize("name", _MASKED + ["EntityMaxPool"])
def test_a_mask_of_another_batch_size_is_refused(name):
    """Measured before: a SelectV2 / ConcatOp / Reshape broadcast error from TensorFlow."""
    layer = keras_relational.EntityMaxPool() if name == "EntityMaxPool" else \
        _entity_layers()[name]()
    _raises(ValueError, lambda: layer(_ENTITIES, mask=np.ones((3, 5), bool)), "`mask`",
            "(2, 5)", "received shape (3, 5)")


@pytest.mark.parametrize("name", _ATTENTION_MASKED)
def test_an_attention_mask_of_another_batch_size_is_refused(name):
    layer = _entity_layers()[name]()
    _raises(ValueError, lambda: layer(_ENTITIES, attention_mask=np.ones((3, 5, 5), bool)),
            name, "`attention_mask`", "[batch, 5, 5] = (2, 5, 5)", "received shape (3, 5, 5)")
    symbolic = layer(keras.Input((5, 8), batch_size=2),
                     attention_mask=keras.Input((5, 5), batch_size=1, dtype="bool"))
    assert tuple(symbolic.shape)[:2] == (2, 5)  # [1, N, N] broadcasts over the batch
    _raises(ValueError, lambda: layer(keras.Input((5, 8), batch_size=2),
                                      attention_mask=keras.Input((5, 5), batch_size=3,
                                                                 dtype="bool")),
            "`attention_mask`", "received shape (3, 5, 5)")


@pytest.mark.parametrize("name,argument", [
    *[(name, "mask") for name in _MASKED + ["EntityMaxPool"]],
    *[(name, "attention_mask") for name in _ATTENTION_MASKED]])
def test_float_masks_are_refused(name, argument):
    """Measured before: a float mask was cast to bool, so the additive mask -1e9 * eye (attend
    everywhere but the diagonal) silently meant its opposite (attend to the diagonal only)."""
    layer = keras_relational.EntityMaxPool() if name == "EntityMaxPool" else \
        _entity_layers()[name]()
    mask = (-1e9 * np.eye(5, dtype="float32")) if argument == "attention_mask" else \
        np.ones((2, 5), "float32")
    _raises(ValueError, lambda: layer(_ENTITIES, **{argument: mask}), name.split("[")[0],
            f"`{argument}` to be boolean", "received dtype float32", "additive_mask == 0")


@pytest.mark.parametrize("name", _MASKED)
def test_integer_masks_mean_what_boolean_ones_do(name):
    layer = _entity_layers()[name]()
    entities = np.random.RandomState(0).normal(size=(2, 5, 8)).astype("float32")
    mask = np.ones((2, 5), bool)
    mask[1, 3:] = False
    np.testing.assert_array_equal(np.asarray(layer(entities, mask=mask.astype("int32"))),
                                  np.asarray(layer(entities, mask=mask)))


def test_an_additive_mask_compared_with_zero_is_the_boolean_mask():
    layer = keras_relational.MultiHeadDotProductAttention(1, 4)
    additive = -1e9 * np.eye(5, dtype="float32")  # blocks the diagonal
    _, scores = layer(_ENTITIES + 1.0, attention_mask=additive == 0,
                      return_attention_scores=True)
    scores = np.asarray(scores)
    assert np.all(np.diagonal(scores, axis1=-2, axis2=-1) == 0)
    np.testing.assert_allclose(scores.sum(-1), 1.0, rtol=1e-6)


@pytest.mark.parametrize("symbolic", [False, True], ids=["eager", "symbolic"])
def test_entity_max_pool_refuses_zero_entities(symbolic):
    """Measured before: TF's "Cannot compute the max of an empty tensor" when run, nothing
    when symbolic."""
    entities = keras.Input((0, 3)) if symbolic else np.zeros((2, 0, 3), "float32")
    _raises(ValueError, lambda: keras_relational.EntityMaxPool()(entities), "EntityMaxPool",
            "`entities`", "at least 1 entity (axis 1)", "0, 3)")


@pytest.mark.parametrize("name,make,inputs,other,argument", [
    ("SymbolConvolution", lambda: keras_relational.SymbolConvolution(2),
     np.zeros((1, 12, 3), "float32"), np.zeros((1, 12, 4), "float32"), "`inputs`"),
    ("TPRSentenceEncoder", lambda: keras_relational.TPRSentenceEncoder(vocab_size=20),
     np.ones((2, 3, 6), "int32"), np.ones((2, 3, 7), "int32"), "`inputs`"),
    ("ConvStackMemory", lambda: keras_relational.ConvStackMemory(4, stack_depth=3),
     np.zeros((2, 3, 5), "float32"), np.zeros((2, 3, 6), "float32"), "`sequences`"),
])
def test_other_layers_refuse_another_size_after_build(name, make, inputs, other, argument):
    layer = make()
    layer(inputs)
    _raises(ValueError, lambda: layer(other), name, argument,
            f"cannot be called on shape {other.shape}")


def test_tpr_memory_refuses_other_widths_and_masks():
    memory = keras_relational.TPRMemory(entity_dim=3, relation_dim=2, hidden_dim=4)
    sentences, question = np.zeros((2, 4, 6), "float32"), np.zeros((2, 6), "float32")
    memory([sentences, question])
    _raises(ValueError, lambda: memory([np.zeros((2, 4, 7), "float32"), question]),
            "TPRMemory", "`sentences`", "(None, None, 6)", "cannot be called on shape (2, 4, 7)")
    _raises(ValueError, lambda: memory([sentences, np.zeros((2, 7), "float32")]),
            "`question`", "(None, 6)", "cannot be called on shape (2, 7)")
    _raises(ValueError, lambda: memory([sentences, question], mask=np.ones((3, 4), bool)),
            "`mask`", "[batch, sentences] = (2, 4)", "received shape (3, 4)")
    _raises(ValueError, lambda: memory([sentences, question], mask=np.ones((2, 4), "float32")),
            "`mask` to be boolean", "received dtype float32")


def test_conv_stack_memory_refuses_masks_of_another_batch_size_or_dtype():
    layer = keras_relational.ConvStackMemory(4, stack_depth=3)
    _raises(ValueError, lambda: layer(np.zeros((2, 3, 5), "float32"),
                                      mask=np.ones((3, 3), bool)),
            "ConvStackMemory", "`mask`", "(2, 3)", "received shape (3, 3)")
    _raises(ValueError, lambda: layer(np.zeros((2, 3, 5), "float32"),
                                      mask=np.ones((2, 3), "float32")),
            "ConvStackMemory", "`mask` to be boolean", "received dtype float32")


# Environments and data generators ----------------------------------------------------------

@pytest.mark.parametrize("env_class", [environments.BoxWorld, environments.BridgeBoxWorld])
@pytest.mark.parametrize("action", [2.0, np.float32(3.0), True, np.bool_(True), "1", -1, 4,
                                    np.array([1])])
def test_single_level_step_takes_integer_actions_only(env_class, action):
    env = env_class(seed=0)
    env.reset()
    _raises(ValueError, lambda: env.step(action), "`action`", "expected an integer in [0, 4)",
            f"received {action!r}")


def test_integer_actions_still_step():
    env = environments.BoxWorld(seed=0)
    env.reset()
    for action in (1, np.int64(2), np.array(3), np.uint8(0)):
        env.step(action)


@pytest.mark.parametrize("env_class", [environments.BoxWorld, environments.BridgeBoxWorld])
@pytest.mark.parametrize("agent", [(99, 1), (-1, 2), (1, 40), (1.5, 2), (1,)])
def test_set_state_refuses_an_agent_outside_the_grid(env_class, agent):
    """Before: an IndexError in rendering (issue 48)."""
    env = env_class(seed=0)
    env.reset()
    state = env.get_state()
    _raises(ValueError, lambda: env.set_state(state._replace(agent=agent)), "`state.agent`",
            "a (row, col) pair of integers with 0 <= row <", f"received {agent!r}")
    env.set_state(state)  # a valid state still restores
    assert env.agent_position == state.agent


def test_bridge_set_state_checks_the_grid_length():
    env = environments.BridgeBoxWorld(seed=0)
    env.reset()
    state = env.get_state()
    _raises(ValueError, lambda: env.set_state(state._replace(grid=state.grid[:-1])),
            "`state.grid`", f"expected {len(state.grid)} tile codes")


@pytest.mark.parametrize("num_examples", [-1, 0, 2.0, "3", True])
def test_relations_game_generate_needs_a_positive_number_of_examples(num_examples):
    """Measured before: NumPy's "negative dimensions are not allowed" for -1, empty arrays for
    0, a TypeError for 2.0."""
    from keras_relational.environments import relations_game

    _raises(ValueError, lambda: relations_game.generate("same", num_examples=num_examples),
            "`num_examples`", "expected an integer >= 1", f"received {num_examples!r}")


@pytest.mark.parametrize("kwargs,items", [
    (dict(room_size=4, goal_length=1, num_distractors=0), "loose key = 2 items"),
    (dict(room_size=8, goal_length=6, num_distractors=0), "loose key = 7 items"),
    (dict(room_size=6, goal_length=3, num_distractors=(1, 2)), "loose key = 5 items"),
])
def test_rooms_must_fit_the_boxes_and_the_loose_key(kwargs, items):
    _raises(ValueError, lambda: environments.BoxWorldConfig(**kwargs), "room_size`",
            items, "expected", f"received ({(kwargs['goal_length'],)}")


def test_rooms_that_fit_the_loose_key_still_generate():
    environments.BoxWorld(room_size=5, goal_length=1, num_distractors=0, seed=0).reset()
    environments.BoxWorld(room_size=8, goal_length=5, num_distractors=0, seed=0).reset()


@pytest.mark.parametrize("make", [
    lambda seed: environments.BoxWorld(seed=seed),
    lambda seed: environments.BridgeBoxWorld(seed=seed),
    lambda seed: environments.BatchedBoxWorld(batch_size=2, seed=seed),
    lambda seed: environments.BatchedBridgeBoxWorld(batch_size=2, seed=seed),
    lambda seed: palindromes.palindrome_dataset(half_lengths=(2,), n_per_length=4, seed=seed),
])
@pytest.mark.parametrize("seed", [-1, 2**32, 1.5])
def test_seeds_are_checked(make, seed):
    _raises(ValueError, lambda: make(seed), "`seed`", "expected an integer in [0, 4294967295]",
            f"received {seed!r}")


@pytest.mark.parametrize("seed,offset,expected", [
    (0, 10_000, 10_000), (2**32 - 1, 1, 0), (2**32 - 2, 10_000, 9_998)])
def test_derived_seeds_wrap_at_2_to_the_32(seed, offset, expected):
    assert validation.offset_seed("seed", seed, offset) == expected


@pytest.mark.parametrize("seed", [-1, 2**32, 1.5, True])
def test_derived_seeds_check_the_seed(seed):
    _raises(ValueError, lambda: validation.offset_seed("seed", seed, 1), "`seed`",
            "expected an integer in [0, 4294967295]", f"received {seed!r}")


def test_seeds_near_2_to_the_32_reach_every_derived_seed():
    from keras_relational.environments.babi import generator, systematic
    from keras_relational.experiments import palindromes_eval_lib

    seed = 2**32 - 1  # each derived seed (seed * k + offset) used to overflow NumPy's range
    assert generator.split_seed(seed, 20, "test") == (seed * 1000 + 97 * 20 + 2) % 2**32
    assert "?" in generator.generate_task_text(1, 1, generator.split_seed(seed, 1, "train"))
    split = systematic.systematic_split(1, seed=seed)
    assert split["train"] and split["test"]
    data = palindromes_eval_lib.palindrome_data(n_per_length=4, long_n_per_length=1,
                                                data_seed=seed)
    assert len(data["long_test"]["inputs"]) > 0


@pytest.mark.parametrize("function", [palindromes.palindrome_dataset,
                                      palindromes.long_palindrome_dataset])
@pytest.mark.parametrize("n", [0, -5, 2.5])
def test_palindrome_datasets_need_strings(function, n):
    _raises(ValueError, lambda: function(n_per_length=n), "`n_per_length`",
            "expected an integer >= 1", f"received {n!r}")


@pytest.mark.parametrize("text,expected", [
    ("abc", "received 'abc'"), ("1,x", "received '1,x'"), ("", "received ''"),
    ("0", "received '0'"), ("1.5", "received '1.5'"),
])
def test_int_lists_are_parsed_with_the_argument_named(text, expected):
    _raises(ValueError, lambda: validation.parse_int_list("goal_length", text, minimum=1),
            "`goal_length`", "expected a non-empty comma-separated list of integers >= 1",
            expected)


# Results files -----------------------------------------------------------------------------

def test_json_results_are_strict_and_atomic(tmp_path):
    path = str(tmp_path / "deep" / "result.json")
    json_files.write_json(path, dict(rate=float("nan"), inf=np.float32("inf"), ok=np.int64(3),
                                     nested=[(1.5, float("-inf"))]))
    with open(path) as f:
        data = json.load(f, parse_constant=lambda token: pytest.fail(f"bare {token} in JSON"))
    assert data == dict(rate=None, inf=None, ok=3, nested=[[1.5, None]])
    assert os.listdir(tmp_path / "deep") == ["result.json"]  # no temporary file left behind


# Training configuration and the play library -----------------------------------------------

@pytest.mark.parametrize("kwargs,fragments", [
    (dict(eval_episodes=-1), ("`eval_episodes`", "integer >= 0", "received -1")),
    (dict(log_interval=0), ("`log_interval`", "integer >= 1", "received 0")),
    (dict(learning_rate=float("nan")), ("`learning_rate`", "finite number > 0", "received nan")),
    (dict(learning_rate=0.0), ("`learning_rate`", "finite number > 0", "received 0.0")),
    (dict(discount=1.5), ("`discount`", "in [0, 1]", "received 1.5")),
    (dict(checkpoint_interval=0), ("`checkpoint_interval`", ">= 1", "received 0")),
    (dict(num_iterations=-1), ("`num_iterations`", ">= 0", "received -1")),
    (dict(max_seconds=float("inf")), ("`max_seconds`", "> 0 or None", "received inf")),
    (dict(seed=-1), ("`seed`", "[0, 4294967295]", "received -1")),
    (dict(eval_episodes=0, test_presets=("test_length_6",)),
     ("`eval_episodes`", "at least 1", "received 0")),
    (dict(environment=environments.BridgeConfig(), test_presets=("test_length_6",)),
     ("`test_presets`", "original BoxWorld", "received env_name='bridge'")),
])
def test_train_config_refuses_bad_hyperparameters(kwargs, fragments):
    """Each trainer's config refuses a bad shared setting the same way."""
    from keras_relational.agents.compiled.config import CompiledConfig
    from keras_relational.agents.config import TFAgentsConfig

    for config_class in (TFAgentsConfig, CompiledConfig):
        _raises(ValueError, lambda c=config_class: c(**kwargs), *fragments)


@pytest.mark.parametrize("episodes", [0, -3, 2.0])
def test_play_needs_episodes(episodes):
    from keras_relational.agents.play import play

    _raises(ValueError, lambda: play(object(), environments.BoxWorld(seed=0), episodes),
            "`episodes`", "expected an integer >= 1", f"received {episodes!r}")


class _FirstActionPolicy:
    """A stand-in for a loaded PolicySaver policy: always action 0 (up)."""

    def action(self, time_step):
        import types

        import tensorflow as tf

        return types.SimpleNamespace(action=tf.zeros([1], tf.int32))


@pytest.mark.parametrize("observation_type", ["rgb", "one_hot"])
def test_play_runs_bridge_boxworld(observation_type):
    import keras_relational.agents.tf_agents  # noqa: F401
    from keras_relational.agents.play import play

    env = environments.BridgeBoxWorld(observation_type=observation_type, max_steps=3, seed=0)
    results, frames = play(_FirstActionPolicy(), env, 2, record_first=True)
    assert [r["steps"] for r in results] == [3, 3] and len(frames) == 4
    assert all(r["solved"] is False for r in results)


def test_load_policy_refuses_what_is_not_a_policy(tmp_path):
    import tensorflow as tf

    import keras_relational.agents.tf_agents  # noqa: F401
    from keras_relational.agents.play import load_policy

    _raises(ValueError, lambda: load_policy(str(tmp_path)), "`policy_dir`", "PolicySaver",
            "no SavedModel there")
    module = tf.Module()
    module.serve = tf.function(lambda x: x + 1.0, input_signature=[tf.TensorSpec([None])])
    tf.saved_model.save(module, str(tmp_path / "keras_like"),
                        signatures={"serve": module.serve})
    _raises(ValueError, lambda: load_policy(str(tmp_path / "keras_like")), "`policy_dir`",
            "expected a PolicySaver SavedModel", "signatures ['serve'] and no 'action'")


def test_load_model_refuses_what_is_not_a_keras_agent(tmp_path):
    from keras_relational.agents.play import load_model

    _raises(ValueError, lambda: load_model(str(tmp_path / "missing.keras")), "`model`",
            "expected a Keras agent model file", "keras_model.keras", "(no such file)")
    _raises(ValueError, lambda: load_model(str(tmp_path)), "`model`", "(a directory",
            "play its .keras file")
    (tmp_path / "weights.h5").write_bytes(b"")
    _raises(ValueError, lambda: load_model(str(tmp_path / "weights.h5")), "`model`",
            "(not a .keras file)")
    (tmp_path / "damaged.keras").write_bytes(b"not a zip file")
    _raises(ValueError, lambda: load_model(str(tmp_path / "damaged.keras")), "`model`",
            "(not loadable: ")
    classifier = keras.Sequential([keras.Input((5,)), keras.layers.Dense(3)])
    classifier.save(str(tmp_path / "classifier.keras"))
    _raises(ValueError, lambda: load_model(str(tmp_path / "classifier.keras")), "`model`",
            "(logits [B, A], value [B])",
            "a model with input shapes [(None, 5)] and output shapes [(None, 3)]")


def test_play_refuses_what_is_not_a_policy():
    from keras_relational.agents.play import play

    _raises(ValueError, lambda: play(object(), environments.BoxWorld(seed=0), 1), "`policy`",
            "a KerasModelPolicy", "a callable timestep -> action", "received 'object'")


def test_play_refuses_an_agent_with_other_actions():
    from keras_relational.agents.play import ObservationSpec, check_environment_matches

    env = environments.BoxWorld(room_size=6, goal_length=1, num_distractors=0)
    spec = ObservationSpec((None, 8, 8, 3), np.dtype("uint8"))
    check_environment_matches(spec, env, num_actions=4, agent="model")
    _raises(ValueError, lambda: check_environment_matches(spec, env, 5, agent="model"),
            "The model chooses among 5 actions", "the environment has 4")
    _raises(ValueError, lambda: check_environment_matches(
        ObservationSpec((None, 14, 14, 3), np.dtype("uint8")), env, agent="model"),
        "The model takes observations of shape (14, 14, 3)", "--room_size",
        "gives shape (8, 8, 3)", "the level settings the model was trained on")


# Binaries: every flag checked when parsed --------------------------------------------------

_FLAG_CASES = {
    "keras_relational.experiments.train_boxworld": [
        ("--goal_length=abc", "`goal_length`", "list of integers >= 1", "'abc'"),
        ("--num_distractors=-1", "`num_distractors`", "integers >= 0", "'-1'"),
        ("--eval_episodes=-1", "`eval_episodes`", "integer >= 0", "received -1"),
        ("--log_interval=0", "`log_interval`", "integer >= 1", "received 0"),
        ("--learning_rate=nan", "`learning_rate`", "finite number > 0", "received nan"),
        ("--discount=2", "`discount`", "in [0, 1]", "received 2.0"),
        ("--num_envs=0", "`num_envs`", "integer >= 1", "received 0"),
        ("--key_dim=0", "`key_dim`", "integer >= 1 or None", "received 0"),
        ("--env=bridge --test_presets=test_length_6", "--test_presets", "--env=original",
         "received --env=bridge"),
        ("--env=bridge --room_size=8", "--room_size", "--env=original", "received --env=bridge"),
    ],
    "keras_relational.experiments.play_boxworld": [
        ("--episodes=-3", "`episodes`", "integer >= 1", "received -3"),
        ("--gif=/nonexistent/dir/episode.gif", "`gif`", "existing, writable directory",
         "'/nonexistent/dir/episode.gif'"),
        ("--gif=/tmp/episode.mp4", "`gif`", "ending with .gif or .png", "'/tmp/episode.mp4'"),
        ("--goal_length=abc", "`goal_length`", "list of integers", "'abc'"),
        ("--env=bridge --goal_length=2", "--goal_length", "--env=original",
         "received --env=bridge"),
        ("--seed=-1", "`seed`", "[0, 4294967295]", "received -1"),
        ("--policy_dir=/tmp/unused --model=/tmp/unused.keras", "--policy_dir and --model",
         "expected exactly one of them",
         "received --policy_dir=/tmp/unused and --model=/tmp/unused.keras"),
        ("--policy_dir=", "--policy_dir and --model", "expected exactly one",
         "received neither"),
        ("--model=/nonexistent/agent.keras", "`model`", "an existing file ending with .keras",
         "'/nonexistent/agent.keras (no such file)'"),
        ("--model=/tmp", "`model`", "an existing file ending with .keras", "'/tmp (a directory)'"),
        ("--nogreedy", "--nogreedy", "expected only with --model", "received no --model"),
    ],
    "keras_relational.experiments.train_babi": [
        ("--tasks=abc", "`tasks`", "integers >= 1 and <= 20", "'abc'"),
        ("--tasks=21", "`tasks`", "integers >= 1 and <= 20", "'21'"),
        ("--batch_size=0", "`batch_size`", "integer >= 1", "received 0"),
    ],
    "keras_relational.experiments.train_relations_game": [
        ("--batch_size=0", "`batch_size`", "integer >= 1", "received 0"),
        ("--early_stopping_accuracy=2", "`early_stopping_accuracy`", "in [0, 1] or None",
         "received 2.0"),
        ("--pause_above_accuracy=0", "`pause_above_accuracy`", "in (0, 1] or None",
         "received 0.0"),
    ],
    "keras_relational.experiments.train_palindromes": [
        ("--seeds=0", "`seeds`", "integer >= 1", "received 0"),
        ("--models=gru", "`models`", "conv_stack, lstm", "'gru'"),
    ],
    "keras_relational.experiments.train_rule_learning": [
        ("--seeds=0", "`seeds`", "integer >= 1", "received 0"),
    ],
    "keras_relational.experiments.train_char_lm": [
        ("--tasks=abc", "`tasks`", "integers >= 1 and <= 20", "'abc'"),
        ("--window=32,x", "`window`", "list of integers >= 1", "'32,x'"),
        ("--attentions=linear", "`attentions`", "simplicial, dot_product", "'linear'"),
        ("--epochs=0", "`epochs`", "integer >= 1", "received 0"),
        ("--seed=-1", "`seed`", "[0, 4294967295]", "received -1"),
    ],
    "keras_relational.experiments.same_colour_demo": [
        ("--epochs=0", "`epochs`", "integer >= 1", "received 0"),
    ],
}
_REQUIRED = {"train_palindromes": "--root_dir=/tmp/unused", "train_rule_learning":
             "--root_dir=/tmp/unused", "play_boxworld": "--policy_dir=/tmp/unused",
             "train_char_lm": "--root_dir=/tmp/unused"}
# A case that gives one of these flags itself gets no required arguments (two ways to name one
# thing: a case gives both, or neither with an empty value).
_ALTERNATIVES = {"play_boxworld": ["--policy_dir", "--model"]}

# Imports each binary in turn (removing its flags before the next one), parses every case and
# prints {module: [error message or None, ...]}.
_PARSE_ALL = textwrap.dedent("""
    import importlib, json, sys
    from absl import flags
    cases, required = json.loads(sys.argv[1]), json.loads(sys.argv[2])
    alternatives = json.loads(sys.argv[3])
    results = {}
    for module, arguments in cases.items():
        before = set(flags.FLAGS)
        importlib.import_module(module)
        binary = module.rsplit(".", 1)[1]
        base = [required[binary]] if binary in required else []
        results[module] = []
        for argument in arguments:
            flags.FLAGS.unparse_flags()
            given = {a.split("=")[0] for a in argument.split()}
            arguments_base = [] if given & set(alternatives.get(binary, ())) else base
            try:
                flags.FLAGS(["binary", *arguments_base, *argument.split()])
                results[module].append(None)
            except flags.Error as error:
                results[module].append(str(error))
        for name in set(flags.FLAGS) - before:
            delattr(flags.FLAGS, name)
    print("RESULTS" + json.dumps(results))
""")


@pytest.fixture(scope="module")
def flag_errors():
    cases = {module: [case[0] for case in module_cases]
             for module, module_cases in _FLAG_CASES.items()}
    done = subprocess.run([sys.executable, "-c", _PARSE_ALL, json.dumps(cases),
                           json.dumps(_REQUIRED), json.dumps(_ALTERNATIVES)], cwd=_REPO_ROOT,
                          capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.split("RESULTS", 1)[1])


@pytest.mark.parametrize("module,index", [(m, i) for m, cases in _FLAG_CASES.items()
                                          for i in range(len(cases))],
                         ids=lambda v: v.rsplit(".", 1)[-1] if isinstance(v, str) else str(v))
def test_binary_flags_are_checked_when_parsed(flag_errors, module, index):
    argument, *fragments = _FLAG_CASES[module][index]
    message = flag_errors[module][index]
    assert message is not None, f"{module} accepted {argument}"
    flag = re.match(r"--(\w+)", argument.split()[-1]).group(1)
    assert flag in message, message
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"


def test_valid_flags_still_parse():
    from absl import flags

    from keras_relational.experiments import flag_checks

    values = flags.FlagValues()
    flag_checks.define_int_list("goal_length", (1, 2), "L", minimum=1, flag_values=values)
    flags.DEFINE_integer("episodes", 10, "E", flag_values=values)
    flag_checks.require_ranges({"episodes": (1, None)}, flag_values=values)
    values(["binary", "--goal_length=3,4"])
    assert values.goal_length == [3, 4] and values.episodes == 10
    assert not math.isnan(values.episodes)
