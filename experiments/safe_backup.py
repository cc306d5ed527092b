"""``SafeBackupAndRestore``: Keras' ``BackupAndRestore`` that kills and corrupt files cannot defeat.

Keras writes ``latest.weights.h5`` in place and then ``training_metadata.json``: a process killed
in between leaves a truncated weights file (a raw ``OSError`` on the next start) or weights and
an epoch that do not match. Here every backup is written to temporary files first, renamed into
place only when complete, and keeps the previous backup (``previous.weights.h5`` and
``training_metadata.json.bkp``: Keras loads weights only from files named ``*.weights.h5``); the
metadata records the weights file's CRC-32, so a restart uses the newest pair that matches, warns
naming any backup it skips (a damaged newest backup is set aside as ``*.corrupt``, so that the
next write keeps the backup resumed from as the previous one), and raises a clear error (naming
the directory and how to start afresh) when backups exist but none can be read. A kill during
the run's first backup write leaves only its temporaries, no backup: the restart warns and
starts from the first epoch. The metadata also
keeps the backed-up epoch's logs (``restored_logs`` after a restore). Used by every supervised
binary (relations game, bAbI, same-colour demo, palindromes, character LM).

Above the epochs: a finished run's result file (with a ``"settings"`` entry) is re-used by
:func:`read_finished` when a re-run has the same settings, and :class:`RunState` records which
parts of an unfinished run are done.
"""

import json
import math
import os
import shutil
import zlib

import keras

from keras_relational import faults, json_files, run_settings

_WEIGHTS = "latest.weights.h5"
_PREVIOUS_WEIGHTS = "previous.weights.h5"  # Keras loads only files named *.weights.h5
_LEGACY_PREVIOUS_WEIGHTS = _WEIGHTS + ".bkp"  # the name before: Keras refuses to load it
_METADATA = "training_metadata.json"


class BackupError(RuntimeError):
    """Backups exist in a run's backup directory, but none of them can be restored."""


class NonFiniteLossError(FloatingPointError):
    """An epoch's training loss was NaN or infinite; it was not backed up."""


def _crc32(path):
    crc = 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            crc = zlib.crc32(block, crc)
    return crc


