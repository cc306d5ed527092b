import numpy as np
import tensorflow as tf
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import time_step as ts
from tf_agents.utils import common

from keras_relational.agents.networks import agent_model_fn
from keras_relational.agents.optimizers import make_optimizer
from keras_relational.agents.tf_agents.boxworld_environment import make_boxworld_environment
from keras_relational.agents.tf_agents.keras3_network import Keras3Network
from keras_relational.agents.tf_agents.vtrace_agent import VTraceAgent

_SMALL = dict(key_dim=8, mlp_hidden_units=(16,), head_units=(16,))


def _specs(env):
    return (tensor_spec.from_spec(env.time_step_spec()),
            tensor_spec.from_spec(env.action_spec()))


def _network(env, **kwargs):
    model_fn = agent_model_fn("relational", env.observation_spec().shape, 4, **_SMALL)
    return Keras3Network(tensor_spec.from_spec(env.observation_spec()), model_fn, **kwargs)


def _random_experience(agent, seed=0):
    """A random ``[4, 6]`` batch of BoxWorld trajectory steps (no episode boundaries)."""
    spec = tensor_spec.add_outer_dims_nest(agent.collect_data_spec, (4, 6))
    experience = tf.nest.map_structure(lambda s: tf.zeros(s.shape, s.dtype), spec)
    rng = np.random.RandomState(seed)
    return experience._replace(
        observation=tf.constant(rng.randint(0, 256, size=(4, 6, 14, 14, 3)).astype("uint8")),
        action=tf.constant(rng.randint(0, 4, size=(4, 6)).astype("int32")),
        policy_info={"logits": tf.constant(rng.normal(size=(4, 6, 4)).astype("float32"))},
        reward=tf.constant(rng.normal(size=(4, 6)).astype("float32")),
        step_type=tf.fill((4, 6), ts.StepType.MID),
        next_step_type=tf.fill((4, 6), ts.StepType.MID),
        discount=tf.ones((4, 6)))


def test_every_keras3_variable_is_trained_and_checkpointed(tmp_path):
    env = make_boxworld_environment(num_envs=4, goal_length=1, num_distractors=0)
    time_step_spec, action_spec = _specs(env)
    network = _network(env)
    optimizer = make_optimizer("rmsprop", 1e-2, keras_module=tf.keras)
    assert type(optimizer).__module__.startswith("tf_keras."), type(optimizer).__module__
    agent = VTraceAgent(time_step_spec, action_spec, network, optimizer, jit_compile=False)
    keras_variables = network.keras_model.trainable_variables
    tracked = {id(v) for v in agent.collect_policy.variables()}
    assert len(keras_variables) > 10
    for variable in keras_variables:
        assert id(variable.value) in tracked, variable.path
    assert {id(v) for v in network.trainable_variables} == {id(v.value) for v in keras_variables}

    # One train step on a random [B, T+1] batch changes every variable.
    experience = _random_experience(agent)
    before = [v.numpy().copy() for v in keras_variables]
    loss = agent.train(experience).loss
    assert np.isfinite(loss.numpy())
    for variable, old in zip(keras_variables, before, strict=True):
        assert not np.array_equal(variable.numpy(), old), f"{variable.path} did not change"

    # A tf.train checkpoint of the agent saves and restores the Keras 3 weights.
    checkpointer = common.Checkpointer(str(tmp_path / "ckpt"), agent=agent)
    checkpointer.save(global_step=tf.constant(1, tf.int64))
    trained = [v.numpy().copy() for v in keras_variables]
    for variable in keras_variables:
        variable.assign(np.zeros(variable.shape, variable.dtype))
    common.Checkpointer(str(tmp_path / "ckpt"), agent=agent).initialize_or_restore()
    for variable, value in zip(keras_variables, trained, strict=True):
        np.testing.assert_array_equal(variable.numpy(), value)


def test_copies_share_no_variables_and_outer_dims_are_squashed():
    env = make_boxworld_environment(num_envs=2, goal_length=1, num_distractors=0)
    network = _network(env)
    network.create_variables()
    target = network.copy(name="target")
    target.create_variables()
    assert not {id(v) for v in network.variables} & {id(v) for v in target.variables}
    assert len(target.variables) == len(network.variables)
    observation = tf.zeros((3, 5, 14, 14, 3), tf.uint8)  # [B, T, ...] as PPO feeds
    (logits, value), _ = network(observation)
    assert logits.shape == (3, 5, 4) and value.shape == (3, 5)


