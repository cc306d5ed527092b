"""Playing a trained Keras agent model (keras_relational.agents.play and play_boxworld --model).

A tiny relational agent, built by the compiled trainer's builder (``agent_model_fn``) and saved
as its ``keras_model.keras``, plays in this process (the suite's TensorFlow backend) and through
the binary under JAX, where neither TensorFlow nor TF-Agents may be imported.
"""

import os
import re
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest

from keras_relational import environments
from keras_relational.agents.networks import agent_model_fn
from keras_relational.agents.play import (
    KerasModelPolicy,
    SavedModelPolicy,
    as_policy,
    check_environment_matches,
    load_model,
    play,
)

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_LEVELS = dict(goal_length=1, num_distractors=0, room_size=5)  # 7 x 7 observations
_TINY = dict(key_dim=8, mlp_hidden_units=(8,), head_units=(8,), conv_filters=(8, 8))
_EPISODES, _MAX_STEPS = 4, 200  # BoxWorld's own limit (120 steps) ends unsolved episodes


def _agent(channels, observation_dtype):
    keras.utils.set_random_seed(0)
    return agent_model_fn("relational", (7, 7, channels), 4, observation_dtype=observation_dtype,
                          **_TINY)()


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    """A one-hot agent saved as the trainers save it (``model.save``)."""
    path = str(tmp_path_factory.mktemp("run") / "keras_model.keras")
    _agent(44, "float32").save(path)
    return path


def _env(seed, observation_type="one_hot"):
    return environments.BoxWorld(observation_type=observation_type, seed=seed, **_LEVELS)


def _lines(results):
    """The binary's output lines for ``results``."""
    lines = [f"episode {i}: return {r['episode_return']:.1f}, {r['steps']} steps, "
             f"{'solved' if r['solved'] else 'not solved'}" for i, r in enumerate(results)]
    return lines + [f"solved {sum(r['solved'] for r in results)} of {len(results)}"]


def test_load_model_reads_the_agent_and_its_observations(model_file):
    model = load_model(model_file)
    assert [tuple(t.shape) for t in model.outputs] == [(None, 4), (None,)]
    policy = KerasModelPolicy(model)
    assert policy.observation_spec == ((None, 7, 7, 44), np.dtype("float32"))
    assert policy.num_actions == 4
    check_environment_matches(policy.observation_spec, _env(0), policy.num_actions)
    # An RGB agent takes float32 too (it scales pixels inside): its 3 channels say uint8 frames.
    rgb = KerasModelPolicy(_agent(3, "uint8"))
    assert rgb.observation_spec == ((None, 7, 7, 3), np.dtype("uint8"))
    check_environment_matches(rgb.observation_spec, _env(0, "rgb"), rgb.num_actions)
    assert 0 <= rgb.act(_env(0, "rgb").reset().observation) < 4


def _fixed_logits_policy(probabilities, greedy, seed=0):
    """A policy whose logits are log(probabilities) for every observation."""
    model = _agent(44, "float32")
    head = model.get_layer("policy_logits")
    kernel, _ = head.get_weights()
    head.set_weights([np.zeros_like(kernel), np.log(probabilities).astype("float32")])
    return KerasModelPolicy(model, greedy=greedy, seed=seed)


def test_greedy_takes_the_argmax_and_sampling_follows_the_softmax():
    probabilities = np.array([0.1, 0.2, 0.3, 0.4])
    observation = _env(0).reset().observation
    greedy = _fixed_logits_policy(probabilities, greedy=True)
    assert {greedy.act(observation) for _ in range(5)} == {3}

    def draws(seed, count=800):
        policy = _fixed_logits_policy(probabilities, greedy=False, seed=seed)
        return [policy.act(observation) for _ in range(count)]

    first = draws(seed=1)
    frequencies = np.bincount(first, minlength=4) / len(first)
    np.testing.assert_allclose(frequencies, probabilities, atol=0.05)  # ~3 standard errors
    assert draws(seed=1, count=100) == first[:100]  # a seed draws the same actions
    assert draws(seed=2, count=100) != first[:100]


