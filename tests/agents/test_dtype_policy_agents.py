"""``dtype_policy`` of the Box-World trainers (issue 23, Sec. 1): a shared field of the configs (so
``train_boxworld --dtype_policy``), float32 logits and values under 16-bit policies, the TF-Agents
V-trace learner and the compiled loop with float16 loss scaling, the policy in result.json."""

import json
import os
import re

import keras
import numpy as np
import pytest

from keras_relational.agents.compiled.config import CompiledConfig
from keras_relational.agents.config import TFAgentsConfig
from keras_relational.agents.networks import agent_model_fn

_LEVELS = dict(goal_length=1, num_distractors=0, room_size=5, observation_type="one_hot")
_TINY = dict(env_kwargs=_LEVELS, num_envs=2, unroll_length=3, log_interval=1, eval_episodes=0,
             num_iterations=2, model_kwargs=dict(key_dim=8, mlp_hidden_units=(8,),
                                                 head_units=(8,), conv_filters=(8, 8)))


def _losses(lines):
    return [float(m.group(1)) for line in lines for m in [re.search(r"loss\s+(\S+) \|", line)]
            if m]


def test_config_checks_the_policy():
    assert TFAgentsConfig().dtype_policy == CompiledConfig().dtype_policy == "float32"
    with pytest.raises(ValueError, match=r"`dtype_policy`.*'float16'"):
        CompiledConfig(dtype_policy="float16")
    with pytest.raises(ValueError, match=r"mixed_float16.*loss scaling.*PPO"):
        TFAgentsConfig(algorithm="ppo", dtype_policy="mixed_float16")
    TFAgentsConfig(algorithm="ppo", dtype_policy="mixed_bfloat16")


def test_network_computes_in_16_bits_with_float32_logits_and_value():
    model = agent_model_fn("relational", (5, 5, 3), 4, dtype_policy="mixed_bfloat16",
                           **_TINY["model_kwargs"])()
    assert keras.config.dtype_policy().name == "float32"  # the global policy is restored
    assert model.get_layer("relational_module").compute_dtype == "bfloat16"
    logits, value = model(np.zeros((2, 5, 5, 3), "uint8"))
    assert [keras.backend.standardize_dtype(t.dtype) for t in (logits, value)] == [
        "float32", "float32"]


@pytest.mark.slow  # a whole train_eval: actors, learner, policy export
def test_tf_agents_vtrace_trains_under_mixed_bfloat16(tmp_path):
    from keras_relational.agents.tf_agents.train_eval import train_eval

    root, lines = str(tmp_path), []
    result = train_eval(root, dtype_policy="mixed_bfloat16", print_fn=lines.append, **_TINY)
    assert result["train_step"] == 2
    losses = _losses(lines)
    assert losses and np.all(np.isfinite(losses)), lines
    with open(os.path.join(root, "result.json")) as f:
        assert json.load(f)["dtype_policy"] == "mixed_bfloat16"


def test_tf_agents_vtrace_agent_scales_the_float16_loss():
    """A finite step trains at the initial scale; a non-finite one is skipped, the scale halved."""
    import tensorflow as tf
    from tf_agents.specs import tensor_spec
    from tf_agents.trajectories import time_step as ts

    from keras_relational.agents.optimizers import make_optimizer
    from keras_relational.agents.tf_agents.boxworld_environment import make_boxworld_environment
    from keras_relational.agents.tf_agents.keras3_network import Keras3Network
    from keras_relational.agents.tf_agents.vtrace_agent import VTraceAgent

    env = make_boxworld_environment(num_envs=2, **_LEVELS)
    time_step_spec = tensor_spec.from_spec(env.time_step_spec())
    model_fn = agent_model_fn("relational", env.observation_spec().shape, 4,
                              observation_dtype=env.observation_spec().dtype,
                              dtype_policy="mixed_float16",
                              **_TINY["model_kwargs"])
    network = Keras3Network(time_step_spec.observation, model_fn)
    optimizer = make_optimizer("rmsprop", 1e-3, "mixed_float16", keras_module=tf.keras)
    assert isinstance(optimizer, tf.keras.mixed_precision.LossScaleOptimizer)
    agent = VTraceAgent(time_step_spec, tensor_spec.from_spec(env.action_spec()), network,
                        optimizer, jit_compile=False)
    shape = tuple(env.observation_spec().shape)
    spec = tensor_spec.add_outer_dims_nest(agent.collect_data_spec, (2, 4))
    rng = np.random.RandomState(0)
    experience = tf.nest.map_structure(lambda s: tf.zeros(s.shape, s.dtype), spec)._replace(
        observation=tf.constant(rng.randint(0, 2, size=(2, 4, *shape)).astype(
            env.observation_spec().dtype)),
        policy_info={"logits": tf.zeros((2, 4, 4))}, step_type=tf.fill((2, 4), ts.StepType.MID),
        reward=tf.constant(rng.normal(size=(2, 4)).astype("float32")), discount=tf.ones((2, 4)))
    (logits, value), _ = network(experience.observation)
    assert (logits.dtype, value.dtype) == (tf.float32, tf.float32)  # TF-Agents' side
    weights = lambda: [v.numpy().copy() for v in network.trainable_variables]  # noqa: E731
    before = weights()
    assert np.isfinite(agent.train(experience).loss.numpy())
    assert float(optimizer.loss_scale.numpy()) == 2.0**15
    trained = weights()
    assert all(not np.array_equal(b, a) for b, a in zip(before, trained, strict=True))
    infinite = experience._replace(reward=tf.fill((2, 4), np.float32(np.inf)))
    agent.train(infinite)
    assert float(optimizer.loss_scale.numpy()) == 2.0**14  # halved, and the step skipped:
    assert all(np.array_equal(t, a) for t, a in zip(trained, weights(), strict=True))


@pytest.mark.slow  # compiles a float16 update, exports the model
def test_compiled_loop_mixed_float16_is_loss_scaled(tmp_path):
    from keras_relational.agents.compiled import checkpointing
    from keras_relational.agents.compiled import train_eval as compiled_train_eval

    root, lines = str(tmp_path), []
    result = compiled_train_eval.train_eval(root, dtype_policy="mixed_float16",
                                            print_fn=lines.append, **_TINY)
    losses = _losses(lines)
    assert result["train_step"] == 2 and losses and np.all(np.isfinite(losses)), lines
    with open(os.path.join(root, "result.json")) as f:
        assert json.load(f)["dtype_policy"] == "mixed_float16"
    with np.load(checkpointing.checkpoints(root)[-1]) as data:
        values = {key: data[key] for key in data.files}
    assert all(np.all(np.isfinite(v)) for k, v in values.items() if k != "meta")
    # The LossScaleOptimizer's scale (2**15 to start) is in the checkpointed optimizer state.
    assert any(v.shape == () and v.dtype == np.float32 and v == 2.0**15
               for v in values.values()), sorted(values)
