"""The compiled loop's speed options: learner minibatches, data-parallel devices, the update
compiled ahead, the first progress line; and the profile and cost-analysis scripts' parsers.

In-process tests run under the suite's backend; the data-parallel equality runs JAX with four
host devices in a subprocess (XLA_FLAGS must be set before JAX starts).
"""

import json
import os
import subprocess
import sys
import textwrap

import benchmark_scripts
import keras
import numpy as np
import pytest

from keras_relational.agents.compiled import loop, progress
from keras_relational.agents.compiled import train_eval as compiled_train_eval
from keras_relational.agents.compiled.config import CompiledConfig
from keras_relational.agents.compiled.learning import Unroll
from keras_relational.agents.networks import agent_model_fn
from keras_relational.agents.optimizers import make_optimizer

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_LEVELS = dict(goal_length=1, num_distractors=0, room_size=5, observation_type="one_hot")
_MODEL = dict(key_dim=8, mlp_hidden_units=(8,), head_units=(8,), conv_filters=(8, 8))


@pytest.mark.parametrize("fields, message", [
    (dict(num_envs=6, learner_minibatches=4), r"`learner_minibatches` \(--learner_minibatches\)"
     r" to divide `num_envs` \(6\), received learner_minibatches=4"),
    (dict(learner_minibatches=0), "`learner_minibatches` to be a positive integer"),
    (dict(num_envs=8, learner_minibatches=2, num_devices=3),
     r"`num_devices` \(--num_devices\) to divide .* received num_devices=3"),
    (dict(dtype_policy="bfloat17"), "dtype_policy"),
    (dict(updates_per_call=0), "`updates_per_call` to be a positive integer"),
    (dict(updates_per_call=4, num_iterations=10), r"`num_iterations` \(--num_iterations\) to be "
     r"a multiple of `updates_per_call` \(--updates_per_call=4\).*received num_iterations=10"),
    (dict(updates_per_call=4, num_iterations=8, checkpoint_interval=6),
     r"`checkpoint_interval` \(--checkpoint_interval\) to be a multiple"),
    (dict(updates_per_call=4, num_iterations=8, checkpoint_interval=4, eval_interval=2),
     r"`eval_interval` \(--eval_interval\) to be a multiple"),
    (dict(num_envs=2, unroll_length=4, updates_per_call=2, num_iterations=8,
          checkpoint_interval=4, level_bank_size=8),
     r"`level_bank_size` >= 12 .*updates_per_call"),
])
def test_config_rejects_bad_speed_options_naming_the_flag(fields, message):
    with pytest.raises(ValueError, match=message):
        CompiledConfig(**fields)


def _loop(learner_minibatches, num_envs=4, updates_per_call=1, learner_epochs=1):
    config = compiled_train_eval.make_config(
        env_kwargs=dict(_LEVELS, max_steps=2), num_envs=num_envs, unroll_length=3,
        model_kwargs=_MODEL, learner_minibatches=learner_minibatches, reward_scale=0.1,
        updates_per_call=updates_per_call, num_iterations=6, checkpoint_interval=6,
        learner_epochs=learner_epochs)
    environment = compiled_train_eval.tensor_environment(config.environment)
    spec = environment.observation_spec()
    keras.utils.set_random_seed(0)
    model = agent_model_fn(config.agent, spec.shape, 4, observation_dtype=spec.dtype,
                           **config.model_kwargs)()
    compiled = loop.CompiledLoop(environment, model, make_optimizer("adam", 1e-2), config)
    bank = environment.level_bank(config.levels_per_bank, seed=0)
    return compiled, compiled.initial_state(bank), bank


def _numpy(values):
    return [keras.ops.convert_to_numpy(v) for v in values]