class SafeBackupAndRestore(keras.callbacks.BackupAndRestore):
    """``keras.callbacks.BackupAndRestore`` with atomic writes and a checked, fallible restore.

    Same arguments as Keras' callback (``backup_dir``, ``save_freq``, ``delete_checkpoint``);
    the previous backup is always kept (``previous.weights.h5``, ``training_metadata.json.bkp``).

    Example:

    >>> callback = SafeBackupAndRestore("/tmp/run/backup")  # doctest: +SKIP
    >>> model.fit(x, y, epochs=10, callbacks=[callback])  # doctest: +SKIP
    """

    def __init__(self, backup_dir, save_freq="epoch", delete_checkpoint=True, warn=print):
        super().__init__(backup_dir, save_freq=save_freq, double_checkpoint=True,
                         delete_checkpoint=delete_checkpoint)
        self._warn = warn
        self._logs = {}
        self.restored_epoch = None  # the epoch the last restore resumed after (None: none)
        self.restored_logs = {}  # and its logs

    @staticmethod
    def _partial(path):
        """The temporary a backup write fills before renaming it to ``path``."""
        folder, name = os.path.split(path)
        return os.path.join(folder, "partial." + name.split(".", 1)[1]) \
            if name == _WEIGHTS else path + ".partial"

    @staticmethod
    def _previous(path):
        """Where the previous backup of ``path`` is kept."""
        folder, name = os.path.split(path)
        return os.path.join(folder, _PREVIOUS_WEIGHTS) if name == _WEIGHTS else path + ".bkp"

    def _files(self, path):
        """The existing copies of a backup file: latest, previous, unfinished write."""
        return [p for p in (path, self._previous(path), self._partial(path))
                if os.path.exists(p)]

    def on_train_begin(self, logs=None):
        # Keras reads `model._initial_epoch` and never resets it: a restore of an earlier `fit`
        # (or of a model re-used across runs) must not shift this one.
        self.model._initial_epoch = self.restore(self.model)

    def on_train_end(self, logs=None):
        super().on_train_end(logs)
        self.model._initial_epoch = None  # a later `fit` without this callback starts afresh

    def on_epoch_end(self, epoch, logs=None):
        self._logs = dict(logs or {})
        loss = self._logs.get("loss")
        if loss is not None and not math.isfinite(float(loss)):
            # Never back up a diverged state: the last backup stays the newest good one.
            last = self._current_epoch or self.restored_epoch
            kept = (f"the backup of epoch {last} in {self.backup_dir} is kept" if last
                    else "no epoch was backed up")
            raise NonFiniteLossError(
                f"The training loss became {float(loss)} in epoch {epoch + 1}; training stopped "
                f"without backing it up ({kept}). Lower the learning rate or check the data.")
        super().on_epoch_end(epoch, logs)

    def restore(self, model):
        """Loads the newest valid backup into ``model``; returns its epoch (None: no backup).

        Raises:
            BackupError: backups exist, but none can be restored.
        """
        legacy = os.path.join(self.backup_dir, _LEGACY_PREVIOUS_WEIGHTS)
        previous = self._previous(self._weights_path)
        if os.path.exists(legacy) and not os.path.exists(previous):
            os.replace(legacy, previous)  # a backup directory of an older version: loadable now
        weights_files = self._files(self._weights_path)
        metadata_files = self._files(self._training_metadata_path)
        if not weights_files and not metadata_files:
            return None  # a fresh run
        if model.optimizer is not None and not model.optimizer.built:
            model.optimizer.build(model.trainable_variables)  # before its weights load
        # An allowed change of the learning rate on resume (run_settings): the optimizer holds
        # the new value now, and loading the backup would put the old one back.
        new_learning_rate = None
        if run_settings.changed("learning_rate") and model.optimizer is not None and isinstance(
                model.optimizer.learning_rate, keras.Variable):
            new_learning_rate = float(model.optimizer.learning_rate.numpy())
        checksums = {path: _crc32(path) for path in weights_files}
        skipped, records = [], []
        for path in metadata_files:
            try:
                with open(path) as f:
                    recorded = json.load(f)
                records.append((int(recorded["epoch"]), recorded.get("weights_crc32"), path,
                                recorded.get("logs") or {}))
            except (OSError, ValueError, KeyError, TypeError) as error:
                skipped.append((path, f"{type(error).__name__}: {str(error)[:200]}"))
        # Newest epoch first; a metadata file only counts with the weights it was written for.
        for epoch, checksum, path, epoch_logs in sorted(records, key=lambda r: r[:3],
                                                        reverse=True):
            matching = [w for w in weights_files if checksums[w] == checksum]
            if not matching:
                skipped.append((path, "no complete weights file matches it (an interrupted "
                                      "write)"))
                continue
            try:
                model.load_weights(matching[0])
            except (OSError, ValueError) as error:
                skipped.append((matching[0], f"{type(error).__name__}: {str(error)[:200]}"))
                continue
            if new_learning_rate is not None:
                model.optimizer.learning_rate.assign(new_learning_rate)
            set_aside = (self._set_aside_newest(keep=matching[0])
                         if path == self._previous(self._training_metadata_path) else [])
            for bad, why in skipped:
                self._warn(f"WARNING: skipping the unreadable backup {bad} ({why}); resuming "
                           f"from {matching[0]} (epoch {epoch}).")
            if set_aside:
                self._warn(f"WARNING: set the damaged newest backup aside ("
                           f"{', '.join(set_aside)}): never read again; the next backup keeps "
                           f"epoch {epoch}'s as the previous one.")
            # As train_boxworld's "Resuming from ...: train step N" (the random-kill harness,
            # benchmarks/random_kills.py, checks it against the newest valid backup).
            self._warn(f"Resuming from {self.backup_dir}: epoch {epoch}")
            self.restored_epoch, self.restored_logs = epoch, epoch_logs
            return epoch
        details = "; ".join(f"{path}: {why}" for path, why in skipped) or "no metadata"
        found = weights_files + metadata_files
        partials = {self._partial(self._weights_path),
                    self._partial(self._training_metadata_path)}
        if all(path in partials for path in found):
            # Only the temporaries of the run's first backup, whose write was killed before it
            # was complete: no epoch was ever backed up, so the newest valid state is the start
            # (the run's first backup replaces the temporaries).
            names = ", ".join(sorted(os.path.basename(path) for path in found))
            self._warn(f"WARNING: skipping the unfinished first backup in {self.backup_dir} "
                       f"({names}; {details}); no epoch was backed up yet, starting from the "
                       f"first epoch.")
            return None
        raise BackupError(
            f"No backup in {self.backup_dir} can be restored ({details}). Nothing was "
            f"overwritten. To start afresh, move or delete {self.backup_dir} (or train with "
            f"another root_dir).")

    def _set_aside_newest(self, keep):
        """Renames the newest backup's files (but ``keep``) to ``*.corrupt``; returns the new
        names. Left in place, the next write would rotate them over the previous backup, the
        one a restart resumed from, and every restart would read them again."""
        moved = []
        for path in (self._weights_path, self._training_metadata_path):
            if path != keep and os.path.exists(path):
                os.replace(path, path + ".corrupt")
                moved.append(path + ".corrupt")
        return moved

    def _save_model(self):
        os.makedirs(self.backup_dir, exist_ok=True)
        weights, metadata = self._weights_path, self._training_metadata_path
        partial_weights = os.path.join(self.backup_dir, "partial.weights.h5")
        self.model.save_weights(partial_weights, overwrite=True)
        faults.point("backup_weights")  # the weights written, not yet their metadata
        partial_metadata = metadata + ".partial"
        with open(partial_metadata, "w") as f:
            json.dump(json_files.strict_json_value(
                {"epoch": self._current_epoch, "batch": self._last_batch_seen,
                 "weights_crc32": _crc32(partial_weights), "logs": self._logs}), f)
        faults.point("backup_write")  # the fault tests kill here, above and below
        if os.path.exists(weights):
            os.replace(weights, self._previous(weights))
        if os.path.exists(metadata):
            os.replace(metadata, self._previous(metadata))
        faults.point("backup_rotate")
        os.replace(partial_weights, weights)
        os.replace(partial_metadata, metadata)