def test_play_takes_either_kind_of_policy(model_file):
    results, frames = play(model_file, _env(5), 2, max_steps_per_episode=10, record_first=True)
    assert [r["steps"] for r in results] == [10, 10] and len(frames) == 11
    assert play(KerasModelPolicy(model_file), _env(5), 2, 10)[0] == results
    assert play(load_model(model_file), _env(5), 2, 10)[0] == results
    assert isinstance(as_policy(load_model(model_file)), KerasModelPolicy)
    oracle_env = _env(5)
    solved, _ = play(environments.OraclePolicy(oracle_env), oracle_env, 2)
    assert all(r["solved"] for r in solved)  # any callable timestep -> action

    class Loaded:  # a loaded PolicySaver policy is adapted
        def action(self, time_step):
            raise AssertionError("not called")

    assert isinstance(as_policy(Loaded()), SavedModelPolicy)


# The binary under JAX: runs play_boxworld and reports the TensorFlow modules it imported.
_BINARY = textwrap.dedent("""
    import runpy, sys
    sys.argv = ["play_boxworld", *sys.argv[1:]]
    try:
        runpy.run_module("keras_relational.experiments.play_boxworld", run_name="__main__")
    finally:
        print("IMPORTED", [m for m in ("tensorflow", "tf_agents", "tf_keras") if m in sys.modules])
""")


def _play_binary(model, *flags, backend="jax"):
    arguments = [f"--model={model}", "--goal_length=1", "--num_distractors=0", "--room_size=5",
                 f"--episodes={_EPISODES}", f"--max_steps_per_episode={_MAX_STEPS}", *flags]
    env = dict(os.environ, KERAS_BACKEND=backend)
    env.pop("TF_USE_LEGACY_KERAS", None)
    done = subprocess.run([sys.executable, "-c", _BINARY, *arguments], cwd=_REPO_ROOT,
                          capture_output=True, text=True, timeout=300, env=env)
    imported = re.search(r"^IMPORTED (.*)$", done.stdout, re.M)
    assert imported, done.stdout[-2000:] + done.stderr[-2000:]
    lines = [line for line in done.stdout.splitlines() if not line.startswith("IMPORTED")]
    return done, lines, imported.group(1)


@pytest.mark.subprocess
def test_binary_plays_a_keras_model_under_jax_without_tensorflow(model_file, tmp_path):
    gif = str(tmp_path / "episode.gif")
    runs = [_play_binary(model_file, f"--gif={gif}"), _play_binary(model_file),
            _play_binary(model_file, "--nogreedy", "--seed=7"),
            _play_binary(model_file, "--nogreedy", "--seed=7")]
    for done, _, imported in runs:
        assert done.returncode == 0, done.stderr[-3000:]
        assert imported == "[]", f"--model under JAX imported {imported}"
    (_, greedy, _), (_, again, _), (_, sampled, _), (_, resampled, _) = runs
    # What this process's library plays (TensorFlow backend) on the binary's levels.
    expected = _lines(play(KerasModelPolicy(model_file), _env(123), _EPISODES, _MAX_STEPS)[0])
    assert greedy == expected + [f"wrote {gif}"], greedy
    assert again == expected  # greedy play is deterministic
    sampling = KerasModelPolicy(model_file, greedy=False, seed=7)
    assert sampled == _lines(play(sampling, _env(7), _EPISODES, _MAX_STEPS)[0])
    assert resampled == sampled  # so is sampling, for a seed
    assert len(set(sampled[:-1])) > 1, sampled  # episodes of their own: the comparisons can fail
    with open(gif, "rb") as f:
        assert f.read(6) == b"GIF89a"


@pytest.mark.subprocess
def test_binary_refuses_a_room_the_model_was_not_trained_on(model_file):
    # Under TensorFlow, the backend where play_boxworld imports it: the model loads, and the
    # level is refused before playing, with the message and no traceback.
    done, lines, _ = _play_binary(model_file, "--room_size=6", backend="tensorflow")
    assert done.returncode == 1 and not any(line.startswith("episode") for line in lines)
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert ("play_boxworld: error: The model takes observations of shape (7, 7, 44) and dtype "
            "float32, but the environment (--env, --room_size, --observation_type) gives shape "
            "(8, 8, 44)") in done.stderr, done.stderr[-3000:]


@pytest.mark.subprocess
def test_binary_refuses_a_keras_file_that_is_not_an_agent(tmp_path):
    path = str(tmp_path / "classifier.keras")
    keras.Sequential([keras.Input((5,)), keras.layers.Dense(3)]).save(path)
    done, _, imported = _play_binary(path)
    assert done.returncode == 1 and imported == "[]"
    assert "play_boxworld: error: `model`: expected a Keras agent model file" in done.stderr
    assert "output shapes [(None, 3)]" in done.stderr, done.stderr[-3000:]
