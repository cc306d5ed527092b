"""The Gymnasium doors: `check_env`, registration, and lockstep with the dm_env classes."""

import subprocess
import sys
import warnings

import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium")

from gymnasium.utils.env_checker import check_env  # noqa: E402

from keras_relational.environments import (  # noqa: E402
    BatchedBoxWorld,
    BatchedBridgeBoxWorld,
    BoxWorld,
    BridgeBoxWorld,
    OraclePolicy,
)
from keras_relational.environments import gymnasium_boxworld as gym_boxworld  # noqa: E402

# Short episodes, so a few hundred steps cross terminations, truncations and resets.
SMALL = dict(goal_length=(1, 2), num_distractors=(0, 1), room_size=5, max_steps=12)


@pytest.mark.parametrize("env_id, kwargs", [
    (gym_boxworld.BOXWORLD_ID, {}),
    (gym_boxworld.BOXWORLD_ID, {"observation_type": "one_hot"}),
    (gym_boxworld.BOXWORLD_ID, {"preset": "test_length_6"}),
    (gym_boxworld.BRIDGE_BOXWORLD_ID, {}),
    (gym_boxworld.BRIDGE_BOXWORLD_ID, {"observation_type": "one_hot", "max_steps": 20}),
])
def test_check_env_passes_without_warnings(env_id, kwargs):
    env = gymnasium.make(env_id, render_mode="rgb_array", **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped)
    env.reset(seed=0)
    frame = env.render()
    assert frame.dtype == np.uint8 and frame.shape[-1] == 3


def test_presets_are_keyword_arguments():
    env = gymnasium.make(gym_boxworld.BOXWORLD_ID, preset="test_length_6", num_distractors=0)
    env.reset(seed=0)
    assert env.unwrapped.dm_env.level.goal_length == 6
    assert env.unwrapped.dm_env.config.num_distractors == (0,)


def _play_both(gym_env, dm_env, seed, num_steps, rng):
    """Plays `gym_env` (reset on episode end) and `dm_env` (its own auto-reset) in lockstep,
    mostly the oracle's moves (so episodes end by the gem and distractors too), some random."""
    oracle = OraclePolicy(dm_env)
    observation, _ = gym_env.reset(seed=seed)
    timestep = dm_env.reset()
    episodes = truncations = 0
    for _ in range(num_steps):
        np.testing.assert_array_equal(observation, timestep.observation)
        action = oracle(timestep) if rng.random() < 0.8 else int(rng.integers(4))
        observation, reward, terminated, truncated, info = gym_env.step(action)
        timestep = dm_env.step(action)
        np.testing.assert_array_equal(observation, timestep.observation)
        assert reward == timestep.reward
        assert terminated == (timestep.last() and timestep.discount == 0.0)
        assert truncated == (timestep.last() and timestep.discount == 1.0)
        assert info["solved"] == dm_env.solved
        if terminated or truncated:
            episodes += 1
            truncations += truncated
            observation, _ = gym_env.reset()
            timestep = dm_env.step(0)  # dm_env's restart step: FIRST on the next level
            assert timestep.first()
    return episodes, truncations


@pytest.mark.parametrize("observation_type", ["rgb", "one_hot"])
def test_boxworld_env_plays_like_the_dm_env(observation_type):
    gym_env = gym_boxworld.BoxWorldEnv(observation_type=observation_type, **SMALL)
    dm_env = BoxWorld(seed=7, observation_type=observation_type, **SMALL)
    episodes, truncations = _play_both(gym_env, dm_env, 7, 300, np.random.default_rng(0))
    assert episodes > 10 and 0 < truncations < episodes


def test_bridge_boxworld_env_plays_like_the_dm_env():
    gym_env = gym_boxworld.BridgeBoxWorldEnv(max_steps=25)
    dm_env = BridgeBoxWorld(seed=3, max_steps=25)
    episodes, truncations = _play_both(gym_env, dm_env, 3, 400, np.random.default_rng(1))
    assert episodes > 10 and 0 < truncations < episodes


