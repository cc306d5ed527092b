"""``SafeBackupAndRestore``: Keras' ``BackupAndRestore`` that kills and corrupt files cannot defeat.

Keras writes ``latest.weights.h5`` in place and then ``training_metadata.json``: a process killed
in between leaves a truncated weights file (a raw ``OSError`` on the next start) or weights and
an epoch that do not match. Here every backup is written to temporary files first, renamed into
place only when complete, and keeps the previous backup (``*.bkp``); the metadata records the
weights file's CRC-32, so a restart uses the newest pair that matches, warns naming any backup
it skips, and raises a clear error (naming the directory and how to start afresh) when backups
exist but none can be read. Used by every supervised binary (relations game, bAbI, same-colour
demo).
"""

import json
import os
import zlib

import keras

from keras_relational import faults

_WEIGHTS = "latest.weights.h5"
_METADATA = "training_metadata.json"


class BackupError(RuntimeError):
    """Backups exist in a run's backup directory, but none of them can be restored."""


def _crc32(path):
    crc = 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            crc = zlib.crc32(block, crc)
    return crc


class SafeBackupAndRestore(keras.callbacks.BackupAndRestore):
    """``keras.callbacks.BackupAndRestore`` with atomic writes and a checked, fallible restore.

    Same arguments as Keras' callback (``backup_dir``, ``save_freq``, ``delete_checkpoint``);
    the previous backup is always kept as ``*.bkp``.

    Example:

    >>> callback = SafeBackupAndRestore("/tmp/run/backup")  # doctest: +SKIP
    >>> model.fit(x, y, epochs=10, callbacks=[callback])  # doctest: +SKIP
    """

    def __init__(self, backup_dir, save_freq="epoch", delete_checkpoint=True, warn=print):
        super().__init__(backup_dir, save_freq=save_freq, double_checkpoint=True,
                         delete_checkpoint=delete_checkpoint)
        self._warn = warn

    def _files(self, path):
        """The existing copies of a backup file: latest, previous (.bkp), unfinished write."""
        folder, name = os.path.split(path)
        partial = os.path.join(folder, "partial." + name.split(".", 1)[1]) \
            if name == _WEIGHTS else path + ".partial"
        return [p for p in (path, path + ".bkp", partial) if os.path.exists(p)]

    def on_train_begin(self, logs=None):
        weights_files = self._files(self._weights_path)
        metadata_files = self._files(self._training_metadata_path)
        if not weights_files and not metadata_files:
            return  # a fresh run
        if self.model.optimizer is not None and not self.model.optimizer.built:
            self.model.optimizer.build(self.model.trainable_variables)  # before its weights load
        checksums = {path: _crc32(path) for path in weights_files}
        skipped, records = [], []
        for path in metadata_files:
            try:
                with open(path) as f:
                    recorded = json.load(f)
                records.append((int(recorded["epoch"]), recorded.get("weights_crc32"), path))
            except (OSError, ValueError, KeyError, TypeError) as error:
                skipped.append((path, f"{type(error).__name__}: {str(error)[:200]}"))
        # Newest epoch first; a metadata file only counts with the weights it was written for.
        for epoch, checksum, path in sorted(records, reverse=True):
            matching = [w for w in weights_files if checksums[w] == checksum]
            if not matching:
                skipped.append((path, "no complete weights file matches it (an interrupted "
                                      "write)"))
                continue
            try:
                self.model.load_weights(matching[0])
            except (OSError, ValueError) as error:
                skipped.append((matching[0], f"{type(error).__name__}: {str(error)[:200]}"))
                continue
            self.model._initial_epoch = epoch
            for bad, why in skipped:
                self._warn(f"WARNING: skipping the unreadable backup {bad} ({why}); resuming "
                           f"from {matching[0]} (epoch {epoch}).")
            return
        details = "; ".join(f"{path}: {why}" for path, why in skipped) or "no metadata"
        raise BackupError(
            f"No backup in {self.backup_dir} can be restored ({details}). Nothing was "
            f"overwritten. To start afresh, move or delete {self.backup_dir} (or train with "
            f"another root_dir).")

    def _save_model(self):
        os.makedirs(self.backup_dir, exist_ok=True)
        weights, metadata = self._weights_path, self._training_metadata_path
        partial_weights = os.path.join(self.backup_dir, "partial.weights.h5")
        self.model.save_weights(partial_weights, overwrite=True)
        partial_metadata = metadata + ".partial"
        with open(partial_metadata, "w") as f:
            json.dump({"epoch": self._current_epoch, "batch": self._last_batch_seen,
                       "weights_crc32": _crc32(partial_weights)}, f)
        faults.point("backup_write")  # the fault tests kill here, and below
        if os.path.exists(weights):
            os.replace(weights, weights + ".bkp")
        if os.path.exists(metadata):
            os.replace(metadata, metadata + ".bkp")
        faults.point("backup_rotate")
        os.replace(partial_weights, weights)
        os.replace(partial_metadata, metadata)
