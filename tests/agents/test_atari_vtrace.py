"""Atari (ale-py) as a dm_env, and a tiny V-trace run of the S11 PrediNet agent on Pong."""

import os

import numpy as np
import pytest

pytest.importorskip("ale_py", reason="ale-py (optional) is not installed")

from keras_relational.environments import atari  # noqa: E402


def test_dm_env_adapter():
    env = atari.AtariEnvironment("pong", seed=0, max_episode_steps=3)
    assert env.observation_spec().shape == (210, 160, 3)
    assert env.action_spec().num_values == 18
    first = env.reset()
    assert first.first() and first.observation.dtype == np.uint8
    steps = [env.step(0) for _ in range(3)]
    assert steps[-1].last() and steps[-1].discount == 1.0  # truncated, not terminated
    assert env.step(0).first()  # the step after LAST starts a new episode
    with pytest.raises(ValueError, match=r"`game`: expected an ale-py ROM id.*'pongg'"):
        atari.AtariEnvironment("pongg")


@pytest.mark.slow
def test_vtrace_smoke_run_with_the_predinet_torso(tmp_path):
    import functools

    from tf_agents.specs import tensor_spec
    from tf_agents.train.utils import train_utils

    from keras_relational.agents.config import TFAgentsConfig
    from keras_relational.agents.tf_agents import acting, learning
    from keras_relational.agents.tf_agents.atari_environment import make_atari_environment
    from keras_relational.agents.tf_agents.keras3_network import Keras3Network
    from keras_relational.agents.tf_agents.unroll_queue import UnrollQueue
    from keras_relational.models import atari_agents

    env = make_atari_environment("pong", num_envs=2, seed=0)
    config = TFAgentsConfig(num_envs=2, unroll_length=3, num_iterations=2, jit_compile=False,
                            actor_jit_compile=False, checkpoint_interval=100, log_interval=1,
                            policy_save_interval=100, optimizer="rmsprop", learning_rate=1e-4)
    time_step_spec = tensor_spec.from_spec(env.time_step_spec())
    action_spec = tensor_spec.from_spec(env.action_spec())
    model_fn = functools.partial(atari_agents.atari_predinet_agent, recurrent=False,
                                 num_actions=18)
    network = Keras3Network(time_step_spec.observation, model_fn, name="atari_predinet")
    train_step = train_utils.create_train_step()
    agent = learning.make_agent(config, time_step_spec, action_spec, network, model_fn,
                                train_step)
    unrolls = UnrollQueue(agent.collect_data_spec, config.num_envs, config.unroll_length)
    learner = learning.make_learner(str(tmp_path), config, agent, unrolls, train_step)
    actor = acting.in_process_actor(env, agent.collect_policy, train_step, unrolls,
                                    os.path.join(str(tmp_path), "collect"), 1)
    central = network.keras_model.get_layer("predinet")
    before = np.array(central.query_kernel_1)
    loss = None
    for _ in range(10):  # as train_eval's loop: act, then learn from every complete unroll
        actor.run()
        while unrolls.qsize() and int(train_step.numpy()) < 2:
            loss = learner.run(iterations=1).loss
        if int(train_step.numpy()) == 2:
            break
    assert int(train_step.numpy()) == 2 and np.isfinite(float(loss))
    assert not np.array_equal(before, np.array(central.query_kernel_1))
    unrolls.close()
