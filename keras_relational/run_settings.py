"""A run's settings, recorded in its root directory and checked on every resume.

A training binary re-run on the same ``root_dir`` resumes its run. Resumed with other settings,
it would load a checkpoint into a network of another shape (an error about array shapes, not
about the flag) or, worse, silently continue with another learning rate. :func:`resumable`
decorates a ``train_eval(root_dir, ...)``: the call's settings (its arguments, defaults applied,
or a config it builds from them) go to ``root_dir/run_settings.json`` on the first call; a later
call compares its own with them and refuses (:class:`SettingsError`) naming each one that differs,
with the recorded and the new value, before anything is loaded or written.

Three kinds of setting:

* ``free`` ones may change on any resume: how long to train, how often to log or evaluate, output
  options (``epochs``, ``num_iterations``, ``max_minutes``, ``verbose``, ...);
* ``optimizer`` ones (the learning rate, gradient clipping, ...) may change only when the call
  passes ``allow_changed_hyperparameters=True`` (the binaries' ``--allow_changed_hyperparameters``):
  the change is printed and appended to the file's ``changes``, and :func:`changed` tells the
  trainer, which applies the new value over the one its checkpoint restores;
* all others (the architecture: ``head_width``, ``key_dim``, ...; the data; the seed) never.

The whole call also holds the root directory's lock (:mod:`keras_relational.run_lock`): one run
per root directory. Pure Python.
"""

import contextvars
import dataclasses
import functools
import inspect
import json
import math
import os
import time

from keras_relational import json_files, run_lock

FILENAME = "run_settings.json"
ALLOW_FLAG = "allow_changed_hyperparameters"
ALLOW_HELP = ("Resume a run although its optimizer hyperparameters (learning rate, clipping) "
              "differ from those it was started with; the change is logged in "
              f"<root_dir>/{FILENAME}. Other settings (the network's, the data's) never change "
              "on resume.")
_changes = contextvars.ContextVar("run_settings_changes", default=None)


class SettingsError(ValueError):
    """A resume with settings other than those the run was started with."""


def settings_path(root_dir):
    return os.path.join(root_dir, FILENAME)


