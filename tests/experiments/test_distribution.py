"""``--distribution_strategy`` for the supervised binaries (``experiments/distribution_lib.py``).

The strategy factory and its errors; library ``train_eval`` runs under ``MirroredStrategy`` over
the one CPU (in process), over two logical CPUs and under a single-worker
``MultiWorkerMirroredStrategy`` (one fresh process), two local workers running the rule-learning
binary, and the JAX backend's ``keras.distribution.DataParallel`` over two virtual CPU devices.
``fit_probe`` wraps ``keras.Model.fit`` to record what each fit ran under and whether it trained.
"""

import hashlib
import json
import logging
import os
import socket
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest

from keras_relational.experiments import distribution_flags, distribution_lib, rule_learning_lib

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def fit_probe(records):
    """A ``keras.Model.fit`` that trains as usual and appends what it saw to ``records``.

    Recorded: whether the trainable weights changed and a digest of their final values, the
    compile settings, and the distribution: the ``tf.distribute`` strategy, its replicas, whether
    every model and optimizer variable was created in its scope and how many per-device copies
    the variables have (TensorFlow), or the ``keras.distribution`` and the number of devices
    holding each variable (JAX).
    """
    original = keras.Model.fit

    def fit(self, *args, **kwargs):
        before = [keras.ops.convert_to_numpy(w) for w in self.trainable_weights]
        history = original(self, *args, **kwargs)
        after = [keras.ops.convert_to_numpy(w) for w in self.trainable_weights]
        record = {
            "changed": any(not np.array_equal(b, a) for b, a in zip(before, after, strict=True)),
            "digest": hashlib.sha256(b"".join(a.tobytes() for a in after)).hexdigest(),
            "jit_compile": bool(self.jit_compile),
            "steps_per_execution": int(self.steps_per_execution),
        }
        if keras.backend.backend() == "tensorflow":
            import tensorflow as tf

            strategy = self.distribute_strategy
            copies = [strategy.experimental_local_results(v.value) for v in self.variables]
            record.update(
                mirrored=isinstance(strategy, tf.distribute.MirroredStrategy),
                multi_worker=isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy),
                replicas=int(strategy.num_replicas_in_sync),
                in_scope=all(strategy.extended.variable_created_in_scope(v.value)
                             for v in list(self.variables) + list(self.optimizer.variables)),
                copies=sorted({len(c) for c in copies}),
                copies_equal=all(np.array_equal(np.asarray(c[0]), np.asarray(x))
                                 for c in copies for x in c))
        else:
            distribution = keras.distribution.distribution()
            record.update(
                distribution=type(distribution).__name__ if distribution else None,
                devices=sorted({len(v.value.sharding.device_set) for v in self.variables}))
        records.append(record)
        return history

    return fit


# ------------------------------------------------------------------------------------------------
# The factory, the compile options and the flag
# ------------------------------------------------------------------------------------------------

def test_strategies_by_name():
    import tensorflow as tf

    assert distribution_lib.STRATEGIES == ("default", "mirrored", "multi_worker", "tpu",
                                           "data_parallel")
    assert distribution_lib.get_strategy() is tf.distribute.get_strategy()
    assert not tf.distribute.has_strategy()
    mirrored = distribution_lib.get_strategy("mirrored")
    assert isinstance(mirrored, tf.distribute.MirroredStrategy)
    assert mirrored.num_replicas_in_sync == 1  # the one CPU of this machine (no GPU)
    assert distribution_lib.get_strategy("mirrored") is mirrored  # one instance per process
    with mirrored.scope():  # "default" is the strategy the caller has entered
        assert distribution_lib.get_strategy("default") is mirrored


@pytest.mark.parametrize("name", ["TPU", "Mirrored", None])
def test_unknown_name_lists_the_choices(name):
    with pytest.raises(ValueError, match=r"`distribution_strategy`.*'default', 'mirrored', "
                                         rf"'multi_worker', 'tpu', 'data_parallel'.*received "
                                         rf"{name!r}"):
        distribution_lib.get_strategy(name)


