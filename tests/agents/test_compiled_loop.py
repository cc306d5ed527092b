"""The compiled actor-learner loop (keras_relational.agents.compiled): V-trace in keras.ops, the
learner against the TF-Agents agent on one unroll, one update, train_eval with its outputs, resume
equality (after a stop and after kill -9), and the same under JAX without TensorFlow.

The in-process tests run under the suite's backend (TensorFlow); the resume test runs the
``train_boxworld`` binary in subprocesses, and one subprocess runs JAX.
"""

import glob
import json
import os
import re
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
from kill_checks import kill_after_checkpoint

from keras_relational import without_tensorflow
from keras_relational.agents.compiled import checkpointing, levels, loop
from keras_relational.agents.compiled import train_eval as compiled_train_eval
from keras_relational.agents.networks import agent_model_fn
from keras_relational.agents.optimizers import make_optimizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import warm_python
from test_vtrace import _random_case  # noqa: E402  (the NumPy reference)

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_LEVELS = dict(goal_length=1, num_distractors=0, room_size=5, observation_type="one_hot")
_TINY = dict(env_kwargs=_LEVELS, num_envs=3, unroll_length=4, log_interval=1,
             model_kwargs=dict(key_dim=8, mlp_hidden_units=(8,), head_units=(8,),
                               conv_filters=(8, 8)))


def _vtrace_case(seed):
    case = _random_case(seed)
    case["mask"] = (np.random.RandomState(seed + 100).uniform(size=case["rewards"].shape)
                    > 0.2).astype("float32")
    return case


def test_device_level_banks_are_drawn_by_seed_and_position():
    environment = compiled_train_eval.tensor_environment(
        compiled_train_eval.make_config(env_kwargs=_LEVELS).environment, "device")
    banks = levels.LevelBanks(environment, 8, 4, seed=3)
    first = keras.ops.convert_to_numpy(banks.bank["grid"])
    banks.record(6)
    second = keras.ops.convert_to_numpy(banks.for_update()["grid"])  # 6 + 4 > 8: the next bank
    assert banks.position == dict(bank_index=1, levels_used=0)
    assert first.shape == second.shape == (8, environment.config.frame_size ** 2)
    assert not np.array_equal(first, second)
    banks.close()
    # Bank k depends on (seed, k) only: what a resumed run (bank_index=1) draws first.
    resumed = levels.LevelBanks(environment, 8, 4, seed=3, bank_index=1, levels_used=0)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(resumed.bank["grid"]), second)
    resumed.close()


def test_numpy_level_banks_come_from_the_one_prefetcher_by_seed_and_position():
    from keras_relational.environments.level_banks import bank_seed

    environment = compiled_train_eval.tensor_environment(
        compiled_train_eval.make_config(env_kwargs=_LEVELS).environment, "numpy")
    banks = levels.LevelBanks(environment, 8, 4, seed=3)
    for index in (0, 1, 2):  # bank k: the NumPy generator seeded (seed, k), drawn ahead
        if index:
            banks.record(6)
            banks.for_update()
        assert banks.position == dict(bank_index=index, levels_used=0)
        expected = environment.level_bank(8, bank_seed(3, index))
        for key, value in expected.items():
            np.testing.assert_array_equal(keras.ops.convert_to_numpy(banks.bank[key]), value)
    banks.close()
    resumed = levels.LevelBanks(environment, 8, 4, seed=3, bank_index=2, levels_used=5)
    assert resumed.position == dict(bank_index=2, levels_used=5)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(resumed.bank["grid"]),
                                  environment.level_bank(8, bank_seed(3, 2))["grid"])
    resumed.close()


