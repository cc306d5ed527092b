"""TensorBoxWorld: lockstep with BatchedBoxWorld (TensorFlow here, JAX in a fresh process),
determinism, laziness and the errors of bad input.

The lockstep tests compare 112,000 env-steps in all: 71,040 here under TensorFlow, 29,440 in
test_tensor_bridge_boxworld.py, 11,520 under JAX (both variants) in `test_lockstep_under_jax`.
"""

import os
import subprocess
import sys

import keras
import numpy as np
import pytest
from tensor_lockstep import compile_step, run_lockstep

from keras_relational.environments import BoxWorldConfig, TensorBoxWorld

_TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("kwargs,num_envs,num_steps", [
    # The paper's training levels, RGB, the 120-step truncation [R]: 256 x 200 = 51,200 steps.
    (dict(), 256, 200),
    # Long distractor branches, one-hot, a short limit with discount 0, a smaller room.
    (dict(distractor_length=3, room_size=10, num_colors=12, goal_length=(1, 2),
          observation_type="one_hot", max_steps=30, time_limit_discount=0.0), 96, 120),
    # Backward branching (distractor locks never open) with zero-shot long paths.
    (dict(branching="backward", goal_length=(2, 6), max_steps=50), 64, 130),
])
def test_lockstep_with_batched_boxworld(kwargs, num_envs, num_steps):
    counts = run_lockstep("boxworld", num_envs, num_steps, num_levels=1200, **kwargs)
    assert counts["solved"] > num_envs // 4  # the oracle's slots win their levels
    assert counts["first"] > 0 and counts["last"] > counts["solved"]
    assert counts["truncated"] > 0 or kwargs.get("time_limit_discount") == 0.0


@pytest.mark.subprocess
def test_lockstep_under_jax():
    env = dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONPATH=_TESTS + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("TF_USE_LEGACY_KERAS", None)
    result = subprocess.run(
        [sys.executable, os.path.join(_TESTS, "tensor_lockstep.py"), "boxworld 64 130",
         "bridge 32 100"], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.count("'solved'") == 2, result.stdout


def test_reset_and_step_are_deterministic_and_pure():
    env = TensorBoxWorld(goal_length=(1, 2), num_distractors=(0, 1, 2))
    bank = env.level_bank(32, seed=3)
    for key, value in env.level_bank(32, seed=3).items():
        np.testing.assert_array_equal(value, bank[key])
    assert not np.array_equal(env.level_bank(32, seed=4)["grid"], bank["grid"])
    step = compile_step(env.step)
    actions = np.random.RandomState(0).randint(4, size=(30, 8)).astype(np.int32)
    runs = []
    for _ in range(2):
        state, timestep = env.reset(bank, 8)
        start = state
        observations = [timestep.observation]
        for a in actions:
            state, timestep = step(state, a, bank)
            observations.append(timestep.observation)
        runs.append(np.stack([keras.ops.convert_to_numpy(o) for o in observations]))
        # The inputs were not modified (pure functions): replaying from `start` agrees.
        _, again = step(start, actions[0], bank)
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(again.observation), runs[-1][1])
    np.testing.assert_array_equal(runs[0], runs[1])


def test_contract_shapes_specs_and_lazy_export():
    import keras_relational.environments as environments

    assert environments.TensorBoxWorld is TensorBoxWorld
    assert "TensorBoxWorld" in dir(environments)
    env = TensorBoxWorld(config=BoxWorldConfig(observation_type="one_hot"))
    assert env.observation_spec().shape == (14, 14, 44)
    assert env.action_spec().num_values == 4
    bank = env.level_bank(5, seed=0)
    assert bank["grid"].shape == (5, 196) and bank["grid"].dtype == np.uint8
    state, timestep = env.reset(bank, 7)  # more slots than levels: the bank wraps around
    assert tuple(timestep.observation.shape) == (7, 14, 14, 44)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(state["level"]),
                                  [0, 1, 2, 3, 4, 0, 1])
    assert int(keras.ops.convert_to_numpy(state["cursor"])) == 2
    assert set(state) >= {"steps", "needs_reset", "solved", "level", "cursor", "grid", "pos",
                          "held", "distractor"}


def test_bank_stream_draws_deterministic_banks_ahead():
    env = TensorBoxWorld(goal_length=1, num_distractors=0)
    first = env.bank_stream(4, seed=1)
    second = env.bank_stream(4, seed=1)
    a, b = next(first), next(first)
    np.testing.assert_array_equal(a["grid"], next(second)["grid"])
    assert not np.array_equal(a["grid"], b["grid"])
    first.close()
    second.close()


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="`goal_length`"):
        TensorBoxWorld(goal_length=0)
    with pytest.raises(ValueError, match="`observation_type`"):
        TensorBoxWorld(observation_type="pixels")
    with pytest.raises(ValueError, match="`config`"):
        TensorBoxWorld(config=BoxWorldConfig(), goal_length=1)
    env = TensorBoxWorld(goal_length=1, num_distractors=0)
    bank = env.level_bank(4, seed=0)
    with pytest.raises(ValueError, match="`num_envs`"):
        env.reset(bank, 0)
    state, _ = env.reset(bank, 4)
    with pytest.raises(ValueError, match="`actions`: expected integers.*float32"):
        env.step(state, np.zeros(4, np.float32), bank)
    with pytest.raises(ValueError, match=r"`actions`: expected shape \(4,\)"):
        env.step(state, np.zeros(3, np.int32), bank)
    with pytest.raises(ValueError, match=r"`actions`: expected values in \[0, 4\)"):
        env.step(state, np.array([0, 1, 4, 2], np.int32), bank)
    with pytest.raises(ValueError, match=r"`bank\['grid'\]`"):
        env.step(state, np.zeros(4, np.int32), dict(bank, grid=bank["grid"][:, :100]))
    with pytest.raises(ValueError, match="`bank`"):
        env.step(state, np.zeros(4, np.int32), {"grid": bank["grid"]})
    # Inside a compiled function: the dtype and shape errors come at trace time.
    step = compile_step(env.step)
    with pytest.raises(ValueError, match="`actions`: expected integers"):
        step(state, np.zeros(4, np.float32), bank)
    with pytest.raises(ValueError, match=r"`actions`: expected shape \(4,\)"):
        step(state, np.zeros(5, np.int32), bank)
