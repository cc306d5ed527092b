"""Checkpoints of the compiled loop: the whole loop state and the host's position, in one file.

A checkpoint is ``root_dir/train/checkpoints/ckpt-<step>.npz``: every tensor of the loop state
(weights, optimizer variables, environment state and last time step, sampling seed, running
returns) flattened in ``keras.tree`` order, and ``meta`` (JSON: the train step, the level-bank
position, the frames counted). It is written to a temporary file and renamed, so a run killed at
any moment (``kill -9``) leaves the previous checkpoint or the new one, never half of one;
resuming from it continues exactly as the uninterrupted run would have (same levels, same seeds).
An unreadable newest checkpoint (a disk fault) is skipped with a warning, as the TF-Agents
trainer's are (``keras_relational.agents.tf_agents.checkpoints``).

:func:`write` and :func:`read_newest` are the file format alone (named NumPy arrays and a JSON
``meta`` in one ``.npz``, in any directory); ``train_sc2``'s checkpoints use them too
(``keras_relational.agents.sc2.checkpointing``).
"""

import glob
import json
import os
import tempfile
import zipfile

import keras
import numpy as np

from keras_relational import faults

KEEP = 2  # checkpoints kept (the newest ones)


def checkpoint_dir(root_dir):
    """Where the checkpoints of a run under ``root_dir`` go."""
    return os.path.join(root_dir, "train", "checkpoints")


def _step_of(path):
    return int(os.path.basename(path)[len("ckpt-"):-len(".npz")])


def files(directory):
    """The checkpoint files ``ckpt-<step>.npz`` of ``directory``, oldest first."""
    return sorted(glob.glob(os.path.join(directory, "ckpt-*.npz")), key=_step_of)


def checkpoints(root_dir):
    """The checkpoint files of ``root_dir``, oldest first."""
    return files(checkpoint_dir(root_dir))


def write(directory, step, arrays, meta, keep=KEEP):
    """Writes ``directory/ckpt-<step>.npz``: ``arrays`` (a dict of name -> array) and ``meta``
    (a JSON-able dict), whole or not at all; keeps the ``keep`` newest checkpoints.

    The ``checkpoint_write`` fault point (:func:`keras_relational.faults.point`) comes between
    the complete temporary file and its rename: a kill there leaves the older checkpoints only.
    """
    os.makedirs(directory, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=directory, suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as f:
            np.savez(f, meta=np.array(json.dumps(meta)), **arrays)
            f.flush()
            os.fsync(f.fileno())
        faults.point("checkpoint_write")
        os.replace(temporary, os.path.join(directory, f"ckpt-{int(step)}.npz"))
    except BaseException:
        os.unlink(temporary)
        raise
    for old in files(directory)[:-keep]:
        os.unlink(old)


def save(root_dir, state, meta):
    """Writes ``state`` (the loop-state pytree) and ``meta`` (a JSON-able dict with ``step``)."""
    arrays = {f"a{i:05d}": keras.ops.convert_to_numpy(x)
              for i, x in enumerate(keras.tree.flatten(state))}
    write(checkpoint_dir(root_dir), meta["step"], arrays, meta)


class CheckpointError(RuntimeError):
    """Checkpoints exist in a run's directory, but none of them can be restored."""


def _read(path):
    """``(meta, arrays)`` of the checkpoint file ``path`` (every array read: CRCs checked)."""
    with np.load(path) as data:
        meta = json.loads(str(data["meta"]))
        return meta, {name: data[name] for name in data.files if name != "meta"}


def read_newest(directory, warn=print, unit="train step"):
    """``(path, meta, arrays)`` of the newest readable checkpoint of ``directory``; None if none.

    A file that cannot be read (truncated, garbled: a disk fault, since writes are atomic) is
    moved aside as ``*.corrupt`` with a warning naming it, and the next newest is used; when
    checkpoints exist but none can be read, :class:`CheckpointError` (nothing is overwritten).
    ``unit`` names the step in the warning ("train step", "update").
    """
    found = files(directory)
    if not found:
        return None
    skipped = []
    for path in reversed(found):
        try:
            meta, arrays = _read(path)
            break
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as error:
            skipped.append((path, f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
                            if str(error) else type(error).__name__))
    else:
        details = "; ".join(f"{os.path.basename(p)}: {why}" for p, why in skipped)
        raise CheckpointError(
            f"No checkpoint in {directory} can be restored ({details}). Nothing was overwritten. "
            f"To start afresh, move or delete {directory} (or train with another root_dir).")
    for bad, why in skipped:
        os.replace(bad, bad + ".corrupt")  # never read again, kept for a look
        warn(f"WARNING: skipping the unreadable checkpoint {bad} ({why}); moved aside as "
             f"*.corrupt, resuming from {path} ({unit} {_step_of(path)}).")
    return path, meta, arrays


def restore(root_dir, template, warn=print):
    """``(state, meta)`` of the newest readable checkpoint, shaped like ``template``; None if none.

    Unreadable checkpoints are skipped as :func:`read_newest` says; when checkpoints exist but
    none can be read, :class:`CheckpointError` (nothing is overwritten).
    """
    newest = read_newest(checkpoint_dir(root_dir), warn)
    if newest is None:
        return None
    path, meta, named = newest
    leaves = keras.tree.flatten(template)
    arrays = [named.get(f"a{i:05d}") for i in range(len(leaves))]
    if len(named) != len(leaves) or any(a is None for a in arrays):
        raise ValueError(f"The checkpoint {path} does not match this run's settings: "
                         f"{len(named)} arrays where the run has {len(leaves)}.")
    for leaf, array in zip(leaves, arrays, strict=True):
        if tuple(leaf.shape) != array.shape:
            raise ValueError(f"The checkpoint {path} does not match this run's settings: "
                             f"an array of shape {array.shape} where the run has "
                             f"{tuple(leaf.shape)}.")
    tensors = [keras.ops.convert_to_tensor(a, dtype=keras.backend.standardize_dtype(leaf.dtype))
               for leaf, a in zip(leaves, arrays, strict=True)]
    return keras.tree.pack_sequence_as(template, tensors), meta
