"""The Ray actor fleet (IMPALA-style actors for the V-trace learner) on a local 2-CPU Ray."""

import glob
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import ray
import tensorboard_tags
import tensorflow as tf
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import policy_step, trajectory
from tf_agents.trajectories import time_step as ts

from keras_relational.agents.networks import agent_model_fn
from keras_relational.agents.tf_agents import ray_actors
from keras_relational.agents.tf_agents.acting import ActorCriticPolicy
from keras_relational.agents.tf_agents.boxworld_environment import make_boxworld_environment
from keras_relational.agents.tf_agents.keras3_network import Keras3Network
from keras_relational.agents.tf_agents.train_eval import train_eval
from keras_relational.agents.tf_agents.unroll_queue import UnrollQueue

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# max_steps=4: episodes are cut every few steps, so unrolls of 5 steps cross episode boundaries.
_ENV_KWARGS = dict(goal_length=1, num_distractors=0, room_size=6, max_steps=4)
_MODEL_KWARGS = dict(key_dim=8, mlp_hidden_units=(16,), head_units=(16,))
_NUM_ENVS, _UNROLL = 4, 5


@pytest.fixture(scope="module")
def local_ray():
    """A fresh local Ray with 2 CPUs (never a cluster found on the machine), shut down after."""
    ray.init(address="local", num_cpus=2, include_dashboard=False,
             object_store_memory=int(2e8), log_to_driver=False)
    yield
    ray.shutdown()


def _process_gone(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] in ("Z", "X")  # zombie: dead, not reaped
    except FileNotFoundError:
        return True


def _kill_and_wait(pid, timeout=60):
    os.kill(pid, signal.SIGKILL)
    deadline = time.time() + timeout
    while not _process_gone(pid):
        assert time.time() < deadline, f"actor process {pid} still alive {timeout} s after SIGKILL"
        time.sleep(0.1)


