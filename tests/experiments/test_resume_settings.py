"""Resume with other settings (issue 48): ``keras_relational.run_settings``.

A toy ``train_eval`` over ``SafeBackupAndRestore`` (the supervised binaries' resume path, fast:
no subprocess); the Box-World trainer's flags are checked in tests/agents/test_compiled_loop.py.
"""

import json
import os

import keras
import numpy as np
import pytest

from keras_relational import run_lock, run_settings
from keras_relational.experiments.safe_backup import SafeBackupAndRestore


@run_settings.resumable(optimizer=("learning_rate",), free=("epochs",))
def _train_eval(root_dir, units=2, learning_rate=1e-3, epochs=2):
    if units < 1:
        raise ValueError(f"units must be >= 1, received {units}.")
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(units)])
    model.compile(optimizer=keras.optimizers.Adam(learning_rate), loss="mse")
    model.fit(np.ones((4, 3), "float32"), np.zeros((4, units), "float32"), epochs=epochs,
              verbose=0, callbacks=[SafeBackupAndRestore(os.path.join(root_dir, "backup"),
                                                         delete_checkpoint=False)])
    return float(keras.ops.convert_to_numpy(model.optimizer.learning_rate))


def test_a_resume_with_other_settings_refuses_naming_each_flag(tmp_path, capsys):
    root = str(tmp_path / "run")
    assert _train_eval(root) == pytest.approx(1e-3)
    with open(os.path.join(root, run_settings.FILENAME)) as f:
        assert json.load(f)["settings"] == dict(units=2, learning_rate=1e-3, epochs=2)
    # The architecture never changes: named with both values, before anything is loaded.
    with pytest.raises(run_settings.SettingsError,
                       match=r"other settings \(--units: 2 in the run, 3 now\)\. These cannot "
                             r"change on resume \(only the optimizer's hyperparameters can, "
                             r"with --allow_changed_hyperparameters: --learning_rate\)"):
        _train_eval(root, units=3)
    # The learning rate only when allowed; free settings (epochs) change silently.
    with pytest.raises(run_settings.SettingsError,
                       match=r"--learning_rate: 0\.001 in the run, 0\.5 now\)\. Re-run with the "
                             r"run's values.*--allow_changed_hyperparameters"):
        _train_eval(root, learning_rate=0.5, epochs=3)
    with pytest.raises(run_settings.SettingsError, match=r"--units: 2 in the run, 3 now"):
        _train_eval(root, units=3, learning_rate=0.5, allow_changed_hyperparameters=True)
    capsys.readouterr()
    # Allowed: logged, recorded, and the resumed optimizer uses the new rate (the backup held
    # the old one, which the restore used to put back).
    assert _train_eval(root, learning_rate=0.5, epochs=3,
                       allow_changed_hyperparameters=True) == pytest.approx(0.5)
    out = capsys.readouterr().out
    assert "changed optimizer hyperparameters (--learning_rate: 0.001 in the run, 0.5 now" in out
    assert "Resuming from" in out and "epoch 2" in out, out
    with open(os.path.join(root, run_settings.FILENAME)) as f:
        record = json.load(f)
    assert record["settings"]["learning_rate"] == 0.5
    assert record["changes"][0]["changed"] == {"learning_rate": dict(old=1e-3, new=0.5)}
    assert _train_eval(root, learning_rate=0.5, epochs=4) == pytest.approx(0.5)  # the new ones
    assert not os.path.exists(run_lock.lock_path(root))


def test_a_refused_first_call_leaves_nothing_and_a_garbled_record_is_an_error(tmp_path):
    root = str(tmp_path / "fresh")
    with pytest.raises(ValueError, match="units must be"):
        _train_eval(root, units=0)
    assert not os.path.exists(root)
    os.makedirs(root)
    with open(os.path.join(root, run_settings.FILENAME), "w") as f:
        f.write("{garbled")
    with pytest.raises(run_settings.SettingsError,
                       match=r"cannot be read.*Nothing was overwritten"):
        _train_eval(root)


def test_flat_settings_names_nested_values_by_their_own_names():
    import dataclasses

    @dataclasses.dataclass
    class Level:
        room_size: int = 5

    @dataclasses.dataclass
    class Config:
        environment: Level = dataclasses.field(default_factory=Level)
        eval_environment: Level = dataclasses.field(default_factory=Level)
        model_kwargs: dict = dataclasses.field(default_factory=lambda: dict(head_units=(8, 8)))
        print_fn: object = print

    assert run_settings.flat_settings(Config()) == {
        "environment.room_size": 5, "eval_environment.room_size": 5, "head_units": [8, 8]}