def test_other_backends_are_sent_to_keras_distribution(monkeypatch):
    monkeypatch.setattr(keras.backend, "backend", lambda: "jax")
    for name in ("mirrored", "multi_worker", "tpu"):
        with pytest.raises(ValueError, match=rf"`distribution_strategy`: '{name}'.*TensorFlow.*"
                                             r"received KERAS_BACKEND='jax'.*DataParallel"):
            distribution_lib.get_strategy(name)
    # Under JAX the compile options are Keras' own business.
    assert distribution_lib.compile_options(object(), True, 50) == {
        "jit_compile": True, "steps_per_execution": 50}


class _TwoReplicas:
    """Stands in for a two-replica strategy (real ones run in the subprocess tests below)."""

    num_replicas_in_sync = 2


def test_compile_options_drop_xla_and_multi_step_loops_with_several_replicas(monkeypatch,
                                                                            caplog):
    assert distribution_lib.compile_options(None, True, 50) == {
        "jit_compile": True, "steps_per_execution": 50}  # the default strategy: one replica
    monkeypatch.setattr(distribution_lib, "_logged", set())
    with caplog.at_level(logging.WARNING, logger=distribution_lib.__name__):
        for _ in range(2):
            assert distribution_lib.compile_options(_TwoReplicas(), True, 50) == {
                "jit_compile": False, "steps_per_execution": 1}
    assert len(caplog.records) == 1  # logged once
    assert "2 replicas" in caplog.text and "received True and 50" in caplog.text


def test_flag_is_the_same_enum_everywhere():
    from absl import flags

    flag_values = flags.FlagValues()
    distribution_flags.define_distribution_strategy_flag(flag_values)
    flag_values(["binary"])
    assert flag_values.distribution_strategy == "default"
    choices = flag_values["distribution_strategy"].parser.enum_values
    assert tuple(choices) == distribution_lib.STRATEGIES == distribution_flags.STRATEGIES
    flag_values(["binary", "--distribution_strategy=multi_worker"])
    assert flag_values.distribution_strategy == "multi_worker"
    with pytest.raises(flags.IllegalFlagValueError):
        flag_values(["binary", "--distribution_strategy=gpu"])
    # --tpu only with --distribution_strategy=tpu (silently ignoring it would train elsewhere).
    flag_values = flags.FlagValues()
    distribution_flags.define_distribution_strategy_flag(flag_values)
    with pytest.raises(flags.IllegalFlagValueError, match=r"--tpu: expected only with "
                                                          r"--distribution_strategy=tpu"):
        flag_values(["binary", "--tpu=grpc://10.0.0.2:8470"])
    flag_values = flags.FlagValues()
    distribution_flags.define_distribution_strategy_flag(flag_values)
    flag_values(["binary", "--distribution_strategy=tpu", "--tpu=local"])
    assert flag_values.tpu == "local"


def test_data_parallel_needs_jax():
    with pytest.raises(ValueError, match=r"`distribution_strategy`: 'data_parallel'.*JAX.*"
                                         r"received KERAS_BACKEND='tensorflow'.*'mirrored'"):
        distribution_lib.get_strategy("data_parallel")


@pytest.mark.parametrize("tpu", [None, "local"])
def test_tpu_without_a_tpu_fails_at_start_up_naming_the_flags(tpu):
    """No TPU here: the resolver finds no TPU name (None) or no TPU device ('local')."""
    with pytest.raises(ValueError, match=r"--distribution_strategy=tpu: no TPU found at "
                                         rf"--tpu={tpu!r}.*devices: \[.*'CPU'"):
        distribution_lib.get_strategy("tpu", tpu=tpu)


# ------------------------------------------------------------------------------------------------
# Training under a strategy
# ------------------------------------------------------------------------------------------------

def test_mirrored_over_the_cpu_trains_rule_learning(tmp_path, monkeypatch):
    records = []
    monkeypatch.setattr(keras.Model, "fit", fit_probe(records))
    result = rule_learning_lib.rule_learning_train_eval(str(tmp_path), model="conv", epochs=4,
                                                        tensorboard=False, export=False,
                                                        distribution_strategy="mirrored")
    assert [r["replicas"] for r in records] == [1]
    record = records[0]
    assert record["mirrored"] and record["in_scope"] and record["copies"] == [1]
    assert record["changed"]
    # One replica: XLA and the multi-step loop are kept.
    assert record["jit_compile"] and record["steps_per_execution"] == 50
    assert 0.0 <= result["test_accuracy"] <= 1.0


