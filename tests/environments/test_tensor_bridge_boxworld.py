"""TensorBridgeBoxWorld: lockstep with BatchedBridgeBoxWorld (TensorFlow; the JAX run is in
test_tensor_boxworld.py), determinism and the errors of bad input."""

import keras
import numpy as np
import pytest
from tensor_lockstep import compile_step, run_lockstep

from keras_relational.environments import BridgeConfig, TensorBridgeBoxWorld


@pytest.mark.parametrize("kwargs,num_envs,num_steps", [
    # The paper's levels (L ~ U{1,2,3}, bridge with probability 1/2), RGB, a 60-step limit:
    # 192 x 120 = 23,040 env-steps.
    (dict(max_steps=60), 192, 120),
    # One-hot, every level with a bridge, truncation with discount 0.5.
    (dict(puzzle_type=(2, 1, 4), observation_type="one_hot", max_steps=40,
          time_limit_discount=0.5), 64, 100),
])
def test_lockstep_with_batched_bridge_boxworld(kwargs, num_envs, num_steps):
    counts = run_lockstep("bridge", num_envs, num_steps, num_levels=1200, **kwargs)
    assert counts["solved"] > num_envs // 4
    assert counts["first"] > 0 and counts["last"] > counts["solved"]
    if kwargs.get("max_steps") and num_steps > kwargs["max_steps"]:
        assert counts["truncated"] > 0


def test_deterministic_and_shapes():
    env = TensorBridgeBoxWorld(config=BridgeConfig(observation_type="one_hot"))
    assert env.observation_spec().shape == (7, 10, 44)
    bank = env.level_bank(16, seed=0)
    assert bank["grid"].shape == (16, 63) and bank["colors"].shape == (16, 20)
    step = compile_step(env.step)
    actions = np.random.RandomState(1).randint(4, size=(20, 6)).astype(np.int32)
    runs = []
    for _ in range(2):
        state, timestep = env.reset(bank, 6)
        observations = [keras.ops.convert_to_numpy(timestep.observation)]
        for a in actions:
            state, timestep = step(state, a, bank)
            observations.append(keras.ops.convert_to_numpy(timestep.observation))
        runs.append(np.stack(observations))
    assert runs[0].shape == (21, 6, 7, 10, 44)
    np.testing.assert_array_equal(runs[0], runs[1])


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="`puzzle_type`"):
        TensorBridgeBoxWorld(puzzle_type=(2, 3, 1))
    with pytest.raises(ValueError, match="`config`"):
        TensorBridgeBoxWorld(config="bridge")
    env = TensorBridgeBoxWorld()
    bank = env.level_bank(3, seed=0)
    state, _ = env.reset(bank, 2)
    with pytest.raises(ValueError, match="`actions`: expected integers"):
        env.step(state, np.zeros(2, np.float64), bank)
    with pytest.raises(ValueError, match=r"`actions`: expected shape \(2,\)"):
        env.step(state, np.zeros((2, 1), np.int32), bank)
    with pytest.raises(ValueError, match=r"`bank\['colors'\]`"):
        env.step(state, np.zeros(2, np.int32), dict(bank, colors=bank["colors"][:2]))