def test_reset_with_the_same_seed_replays_the_level():
    env = gym_boxworld.BoxWorldEnv()
    first, _ = env.reset(seed=5)
    env.step(0)
    env.reset()
    again, _ = env.reset(seed=5)
    np.testing.assert_array_equal(first, again)


@pytest.mark.parametrize("vector_class, single_class, batched_class, kwargs", [
    (gym_boxworld.BoxWorldVectorEnv, gym_boxworld.BoxWorldEnv, BatchedBoxWorld, SMALL),
    (gym_boxworld.BoxWorldVectorEnv, gym_boxworld.BoxWorldEnv, BatchedBoxWorld,
     dict(SMALL, observation_type="one_hot")),
    (gym_boxworld.BridgeBoxWorldVectorEnv, gym_boxworld.BridgeBoxWorldEnv,
     BatchedBridgeBoxWorld, dict(max_steps=12)),
])
def test_vector_env_equals_sync_vector_env_and_the_batched_dm_env(
        vector_class, single_class, batched_class, kwargs):
    n, seed = 4, 11
    native = vector_class(num_envs=n, **kwargs)
    assert native.metadata["autoreset_mode"] == gymnasium.vector.AutoresetMode.NEXT_STEP
    sync = gymnasium.vector.SyncVectorEnv([lambda: single_class(**kwargs)] * n)
    batched = batched_class(batch_size=n, seeds=[seed + i for i in range(n)], **kwargs)
    observations, _ = native.reset(seed=seed)
    np.testing.assert_array_equal(observations, sync.reset(seed=seed)[0])
    np.testing.assert_array_equal(observations, batched.reset().observation)
    assert native.observation_space.contains(observations)
    rng = np.random.default_rng(2)
    ends = 0
    for _ in range(120):
        actions = rng.integers(4, size=n)
        step = native.step(actions)
        for value, expected in zip(step, sync.step(actions), strict=True):
            if isinstance(value, dict):
                continue
            np.testing.assert_array_equal(value, expected)
        timestep = batched.step(actions)
        np.testing.assert_array_equal(step[0], timestep.observation)
        np.testing.assert_array_equal(step[1], timestep.reward)
        last = timestep.step_type == 2
        np.testing.assert_array_equal(step[2], last & (timestep.discount == 0))
        np.testing.assert_array_equal(step[3], last & (timestep.discount == 1))
        ends += int(last.sum())
    assert ends > n  # autoresets were exercised


def test_make_vec_uses_the_native_vector_env():
    envs = gymnasium.make_vec(gym_boxworld.BOXWORLD_ID, num_envs=3, preset="train",
                              render_mode="rgb_array")
    assert isinstance(envs.unwrapped, gym_boxworld.BoxWorldVectorEnv)
    observations, _ = envs.reset(seed=0)
    assert observations.shape == (3, 14, 14, 3)
    assert len(envs.render()) == 3


def test_bad_arguments_name_themselves():
    with pytest.raises(ValueError, match="seed"):
        gym_boxworld.BoxWorldEnv(seed=1)
    with pytest.raises(ValueError, match="preset"):
        gym_boxworld.BoxWorldEnv(preset="nope")
    with pytest.raises(ValueError, match="render_mode"):
        gym_boxworld.BoxWorldEnv(render_mode="human")
    with pytest.raises(ValueError, match="batch_size"):
        gym_boxworld.BoxWorldVectorEnv(batch_size=3)
    with pytest.raises(RuntimeError, match="reset"):
        gym_boxworld.BoxWorldEnv().step(0)


def test_importing_the_environments_does_not_import_gymnasium():
    code = ("import sys, keras_relational.environments; "
            "print('gymnasium' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "False"


def python_blocks(path):
    """The ```python blocks of a Markdown page."""
    import os
    import re

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, path)) as f:
        return re.findall(r"```python\n(.*?)```", f.read(), flags=re.S)


def test_the_docs_gymnasium_examples_run():
    blocks = [b for b in python_blocks("docs/environments.md") if "gymnasium" in b]
    assert len(blocks) == 2
    for block in blocks:
        exec(compile(block, "docs/environments.md", "exec"), {})
