"""Checkpoints of the compiled loop: the whole loop state and the host's position, in one file.

A checkpoint is ``root_dir/train/checkpoints/ckpt-<step>.npz``: every tensor of the loop state
(weights, optimizer variables, environment state and last time step, sampling seed, running
returns) flattened in ``keras.tree`` order, and ``meta`` (JSON: the train step, the level-bank
position, the frames counted). It is written to a temporary file and renamed, so a run killed at
any moment (``kill -9``) leaves the previous checkpoint or the new one, never half of one;
resuming from it continues exactly as the uninterrupted run would have (same levels, same seeds).
An unreadable newest checkpoint (a disk fault) is skipped with a warning, as the TF-Agents
trainer's are (``keras_relational.agents.checkpoints``).
"""

import glob
import json
import os
import tempfile
import zipfile

import keras
import numpy as np

KEEP = 2  # checkpoints kept (the newest ones)


def checkpoint_dir(root_dir):
    """Where the checkpoints of a run under ``root_dir`` go."""
    return os.path.join(root_dir, "train", "checkpoints")


def _step_of(path):
    return int(os.path.basename(path)[len("ckpt-"):-len(".npz")])


def checkpoints(root_dir):
    """The checkpoint files of ``root_dir``, oldest first."""
    return sorted(glob.glob(os.path.join(checkpoint_dir(root_dir), "ckpt-*.npz")), key=_step_of)


def save(root_dir, state, meta):
    """Writes ``state`` (the loop-state pytree) and ``meta`` (a JSON-able dict with ``step``)."""
    directory = checkpoint_dir(root_dir)
    os.makedirs(directory, exist_ok=True)
    arrays = {f"a{i:05d}": keras.ops.convert_to_numpy(x)
              for i, x in enumerate(keras.tree.flatten(state))}
    handle, temporary = tempfile.mkstemp(dir=directory, suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as f:
            np.savez(f, meta=np.array(json.dumps(meta)), **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, os.path.join(directory, f"ckpt-{int(meta['step'])}.npz"))
    except BaseException:
        os.unlink(temporary)
        raise
    for old in checkpoints(root_dir)[:-KEEP]:
        os.unlink(old)


class CheckpointError(RuntimeError):
    """Checkpoints exist in a run's directory, but none of them can be restored."""


def _read(path, count):
    """``(meta, arrays)`` of the checkpoint file ``path`` (every array read: CRCs checked)."""
    with np.load(path) as data:
        meta = json.loads(str(data["meta"]))
        return meta, [data[f"a{i:05d}"] for i in range(count)]


def restore(root_dir, template, warn=print):
    """``(state, meta)`` of the newest readable checkpoint, shaped like ``template``; None if none.

    A file that cannot be read (truncated, garbled: a disk fault, since writes are atomic) is
    moved aside as ``*.corrupt`` with a warning naming it, and the next newest is used; when
    checkpoints exist but none can be read, :class:`CheckpointError` (nothing is overwritten).
    """
    found = checkpoints(root_dir)
    if not found:
        return None
    leaves = keras.tree.flatten(template)
    skipped = []
    for path in reversed(found):
        try:
            meta, arrays = _read(path, len(leaves))
            break
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as error:
            skipped.append((path, f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
                            if str(error) else type(error).__name__))
    else:
        details = "; ".join(f"{os.path.basename(p)}: {why}" for p, why in skipped)
        raise CheckpointError(
            f"No checkpoint in {checkpoint_dir(root_dir)} can be restored ({details}). Nothing "
            f"was overwritten. To start afresh, move or delete {checkpoint_dir(root_dir)} (or "
            f"train with another root_dir).")
    for bad, why in skipped:
        os.replace(bad, bad + ".corrupt")  # never read again, kept for a look
        warn(f"WARNING: skipping the unreadable checkpoint {bad} ({why}); moved aside as "
             f"*.corrupt, resuming from {path} (train step {int(meta['step'])}).")
    for leaf, array in zip(leaves, arrays, strict=True):
        if tuple(leaf.shape) != array.shape:
            raise ValueError(f"The checkpoint {path} does not match this run's settings: "
                             f"an array of shape {array.shape} where the run has "
                             f"{tuple(leaf.shape)}.")
    tensors = [keras.ops.convert_to_tensor(a, dtype=keras.backend.standardize_dtype(leaf.dtype))
               for leaf, a in zip(leaves, arrays, strict=True)]
    return keras.tree.pack_sequence_as(template, tensors), meta