def _script(*pieces):
    """One Python program from separately indented pieces of code."""
    return "\n".join(textwrap.dedent(piece) for piece in pieces)


def _environment(**overrides):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    for name in ("TF_USE_LEGACY_KERAS", "KERAS_BACKEND", "TF_CONFIG"):
        env.pop(name, None)  # set up explicitly below (conftest routes tf.keras to tf-keras)
    env.update(overrides)
    return env


def _run_python(code, **env_overrides):
    return subprocess.run([sys.executable, "-c", code], cwd=_REPO_ROOT,
                          env=_environment(**env_overrides), capture_output=True, text=True,
                          timeout=600)


# Loads `fit_probe` from this file into a fresh process and installs it.
_PROBE = f"""
import importlib.util
import json

import keras

_spec = importlib.util.spec_from_file_location("distribution_probe", {__file__!r})
_probe = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_probe)
records = []
keras.Model.fit = _probe.fit_probe(records)
"""


@pytest.mark.slow
@pytest.mark.subprocess
def test_two_logical_cpus_and_a_single_worker(tmp_path):
    # MirroredStrategy over two logical CPU devices (configured before TensorFlow initialises)
    # through three libraries, then a single-worker MultiWorkerMirroredStrategy (no TF_CONFIG).
    out = tmp_path / "records.json"
    result = _run_python(_script("""
        import tensorflow as tf

        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()])
    """, _PROBE, f"""
        from keras_relational.environments import palindromes
        from keras_relational.experiments import (
            palindromes_lib,
            relations_game_lib,
            rule_learning_lib,
        )

        root = {str(tmp_path)!r}
        runs = {{}}

        def run(label, train_eval, **kwargs):
            start = len(records)
            train_eval(f"{{root}}/{{label}}", **kwargs)
            runs[label] = records[start:]

        run("relations_game", relations_game_lib.train_eval, central="predinet", task="same",
            num_batches=2, eval_interval=2, batch_size=4, num_train_examples=8,
            num_eval_examples=4, num_monitor_examples=4, steps_per_execution=2,
            central_kwargs={{"num_heads": 2, "key_dim": 3, "num_relations": 4}},
            distribution_strategy="mirrored")
        run("rule_learning", rule_learning_lib.rule_learning_train_eval, model="conv", epochs=2,
            tensorboard=False, export=False, distribution_strategy="mirrored")
        small = palindromes.palindrome_dataset(half_lengths=(3,), n_per_length=40, seed=0)
        long = palindromes.long_palindrome_dataset(half_lengths=(7,), n_per_length=4)
        data = {{"train": small["train"], "dev": small["dev"], "in_domain_test": small["test"],
                 "long_test": long["test"]}}
        run("palindromes", palindromes_lib.palindromes_train_eval, model="conv_stack", epochs=1,
            batch_size=16, restart_threshold=None, data=data, tensorboard=False, export=False,
            distribution_strategy="mirrored")
        run("single_worker", rule_learning_lib.rule_learning_train_eval, model="conv", epochs=2,
            tensorboard=False, export=False, distribution_strategy="multi_worker")
        with open({str(out)!r}, "w") as f:
            json.dump(runs, f)
    """))
    assert result.returncode == 0, result.stderr[-4000:]
    runs = json.loads(out.read_text())
    for label in ("relations_game", "rule_learning", "palindromes"):
        assert len(runs[label]) == 1, label
        record = runs[label][0]
        assert record["mirrored"] and record["replicas"] == 2, (label, record)
        # Every variable has a copy on each device, the copies agree after training, and the
        # weights moved.
        assert record["in_scope"] and record["copies"] == [2] and record["copies_equal"], label
        assert record["changed"], label
        assert not record["jit_compile"] and record["steps_per_execution"] == 1, label
    # The SavedModel export also works from mirrored variables.
    assert (tmp_path / "relations_game" / "saved_model" / "saved_model.pb").exists()
    assert "compiling with jit_compile=False and steps_per_execution=1" in result.stderr
    (record,) = runs["single_worker"]
    assert record["multi_worker"] and record["replicas"] == 1 and record["in_scope"]
    assert record["changed"] and record["jit_compile"] and record["steps_per_execution"] == 50