def test_reward_scale_is_the_same_as_scaled_rewards():
    env = make_boxworld_environment(num_envs=4, goal_length=1, num_distractors=0)
    time_step_spec, action_spec = _specs(env)
    network = _network(env)
    rmsprop = lambda: make_optimizer("rmsprop", 1e-3, keras_module=tf.keras)  # noqa: E731
    scaled = VTraceAgent(time_step_spec, action_spec, network, rmsprop(), reward_scale=0.1,
                         jit_compile=False)
    plain = VTraceAgent(time_step_spec, action_spec, network, rmsprop(), jit_compile=False)
    experience = _random_experience(scaled)
    loss = scaled.loss(experience)
    expected = plain.loss(experience._replace(reward=0.1 * experience.reward))
    np.testing.assert_allclose(loss.loss.numpy(), expected.loss.numpy(), rtol=1e-5)
    np.testing.assert_allclose(loss.extra.value_loss.numpy(), expected.extra.value_loss.numpy(),
                               rtol=1e-5)
    unscaled = plain.loss(experience)
    assert not np.isclose(unscaled.loss.numpy(), loss.loss.numpy())


def test_optimizer_choice_and_error():
    import keras
    import pytest

    # One definition of the papers' settings, built for tf-keras (TF-Agents) or Keras 3.
    for keras_module in (tf.keras, keras):
        adam = make_optimizer("adam", 1e-3, keras_module=keras_module)
        assert isinstance(adam, keras_module.optimizers.Adam)
        rmsprop = make_optimizer("rmsprop", 1e-3, keras_module=keras_module)
        assert isinstance(rmsprop, keras_module.optimizers.RMSprop)
        assert (rmsprop.epsilon, rmsprop.rho) == (0.1, 0.99)
        scaled = make_optimizer("rmsprop", 1e-3, "mixed_float16", keras_module=keras_module)
        assert isinstance(scaled, keras_module.mixed_precision.LossScaleOptimizer)
        with pytest.raises(ValueError, match="`optimizer` must be one of .*received 'sgd'"):
            make_optimizer("sgd", 1e-3, keras_module=keras_module)
    assert type(make_optimizer("adam", 1e-3)).__module__.startswith("keras.")  # Keras 3 default


def test_one_hot_observations_are_not_rescaled_like_pixels():
    one_hot = make_boxworld_environment(num_envs=2, goal_length=1, num_distractors=0,
                                        observation_type="one_hot")
    spec = one_hot.observation_spec()
    model = agent_model_fn("relational", spec.shape, 4, observation_dtype=spec.dtype,
                           **_SMALL)()
    assert model.get_layer("relational_agent_rescale").scale == 1.0
    pixels = make_boxworld_environment(num_envs=2, goal_length=1, num_distractors=0)
    spec = pixels.observation_spec()
    model = agent_model_fn("relational", spec.shape, 4, observation_dtype=spec.dtype,
                           **_SMALL)()
    assert model.get_layer("relational_agent_rescale").scale == 1.0 / 255.0


def test_xla_compiled_acting_policy_matches_the_exported_one():
    from tf_agents.trajectories import time_step as ts_lib

    from keras_relational.agents.tf_agents.acting import ActorCriticPolicy

    env = make_boxworld_environment(num_envs=3, goal_length=1, num_distractors=0)
    time_step_spec, action_spec = _specs(env)
    network = _network(env)
    time_step = tf.nest.map_structure(tf.convert_to_tensor, env.reset())
    time_step = ts_lib.TimeStep(*time_step)
    plain = ActorCriticPolicy(time_step_spec, action_spec, network)
    compiled = ActorCriticPolicy(time_step_spec, action_spec, network, jit_compile=True)
    expected = plain.distribution(time_step).info["logits"]
    logits = compiled.distribution(time_step).info["logits"]
    np.testing.assert_allclose(logits.numpy(), expected.numpy(), rtol=1e-5, atol=1e-5)
    assert {id(v) for v in compiled.variables()} == {id(v) for v in plain.variables()}
    action = compiled.action(time_step).action.numpy()
    assert action.shape == (3,) and ((0 <= action) & (action < 4)).all()