def test_one_learner_minibatch_is_the_learners_update_on_the_whole_unroll():
    compiled, state, bank = _loop(learner_minibatches=1)
    _, unroll, _ = compiled._unroll(state, bank)
    params = (state["trainable"], state["non_trainable"])
    (trainable, _), _, info = compiled.learn(params, state["optimizer"], unroll)
    (expected, _), _, expected_info = compiled.learner.update(params, state["optimizer"], unroll)
    for got, want in zip(_numpy(trainable), _numpy(expected), strict=True):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(info.loss),
                                  keras.ops.convert_to_numpy(expected_info.loss))


def test_learner_minibatches_are_steps_on_every_kth_environment_in_turn():
    compiled, state, bank = _loop(learner_minibatches=2)
    _, unroll, _ = compiled._unroll(state, bank)
    params, optimizer = (state["trainable"], state["non_trainable"]), state["optimizer"]
    (trainable, _), _, info = compiled.learn(params, optimizer, unroll)

    expected_params, expected_optimizer, losses = params, optimizer, []
    for i in range(2):  # minibatch i: environments i, i + 2
        minibatch = Unroll(*(keras.ops.convert_to_numpy(x)[:, i::2] for x in unroll))
        expected_params, expected_optimizer, step_info = compiled.learner.update(
            expected_params, expected_optimizer, minibatch)
        losses.append(float(keras.ops.convert_to_numpy(step_info.loss)))
    for got, want in zip(_numpy(trainable), _numpy(expected_params[0]), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(float(keras.ops.convert_to_numpy(info.loss)), sum(losses),
                               rtol=1e-5)
    # Two steps differ from one step on the whole unroll.
    (one_step, _), _, _ = compiled.learner.update(params, optimizer, unroll)
    assert not all(np.allclose(a, b) for a, b in zip(_numpy(trainable), _numpy(one_step),
                                                     strict=True))


def test_learner_epochs_are_the_minibatch_steps_again_on_the_same_unroll():
    compiled, state, bank = _loop(learner_minibatches=2, learner_epochs=2)
    _, unroll, _ = compiled._unroll(state, bank)
    params, optimizer = (state["trainable"], state["non_trainable"]), state["optimizer"]
    (trainable, _), _, info = compiled.learn(params, optimizer, unroll)

    expected_params, expected_optimizer, infos = params, optimizer, []
    for _ in range(2):  # each epoch: minibatch 0 (environments 0, 2), then 1 (1, 3)
        for i in range(2):
            minibatch = Unroll(*(keras.ops.convert_to_numpy(x)[:, i::2] for x in unroll))
            expected_params, expected_optimizer, step_info = compiled.learner.update(
                expected_params, expected_optimizer, minibatch)
            infos.append(step_info)
    for got, want in zip(_numpy(trainable), _numpy(expected_params[0]), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)

    def value(x):
        return float(keras.ops.convert_to_numpy(x))

    # Sums over the unroll's transitions: one pass's worth (the four steps' sum over 2 epochs);
    # the transitions are the unroll's, once.
    np.testing.assert_allclose(value(info.loss), sum(value(i.loss) for i in infos) / 2,
                               rtol=1e-5)
    assert value(info.transitions) == value(infos[0].transitions) + value(infos[1].transitions)
    np.testing.assert_allclose(value(info.gradient_norm),
                               np.mean([value(i.gradient_norm) for i in infos]), rtol=1e-5)
    # The second pass learned more: the weights are not those of one pass.
    one_pass, _, _ = _loop(learner_minibatches=2)
    (once, _), _, _ = one_pass.learn(params, optimizer, unroll)
    assert not all(np.allclose(a, b) for a, b in zip(_numpy(trainable), _numpy(once),
                                                     strict=True))
    with pytest.raises(ValueError, match="`learner_epochs` to be a positive integer"):
        CompiledConfig(learner_epochs=0)


def test_several_updates_per_call_are_those_updates_one_call_each():
    # One call of K = 3 updates on a bank equals three calls of one update on it (the bank is
    # large enough for both), state and every update's metrics.
    several, state, bank = _loop(learner_minibatches=1, updates_per_call=3)
    single, single_state, _ = _loop(learner_minibatches=1)
    state, metrics = several.update(state, bank)
    rows = []
    for _ in range(3):
        single_state, row = single.update(single_state, bank)
        rows.append(row)
    # The scan compiles the update body on its own (other fusions, other summation orders);
    # Adam's per-coordinate normalisation turns those float32 differences of a near-zero
    # gradient coordinate into a fraction of the learning rate (1e-2 here): 1 % of it allowed.
    for name in ("trainable", "optimizer"):
        for got, want in zip(_numpy(state[name]), _numpy(single_state[name]), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4, err_msg=name)
    # The first update starts from the same state: its metrics agree to float32 rounding. The
    # later ones start from weights that may differ by the 1e-4 allowed above, and their loss
    # and gradient norm with them (update 3's gradient norm by 1.3e-5 of itself on an AMD EPYC
    # with AVX-512; within 1e-5 on the machines of earlier runs): 1e-4 of the value there.
    for field in ("loss", "episodes", "levels_started", "gradient_norm"):
        got = keras.ops.convert_to_numpy(getattr(metrics, field))
        want = np.array([float(keras.ops.convert_to_numpy(getattr(row, field))) for row in rows])
        assert got.shape == (3,), (field, got.shape)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6, err_msg=field)
        later = 1e-4 if field in ("loss", "gradient_norm") else 1e-5
        np.testing.assert_allclose(got[1:], want[1:], rtol=later, atol=1e-6, err_msg=field)