def test_one_update_changes_every_weight_and_is_finite():
    config = compiled_train_eval.make_config(num_iterations=1, **{
        k: v for k, v in _TINY.items() if k != "env_kwargs"}, env_kwargs=_LEVELS)
    environment = compiled_train_eval.tensor_environment(config.environment)
    spec = environment.observation_spec()
    model = agent_model_fn(config.agent, spec.shape, 4, observation_dtype=spec.dtype,
                           **config.model_kwargs)()
    compiled = loop.CompiledLoop(environment, model, make_optimizer("rmsprop", 1e-3), config)
    banks = levels.LevelBanks.for_config(environment, config)
    state = compiled.initial_state(banks.bank)
    before = [keras.ops.convert_to_numpy(w) for w in state["trainable"]]
    state, metrics = compiled.update(state, banks.for_update())
    banks.close()
    after = [keras.ops.convert_to_numpy(w) for w in state["trainable"]]
    for name, value in metrics._asdict().items():
        assert np.isfinite(keras.ops.convert_to_numpy(value)), name
    assert float(keras.ops.convert_to_numpy(metrics.gradient_norm)) > 0
    changed = [not np.array_equal(b, a) for b, a in zip(before, after, strict=True)]
    assert all(changed), f"{changed.count(False)} of {len(changed)} weights did not change"
    assert all(np.all(np.isfinite(a)) for a in after)


def _final_checkpoint(root):
    with np.load(checkpointing.checkpoints(root)[-1]) as data:
        return {key: data[key] for key in data.files}


def _checkpoint(root, step):
    with np.load(os.path.join(checkpointing.checkpoint_dir(root), f"ckpt-{step}.npz")) as data:
        return {key: data[key] for key in data.files}


def _steps(root):
    return [int(os.path.basename(path)[len("ckpt-"):-len(".npz")])
            for path in checkpointing.checkpoints(root)]


def _assert_same_state(again, reference):
    assert sorted(again) == sorted(reference)
    for key in reference:
        if key != "meta":
            np.testing.assert_array_equal(again[key], reference[key], err_msg=key)
    assert json.loads(str(again["meta"])) == json.loads(str(reference["meta"]))