def read_finished(path, settings):
    """The JSON result at ``path`` if its ``"settings"`` entry equals ``settings``, else None.

    A result written with other settings (or none) is not reused (None); an unreadable one is
    reported and not reused. ``settings`` is a JSON-able dict of what determines the result.
    """
    if not os.path.exists(path):
        return None
    try:
        with open(path) as f:
            result = json.load(f)
    except (OSError, ValueError) as error:
        print(f"WARNING: ignoring the unreadable result {path} ({type(error).__name__}: "
              f"{str(error)[:200]}); running again.")
        return None
    if not isinstance(result, dict) or result.get("settings") != json_files.strict_json_value(
            settings):
        return None
    return result


class RunState:
    """The small JSON state of an unfinished run, kept in its backup directory with its settings.

    Records what the epoch backups cannot (which attempts or parts of a run are done, with their
    results). Opening the directory of an unfinished run made with other ``settings`` is a
    :class:`BackupError` (nothing is overwritten); :meth:`clear` removes the whole directory
    once the run has finished.
    """

    _FILE = "run_state.json"

    def __init__(self, backup_dir, settings):
        self.backup_dir = backup_dir
        self.path = os.path.join(backup_dir, self._FILE)
        self.settings = json_files.strict_json_value(settings)
        self.values = {}
        if os.path.exists(self.path):
            try:
                with open(self.path) as f:
                    saved = json.load(f)
                saved_settings, self.values = saved["settings"], dict(saved["values"])
            except (OSError, ValueError, KeyError, TypeError) as error:
                raise BackupError(
                    f"The run state {self.path} cannot be read ({type(error).__name__}: "
                    f"{str(error)[:200]}). Nothing was overwritten. To start afresh, move or "
                    f"delete {backup_dir}.") from error
            if saved_settings != self.settings:
                differ = sorted(k for k in set(saved_settings) | set(self.settings)
                                if saved_settings.get(k) != self.settings.get(k))
                raise BackupError(
                    f"{backup_dir} holds an unfinished run with other settings ("
                    + ", ".join(f"{k}: {saved_settings.get(k)!r} there, {self.settings.get(k)!r} "
                                f"now" for k in differ)
                    + "). Nothing was overwritten. Re-run with its settings to resume it, or "
                      f"move or delete {backup_dir} to start afresh.")
        else:
            self._write()

    def get(self, key, default=None):
        return self.values.get(key, default)

    def set(self, key, value):
        """Records ``value`` (JSON-able) under ``key``, atomically."""
        self.values[key] = json_files.strict_json_value(value)
        self._write()

    def clear(self):
        """Removes the backup directory (the run has finished)."""
        if os.path.isdir(self.backup_dir):
            shutil.rmtree(self.backup_dir)

    def _write(self):
        json_files.write_json(self.path, {"settings": self.settings, "values": self.values})
