"""Training checkpoints that survive faults: resume from the newest valid one, never overwrite.

TF-Agents' ``Learner`` restores ``tf.train.CheckpointManager``'s latest checkpoint, named by the
``checkpoint`` index file of ``root_dir/train/checkpoints``. A process killed while writing, a
truncated or corrupt file, or a garbage index would make that restore fail with a raw
TensorFlow error, or (an unreadable index) silently start again from step 0 and overwrite the
existing checkpoints. :func:`prepare_resume` runs first: it reads every tensor of the newest
``ckpt-<step>`` checkpoint (and its actor state ``ckpt-<step>.actor.pkl``, when it has one, so
that a resume from it continues bit-identically), falls back to the next newest when one is
unreadable (moving it aside as ``*.corrupt`` with a warning that names it), and rewrites the
index to name the one to resume.
When checkpoints exist but none can be read it raises :class:`CheckpointError`, naming the
directory and how to start afresh.
"""

import os
import pickle
import re

import tensorflow as tf
from tf_agents.train import learner

from keras_relational import faults

_CHECKPOINT = re.compile(r"^ckpt-(\d+)\.index$")
# The train-step counter every training checkpoint holds (common.Checkpointer(train_step=...)).
_TRAIN_STEP_KEY = "train_step/.ATTRIBUTES/VARIABLE_VALUE"
# The actor's half of a checkpoint, beside it (keras_relational.agents.tf_agents.actor_state).
ACTOR_SUFFIX = ".actor.pkl"


class CheckpointError(RuntimeError):
    """Checkpoints exist in a run's directory, but none of them can be restored."""


def checkpoint_dir(root_dir):
    """Where the Learner writes the training checkpoints: ``root_dir/train/checkpoints``."""
    return os.path.join(root_dir, learner.TRAIN_DIR, learner.POLICY_CHECKPOINT_DIR)


def _candidates(directory):
    """``(step, prefix)`` of every checkpoint in ``directory`` with an index file, newest first."""
    if not os.path.isdir(directory):
        return []
    found = [(int(m.group(1)), os.path.join(directory, f"ckpt-{m.group(1)}"))
             for m in map(_CHECKPOINT.match, os.listdir(directory)) if m]
    return sorted(found, reverse=True)


def checkpoint_problem(prefix):
    """None if every tensor of the checkpoint ``prefix`` (and its actor state, when it has one)
    reads back, else what is wrong."""
    try:
        reader = tf.train.load_checkpoint(prefix)
        keys = reader.get_variable_to_shape_map()
        if _TRAIN_STEP_KEY not in keys:
            return "not a training checkpoint (no train_step)"
        for key in keys:
            reader.get_tensor(key)  # checks the data files' sizes and checksums
    except (tf.errors.OpError, ValueError, IndexError, OSError) as error:
        return f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
    actor = prefix + ACTOR_SUFFIX
    if os.path.exists(actor):  # optional; when there, resuming needs it whole
        try:
            with open(actor, "rb") as f:
                pickle.load(f)
        except (OSError, EOFError, ValueError, pickle.UnpicklingError, AttributeError,
                ImportError, IndexError) as error:
            return f"its actor state {os.path.basename(actor)}: {type(error).__name__}"
    return None


def _indexed_latest(directory):
    """The checkpoint the index file names, or an error string when it cannot be parsed."""
    if not os.path.exists(os.path.join(directory, "checkpoint")):
        return None
    try:
        state = tf.train.get_checkpoint_state(directory)
    except (tf.errors.OpError, ValueError) as error:
        return f"unreadable index ({type(error).__name__})"
    if state is None or not state.model_checkpoint_path:
        return "unreadable index"
    return os.path.basename(state.model_checkpoint_path)


def prepare_resume(root_dir, warn=print):
    """Makes the newest readable checkpoint of ``root_dir`` the one the Learner restores.

    Returns its train step, or None when there is no checkpoint (a fresh run). ``warn``
    receives one line per checkpoint skipped and per index repaired.
    """
    directory = checkpoint_dir(root_dir)
    candidates = _candidates(directory)
    indexed = _indexed_latest(directory)
    if not candidates:
        if indexed is not None:
            raise CheckpointError(
                f"{directory} has a checkpoint index ({indexed}) but no checkpoint files: "
                f"refusing to start again from step 0 over it. To start afresh, delete "
                f"{directory} (or train with another root_dir).")
        return None
    skipped = []
    for step, prefix in candidates:  # noqa: B007  (the break keeps the one to resume)
        problem = checkpoint_problem(prefix)
        if problem is None:
            break
        skipped.append((prefix, problem))
    else:
        details = "; ".join(f"{os.path.basename(p)}: {why}" for p, why in skipped)
        raise CheckpointError(
            f"No checkpoint in {directory} can be restored ({details}). Nothing was "
            f"overwritten. To start afresh, move or delete {directory} (or train with another "
            f"root_dir).")
    for bad, problem in skipped:
        for name in os.listdir(directory):
            if name.startswith(os.path.basename(bad) + "."):
                path = os.path.join(directory, name)
                os.replace(path, path + ".corrupt")
        warn(f"WARNING: skipping the unreadable checkpoint {bad} ({problem}); moved aside as "
             f"*.corrupt, resuming from {prefix} (train step {step}).")
    if indexed != os.path.basename(prefix):
        if not skipped:
            warn(f"WARNING: the checkpoint index in {directory} names "
                 f"{indexed or 'nothing'}; resuming from the newest readable checkpoint "
                 f"{prefix} (train step {step}).")
        valid = [p for _, p in reversed(candidates) if p not in dict(skipped)]
        tf.compat.v1.train.update_checkpoint_state(directory, prefix,
                                                   all_model_checkpoint_paths=valid)
    return step


def fault_point_options():
    """``CheckpointOptions`` whose write callback is the ``checkpoint_write`` fault point.

    TensorFlow runs it once the checkpoint's files are written and before the index names
    them: a process killed there leaves a complete but unindexed newest checkpoint.
    """
    return tf.train.CheckpointOptions(
        experimental_write_callbacks=[lambda _: faults.point("checkpoint_write")])


class CheckpointSaver:
    """Saves training checkpoints where the Learner does, without restoring anything first.

    (``tf_agents.utils.common.Checkpointer`` restores the directory's latest checkpoint when it
    is created, which would overwrite the weights trained since then.)
    """

    def __init__(self, root_dir, max_to_keep=3, **objects):
        self._manager = tf.train.CheckpointManager(
            tf.train.Checkpoint(**objects), checkpoint_dir(root_dir), max_to_keep=max_to_keep)

    def save(self, train_step):
        return self._manager.save(checkpoint_number=int(train_step.numpy()),
                                  options=fault_point_options())