def test_train_eval_with_several_updates_per_call_records_every_update(tmp_path):
    root = str(tmp_path)
    lines = []
    result = compiled_train_eval.train_eval(
        root, env_kwargs=_LEVELS, num_envs=2, unroll_length=3, model_kwargs=_MODEL,
        num_iterations=4, updates_per_call=2, checkpoint_interval=2, log_interval=1,
        eval_episodes=0, print_fn=lines.append)
    assert result["train_step"] == 4 and result["frames"] == 4 * 2 * 3
    assert [row["step"] for row in result["history"]] == [1, 2, 3, 4]
    from keras_relational.agents.compiled import checkpointing

    steps = sorted(int(os.path.basename(p)[5:-4]) for p in checkpointing.checkpoints(root))
    assert steps[-1] == 4 and all(step % 2 == 0 for step in steps), steps
    # A speed setting: a resume may change it, but it must divide the step resumed from.
    with pytest.raises(ValueError, match=r"`updates_per_call` \(--updates_per_call=3\) must "
                                         r"divide the step .* received train step 4"):
        compiled_train_eval.train_eval(
            root, env_kwargs=_LEVELS, num_envs=2, unroll_length=3, model_kwargs=_MODEL,
            num_iterations=6, updates_per_call=3, checkpoint_interval=3, log_interval=1,
            eval_episodes=0, print_fn=lines.append)


def test_more_devices_than_there_are_is_an_error_naming_the_flag():
    config = compiled_train_eval.make_config(env_kwargs=_LEVELS, num_envs=4, unroll_length=3,
                                             model_kwargs=_MODEL, num_devices=4)
    environment = compiled_train_eval.tensor_environment(config.environment)
    spec = environment.observation_spec()
    model = agent_model_fn(config.agent, spec.shape, 4, observation_dtype=spec.dtype,
                           **config.model_kwargs)()
    with pytest.raises(ValueError, match=r"num_devices.*--num_devices"):
        loop.CompiledLoop(environment, model, make_optimizer("adam", 1e-3), config)


class _Writer:
    def scalars(self, step, values):
        pass


def test_the_first_update_gets_a_progress_line_whatever_the_interval():
    config = CompiledConfig(num_envs=2, unroll_length=3, num_iterations=25, log_interval=10)
    lines = []
    record = progress.Progress(config, 0, _Writer(), _Writer(), lines.append)
    metrics = loop.Metrics(*(np.float32(1.0) for _ in loop.Metrics._fields))
    for step in range(1, 26):
        record.record(step, metrics, 0.0, 0.0)
    assert [entry["step"] for entry in record.history] == [1, 11, 21, 25]
    assert len(lines) == 4