def _event_scalars(directory):
    import tensorflow as tf

    tags = set()
    for path in glob.glob(os.path.join(directory, "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            tags.update(value.tag for value in event.summary.value)
    return tags


# The binary's flags (``train_boxworld --trainer=compiled``) of every run below.
_FLAGS = dict(trainer="compiled", goal_length="1", num_distractors="0", room_size="5",
              observation_type="one_hot", num_envs="2", unroll_length="3", key_dim="8",
              head_width="8", log_interval="1", checkpoint_interval="1", eval_episodes="0")


def _command(root, num_iterations, *extra):
    return [sys.executable, "-m", "keras_relational.experiments.train_boxworld",
            f"--root_dir={root}", f"--num_iterations={num_iterations}",
            *(f"--{name}={value}" for name, value in _FLAGS.items()), *extra]


def _binary_config(import_binary, num_iterations, **changed):
    """The config the binary builds from ``_command``'s flags (``changed``: other values)."""
    from absl import flags
    from absl.testing import flagsaver

    train_boxworld = import_binary("train_boxworld")
    was_parsed = flags.FLAGS.is_parsed()
    with flagsaver.as_parsed(num_iterations=str(num_iterations), **dict(_FLAGS, **changed)):
        flags.FLAGS.mark_as_parsed()
        try:
            return train_boxworld.config_from_flags()
        finally:
            if not was_parsed:
                flags.FLAGS.unparse_flags()


@pytest.mark.slow  # four runs of the binary (two compile their update), one in this process
def test_train_eval_outputs_and_resumes_after_a_stop_and_a_kill_9_equal_the_uninterrupted_run(
        tmp_path, import_binary):
    """One uninterrupted run of ``train_boxworld --trainer=compiled`` (its outputs checked) is
    the reference of two resumes: a run killed with SIGKILL after its second checkpoint and
    restarted, then stopped at its ``--num_iterations`` and restarted with a larger one. Each
    ends with the uninterrupted run's checkpoint (every array and the metadata), result and
    curve. The binary's runs share one XLA compilation cache (a fresh run's update, then a
    resumed run's: TensorFlow traces the two apart), so only the first of each kind compiles."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TF_XLA_FLAGS=" ".join(filter(None, (
        os.environ.get("TF_XLA_FLAGS"),
        f"--tf_xla_persistent_cache_directory={tmp_path / 'xla_cache'}"))))

    def run(*arguments):
        done = warm_python.run(_command(*arguments), cwd=_REPO_ROOT, env=env,
                               capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout.splitlines()

    # Killed with SIGKILL once its second checkpoint is written, then restarted.
    root = str(tmp_path / "killed")
    killed_at = kill_after_checkpoint(_command(root, 100_000), lambda: _steps(root), at_least=2,
                                      timeout=600, poll_seconds=0.05, cwd=_REPO_ROOT, env=env,
                                      popen=warm_python.Popen)
    final = killed_at + 2
    lines = run(root, final)
    assert f"Resuming from {root}: train step {killed_at}" in lines, lines

    # The uninterrupted run, one update longer (the stop below continues to it), evaluated and
    # exported: its outputs.
    whole = str(tmp_path / "whole")
    frames_per_update = int(_FLAGS["num_envs"]) * int(_FLAGS["unroll_length"])
    lines = run(whole, final + 1, "--eval_episodes=2", "--eval_num_envs=2")
    with open(os.path.join(whole, "result.json")) as f:
        result = json.load(f)
    assert result["train_step"] == final + 1 and result["frames"] == (final + 1) * frames_per_update
    assert [entry["step"] for entry in result["history"]] == list(range(1, final + 2))
    # No acting share: acting runs inside the compiled update (agents/compiled/progress.py).
    assert sum(line.startswith("step ") and "frames/s" in line and "acting" not in line
               for line in lines) == final + 1, lines
    assert any(line.startswith(f"eval @ step {final + 1}: solved") for line in lines), lines
    # TF-Agents' collect metrics, in the TF-Agents trainer's directory (docs/tensorboard.md).
    assert {"Metrics/NumberOfEpisodes", "Metrics/EnvironmentSteps",
            "Metrics/EnvironmentStepsPerSecond"} <= _event_scalars(os.path.join(whole, "collect"))
    assert "Losses/loss" in _event_scalars(os.path.join(whole, "train"))
    assert "eval/solve_rate" in _event_scalars(os.path.join(whole, "eval"))
    reloaded = keras.saving.load_model(result["keras_file"])
    assert reloaded.get_weights()  # the exported model holds weights
    assert os.path.exists(os.path.join(result["keras_model_dir"], "saved_model.pb"))
    assert len(checkpointing.checkpoints(whole)) == checkpointing.KEEP
    assert _steps(whole) == [final, final + 1]

    # The killed and restarted run: the uninterrupted run's state, result and curve at `final`.
    _assert_same_state(_final_checkpoint(root), _checkpoint(whole, final))
    with open(os.path.join(root, "result.json")) as f:
        resumed = json.load(f)
    assert resumed["train_step"] == final and resumed["frames"] == final * frames_per_update
    timeless = lambda rows: [(r["step"], r["solve_rate"], r["average_return"])  # noqa: E731
                             for r in rows]
    from keras_relational.agents import curves

    assert timeless(curves.read_curve(root)) == timeless(curves.read_curve(whole))[:final]

    # Stopped at its --num_iterations and restarted with one more: the uninterrupted run's
    # state and curve.
    lines = run(root, final + 1)
    assert lines[0] == f"Resuming from {root}: train step {final}", lines
    _assert_same_state(_final_checkpoint(root), _final_checkpoint(whole))
    assert timeless(curves.read_curve(root)) == timeless(curves.read_curve(whole))

    # Resumed with another network: refused naming the flag, before any checkpoint is read
    # (issue 48: an error about array shapes); another learning rate only when allowed, then
    # logged and applied over the restored optimizer's.
    from keras_relational import run_settings

    wider = _binary_config(import_binary, final + 2, head_width="16", key_dim="4")
    with pytest.raises(run_settings.SettingsError,
                       match=r"--head_width \(head_units\): \[8, 8, 8, 8\] in the run, "
                             r"\[16, 16, 16, 16\] now; --key_dim: 8 in the run, 4 now"):
        compiled_train_eval.train_eval(root, wider)
    with pytest.raises(run_settings.SettingsError,
                       match=r"--learning_rate: 0\.0002 in the run, 0\.001 now.*"
                             r"--allow_changed_hyperparameters"):
        compiled_train_eval.train_eval(
            root, _binary_config(import_binary, final + 2, learning_rate="1e-3"))
    lines = []  # in this process: the new learning rate compiles another update anyway
    compiled_train_eval.train_eval(
        root, _binary_config(import_binary, final + 2, learning_rate="1e-3"),
        allow_changed_hyperparameters=True, print_fn=lines.append)
    assert "changed optimizer hyperparameters (--learning_rate: 0.0002 in the run, 0.001 now" \
        in lines[0], lines
    rates = [float(a) for a in _final_checkpoint(root).values() if a.dtype == np.float32
             and a.shape == () and np.isclose(a, (2e-4, 1e-3)).any()]
    assert rates and np.allclose(rates, 1e-3), rates


def test_event_files_are_read_by_tensorflow(tmp_path):
    writer = without_tensorflow.ScalarWriter(str(tmp_path))
    writer.scalars(7, {"a/b": 1.5})
    writer.close()
    import tensorflow as tf

    events = list(tf.compat.v1.train.summary_iterator(writer.path))
    assert events[0].file_version == "brain.Event:2"
    assert [(e.step, v.tag, v.simple_value) for e in events[1:] for v in e.summary.value] == [
        (7, "a/b", 1.5)]


_JAX_SCRIPT = textwrap.dedent("""
    import json, sys, types

    class NoTensorFlow:  # as on a machine without TensorFlow: importing it fails
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("tensorflow", "tf_agents", "tf_keras"):
                raise ModuleNotFoundError(f"No module named {{name!r}}")

    sys.meta_path.insert(0, NoTensorFlow())
    sys.path[:0] = [{tests!r}, {tests_root!r}]  # as pytest's pythonpath: tests/ too
    import numpy as np
    import keras
    from test_vtrace import vtrace_reference
    from test_compiled_loop import _vtrace_case, _TINY
    from keras_relational.agents.vtrace import vtrace_returns
    from keras_relational.agents.compiled import train_eval

    case = _vtrace_case(0)
    vs, adv = vtrace_returns(case["log_rhos"], case["discounts"], case["rewards"],
                             case["values"], case["bootstrap"], mask=case["mask"])
    expected_vs, expected_adv = vtrace_reference(**case)
    error = max(float(np.abs(np.asarray(vs) - expected_vs).max()),
                float(np.abs(np.asarray(adv) - expected_adv).max()))
    result = train_eval.train_eval({root!r}, num_iterations=2, eval_episodes=2, eval_num_envs=2,
                                   **_TINY)
    from keras_relational.experiments.devices import report_devices

    report_devices()  # the notebooks' first cell: names the JAX devices, loads no TensorFlow
    # What the compiled trainer wrote plays (play_boxworld --model) in this process.
    from keras_relational import environments
    from keras_relational.agents.play import play
    played, _ = play(result["keras_file"], environments.BoxWorld(seed=0, **_TINY["env_kwargs"]),
                     2, max_steps_per_episode=5)
    assert "tensorflow" not in sys.modules
    print(json.dumps(dict(backend=keras.backend.backend(), vtrace_error=error,
                          train_step=result["train_step"], note=result["export_note"],
                          keras_file=result["keras_file"],
                          played_steps=[r["steps"] for r in played])))
""")


@pytest.mark.slow  # a fresh JAX process compiling an update and an evaluation
def test_under_jax_without_tensorflow(tmp_path):
    tests = os.path.dirname(os.path.abspath(__file__))
    script = _JAX_SCRIPT.format(tests=tests, tests_root=os.path.dirname(tests),
                                root=str(tmp_path / "jax"))
    done = subprocess.run([sys.executable, "-c", script], cwd=_REPO_ROOT, capture_output=True,
                          text=True, timeout=600, env=dict(os.environ, KERAS_BACKEND="jax"))
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["backend"] == "jax"
    assert report["vtrace_error"] < 1e-5
    assert report["train_step"] == 2
    assert "TensorFlow" in report["note"]  # model.export skipped, the .keras file written
    assert os.path.exists(report["keras_file"])
    assert report["played_steps"] == [5, 5]
    assert "step      2 | frames" in done.stdout
    assert re.search(r"^Keras [\d.]+, jax backend: (no GPU found|\d+ GPUs? found)", done.stdout,
                     re.M), done.stdout[-2000:]


@pytest.mark.parametrize("flag, message", [
    ("--trainer=anakin", "--trainer"),
    ("--algorithm=ppo", "--algorithm: expected only with --trainer=tf_agents"),
])
def test_binary_rejects_bad_trainer_flags_before_training(tmp_path, flag, message):
    command = [sys.executable, "-m", "keras_relational.experiments.train_boxworld",
               f"--root_dir={tmp_path}", "--trainer=compiled", flag]
    done = subprocess.run(command, cwd=_REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert message in done.stderr, done.stderr[-2000:]
    assert not os.listdir(tmp_path)  # nothing trained or written


def test_learner_matches_the_tf_agents_agent_on_the_same_unroll():
    """The compiled learner's loss and gradients are the TF-Agents agent's on one unroll.

    The unroll is the compiled loop's own (a 2-step time limit puts LAST and FIRST steps inside
    it), with random rewards and behaviour logits so that every V-trace term is non-trivial.
    """
    import tensorflow as tf
    from tf_agents.specs import tensor_spec
    from tf_agents.trajectories import time_step as ts
    from tf_agents.trajectories import trajectory

    from keras_relational.agents.tf_agents.keras3_network import Keras3Network
    from keras_relational.agents.tf_agents.vtrace_agent import VTraceAgent

    keras.utils.set_random_seed(0)
    config = compiled_train_eval.make_config(
        env_kwargs=dict(_LEVELS, max_steps=2), reward_scale=0.1, entropy_cost=0.01,
        **{k: v for k, v in _TINY.items() if k != "env_kwargs"})
    environment = compiled_train_eval.tensor_environment(config.environment)
    spec = environment.observation_spec()
    model = agent_model_fn(config.agent, spec.shape, 4, observation_dtype=spec.dtype,
                           **config.model_kwargs)()
    compiled = loop.CompiledLoop(environment, model, make_optimizer("adam", 1e-3), config)
    bank = environment.level_bank(config.levels_per_bank, seed=0)
    state = compiled.initial_state(bank)
    _, unroll, _ = compiled._unroll(state, bank)
    rng = np.random.RandomState(0)
    steps, batch = config.unroll_length, config.num_envs
    unroll = unroll._replace(
        reward=rng.uniform(-1, 10, size=(steps, batch)).astype("float32"),
        behaviour_logits=rng.normal(size=(steps, batch, 4)).astype("float32"))
    step_types = keras.ops.convert_to_numpy(unroll.step_type)
    assert (step_types == 2).any() and (step_types[1:] == 0).any(), step_types  # boundaries
    (_, (loss, _)), grads = compiled.learner._loss_and_grads(
        state["trainable"], state["non_trainable"], unroll, keras.ops.ones((), "float32"))

    # The TF-Agents agent on the same weights (the model itself) and the same [B, T+1] batch.
    observation_spec = tensor_spec.from_spec(spec)
    agent = VTraceAgent(ts.time_step_spec(observation_spec),
                        tensor_spec.from_spec(environment.action_spec()),
                        Keras3Network(observation_spec, lambda: model),
                        tf.keras.optimizers.Adam(1e-3), discount=config.discount,
                        entropy_cost=config.entropy_cost, baseline_cost=config.baseline_cost,
                        gradient_clip_norm=None, reward_scale=config.reward_scale,
                        jit_compile=False)

    def batch_major(x, pad=False):  # [T(+1), B, ...] -> [B, T+1, ...]
        x = keras.ops.convert_to_numpy(x)
        if pad:  # the agent ignores the last step's action, logits, reward and discount
            x = np.concatenate([x, x[-1:]], axis=0)
        return tf.constant(np.swapaxes(x, 0, 1))

    experience = trajectory.Trajectory(
        step_type=batch_major(unroll.step_type), observation=batch_major(unroll.observation),
        action=batch_major(unroll.action, pad=True),
        policy_info={"logits": batch_major(unroll.behaviour_logits, pad=True)},
        next_step_type=batch_major(keras.ops.concatenate(
            [unroll.step_type[1:], unroll.step_type[-1:]], axis=0)),
        reward=batch_major(unroll.reward, pad=True),
        discount=batch_major(unroll.discount, pad=True))
    expected_loss, expected_grads, _ = agent._loss_and_gradients(experience)
    np.testing.assert_allclose(float(keras.ops.convert_to_numpy(loss)),
                               float(expected_loss.numpy()), rtol=1e-4, atol=1e-4)
    assert len(grads) == len(expected_grads) == len(model.trainable_variables)
    for variable, grad, expected in zip(model.trainable_variables, grads, expected_grads,
                                        strict=True):
        np.testing.assert_allclose(keras.ops.convert_to_numpy(grad), expected.numpy(),
                                   rtol=1e-3, atol=1e-5, err_msg=variable.path)