def _free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("localhost", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


@pytest.mark.slow
@pytest.mark.subprocess
def test_two_workers_run_the_rule_learning_binary_in_sync(tmp_path):
    # The multi-worker command of the README, with both workers on this machine.
    cluster = {"worker": [f"localhost:{port}" for port in _free_ports(2)]}
    workers = []
    for index in range(2):
        code = _script(_PROBE, f"""
            import runpy
            import sys

            sys.argv = ["train_rule_learning", "--root_dir={tmp_path}/worker_{index}",
                        "--distribution_strategy=multi_worker", "--models=conv", "--seeds=1",
                        "--epochs=4", "--noexport"]
            try:
                runpy.run_module("keras_relational.experiments.train_rule_learning",
                                 run_name="__main__")
            except SystemExit as error:  # absl's app.run exits
                assert not error.code, error.code
            with open("{tmp_path}/records_{index}.json", "w") as f:
                json.dump(records, f)
        """)
        env = _environment(TF_CONFIG=json.dumps(
            {"cluster": cluster, "task": {"type": "worker", "index": index}}))
        workers.append(subprocess.Popen([sys.executable, "-c", code], cwd=_REPO_ROOT, env=env,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True))
    outputs = []
    try:
        for worker in workers:
            outputs.append(worker.communicate(timeout=600))
    finally:
        for worker in workers:
            worker.kill()  # a worker whose peer failed waits for it forever
    for worker, (_, stderr) in zip(workers, outputs, strict=True):
        assert worker.returncode == 0, stderr[-4000:]
    records = [json.loads((tmp_path / f"records_{i}.json").read_text()) for i in range(2)]
    for (record,) in records:
        assert record["multi_worker"] and record["replicas"] == 2 and record["in_scope"]
        assert record["changed"]
        assert not record["jit_compile"] and record["steps_per_execution"] == 1
    # Each worker trains on its own half of every global batch; in-sync workers end equal.
    assert records[0][0]["digest"] == records[1][0]["digest"]
    results = [json.loads((tmp_path / f"worker_{i}" / "summary.json").read_text())
               for i in range(2)]
    assert results[0]["conv"]["runs"][0]["kernel"] == results[1]["conv"]["runs"][0]["kernel"]


# The README's JAX snippet; the test runs it with fewer epochs.
_JAX_SNIPPET = """
import keras

keras.distribution.set_distribution(keras.distribution.DataParallel())  # all devices
from keras_relational.experiments import rule_learning_lib

result = rule_learning_lib.rule_learning_train_eval("{root}", model="conv", epochs={epochs},
                                                    export=False)
"""


@pytest.mark.slow
@pytest.mark.subprocess
def test_jax_data_parallel_over_two_cpu_devices(tmp_path):
    out = tmp_path / "records.json"
    result = _run_python(_script(_PROBE, """
        import jax
        import pytest

        from keras_relational.experiments import distribution_lib

        assert len(jax.devices()) == 2, jax.devices()
        with pytest.raises(ValueError, match="DataParallel"):
            distribution_lib.get_strategy("mirrored")
    """, _JAX_SNIPPET.format(root=tmp_path / "run", epochs=8), f"""
        with open({str(out)!r}, "w") as f:
            json.dump({{"records": records, "result": result}}, f)
    """), KERAS_BACKEND="jax", JAX_PLATFORMS="cpu",
        XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} "  # after tests/conftest.py's
                  "--xla_force_host_platform_device_count=2")
    assert result.returncode == 0, result.stderr[-4000:]
    report = json.loads(out.read_text())
    (record,) = report["records"]
    assert record["distribution"] == "DataParallel" and record["devices"] == [2]
    assert record["changed"]
    assert 0.0 <= report["result"]["test_accuracy"] <= 1.0


