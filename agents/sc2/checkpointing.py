"""Checkpoints of ``train_sc2``: what a run needs to continue, one file per checkpoint.

``root_dir/checkpoints/ckpt-<update>.npz``, in the compiled Box-World loop's format
(:mod:`keras_relational.agents.compiled.checkpointing`: written to a temporary file and renamed,
so a run killed at any moment leaves the previous checkpoint or the new one; the two newest
kept), holds for either trainer:

* ``w00000``, ... the model's weights (``model.weights`` order) and ``o00000``, ... the
  optimizer's variables (the Keras Adam of the compiled learner, or the tf-keras Adam of the
  TF-Agents trainer: its step count and both moments);
* ``actor``: the trainer's acting state, pickled (``SC2Actor.get_state`` /
  ``TFAgentsSC2Trainer.get_state``): the sampling generator's state or the stateless sampler's
  counter, the finished episodes' count and recent returns (``mean_return``), and, where the
  environments can be restored (pysc2's mock), their states, the last time steps, the ConvLSTM
  state and the running returns;
* ``meta`` (JSON): the update, the run's settings, the seconds trained and the last loss terms.

Resuming from it continues the update count, the weights, the optimizer and the sampling exactly;
on pysc2's mock the environments too, so a resumed compiled-trainer run ends with the weights of
the uninterrupted one. The game's state lives in the StarCraft II process, which pysc2 can neither
save nor load: a resumed game run starts new episodes (a warning says so).

An unreadable newest checkpoint is moved aside (``*.corrupt``) with a warning naming it and the
next newest is used; when none reads, :class:`CheckpointError`. A checkpoint of other settings
(another map, model size, trainer, ...) is a :class:`SettingsMismatchError` naming the setting:
the old run is never overwritten.
"""

import dataclasses
import json
import os
import pickle

import numpy as np

from keras_relational.agents.compiled import checkpointing as files
from keras_relational.agents.compiled.checkpointing import CheckpointError
from keras_relational.agents.sc2.config import RESUMABLE_FIELDS

FORMAT = 1  # bump when the saved fields change


class SettingsMismatchError(ValueError):
    """A run's checkpoint was written with other settings than the command's."""


@dataclasses.dataclass
class Checkpoint:
    """A checkpoint read back: its file, ``meta`` and arrays (name -> NumPy array)."""

    path: str
    meta: dict
    arrays: dict

    @property
    def update(self):
        return int(self.meta["update"])


def checkpoint_dir(root_dir):
    """``root_dir/checkpoints``."""
    return os.path.join(root_dir, "checkpoints")


def settings(config, model_kwargs=None):
    """The settings a checkpoint belongs to: every :class:`SC2Config` field but those a resumed
    run may change (``RESUMABLE_FIELDS``), and the model's extra arguments; JSON values."""
    fields = {key: value for key, value in dataclasses.asdict(config).items()
              if key not in RESUMABLE_FIELDS}
    return json.loads(json.dumps(dict(fields, model_kwargs=dict(model_kwargs or {}))))


def _check_settings(path, saved, expected):
    for name in sorted(set(saved) | set(expected)):
        if saved.get(name) != expected.get(name):
            flag = "--tiny_model" if name == "model_kwargs" else \
                f"--{'map' if name == 'map_name' else name}"
            raise SettingsMismatchError(
                f"The checkpoint {path} was written by a run with {name}="
                f"{saved.get(name)!r} ({flag}); this command has {name}={expected.get(name)!r}. "
                f"Re-run with the checkpoint's settings to resume it (only "
                f"{', '.join(RESUMABLE_FIELDS)} may change), or train in another root_dir; "
                f"nothing was overwritten.")


def read(root_dir, config, model_kwargs=None, warn=print):
    """The newest readable :class:`Checkpoint` of ``root_dir`` (None: a fresh run).

    Raises :class:`CheckpointError` when checkpoints exist but none can be read, and
    :class:`SettingsMismatchError` when the newest readable one belongs to other settings.
    """
    newest = files.read_newest(checkpoint_dir(root_dir), warn, unit="update")
    if newest is None:
        return None
    path, meta, arrays = newest
    if meta.get("format") != FORMAT or "actor" not in arrays:
        raise SettingsMismatchError(f"{path} is not a train_sc2 checkpoint of format {FORMAT} "
                                    f"(format {meta.get('format')!r}); nothing was overwritten.")
    _check_settings(path, meta["settings"], settings(config, model_kwargs))
    return Checkpoint(path, meta, arrays)


def _path(variable):
    return getattr(variable, "path", None) or variable.name


def save(root_dir, update, trainer, config, model_kwargs=None, **meta):
    """Writes ``ckpt-<update>.npz`` of ``trainer`` (``_CompiledTrainer`` or
    ``TFAgentsSC2Trainer``: ``keras_model``, ``optimizer_variables()``, ``get_state()``);
    ``meta`` adds JSON-able fields (``seconds``, ``loss``)."""
    arrays = {f"w{i:05d}": np.array(v) for i, v in enumerate(trainer.keras_model.weights)}
    arrays.update({f"o{i:05d}": np.array(v)
                   for i, v in enumerate(trainer.optimizer_variables())})
    arrays["actor"] = np.frombuffer(
        pickle.dumps(trainer.get_state(), protocol=pickle.HIGHEST_PROTOCOL), np.uint8)
    meta = dict(meta, format=FORMAT, update=int(update), settings=settings(config, model_kwargs))
    files.write(checkpoint_dir(root_dir), update, arrays, meta)


def _assign(path, kind, variables, arrays, prefix):
    saved = sorted(name for name in arrays if name.startswith(prefix))
    if len(saved) != len(variables):
        raise SettingsMismatchError(f"The checkpoint {path} holds {len(saved)} {kind}; this run "
                                    f"has {len(variables)}.")
    for variable, name in zip(variables, saved, strict=True):
        array = arrays[name]
        if tuple(variable.shape) != array.shape:
            raise SettingsMismatchError(
                f"The checkpoint {path} does not fit this run: {kind[:-1]} {_path(variable)} has "
                f"shape {array.shape} there and {tuple(variable.shape)} here.")
    for variable, name in zip(variables, saved, strict=True):
        variable.assign(arrays[name])


def restore(checkpoint, trainer, warn=print):
    """Loads ``checkpoint`` into ``trainer``: the weights, the optimizer's variables and the
    acting state (with a warning when the environments cannot be restored)."""
    _assign(checkpoint.path, "weights", trainer.keras_model.weights, checkpoint.arrays, "w")
    _assign(checkpoint.path, "optimizer variables", trainer.optimizer_variables(),
            checkpoint.arrays, "o")
    state = pickle.loads(checkpoint.arrays["actor"].tobytes())
    if not trainer.set_state(state):
        warn(f"WARNING: {checkpoint.path} holds no state of these environments (they cannot be "
             f"saved: the game's lives in the StarCraft II process): the weights, the "
             f"optimizer, the update count, the sampling and the episode returns continue from "
             f"update {checkpoint.update}, the environments from new episodes.")


__all__ = ["Checkpoint", "CheckpointError", "SettingsMismatchError", "checkpoint_dir", "read",
           "restore", "save", "settings"]
