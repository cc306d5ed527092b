"""The actor-learner pipeline learns: V-trace on tasks whose solution is known.

These are the pipeline's learning sanity checks (collection with the collect policy, unrolls cut
by ``UnrollQueue``, episode-boundary masks, V-trace bootstrapping, the optimiser): a contextual
bandit, and a two-step task whose reward arrives one step after the action that earns it, with
episodes crossing unroll boundaries. A uniform policy earns 0.25 on both.
"""

import re

import numpy as np
import pytest
import tensorflow as tf
from tf_agents.environments import py_environment
from tf_agents.policies import py_tf_eager_policy
from tf_agents.specs import array_spec, tensor_spec
from tf_agents.train import actor, learner
from tf_agents.train.utils import train_utils
from tf_agents.trajectories import time_step as ts

from keras_relational.agents.optimizers import make_optimizer
from keras_relational.agents.tf_agents.keras3_network import Keras3Network
from keras_relational.agents.tf_agents.unroll_queue import UnrollQueue
from keras_relational.agents.tf_agents.vtrace_agent import VTraceAgent

NUM_CONTEXTS = 4


class _ContextTask(py_environment.PyEnvironment):
    """Batched episodes of ``delay + 1`` steps; the right first action is the shown context.

    ``delay=0``: one step, reward 1 for ``action == context``. ``delay=1``: the first step shows
    the context and pays nothing; the second shows only whether the first action was right
    (and a step marker) and pays 1 if it was, whatever the second action.
    """

    def __init__(self, batch_size, delay, seed):
        super().__init__(handle_auto_reset=False)
        self._batch_size, self._delay = batch_size, delay
        self._rng = np.random.RandomState(seed)
        self.first_step_rewards = []

    @property
    def batched(self):
        return True

    @property
    def batch_size(self):
        return self._batch_size

    def observation_spec(self):
        return array_spec.ArraySpec((NUM_CONTEXTS + 2,), np.float32)

    def action_spec(self):
        return array_spec.BoundedArraySpec((), np.int32, 0, NUM_CONTEXTS - 1)

    def _observation(self):
        obs = np.zeros((self._batch_size, NUM_CONTEXTS + 2), np.float32)
        first = self._t == 0
        obs[first, self._context[first]] = 1.0
        obs[~first, NUM_CONTEXTS] = self._correct[~first]
        obs[~first, NUM_CONTEXTS + 1] = 1.0
        return obs

    def _new_episodes(self, rows):
        self._t[rows] = 0
        self._context[rows] = self._rng.randint(NUM_CONTEXTS, size=rows.sum())
        self._correct[rows] = False

    def _reset(self):
        n = self._batch_size
        self._t, self._context = np.zeros(n, int), np.zeros(n, int)
        self._correct, self._done = np.zeros(n, bool), np.zeros(n, bool)
        self._new_episodes(np.ones(n, bool))
        return ts.TimeStep(np.zeros(n, np.int32), np.zeros(n, np.float32),
                           np.ones(n, np.float32), self._observation())

    def _step(self, action):
        action = np.asarray(action).reshape(-1)
        n = self._batch_size
        restart, active = self._done, ~self._done
        step_type = np.full(n, int(ts.StepType.MID), np.int32)
        reward = np.zeros(n, np.float32)
        first = active & (self._t == 0)
        self._correct[first] = action[first] == self._context[first]
        paying = active & (self._t == self._delay)
        reward[paying] = self._correct[paying]
        self.first_step_rewards.extend(self._correct[first].astype(float))
        self._t[active] += 1
        last = active & (self._t > self._delay)
        step_type[last] = int(ts.StepType.LAST)
        step_type[restart] = int(ts.StepType.FIRST)
        discount = np.where(last, 0.0, 1.0).astype(np.float32)
        self._new_episodes(restart)
        self._done = last
        return ts.TimeStep(step_type, reward, discount, self._observation())


def _mlp():
    import keras

    inputs = keras.Input((NUM_CONTEXTS + 2,))
    hidden = keras.layers.Dense(32, activation="relu")(inputs)
    logits = keras.layers.Dense(NUM_CONTEXTS)(hidden)
    value = keras.layers.Reshape(())(keras.layers.Dense(1)(hidden))
    return keras.Model(inputs, (logits, value))


