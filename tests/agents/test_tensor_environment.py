"""The in-graph TF-Agents environment over TensorBoxWorld; train_eval with env_backend=tensor."""

import numpy as np
import pytest
import tensorflow as tf
from tf_agents.specs import tensor_spec

from keras_relational import environments
from keras_relational.agents.config import TFAgentsConfig
from keras_relational.agents.tf_agents.boxworld_environment import make_boxworld_environment
from keras_relational.agents.tf_agents.tensor_environment import TensorBoxWorldEnvironment
from keras_relational.agents.tf_agents.train_eval import train_eval


def test_tf_environment_specs_steps_and_episode_records():
    config = environments.BoxWorldConfig(goal_length=1, num_distractors=0, max_steps=6)
    env = TensorBoxWorldEnvironment(config, num_envs=3, seed=0, bank_size=16)
    numpy_env = make_boxworld_environment(config, num_envs=3)
    assert env.time_step_spec() == tensor_spec.from_spec(numpy_env.time_step_spec())
    assert env.action_spec() == tensor_spec.from_spec(numpy_env.action_spec())
    time_step = env.reset()
    assert time_step.observation.shape == (3, 14, 14, 3)
    np.testing.assert_array_equal(time_step.step_type, [0, 0, 0])
    step = tf.function(env.step)  # in the graph
    step_types, rewards, solved = [], [], []
    for _ in range(14):
        time_step = step(tf.constant([0, 1, 2], tf.int32))
        step_types.append(time_step.step_type.numpy())
        rewards.append(time_step.reward.numpy())
        solved.append(env.solved.numpy())
    step_types = np.array(step_types)
    # 6 actions, truncation (LAST), then a new level (FIRST), twice.
    np.testing.assert_array_equal(step_types[:, 0], [1] * 5 + [2, 0] + [1] * 5 + [2, 0])
    env.record(step_types, np.array(rewards), np.array(solved))
    assert len(env.finished_episodes) == 6
    assert all(e.length == 6 and not e.solved for e in env.finished_episodes)
    env.fresh_levels_for(100)  # more than the bank has left: installs the next bank
    assert int(step(tf.zeros(3, tf.int32)).step_type[0]) == 1
    env.close()


def test_train_eval_with_the_tensor_environment(tmp_path, no_exports):
    lines = []
    result = train_eval(
        str(tmp_path / "run"), env_backend="tensor", num_iterations=2, eval_episodes=0,
        env_kwargs=dict(goal_length=1, num_distractors=0), num_envs=4, unroll_length=5,
        model_kwargs=dict(key_dim=8, mlp_hidden_units=(16,), head_units=(16,)),
        log_interval=1, print_fn=lines.append)
    assert result["train_step"] == 2
    assert result["frames"] == 2 * 4 * 5
    assert set(result) >= {"frames_per_second", "eval_solve_rate", "test_solve_rates",
                           "policies_dir", "keras_model_dir", "history"}
    assert any("frames/s" in line for line in lines), lines


def test_env_backend_is_checked():
    with pytest.raises(ValueError, match="`env_backend`"):
        TFAgentsConfig(env_backend="gpu")
    with pytest.raises(ValueError, match="`env_backend` must be 'numpy' with Ray actors"):
        TFAgentsConfig(env_backend="tensor", num_ray_actors=2)
