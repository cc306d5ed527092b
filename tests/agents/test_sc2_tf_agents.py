"""The SC2 agent through TF-Agents: the recurrent network, the two-stage policy, the V-trace
agent with the composite target (its loss equal to the compiled SC2 learner's on one unroll),
and train steps through a driver.

No pysc2 needed: the tiny stand-in environment of test_sc2_learning.py, with the adapter's specs
(tests/environments/test_sc2.py runs the TF-Agents trainer on pysc2's mock environment).
"""

import os
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
from dm_env import specs
from tf_agents.environments import dm_control_wrapper
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import time_step as ts
from tf_agents.trajectories import trajectory

from keras_relational.agents.sc2 import train_eval as sc2_train_eval
from keras_relational.agents.sc2.acting import SC2Actor
from keras_relational.agents.sc2.learning import SC2VTraceLearner, as_tensors
from keras_relational.agents.sc2.policy import ARGUMENTS
from keras_relational.agents.tf_agents.sc2_agent import sc2_vtrace_agent
from keras_relational.agents.tf_agents.sc2_network import SC2Network
from keras_relational.agents.tf_agents.sc2_policy import SC2Policy
from keras_relational.agents.tf_agents.vtrace_agent import VTraceAgent
from keras_relational.models.sc2_agent import sc2_agent

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_sc2_learning import FUNCTIONS, MASK, SIZE, SIZES, SMALL, TinySC2  # noqa: E402

COSTS = dict(discount=0.99, entropy_cost=1e-2, baseline_cost=0.1, reward_scale=1.0, lambda_=1.0)


class SpecTinySC2(TinySC2):
    """:class:`TinySC2` with the adapter's specs (what TF-Agents' wrappers read)."""

    def observation_spec(self):
        return {"screen": specs.Array((SIZE, SIZE, 2), np.int32, "screen"),
                "minimap": specs.Array((SIZE, SIZE, 2), np.int32, "minimap"),
                "player": specs.Array((11,), np.float32, "player"),
                "available_actions": specs.BoundedArray((FUNCTIONS,), np.float32, 0.0, 1.0),
                "previous_function": specs.BoundedArray((), np.int32, 0, FUNCTIONS - 1),
                "previous_spatial": specs.BoundedArray((2,), np.float32, 0.0, 1.0)}

    def action_spec(self):
        spec = {"function": specs.BoundedArray((), np.int32, 0, FUNCTIONS - 1, "function")}
        spec.update({name: specs.BoundedArray((), np.int32, 0, SIZES[name] - 1, name)
                     for name in ARGUMENTS})
        return spec

    def argument_mask(self):
        return ARGUMENTS, MASK

    def close(self):
        pass

    def reward_spec(self):
        return specs.Array((), np.float32, "reward")

    def discount_spec(self):
        return specs.BoundedArray((), np.float32, 0.0, 1.0, "discount")


def _tf_specs():
    env = dm_control_wrapper.DmControlWrapper(SpecTinySC2(0))  # as the trainer sees it
    return tensor_spec.from_spec(env.time_step_spec()), tensor_spec.from_spec(env.action_spec())


def test_policy_samples_available_functions_and_records_the_composite_log_prob():
    keras.utils.set_random_seed(1)
    time_step_spec, action_spec = _tf_specs()
    network = SC2Network(time_step_spec.observation, lambda: sc2_agent(**SMALL))
    policy = SC2Policy(time_step_spec, action_spec, network, MASK)
    env = SpecTinySC2(3)
    observation = env.reset().observation
    batch = {key: tf.constant(np.stack([value] * 3)) for key, value in observation.items()}
    time_step = ts.restart(batch, batch_size=3)
    state = policy.get_initial_state(3)
    step = policy.action(time_step, state, seed=7)
    function = step.action["function"].numpy()
    assert (observation["available_actions"][function] == 1.0).all(), function
    # The recorded log-probability is the full model's composite one for that action.
    model = network.keras_model
    out = model(dict(batch, state_h=state[0], state_c=state[1],
                     function_id=tf.constant(function)))
    from keras_relational.models.sc2_agent import composite_log_prob_and_entropy

    expected, _ = composite_log_prob_and_entropy(out, step.action, MASK)
    np.testing.assert_allclose(step.info["log_prob"].numpy(), expected, atol=1e-5)
    np.testing.assert_allclose(step.state[0].numpy(), out["state_h"], atol=1e-6)
    greedy = SC2Policy(time_step_spec, action_spec, network, MASK, greedy=True)
    logits = np.asarray(out["function_logits"])
    assert (greedy.action(time_step, state).action["function"].numpy()
            == logits.argmax(-1)).all()
    with pytest.raises(ValueError, match="argument_mask"):
        SC2Policy(time_step_spec, action_spec, network, MASK[:, :3])


def test_network_unrolls_a_trajectory_as_steps_one_by_one():
    keras.utils.set_random_seed(2)
    time_step_spec, _ = _tf_specs()
    network = SC2Network(time_step_spec.observation, lambda: sc2_agent(**SMALL))
    env = SpecTinySC2(4)
    steps = [env.reset()] + [env.step({"function": 0, **{n: 0 for n in ARGUMENTS}})
                             for _ in range(4)]  # a LAST then a FIRST step inside
    observation = {key: tf.constant(np.stack([s.observation[key] for s in steps])[None])
                   for key in steps[0].observation}
    step_type = tf.constant([[int(s.step_type) for s in steps]], tf.int32)
    state = tuple(tf.random.normal([1, *spec.shape]) for spec in network.state_spec)
    whole, whole_state = network(observation, step_type=step_type, network_state=state)
    assert whole["function_logits"].shape == (1, 5, FUNCTIONS)
    for t in range(5):
        out, state = network(tf.nest.map_structure(lambda x: x[:, t], observation),  # noqa: B023
                             step_type=step_type[:, t], network_state=state)
        np.testing.assert_allclose(out["value"], whole["value"][:, t], atol=1e-5)
    np.testing.assert_allclose(state[0], whole_state[0], atol=1e-5)


