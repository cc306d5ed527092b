"""``SafeBackupAndRestore.restore`` on the states a kill leaves in a backup directory (fast: a
tiny model, no subprocess; the binaries' kill tests are in test_binary_faults.py and
test_supervised_faults.py)."""

import json
import os

import keras
import numpy as np
import pytest
from backup_damage import damage_newest_backup

from keras_relational.experiments.safe_backup import BackupError, SafeBackupAndRestore


def _model():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(optimizer="adam", loss="mse")
    return model


def _fit(model, callbacks, epochs=2):
    x, y = np.ones((4, 3), "float32"), np.zeros((4, 2), "float32")
    callbacks = callbacks if isinstance(callbacks, list) else [callbacks]
    return model.fit(x, y, epochs=epochs, verbose=0, callbacks=callbacks)


def _first_write_killed(backup, weights, metadata):
    """The first backup write, killed: its temporaries only (``weights``: whole, half or None;
    ``metadata``: whole, half or None)."""
    os.makedirs(backup)
    partial = os.path.join(backup, "partial.weights.h5")
    _model().save_weights(partial)
    size = os.path.getsize(partial)
    record = json.dumps({"epoch": 1, "batch": -1, "weights_crc32": 0, "logs": {}})
    if weights == "half":
        with open(partial, "r+b") as f:
            f.truncate(size // 2)
    elif weights is None:
        os.remove(partial)
    if metadata is not None:
        with open(os.path.join(backup, "training_metadata.json.partial"), "w") as f:
            f.write(record if metadata == "whole" else record[: len(record) // 2])


@pytest.mark.parametrize("weights,metadata", [("half", None), ("whole", None),
                                              ("whole", "half"), (None, "half")])
def test_a_kill_in_the_first_backup_write_starts_from_the_first_epoch(tmp_path, weights,
                                                                      metadata):
    """The state of train_babi's random kill (a half-written partial.weights.h5, no metadata)
    and its neighbours: no epoch was backed up, so the restart warns naming the temporaries and
    trains from the first epoch (it raised BackupError, refusing the directory)."""
    backup = str(tmp_path / "backup")
    _first_write_killed(backup, weights, metadata)
    warnings = []
    callback = SafeBackupAndRestore(backup, delete_checkpoint=False, warn=warnings.append)
    history = _fit(_model(), callback)
    assert history.epoch == [0, 1] and callback.restored_epoch is None
    assert len(warnings) == 1 and "unfinished first backup" in warnings[0], warnings
    assert "first epoch" in warnings[0] and ("partial" in warnings[0]), warnings
    # The run's own backups replaced the temporaries.
    assert sorted(os.listdir(backup)) == ["latest.weights.h5", "previous.weights.h5",
                                          "training_metadata.json",
                                          "training_metadata.json.bkp"]
    with open(os.path.join(backup, "training_metadata.json")) as f:
        assert json.load(f)["epoch"] == 2


def test_unreadable_backups_are_still_an_error_next_to_an_unfinished_write(tmp_path):
    """Complete backups that cannot be read are not a fresh start: a clear error, nothing
    overwritten, even when an unfinished write lies next to them."""
    backup = str(tmp_path / "backup")
    _first_write_killed(backup, "half", None)
    for name in ("latest.weights.h5", "training_metadata.json"):
        with open(os.path.join(backup, name), "w") as f:
            f.write("garbage")
    before = sorted(os.listdir(backup))
    with pytest.raises(BackupError, match=r"No backup in .*backup can be restored.*afresh"):
        _fit(_model(), SafeBackupAndRestore(backup, warn=lambda line: None))
    assert sorted(os.listdir(backup)) == before


@pytest.mark.parametrize("how", ["truncated", "random", "garbage"])
def test_a_damaged_newest_backup_falls_back_to_the_previous_one(tmp_path, how):
    """The previous backup is restored when the newest cannot be (issue 48: it was kept as
    ``latest.weights.h5.bkp``, a name Keras refuses to load, so every fallback failed)."""
    backup = str(tmp_path / "backup")
    model, weights_after = _model(), {}
    record = keras.callbacks.LambdaCallback(
        on_epoch_end=lambda epoch, logs: weights_after.setdefault(epoch + 1, model.get_weights()))
    _fit(model, [record, SafeBackupAndRestore(backup, delete_checkpoint=False)])
    damage_newest_backup(backup, how)
    warnings, restored = [], _model()
    callback = SafeBackupAndRestore(backup, warn=warnings.append)
    assert callback.restore(restored) == 1
    for got, want in zip(restored.get_weights(), weights_after[1], strict=True):
        np.testing.assert_array_equal(got, want)
    assert any("skipping the unreadable backup" in w for w in warnings), warnings
    assert warnings[-1] == f"Resuming from {backup}: epoch 1", warnings
    # Training on resumes after epoch 1 and backs up again.
    history = _fit(restored, callback, epochs=3)
    assert history.epoch == [1, 2]


def test_a_backup_directory_of_the_older_layout_restores_its_previous_backup(tmp_path):
    """A backup directory written before the previous weights were renamed (``*.bkp``) falls
    back to them too."""
    backup = str(tmp_path / "backup")
    _fit(_model(), SafeBackupAndRestore(backup, delete_checkpoint=False))
    os.replace(os.path.join(backup, "previous.weights.h5"),
               os.path.join(backup, "latest.weights.h5.bkp"))
    damage_newest_backup(backup, "truncated")
    assert SafeBackupAndRestore(backup, warn=lambda line: None).restore(_model()) == 1
