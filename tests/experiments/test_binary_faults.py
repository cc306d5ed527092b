"""Faults during the supervised binaries' training (issue 29): palindromes, relations game, bAbI,
character LM and rule learning.

Each binary's library (its first kill: the binary itself, where the case names it) is killed
with SIGKILL while a backup is written and while its model is exported (a deterministic point,
``KERAS_RELATIONAL_KILL_AT``, see ``keras_relational.faults``), with the unfinished backup and
the newest complete one damaged in between (truncated, random bytes or garbage metadata): every
restart resumes from the previous backup (``keras_relational.experiments.safe_backup``), warns
naming the files it skipped, trains only the epochs that were lost, and the last restart
completes the run. Tiny sizes: each kill is a fresh process (about 10 s of imports and
compiling on 2 CPU cores).
"""

import contextlib
import dataclasses
import io
import json
import os
import sys
import warnings

import pytest
import warm_python
from backup_damage import DAMAGES, damage_newest_backup
from kill_checks import soak_command

from keras_relational.experiments import safe_backup

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclasses.dataclass
class Case:
    module: str  # in keras_relational.experiments
    function: str  # called as function(root_dir, **kwargs)
    kwargs: dict
    backup: str  # the backup directory the first kill leaves, relative to root_dir
    write: int  # the backup write the first kill interrupts: its fit's epoch 3 (1, 2 complete)
    epochs: int  # the epochs of that backup's fit
    export: bool = True  # has an export kill point
    outputs: tuple = ()  # files of a finished run, relative to root_dir (the export last)
    # The absl binary (benchmarks/fault_soak.py's name for it, flags added to the soak's) with the
    # settings of ``kwargs``: the first kill below is of the binary a user starts
    # (tests/test_random_kills.py leaves its random kill to this test).
    binary: tuple = ()


CASES = {
    # Two attempts of the restart rule (the first fails the check at epoch 1): killed while
    # writing attempt 1's epoch-2 backup.
    "palindromes": Case(
        "palindromes_lib", "palindromes_train_eval",
        dict(model="lstm", epochs=3, batch_size=64, n_per_length=12, long_n_per_length=2,
             restart_baseline=True, restart_epoch=1, restart_threshold=0.999, max_restarts=1,
             tensorboard=False, verbose=2, steps_per_execution=1),
        "backup/attempt_1", write=4, epochs=3, outputs=("model.keras", "results.json")),
    "relations_game": Case(
        "relations_game_lib", "train_eval",
        dict(central="mlp1", task="same", num_batches=6, eval_interval=2, batch_size=5,
             num_train_examples=20, num_eval_examples=10, steps_per_execution=2, verbose=2),
        "backup", write=3, epochs=3,
        outputs=("results.json", "final.weights.h5", "saved_model/saved_model.pb"),
        binary=("train_relations_game", ())),
    "babi": Case(
        "babi_lib", "train_eval",
        dict(tasks=(1,), num_train=32, num_valid=16, num_test=16, entity_dim=4, relation_dim=3,
             hidden_dim=8, batch_size=16, epochs=3, jit_compile=False, verbose=2),
        "backup", write=3, epochs=3,
        outputs=("results.json", "saved_model/saved_model.pb"),
        binary=("train_babi", ())),
    # The first attention finishes (3 backups); killed in the second one's epoch-3 backup.
    "char_lm": Case(
        "char_lm_lib", "train_eval",
        dict(tasks=(1,), train_questions=4, valid_questions=2, sequence_length=16, width=8,
             num_layers=1, num_heads=2, key_dim=4, num_key_value_heads=1, window=(4, 2),
             epochs=3, batch_size=8, jit_compile=False, verbose=2),
        "backup/dot_product", write=6, epochs=3, export=False,
        outputs=("results.json", "results.md"),
        binary=("train_char_lm", ("--epochs=3",))),
}


def _killed_run(root, case, kill_at, binary=False):
    """Runs the case's library function (``binary``: its absl binary) until ``kill_at``."""
    code = (f"from keras_relational.experiments import {case.module}\n"
            f"{case.module}.{case.function}({root!r}, **{case.kwargs!r})\n")
    command = soak_command(case.binary[0], root, *case.binary[1]) if binary \
        else [sys.executable, "-c", code]
    env = warm_python.binary_env(KERAS_RELATIONAL_KILL_AT=kill_at)
    done = warm_python.run(command, cwd=_REPO_ROOT, env=env,
                           capture_output=True, text=True, timeout=600)
    assert done.returncode == -9, (kill_at, done.returncode, done.stderr[-3000:])
    return done.stdout