def _scalars(log_dir, tag):
    values = []
    for path in glob.glob(os.path.join(log_dir, "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                if value.tag == tag:
                    values.append((event.step, float(tf.make_ndarray(value.tensor))))
    return sorted(values)


def _policy_variables(path):
    reader = tf.train.load_checkpoint(path)
    return {name: reader.get_tensor(name) for name, _ in tf.train.list_variables(path)
            if name.startswith("model_variables/")}


@pytest.mark.slow
@pytest.mark.subprocess
def test_two_ray_actors_train_end_to_end_and_survive_a_killed_actor(tmp_path, local_ray):
    """train_eval(num_ray_actors=2): the learner trains on the actors' unrolls (its weights
    change), the policy lag is recorded, and a SIGKILLed actor is replaced mid-run."""
    root = str(tmp_path / "run")
    lines, killed = [], []

    def print_fn(line):
        lines.append(line)
        if line.startswith("Ray actor fleet:"):
            killed.append(int(line.split("actor 0 pid ")[1].split()[0]))
        if line.startswith("step      2 |"):
            _kill_and_wait(killed[0])
            time.sleep(2)  # lets Ray see the death; the fleet must notice on the next waits

    num_iterations = 8
    result = train_eval(root, num_iterations=num_iterations, num_envs=_NUM_ENVS,
                        unroll_length=_UNROLL, env_kwargs=_ENV_KWARGS,
                        model_kwargs=_MODEL_KWARGS, log_interval=1, eval_episodes=0,
                        jit_compile=False, num_ray_actors=2, weight_sync_interval=1,
                        policy_save_interval=1, print_fn=print_fn)

    assert result["train_step"] == num_iterations
    assert result["actor_jit_compile"] is True  # V-trace's default: Ray actors act through XLA
    assert any(line.startswith("Ray actor fleet: 2 actors") for line in lines), lines
    # The killed actor was noticed, named and replaced; training still reached the step count.
    restart_lines = [line for line in lines if line.startswith("Ray actor 0 (pid ")]
    assert len(restart_lines) == 1 and f"pid {killed[0]} " in restart_lines[0], lines
    assert "died" in restart_lines[0] and "restarting" in restart_lines[0]
    assert [v for _, v in _scalars(os.path.join(root, "collect"), "actor_restarts")] == [1.0]
    # Policy lag: one value per learner step in TensorBoard and in every progress line; with two
    # actors in flight, the unroll trained at step 1 was collected with the step-0 weights.
    lags = _scalars(os.path.join(root, "collect"), "policy_lag")
    assert [step for step, _ in lags] == list(range(num_iterations)), lags
    assert all(lag >= 0 for _, lag in lags) and lags[1][1] >= 1, lags
    progress = [line for line in lines if line.startswith("step ")]
    assert len(progress) == num_iterations and all("policy lag" in p for p in progress), lines
    # The collect metrics TF-Agents users expect, from the Ray actors' episodes too.
    collect = tensorboard_tags.scalar_tags(os.path.join(root, "collect"))
    assert set(tensorboard_tags.COLLECT_TAGS) <= set(collect), sorted(collect)
    steps = [v for _, v in collect["Metrics/EnvironmentSteps"]]
    assert steps == [_NUM_ENVS * _UNROLL * (i + 1) for i in range(num_iterations)], steps
    # The weights changed: the policy checkpoint of the first step vs the one of the last, which
    # is also what the exported SavedModel holds.
    policies = os.path.join(root, "policies")

    def checkpoint(step):
        return _policy_variables(os.path.join(
            policies, "checkpoints", f"policy_checkpoint_{step:010d}", "variables", "variables"))

    before, after = checkpoint(1), checkpoint(num_iterations)
    assert before.keys() == after.keys() and len(before) > 4, sorted(before)
    changed = [name for name in before if not np.array_equal(before[name], after[name])]
    assert len(changed) == len(before), sorted(set(before) - set(changed))
    exported = _policy_variables(os.path.join(policies, "policy", "variables", "variables"))
    assert exported.keys() == after.keys()
    for name in after:
        np.testing.assert_array_equal(exported[name], after[name], err_msg=name)
    assert ray.is_initialized()  # the fleet leaves a Ray it did not start running


class _ListQueue(list):
    """Stands in for the learner's UnrollQueue: keeps every unroll."""

    put = list.append


def _replay_in_process(outputs, data_spec, seed, model, weights_by_version):
    """Checks actor unrolls against the in-process path with the same levels and actions.

    Replays the recorded actions in a fresh in-process BoxWorld with the actor's seed, feeds
    ``trajectory.from_transition`` steps to an :class:`UnrollQueue` (what TF-Agents' driver does
    in ``train_eval``) and requires identical unrolls; the recorded logits must be the network's
    logits under the weights of the version the actor reported.
    """
    env = make_boxworld_environment("original", num_envs=_NUM_ENVS, seed=seed, **_ENV_KWARGS)
    queue = UnrollQueue(data_spec, _NUM_ENVS, _UNROLL, max_unrolls=len(outputs))
    time_step = env.reset()
    for k, output in enumerate(outputs):
        unroll = output.unroll
        for t in range(0 if k == 0 else 1, _UNROLL + 1):
            action, logits = unroll.action[:, t], unroll.policy_info["logits"][:, t]
            next_time_step = env.step(action)
            queue(trajectory.from_transition(
                time_step, policy_step.PolicyStep(action, (), {"logits": logits}),
                next_time_step))
            time_step = next_time_step
        expected = queue._queue.get_nowait()  # the unroll train_eval's learner would read
        tf.nest.map_structure(np.testing.assert_array_equal, expected, unroll)
        model.set_weights(weights_by_version[output.weights_version])
        fresh = slice(0 if k == 0 else 1, None)  # step 0 was chosen by the previous call
        observations = unroll.observation[:, fresh].reshape(-1, *unroll.observation.shape[2:])
        logits, _ = model(observations)
        np.testing.assert_allclose(unroll.policy_info["logits"][:, fresh].reshape(logits.shape),
                                   np.asarray(logits), rtol=1e-5, atol=1e-5)


def _check_spec(unroll, data_spec):
    batched = tensor_spec.add_outer_dims_nest(data_spec, (_NUM_ENVS, _UNROLL + 1))
    tf.nest.assert_same_structure(batched, unroll)
    for spec, array in zip(tf.nest.flatten(batched), tf.nest.flatten(unroll), strict=True):
        assert array.dtype == spec.dtype.as_numpy_dtype and array.shape == tuple(spec.shape), (
            spec, array.dtype, array.shape)


@pytest.mark.slow
@pytest.mark.subprocess
def test_fleet_unrolls_match_the_in_process_path_and_a_dead_actor_comes_back(local_ray):
    """Every unroll has the agent's collect_data_spec and the in-process semantics (shared
    boundary step, FIRST after LAST, behaviour logits of the broadcast weights); a SIGKILLed
    actor is replaced by one with a new seed whose unrolls reach the learner."""
    env = make_boxworld_environment("original", num_envs=1, **_ENV_KWARGS)
    time_step_spec = tensor_spec.from_spec(env.time_step_spec())
    action_spec = tensor_spec.from_spec(env.action_spec())
    model_fn = agent_model_fn("relational", env.observation_spec().shape, 4, **_MODEL_KWARGS)
    network = Keras3Network(time_step_spec.observation, model_fn)
    data_spec = ActorCriticPolicy(time_step_spec, action_spec, network).trajectory_spec
    model = network.keras_model
    reference_model = model_fn()
    train_step = tf.Variable(0, dtype=tf.int64)
    weights_by_version = {}
    sink, lines = _ListQueue(), []

    def learner_step():  # what the learner does to the weights, in miniature
        step = int(train_step.numpy())
        weights_by_version.setdefault(step, model.get_weights())
        model.set_weights([w + 0.01 * np.float32(step + 1) for w in model.get_weights()])
        train_step.assign_add(1)
        weights_by_version[step + 1] = model.get_weights()

    seed = 7
    # One actor: after the kill the learner has nothing to train on until the replacement
    # delivers, so run() itself must restart it and wait (two actors: see the test above).
    fleet = ray_actors.RayActorFleet(
        1, sink, model, train_step, model_fn, env_kwargs=_ENV_KWARGS, num_envs=_NUM_ENVS,
        unroll_length=_UNROLL, data_spec=data_spec, seed=seed, print_fn=lines.append,
        actor_jit_compile=True)  # the replay below checks its logits against the plain model
    try:
        weights_by_version[0] = model.get_weights()
        outputs = []
        for _ in range(3):
            outputs.append(fleet.run())
            learner_step()
        old_pid = fleet.pids[0]
        _kill_and_wait(old_pid)
        for _ in range(3):
            outputs.append(fleet.run())
            learner_step()
    finally:
        fleet.close()

    assert list(sink) == [o.unroll for o in outputs]
    assert fleet.restarts == 1 and fleet.pids[0] != old_pid
    # The collect call in flight at the kill may have finished before it (a valid unroll, kept
    # in Ray's object store): the old actor delivers 3 or 4 unrolls, then only the replacement.
    pids = [o.pid for o in outputs]
    switch = pids.index(fleet.pids[0])
    assert switch in (3, 4) and set(pids[:switch]) == {old_pid}, pids
    assert set(pids[switch:]) == {fleet.pids[0]}, pids
    assert any(line.startswith(f"Ray actor 0 (pid {old_pid} ") and "died" in line
               for line in lines), lines
    assert any(line.startswith(f"Ray actor 0 is back (pid {fleet.pids[0]} ") for line in lines)
    for output in outputs:
        _check_spec(output.unroll, data_spec)
    # Learner step i trained on outputs[i]: its weights are never newer, and the lag shows.
    versions = [o.weights_version for o in outputs]
    assert all(v <= step for step, v in enumerate(versions)) and max(versions) >= 2, versions
    assert fleet.policy_lags == [step - v for step, v in enumerate(versions)]

    first = [o for o in outputs if o.actor_index == 0 and o.pid == old_pid]
    _replay_in_process(first, data_spec, ray_actors.actor_seed(seed, 1, 0), reference_model,
                       weights_by_version)
    second = [o for o in outputs if o.actor_index == 0 and o.pid != old_pid]
    _replay_in_process(second, data_spec, ray_actors.actor_seed(seed, 1, 1), reference_model,
                       weights_by_version)
    # The invariants the replay implies, spelled out: consecutive unrolls share one step, and
    # with max_steps=4 some episode ends inside the data and the next step starts a new one.
    for a, b in zip(first[:-1], first[1:], strict=True):
        tf.nest.map_structure(lambda x, y: np.testing.assert_array_equal(x[:, -1], y[:, 0]),
                              a.unroll, b.unroll)
    step_types = np.concatenate([o.unroll.step_type[:, 1:] for o in first], axis=1)
    last = step_types[:, :-1] == ts.StepType.LAST
    assert last.any() and (step_types[:, 1:][last] == ts.StepType.FIRST).all()
    assert len(np.unique(np.concatenate([o.unroll.action for o in first]))) > 1
    # The replacement plays other levels (a new seed) from a fresh reset.
    assert (second[0].unroll.step_type[:, 0] == ts.StepType.FIRST).all()
    assert not np.array_equal(first[0].unroll.observation[:, 0], second[0].unroll.observation[:, 0])


def test_an_xla_compiled_actor_collects_what_the_plain_actor_collects():
    """BoxWorldActor(jit_compile=True) runs the same network: with the same seed and weights it
    plays the same levels with the same actions and records the same logits."""
    shape = make_boxworld_environment("original", num_envs=1, **_ENV_KWARGS).observation_spec()
    model_fn = agent_model_fn("relational", shape.shape, 4, **_MODEL_KWARGS)
    weights = model_fn().get_weights()
    outputs = {}
    for jit_compile in (False, True):
        actor = ray_actors.BoxWorldActor("original", _NUM_ENVS, _UNROLL, model_fn, seed=3,
                                         env_kwargs=_ENV_KWARGS, num_threads=None,
                                         jit_compile=jit_compile)
        outputs[jit_compile] = [actor.collect(weights, 0) for _ in range(3)]
    for plain, compiled in zip(outputs[False], outputs[True], strict=True):
        for name in ("observation", "action", "step_type", "reward", "discount"):
            np.testing.assert_array_equal(getattr(plain.unroll, name),
                                          getattr(compiled.unroll, name))
        np.testing.assert_allclose(plain.unroll.policy_info["logits"],
                                   compiled.unroll.policy_info["logits"], rtol=1e-5, atol=1e-5)
    assert len(np.unique(np.concatenate([o.unroll.action for o in outputs[True]]))) > 1


def test_actor_seeds_are_distinct_per_actor_and_restart():
    seeds = {ray_actors.actor_seed(0, i, k) for i in (1, 2) for k in (0, 1)}
    assert len(seeds) == 4, seeds  # distinct per actor and per restart


@pytest.mark.subprocess
def test_importing_the_agents_does_not_import_ray():
    code = textwrap.dedent("""
        import sys
        import keras_relational.agents
        import keras_relational.agents.tf_agents.train_eval
        assert "ray" not in sys.modules, "importing keras_relational.agents imported ray"
        print("ok")
    """)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run([sys.executable, "-c", code], cwd=_REPO_ROOT, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "ok" in result.stdout


def test_without_ray_the_fleet_names_the_extra_to_install(monkeypatch):
    monkeypatch.setattr(ray_actors, "ray", None)  # as if ray were not installed
    with pytest.raises(ImportError, match=r'needs the optional dependency `ray`.*pip install '
                                          r'"keras-relational\[distributed\]"'):
        ray_actors.RayActorFleet(1, None, None, None, None)


def test_ray_actors_need_vtrace(tmp_path):
    with pytest.raises(ValueError, match="num_ray_actors.*algorithm='vtrace'.*received 'ppo'"):
        train_eval(str(tmp_path), algorithm="ppo", num_ray_actors=2)
    with pytest.raises(ValueError,
                       match="num_actors` to be a positive integer, received num_actors=0"):
        ray_actors.RayActorFleet(0, None, None, None, None)
    with pytest.raises(ValueError, match="weight_sync_interval` to be a positive integer, "
                                         "received weight_sync_interval=0"):
        ray_actors.RayActorFleet(1, None, None, None, None, weight_sync_interval=0)