def test_kernel_counts_and_scopes_read_from_hlo_text():
    hlo = "\n".join([
        "%fused_computation (param_0: f32[4,8]) -> f32[4,8] {",
        "  %param_0 = f32[4,8]{1,0} parameter(0)",
        '  ROOT %tanh.2 = f32[4,8]{1,0} tanh(%param_0), metadata={op_name="f/acting/tanh"}',
        "}",
        "",
        "ENTRY %main.1 (a: f32[4,8], b: f32[8,8]) -> (f32[4,8], f32[4,8]) {",
        "  %a = f32[4,8]{1,0} parameter(0)",
        "  %b = f32[8,8]{1,0} parameter(1)",
        '  %dot.1 = f32[4,8]{1,0} dot(%a, %b), metadata={op_name="jit(f)/learning/dot"}',
        "  %tanh_fusion = f32[4,8]{1,0} fusion(%dot.1), kind=kLoop, calls=%fused_computation, "
        'metadata={op_name="jit(f)/while/body/acting/tanh"}',
        "  ROOT %tuple.3 = (f32[4,8]{1,0}, f32[4,8]{1,0}) tuple(%dot.1, %tanh_fusion)",
        "}"])
    counts = benchmark_scripts.load("update_cost_analysis").kernel_counts(hlo)
    assert counts == dict(fusions=1, kernels=2, instructions=5)
    parts = benchmark_scripts.load("profile_update").scope_of_ops(hlo)
    assert parts["dot.1"] == "learning" and parts["tanh_fusion"] == "acting"


_DATA_PARALLEL = textwrap.dedent("""
    import json, sys
    import jax, keras
    import numpy as np
    sys.path[:0] = [{tests!r}, {tests_root!r}]  # as pytest's pythonpath: tests/ too
    from test_compiled_speed_options import _LEVELS, _MODEL
    from keras_relational.agents.compiled import loop
    from keras_relational.agents.compiled import train_eval
    from keras_relational.agents.optimizers import make_optimizer
    from keras_relational.agents.networks import agent_model_fn

    def run(num_devices, learner_minibatches):
        config = train_eval.make_config(env_kwargs=dict(_LEVELS, max_steps=3), num_envs=8,
                                        unroll_length=4, model_kwargs=_MODEL,
                                        num_devices=num_devices,
                                        learner_minibatches=learner_minibatches)
        environment = train_eval.tensor_environment(config.environment)
        spec = environment.observation_spec()
        keras.utils.set_random_seed(0)
        model = agent_model_fn(config.agent, spec.shape, 4, observation_dtype=spec.dtype,
                               **config.model_kwargs)()
        # Adam divides each gradient by its own RMS, so a coordinate whose gradient is nearly
        # zero moves by up to the learning rate in a direction that the devices' other order of
        # summation can flip: the weights then differ by a fraction of the learning rate. At
        # 1e-3 that stays below the tolerance below; at 1e-2 it reached 1.1e-4 in one run.
        compiled = loop.CompiledLoop(environment, model, make_optimizer("adam", 1e-3), config)
        bank = environment.level_bank(config.levels_per_bank, seed=0)
        state, seconds = compiled.compile(compiled.initial_state(bank), bank)
        losses = []
        for _ in range(3):
            state, metrics = compiled.update(state, bank)
            losses.append(float(metrics.loss))
        shards = len(state["timestep"].observation.sharding.device_set)
        return [np.asarray(w) for w in state["trainable"]], losses, shards

    report = dict(devices=len(jax.devices()))
    for minibatches in (1, 2):
        one, one_losses, one_shards = run(1, minibatches)
        four, four_losses, four_shards = run(4, minibatches)
        report[minibatches] = dict(
            shards=[one_shards, four_shards], losses=[one_losses, four_losses],
            weight_error=max(float(np.abs(a - b).max()) for a, b in zip(one, four)),
            weight_scale=max(float(np.abs(a).max()) for a in one))
    print(json.dumps(report))
""")