def _run_here(root, case):
    import importlib

    function = getattr(importlib.import_module(f"keras_relational.experiments.{case.module}"),
                       case.function)
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        result = function(root, **case.kwargs)
    return result, buffer.getvalue()


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_binary_survives_kills_and_a_corrupt_backup(tmp_path, name):
    case = CASES[name]
    root = str(tmp_path / "run")
    backup = os.path.join(root, case.backup)
    last = f"Epoch {case.epochs}/{case.epochs}"
    # Killed while writing a backup: epochs 1 (previous) and 2 (latest) in place, 3 unfinished.
    # Where the case has one, the binary is killed; the library resumes with its settings.
    _killed_run(root, case, f"backup_write:{case.write}", binary=bool(case.binary))
    assert {"latest.weights.h5", "previous.weights.h5", "partial.weights.h5",
            "training_metadata.json", "training_metadata.json.partial"} <= set(os.listdir(backup))
    with open(os.path.join(backup, "training_metadata.json")) as f:
        assert json.load(f)["epoch"] == 2
    # The unfinished backup and the newest complete one damaged (each binary another way): the
    # restart skips both, naming them, resumes from the previous backup (epoch 1; Keras refused
    # its file name before issue 48) and trains the others.
    with open(os.path.join(backup, "partial.weights.h5"), "r+b") as f:
        f.truncate(100)
    damage_newest_backup(backup, DAMAGES[sorted(CASES).index(name) % len(DAMAGES)])
    if case.export:  # ... and is killed while exporting
        out = _killed_run(root, case, "export:1")
        assert not os.path.exists(os.path.join(root, case.outputs[-1]))  # not exported yet
    else:
        _, out = _run_here(root, case)
    assert "skipping the unreadable backup" in out and ".partial" in out, out
    assert "previous.weights.h5 (epoch 1)" in out, out
    assert f"Epoch 1/{case.epochs}" not in out and f"Epoch 2/{case.epochs}" in out, out
    assert last in out, out
    if case.export:  # the export restart trains nothing and finishes, without Keras' warning
        with warnings.catch_warnings(record=True) as caught:  # that it skipped the optimizer
            warnings.simplefilter("always")
            result, out = _run_here(root, case)
        assert "Epoch " not in out, out
        skipped = [str(w.message) for w in caught if "Skipping variable loading" in str(w.message)]
        assert not skipped, skipped
    for path in case.outputs:
        assert os.path.exists(os.path.join(root, path)), path
    if name != "relations_game":  # (its stages keep their backups, by design)
        assert not os.path.exists(os.path.join(root, "backup"))