# rule_learning conv on one device, then with distribution_strategy="data_parallel" on a mesh of 4
# simulated CPU devices; every batch given to a train step is recorded with its sharding.
_MESH_SCRIPT = """
import jax
from keras.src.backend.jax import distribution_lib as jax_distribution_lib

from keras_relational.experiments import distribution_lib, rule_learning_lib

assert len(jax.devices()) == 4, jax.devices()
batches = []
_distribute = jax_distribution_lib.distribute_data_input


def distribute_and_record(per_process_batch, layout, batch_dim_name):
    batch = _distribute(per_process_batch, layout, batch_dim_name)
    batches.append(dict(devices=len(batch.sharding.device_set),
                        shard=list(batch.sharding.shard_shape(batch.shape)),
                        shape=list(batch.shape)))
    return batch


jax_distribution_lib.distribute_data_input = distribute_and_record
kwargs = dict(model="conv", epochs=3, tensorboard=False, export=False)
single = rule_learning_lib.rule_learning_train_eval({single!r}, **kwargs)
assert not batches  # no distribution: nothing sharded
mesh = rule_learning_lib.rule_learning_train_eval({mesh!r}, distribution_strategy="data_parallel",
                                                  **kwargs)
distribution = distribution_lib.get_strategy("data_parallel")
with open({out!r}, "w") as f:
    json.dump(dict(records=records, batches=batches, single=single["kernel"],
                   mesh=mesh["kernel"], mesh_shape=list(distribution.device_mesh.shape)), f)
"""


@pytest.mark.slow  # a fresh JAX process training twice
@pytest.mark.subprocess
def test_data_parallel_flag_on_a_simulated_4_device_mesh_matches_one_device(tmp_path):
    out = tmp_path / "report.json"
    result = _run_python(_script(_PROBE, _MESH_SCRIPT.format(
        single=str(tmp_path / "single"), mesh=str(tmp_path / "mesh"), out=str(out))),
        KERAS_BACKEND="jax", JAX_PLATFORMS="cpu",
        XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} "  # after tests/conftest.py's
                  "--xla_force_host_platform_device_count=4")
    assert result.returncode == 0, result.stderr[-4000:]
    report = json.loads(out.read_text())
    assert report["mesh_shape"] == [4]
    single, mesh = report["records"]
    assert single["distribution"] is None and single["devices"] == [1]
    assert mesh["distribution"] == "DataParallel" and mesh["devices"] == [4]  # replicated
    assert mesh["changed"]
    # Every batch (training: 16 examples; predict: 32 and 4) is split 4 ways along its first axis.
    assert report["batches"] and all(b["devices"] == 4 for b in report["batches"])
    assert {(b["shape"][0], b["shard"][0]) for b in report["batches"]} == {
        (16, 4), (32, 8), (4, 1)}
    # The same updates as on one device (a sum over 4 shards: float32 rounding only).
    np.testing.assert_allclose(report["mesh"], report["single"], rtol=1e-4, atol=1e-5)


def test_other_backends_get_one_device_and_torch_one_batch_per_call(monkeypatch, caplog):
    # Under JAX or torch, "default" is NoDistribution (no TensorFlow touched); the torch backend
    # refuses steps_per_execution > 1, so compile_options asks for 1, logged once.
    for backend in ("jax", "torch"):
        monkeypatch.setattr(distribution_lib.keras.backend, "backend", lambda b=backend: b)
        strategy = distribution_lib.get_strategy("default")
        assert isinstance(strategy, distribution_lib.NoDistribution)
        assert strategy.num_replicas_in_sync == 1
        with strategy.scope():
            pass
    monkeypatch.setattr(distribution_lib, "_logged", set())
    with caplog.at_level(logging.WARNING, logger=distribution_lib.__name__):
        for _ in range(2):
            assert distribution_lib.compile_options(None, True, 50) == {
                "jit_compile": True, "steps_per_execution": 1}
    assert len([r for r in caplog.records if "torch backend" in r.getMessage()]) == 1
    monkeypatch.setattr(distribution_lib.keras.backend, "backend", lambda: "jax")
    assert distribution_lib.compile_options(None, True, 50) == {
        "jit_compile": True, "steps_per_execution": 50}
