"""TF-Agents compatibility: `validate_py_environment` through `DmControlWrapper`, and batching.

The environments never import TensorFlow; this module checks the glue TF-Agents needs: the
single envs go through TF-Agents' own `DmControlWrapper` (and `BatchedPyEnvironment`), the
NumPy-batched envs through `keras_relational.agents.BatchedBoxWorldEnvironment`.
"""

import numpy as np
import pytest
import tensorflow as tf
from tf_agents.environments import batched_py_environment, tf_py_environment, utils
from tf_agents.environments.dm_control_wrapper import DmControlWrapper

from keras_relational.agents.tf_agents.boxworld_environment import BatchedBoxWorldEnvironment
from keras_relational.environments import (
    BatchedBoxWorld,
    BatchedBridgeBoxWorld,
    BoxWorld,
    BridgeBoxWorld,
)


@pytest.mark.parametrize("make", [
    lambda: BoxWorld(seed=0),
    lambda: BoxWorld(seed=1, observation_type="one_hot"),
    lambda: BridgeBoxWorld(seed=0),
], ids=["boxworld_rgb", "boxworld_one_hot", "bridge"])
def test_validate_py_environment_through_dm_control_wrapper(make):
    env = DmControlWrapper(make())
    utils.validate_py_environment(env, episodes=5)
    assert env.observation_spec().dtype in (np.uint8, np.float32)
    assert env.action_spec().maximum == 3


def test_tf_agents_batched_py_environment_equals_batched_boxworld():
    seeds = [3, 4, 5, 6]
    ours = BatchedBoxWorld(4, seeds=seeds)
    theirs = batched_py_environment.BatchedPyEnvironment(
        [DmControlWrapper(BoxWorld(seed=s)) for s in seeds], multithreading=False)
    a, b = ours.reset(), theirs.reset()
    rng = np.random.RandomState(0)
    for _ in range(400):
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x, y)
        actions = rng.randint(4, size=4).astype(np.int32)
        a, b = ours.step(actions), theirs.step(actions)


@pytest.mark.parametrize("make", [
    lambda: BatchedBoxWorld(16, seed=0),
    lambda: BatchedBridgeBoxWorld(8, seed=0, max_steps=100),
], ids=["boxworld", "bridge"])
def test_numpy_batched_env_in_tf_agents(make):
    env = BatchedBoxWorldEnvironment(make())
    utils.validate_py_environment(env, episodes=30)
    tf_env = tf_py_environment.TFPyEnvironment(env)
    assert tf_env.batch_size == env.batch_size
    timestep = tf_env.reset()
    timestep = tf_env.step(tf.zeros([env.batch_size], tf.int32))
    assert timestep.observation.shape == (env.batch_size,) + env.observation_spec().shape
    assert timestep.step_type.dtype == tf.int32 and timestep.reward.dtype == tf.float32