def test_vtrace_agent_needs_policies_with_a_target_fn():
    time_step_spec, action_spec = _tf_specs()
    network = SC2Network(time_step_spec.observation, lambda: sc2_agent(**SMALL))
    with pytest.raises(ValueError, match="collect_policy"):
        VTraceAgent(time_step_spec, action_spec, network, tf.keras.optimizers.Adam(),
                    target_fn=lambda network, trajectory: None)


def test_tf_agents_loss_equals_the_compiled_sc2_learner_loss():
    """The TF-Agents agent (composite target) and the compiled SC2 learner: one loss and the
    same gradients on one unroll and one set of weights, off-policy, across an episode start,
    from a non-zero ConvLSTM state."""
    keras.utils.set_random_seed(0)
    model = sc2_agent(**SMALL)
    actor = SC2Actor([SpecTinySC2(0), SpecTinySC2(1)], model, MASK, seed=0)
    actor.collect(2)  # the next unroll starts mid-episode, from a non-zero state
    unroll = actor.collect(4)
    assert (unroll.step_type == 2).any() and np.abs(unroll.state[0]).max() > 0
    rng = np.random.default_rng(0)
    unroll = unroll._replace(
        reward=rng.uniform(-1, 2, unroll.reward.shape).astype(np.float32),
        behaviour_log_prob=unroll.behaviour_log_prob + rng.normal(
            0, 0.5, unroll.behaviour_log_prob.shape).astype(np.float32))
    learner = SC2VTraceLearner(model, keras.optimizers.Adam(1e-3), MASK, compile_mode="eager",
                               gradient_clip_norm=None, discount=COSTS["discount"],
                               entropy_cost=COSTS["entropy_cost"],
                               baseline_cost=COSTS["baseline_cost"])
    (loss, parts), grads = learner._loss_and_grads(
        [v.value for v in model.trainable_variables], as_tensors(unroll))

    time_step_spec, action_spec = _tf_specs()
    network = SC2Network(time_step_spec.observation, lambda: model)  # the same weights
    agent = sc2_vtrace_agent(time_step_spec, action_spec, network, MASK,
                             tf.keras.optimizers.Adam(1e-3), gradient_clip_norm=None,
                             use_tf_function=False, **COSTS)

    def batch_major(x, pad=False):  # [T(+1), B, ...] -> [B, T+1, ...]
        x = np.asarray(x)
        if pad:  # the agent ignores the last step's action, log-prob, reward and discount
            x = np.concatenate([x, x[-1:]], axis=0)
        return tf.constant(np.swapaxes(x, 0, 1))

    steps = unroll.step_type.shape[0]
    state = {key: batch_major(np.repeat(s[None], steps, axis=0))  # only step 0's is read
             for key, s in zip(("state_h", "state_c"), unroll.state, strict=True)}
    experience = trajectory.Trajectory(
        step_type=batch_major(unroll.step_type),
        observation={key: batch_major(value) for key, value in unroll.observation.items()},
        action={key: batch_major(value, pad=True) for key, value in unroll.action.items()},
        policy_info=dict(state, log_prob=batch_major(unroll.behaviour_log_prob, pad=True)),
        next_step_type=batch_major(np.concatenate([unroll.step_type[1:],
                                                   unroll.step_type[-1:]])),
        reward=batch_major(unroll.reward, pad=True),
        discount=batch_major(unroll.discount, pad=True))
    expected_loss, expected_grads, extra = agent._loss_and_gradients(experience)
    np.testing.assert_allclose(float(loss), float(expected_loss), rtol=1e-4, atol=1e-4)
    for part, expected in zip(parts, extra[:3], strict=True):
        np.testing.assert_allclose(float(part), float(expected), rtol=1e-4, atol=1e-4)
    assert len(grads) == len(expected_grads) == len(model.trainable_variables)
    for variable, grad, expected in zip(model.trainable_variables, grads, expected_grads,
                                        strict=True):
        # Embedding gradients are IndexedSlices on both sides.
        grad, expected = tf.convert_to_tensor(grad), tf.convert_to_tensor(expected)
        np.testing.assert_allclose(grad.numpy(), expected.numpy(), rtol=1e-3, atol=1e-5,
                                   err_msg=variable.path)


@pytest.mark.parametrize("trainer", ["tf_agents", "compiled"])
def test_train_eval_with_either_trainer_exports_the_greedy_policy(tmp_path, trainer):
    lines = []
    result = sc2_train_eval.train_eval(
        str(tmp_path), trainer=trainer, compile_mode="eager", num_envs=2, unroll_length=2,
        num_iterations=1, screen_size=SIZE, environments=[SpecTinySC2(7), SpecTinySC2(8)],
        model_kwargs={k: v for k, v in SMALL.items() if k not in ("screen_size", "num_functions",
                                                                   "num_blocks", "num_heads")},
        num_blocks=1, num_heads=1, print_fn=lines.append)
    assert f"{trainer} trainer" in lines[0] and lines[-1].startswith("update 1: loss"), lines
    assert np.isfinite(result["loss"]["loss"]) and result["config"]["trainer"] == trainer
    assert os.path.exists(os.path.join(result["policy_dir"], "saved_model.pb"))
    # The TF-Agents trainer's driver acted with SC2Policy (SpecTinySC2.step asserts that the
    # function is available and the arguments in range); sc2_tf_agents_check.py runs two of its
    # train steps on pysc2's mock and checks that the weights moved.
    assert result["updates"] == 1