@pytest.mark.slow  # a fresh JAX process with four host devices, compiling four loops
def test_four_devices_learn_as_one_device_with_all_the_environments():
    tests = os.path.dirname(os.path.abspath(__file__))
    script = _DATA_PARALLEL.format(tests=tests, tests_root=os.path.dirname(tests))
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=_REPO_ROOT, capture_output=True, text=True,
        timeout=900, env=dict(os.environ, KERAS_BACKEND="jax",
                              XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} "  # conftest's
                                        "--xla_force_host_platform_device_count=4"))
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["devices"] == 4
    for minibatches in ("1", "2"):
        case = report[minibatches]
        assert case["shards"] == [1, 4], case
        np.testing.assert_allclose(case["losses"][1], case["losses"][0], rtol=1e-4, atol=1e-4)
        assert case["weight_error"] < 1e-4 * max(case["weight_scale"], 1.0), case


@pytest.mark.slow  # a fresh JAX process compiling and tracing a tiny update
def test_profile_update_smoke_writes_a_summary(tmp_path):
    output = str(tmp_path / "profile")
    done = subprocess.run(
        [sys.executable, "benchmarks/profile_update.py", "--smoke", "--updates=2",
         f"--output={output}"], cwd=_REPO_ROOT, capture_output=True, text=True, timeout=600,
        env=dict(os.environ, KERAS_BACKEND="jax"))
    assert done.returncode == 0, done.stderr[-3000:]
    with open(output + ".json") as f:
        result = json.load(f)
    assert result["updates"] == 2 and result["compile_seconds"] > 0
    assert result["kernel_events"] > 0 and result["top_kernels"]
    assert result["parts"]["learning"]["microseconds"] > 0
    assert os.path.getsize(output + ".md") < 2**20 and os.path.getsize(output + ".json") < 2**20


def test_loop_speed_sweeps_and_flop_rates(tmp_path, capsys):
    speed = benchmark_scripts.load("compiled_loop_speed")
    args = speed.parse_args(["--num_envs=8,16", "--learner_minibatches=1,4",
                             "--dtype_policies=float32,mixed_bfloat16"])
    assert args.learner_minibatches == [1, 4]
    assert args.dtype_policies == ["float32", "mixed_bfloat16"]
    assert speed.parse_args([]).learner_minibatches == [None]
    for bad, flag in (("--learner_minibatches=3", "--learner_minibatches"),
                      ("--dtype_policies=bfloat17", "--dtype_policies")):
        with pytest.raises(SystemExit):
            speed.parse_args(["--num_envs=8", bad])
        assert flag in capsys.readouterr().err
    assert speed.device_slug("gpu (NVIDIA H200), 1 device(s)") == "nvidia-h200"
    assert speed.device_slug("cpu (cpu), 1 device(s)") == "cpu"
    costs = tmp_path / "costs.json"
    costs.write_text(json.dumps({"preset": "p", "rows": [
        {"sum_of_parts": {"flops_per_frame": 2e8}}]}))
    assert speed.flops_per_frame(str(costs), "p") == 2e8
    assert speed.flops_per_frame(str(costs), "other") is None
    rows = [{"frames_per_second": 1e6, "dtype_policy": "mixed_bfloat16"},
            {"frames_per_second": 1e6, "dtype_policy": None}, {"skipped": "x"}]
    speed.add_flop_rates(rows, 2e8, {"float32": 4e14, "bfloat16": 8e14})
    assert rows[0]["flops_per_second"] == 2e14 and rows[0]["matmul_fraction"] == 0.25
    assert rows[1]["matmul_dtype"] == "float32" and rows[1]["matmul_fraction"] == 0.5
    assert "flops_per_second" not in rows[2]