@pytest.mark.slow
def test_babi_killed_in_its_first_backup_write_starts_from_the_first_epoch(tmp_path):
    """The state a random kill of train_babi once left (tests/test_random_kills.py, seed 1): killed
    while the first epoch's weights were being written, a half-written ``partial.weights.h5``
    without metadata and no backup. The restart refused the backup directory (BackupError); it
    warns, naming the file, and trains from the first epoch."""
    case = CASES["babi"]
    root = str(tmp_path / "run")
    backup = os.path.join(root, case.backup)
    _killed_run(root, case, "backup_weights:1")
    assert sorted(os.listdir(backup)) == ["partial.weights.h5", "run_state.json"]
    partial = os.path.join(backup, "partial.weights.h5")
    with open(partial, "r+b") as f:  # half written, as the random kill left it
        f.truncate(os.path.getsize(partial) // 2)
    _, out = _run_here(root, case)
    assert "skipping the unfinished first backup" in out and "partial.weights.h5" in out, out
    assert "Resuming from" not in out, out
    assert f"Epoch 1/{case.epochs}" in out and f"Epoch {case.epochs}/{case.epochs}" in out, out
    for path in case.outputs:
        assert os.path.exists(os.path.join(root, path)), path
    assert not os.path.exists(backup)


@pytest.mark.slow
def test_palindromes_resumed_run_keeps_its_attempts_and_finished_runs_are_reused(tmp_path):
    case = CASES["palindromes"]
    root = str(tmp_path / "run")
    _killed_run(root, case, "export:1")  # both attempts done, killed while exporting
    # An unfinished run with other settings is a clear error, never silently overwritten.
    other = dataclasses.replace(case, kwargs=dict(case.kwargs, epochs=2))
    with pytest.raises(safe_backup.BackupError, match=r"other settings \(epochs: 3 there, 2 now\)"):
        _run_here(root, other)
    result, out = _run_here(root, case)
    assert "Epoch " not in out, out  # nothing trained again
    assert result["restarts"] == 1 and len(result["dev_accuracy_at_restart_epoch"]) == 2
    again, out = _run_here(root, case)  # a finished run is not trained again
    assert "Epoch " not in out and again["restarts"] == 1


def test_finished_results_are_reused_only_with_the_same_settings(tmp_path):
    path = str(tmp_path / "results.json")
    assert safe_backup.read_finished(path, {"epochs": 3}) is None  # none yet
    with open(path, "w") as f:
        json.dump({"accuracy": 0.5, "settings": {"epochs": 3, "tasks": [1, 2]}}, f)
    assert safe_backup.read_finished(path, {"epochs": 3, "tasks": (1, 2)})["accuracy"] == 0.5
    assert safe_backup.read_finished(path, {"epochs": 2, "tasks": (1, 2)}) is None


@pytest.mark.slow
def test_rule_learning_resumes_at_the_first_unfinished_run(tmp_path):
    from keras_relational.experiments import rule_learning_lib

    root = str(tmp_path / "rules")
    kwargs = dict(epochs=3, tensorboard=False, steps_per_execution=1)
    case = Case("rule_learning_lib", "train_seeds",
                dict(models=("conv",), seeds=2, **kwargs), "", write=0, epochs=0,
                binary=("train_rule_learning", ()))
    # The binary killed while exporting the second run (TensorBoard and steps per execution are
    # not among the settings that decide whether a finished run is re-used).
    _killed_run(root, case, "export:2", binary=True)
    first = os.path.join(root, "conv", "seed_0", "results.json")
    second = os.path.join(root, "conv", "seed_1", "results.json")
    assert os.path.exists(first) and not os.path.exists(second)
    stamp = os.stat(first).st_mtime_ns
    summary = rule_learning_lib.train_seeds(root, ("conv",), 2, **kwargs)
    assert os.stat(first).st_mtime_ns == stamp  # the finished run was re-used
    assert [run["seed"] for run in summary["conv"]["runs"]] == [0, 1]
    # A corrupt result is reported and its run trained again; the other one is re-used.
    with open(second, "r+b") as f:
        f.truncate(10)
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        again = rule_learning_lib.train_seeds(root, ("conv",), 2, **kwargs)
    assert "ignoring the unreadable result" in buffer.getvalue() and second in buffer.getvalue()
    assert os.stat(first).st_mtime_ns == stamp
    assert again["conv"]["runs"][1]["test_accuracy"] == summary["conv"]["runs"][1][
        "test_accuracy"]  # seeded: the same run again


def test_a_non_finite_loss_stops_training_and_keeps_the_last_good_backup(tmp_path):
    import keras
    import numpy as np

    backup = str(tmp_path / "backup")
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")

    def diverge(epoch, logs):
        if epoch == 1:  # as a too-high learning rate would
            model.set_weights([np.full_like(w, np.nan) for w in model.get_weights()])

    with pytest.raises(safe_backup.NonFiniteLossError,
                       match=r"loss became nan in epoch 2.*backup of epoch 1 in .*backup is kept"):
        model.fit(np.ones((8, 2)), np.ones((8, 1)), epochs=3, verbose=0, callbacks=[
            keras.callbacks.LambdaCallback(on_epoch_begin=diverge),
            safe_backup.SafeBackupAndRestore(backup, delete_checkpoint=False)])
    with open(os.path.join(backup, "training_metadata.json")) as f:
        assert json.load(f)["epoch"] == 1
    restored = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    restored.compile(optimizer="sgd", loss="mse")
    assert safe_backup.SafeBackupAndRestore(backup).restore(restored) == 1
    assert all(np.isfinite(w).all() for w in restored.get_weights())


@pytest.mark.parametrize("how", DAMAGES)
def test_a_resume_from_the_previous_backup_keeps_two_valid_backups(tmp_path, how):
    """The random-kill soak of train_palindromes (seed 3): killed after its last epoch's backup,
    the newest backup's metadata truncated; the restart resumed from the previous backup, but
    left the damaged files under their names, so the next backup write rotated them into the
    previous backup's place: the state it had resumed from was gone, and one more fault to the
    newest backup left nothing to restore (BackupError). The damaged newest backup is set aside
    (``*.corrupt``, never read again): after the next write both backups are valid."""
    import keras
    import numpy as np

    def model():
        net = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        net.compile(optimizer="adam", loss="mse")
        return net

    def fit(net, callback):
        return net.fit(np.ones((8, 2)), np.ones((8, 1)), epochs=3, verbose=0,
                       callbacks=[callback])

    backup = str(tmp_path / "backup")
    fit(model(), safe_backup.SafeBackupAndRestore(backup, delete_checkpoint=False))
    damage_newest_backup(backup, how)  # epoch 3 damaged, epoch 2 whole
    warnings = []
    history = fit(model(), safe_backup.SafeBackupAndRestore(backup, delete_checkpoint=False,
                                                            warn=warnings.append))
    assert history.epoch == [2], warnings  # resumed after epoch 2
    with open(os.path.join(backup, "training_metadata.json")) as f:
        assert json.load(f)["epoch"] == 3
    with open(os.path.join(backup, "training_metadata.json.bkp")) as f:
        assert json.load(f)["epoch"] == 2  # the backup it resumed from
    damage_newest_backup(backup, how, np.random.default_rng(1))  # a second fault
    again = safe_backup.SafeBackupAndRestore(backup, warn=lambda line: None)
    assert again.restore(model()) == 2
    # The first damage is kept for a look, under a name no restore reads, and the warning says
    # where.
    assert any(".corrupt" in w for w in warnings), warnings