def _train(tmp_path, delay, updates, batch_size=16, unroll_length=5, learning_rate=3e-3):
    import keras

    keras.utils.set_random_seed(0)
    env = _ContextTask(batch_size, delay, seed=0)
    time_step_spec = tensor_spec.from_spec(env.time_step_spec())
    network = Keras3Network(time_step_spec.observation, _mlp)
    train_step = train_utils.create_train_step()
    agent = VTraceAgent(time_step_spec, tensor_spec.from_spec(env.action_spec()), network,
                        make_optimizer("rmsprop", learning_rate, keras_module=tf.keras),
                        entropy_cost=0.001, train_step_counter=train_step)
    unrolls = UnrollQueue(agent.collect_data_spec, batch_size, unroll_length)
    agent_learner = learner.Learner(str(tmp_path), train_step, agent,
                                    experience_dataset_fn=unrolls.as_dataset,
                                    checkpoint_interval=10**9)
    policy = py_tf_eager_policy.PyTFEagerPolicy(agent.collect_policy, use_tf_function=True)
    collect = actor.Actor(env, policy, train_step, steps_per_run=batch_size * unroll_length,
                          observers=[unrolls])
    try:
        while int(train_step.numpy()) < updates:
            collect.run()
            while unrolls.qsize() and int(train_step.numpy()) < updates:
                agent_learner.run(iterations=1)
    finally:
        unrolls.close()
        agent_learner._experience_iterator = None
    return np.asarray(env.first_step_rewards)


@pytest.mark.slow
@pytest.mark.parametrize("delay", [0, 1], ids=["immediate", "delayed_one_step"])
def test_vtrace_learns_the_right_first_action(tmp_path, delay):
    rewards = _train(tmp_path, delay, updates=150)
    early, late = rewards[:400].mean(), rewards[-400:].mean()
    assert early < 0.5, early  # starts near the uniform policy's 0.25
    assert late > 0.9, (early, late)


def _context_agent(optimizer_name, dtype_policy):
    import keras

    keras.utils.set_random_seed(0)
    env = _ContextTask(2, 0, seed=0)
    time_step_spec = tensor_spec.from_spec(env.time_step_spec())
    network = Keras3Network(time_step_spec.observation, _mlp)
    train_step = train_utils.create_train_step()
    agent = VTraceAgent(time_step_spec, tensor_spec.from_spec(env.action_spec()), network,
                        make_optimizer(optimizer_name, 1e-3, dtype_policy, keras_module=tf.keras),
                        train_step_counter=train_step)
    return agent, train_step


@pytest.mark.parametrize("optimizer_name, dtype_policy", [
    ("rmsprop", "float32"), ("adam", "float32"), ("rmsprop", "mixed_float16")])
def test_the_learner_makes_the_optimizer_variables_of_tf_agents_traced_train_step(
        tmp_path, optimizer_name, dtype_policy):
    """GuardedLearner builds the optimizer where TF-Agents' Learner traces a train step to.

    Same variables in the same order (the checkpoint names them by position), and a checkpoint
    the stock Learner wrote restores into them: runs checkpointed before resume.
    """
    from keras_relational.agents.tf_agents.learning import GuardedLearner

    def described(agent):  # layer names differ by their counters (dense_12, dense_15)
        return [(re.sub(r"_\d+", "", v.name), tuple(v.shape), v.dtype)
                for v in agent._optimizer.variables]

    stock_agent, stock_step = _context_agent(optimizer_name, dtype_policy)
    unrolls = UnrollQueue(stock_agent.collect_data_spec, 2, 3)  # the batch spec traced
    stock = learner.Learner(str(tmp_path), stock_step, stock_agent, checkpoint_interval=10**9,
                            experience_dataset_fn=unrolls.as_dataset)
    unrolls.close()
    rng = np.random.default_rng(0)
    for variable in stock_agent._optimizer.variables:
        variable.assign(rng.random(variable.shape).astype(variable.dtype.as_numpy_dtype))
    stock_step.assign(7)
    stock._checkpointer.save(stock_step)

    guarded_agent, guarded_step = _context_agent(optimizer_name, dtype_policy)
    guarded_variables = len(guarded_agent._optimizer.variables)
    GuardedLearner(str(tmp_path), guarded_step, guarded_agent, checkpoint_interval=10**9)
    assert guarded_variables < len(stock_agent._optimizer.variables)  # the Learner made them
    assert described(guarded_agent) == described(stock_agent)
    assert int(guarded_step.numpy()) == 7
    for restored, saved in zip(guarded_agent._optimizer.variables,
                               stock_agent._optimizer.variables, strict=True):
        np.testing.assert_array_equal(restored.numpy(), saved.numpy())