def _json_value(value):
    """``value`` as JSON (tuples as lists, dataclasses as dicts); None if it has no JSON form."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        items = {str(k): _json_value(v) for k, v in value.items()}
        return items if all(v is not _NO_JSON for v in items.values()) else _NO_JSON
    if isinstance(value, (list, tuple)):
        items = [_json_value(v) for v in value]
        return items if all(v is not _NO_JSON for v in items) else _NO_JSON
    value = json_files.strict_json_value(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return _NO_JSON


_NO_JSON = object()


def json_settings(values):
    """``values`` (``{name: value}``) as JSON settings, each value whole (a dict stays a dict);
    those without a JSON form are left out."""
    encoded = {k: _json_value(v) for k, v in values.items()}
    return {k: v for k, v in encoded.items() if v is not _NO_JSON}


def flat_settings(value, prefix=""):
    """A config (a dataclass or dict, nested) as ``{name: JSON value}``: a nested dataclass's or
    dict's entries under their own names (``environment.room_size`` is ``room_size``), dotted
    only where two would collide; values without a JSON form are left out."""
    flat = {}

    def walk(node, path):
        if dataclasses.is_dataclass(node) and not isinstance(node, type):
            node = {f.name: getattr(node, f.name) for f in dataclasses.fields(node)}
        if isinstance(node, dict) and node:
            for key, item in node.items():
                walk(item, path + (str(key),))
            return
        encoded = _json_value(node)
        if encoded is not _NO_JSON:
            flat[path] = encoded

    walk(value, (prefix,) if prefix else ())
    names = {}
    for path in flat:
        names.setdefault(path[-1], []).append(path)
    return {(path[-1] if len(names[path[-1]]) == 1 else ".".join(path)): encoded
            for path, encoded in flat.items()}


def _same(old, new):
    if isinstance(old, float) and isinstance(new, (int, float)) and not isinstance(new, bool):
        return math.isclose(old, new, rel_tol=1e-12, abs_tol=0.0)
    return old == new


def check_and_record(root_dir, settings, optimizer=(), free=(), allow_changed=False,
                     flag_names=None, warn=print, retired=(), introduced=None):
    """Records ``settings`` (``{name: JSON value}``) in ``root_dir``, or checks them against
    those recorded there (and records the new values of ``free`` and allowed ones); returns
    ``{name: (old, new)}`` of the allowed changes. ``retired`` names settings that earlier
    versions recorded and this one no longer has (a field moved to another trainer's config):
    recorded but absent from ``settings``, they are not compared. ``introduced`` maps settings
    that earlier versions did not have to the value those versions ran with (a new option's
    default): a run that did not record one compares as if it had recorded that value, so a run
    started before the option existed resumes with the default and refuses another value.

    Raises:
        SettingsError: a setting other than ``free`` ones differs (``optimizer`` ones are allowed
            with ``allow_changed``); the message names each, with the old and the new value.
    """
    path = settings_path(root_dir)
    flag_names = flag_names or {}
    label = lambda name: f"--{flag_names.get(name, name)}" + (  # noqa: E731
        f" ({name})" if name in flag_names else "")
    record = dict(settings=settings, changes=[])
    if os.path.exists(path):
        try:
            with open(path) as f:
                record = json.load(f)
            recorded = {k: v for k, v in record["settings"].items() if k not in free
                        and not (k in retired and k not in settings)}
            for name, value in (introduced or {}).items():
                if name not in record["settings"] and name not in free:
                    recorded[name] = value
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
            raise SettingsError(
                f"The settings of the run in {root_dir} ({path}) cannot be read "
                f"({type(error).__name__}: {str(error)[:200]}). Nothing was overwritten. Restore "
                f"the file, or train with another root_dir.") from error
        compared = {k: v for k, v in settings.items() if k not in free}
        differ = sorted(name for name in set(recorded) | set(compared)
                        if not _same(recorded.get(name), compared.get(name)))
        fixed = [name for name in differ if name not in optimizer]
        changes = {name: (recorded.get(name), settings.get(name)) for name in differ}
        describe = lambda names: "; ".join(  # noqa: E731
            f"{label(n)}: {json.dumps(changes[n][0])} in the run, {json.dumps(changes[n][1])} now"
            for n in names)
        if fixed:
            allowed = [n for n in optimizer if n in settings]
            raise SettingsError(
                f"root_dir {root_dir} holds a run started with other settings ({describe(fixed)})"
                f". These cannot change on resume" + (
                    f" (only the optimizer's hyperparameters can, with --{ALLOW_FLAG}: "
                    f"{', '.join(label(n) for n in allowed)})" if allowed else "")
                + f". Re-run with the run's settings to resume it, or train with another "
                  f"root_dir. Recorded in {path}.")
        if differ and not allow_changed:
            raise SettingsError(
                f"root_dir {root_dir} holds a run started with other optimizer hyperparameters "
                f"({describe(differ)}). Re-run with the run's values to resume it, or pass "
                f"--{ALLOW_FLAG} ({ALLOW_FLAG}=True) to resume with the new ones.")
        if differ:
            warn(f"Resuming {root_dir} with changed optimizer hyperparameters "
                 f"({describe(differ)}; --{ALLOW_FLAG}); recorded in {path}.")
            record.setdefault("changes", []).append(dict(
                time=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                changed={n: dict(old=old, new=new) for n, (old, new) in changes.items()}))
        if record["settings"] == settings and not differ:
            return {}
        record["settings"] = settings  # the free ones as this piece runs them
        json_files.write_json(path, record)
        return changes
    json_files.write_json(path, record)
    return {}


def changed(name=None):
    """Inside a :func:`resumable` call: the allowed changes ``{name: (old, new)}`` of this resume
    (or the one of ``name``, None if it did not change)."""
    changes = _changes.get() or {}
    return changes if name is None else changes.get(name)


def resumable(settings=None, optimizer=(), free=(), ignore=(), flag_names=None, retired=(),
              introduced=None):
    """Decorates a ``train_eval(root_dir, ...)``: each call holds ``root_dir``'s lock and checks
    (or records) the run's settings before the body runs; adds the keyword argument
    ``allow_changed_hyperparameters`` (default False).

    Args:
        settings: ``settings(arguments)`` -> ``{name: value}`` from the call's arguments (a dict,
            defaults applied); None: the arguments themselves (those with a JSON form).
        optimizer: the names that ``allow_changed_hyperparameters`` lets change.
        free: the names that may change on any resume.
        ignore: arguments that are not settings (``print_fn``, ...); ``root_dir`` never is.
        flag_names: ``{setting: flag}`` where a setting comes from a flag of another name.
        retired: settings that earlier versions recorded and this one no longer has
            (:func:`check_and_record`).
        introduced: ``{setting: value}``, settings earlier versions did not record and the
            value they ran with (:func:`check_and_record`).
    """
    def decorate(function):
        signature = inspect.signature(function)

        @functools.wraps(function)
        def wrapper(*args, allow_changed_hyperparameters=False, **kwargs):
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            arguments = dict(bound.arguments)
            for name, parameter in signature.parameters.items():
                if parameter.kind is inspect.Parameter.VAR_KEYWORD:
                    arguments.update(arguments.pop(name))
            root_dir = arguments.pop("root_dir")
            warn = arguments.get("print_fn") or print
            if settings is None:
                values = json_settings({k: v for k, v in arguments.items()
                                        if k not in ignore})
            else:
                values = settings(arguments)
            with run_lock.hold(root_dir, warn=warn):
                fresh = not os.path.exists(settings_path(root_dir))
                changes = check_and_record(root_dir, values, optimizer, free,
                                           allow_changed_hyperparameters, flag_names, warn,
                                           retired, introduced)
                token = _changes.set(changes)
                try:
                    return function(*args, **kwargs)
                except BaseException:
                    if fresh and set(os.listdir(root_dir)) <= {FILENAME, run_lock.FILENAME}:
                        os.remove(settings_path(root_dir))  # refused before it wrote anything
                    raise
                finally:
                    _changes.reset(token)

        parameters = list(signature.parameters.values())
        extra = inspect.Parameter(ALLOW_FLAG, inspect.Parameter.KEYWORD_ONLY, default=False)
        at = next((i for i, p in enumerate(parameters)
                   if p.kind is inspect.Parameter.VAR_KEYWORD), len(parameters))
        wrapper.__signature__ = signature.replace(parameters=parameters[:at] + [extra]
                                                  + parameters[at:])
        return wrapper

    return decorate


__all__ = ["ALLOW_FLAG", "FILENAME", "SettingsError", "changed", "check_and_record",
           "flat_settings", "json_settings", "resumable"]
