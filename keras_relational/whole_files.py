"""Outputs written whole or not at all: a model file or an export directory, written next to its
place and then renamed into it, so a process killed at any moment (``kill -9``) leaves the old
output or the new one, never half of one. Pure Python (the caller's ``write`` does the saving).
"""

import os
import shutil

from keras_relational import faults


def _remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)


def write_whole(path, write, fault_point=None):
    """Calls ``write(partial)``, then makes ``partial`` the file or directory ``path``; returns it.

    ``partial`` is ``partial.<name>`` next to ``path`` (so it keeps the suffix Keras wants, e.g.
    ``.keras`` or ``.weights.h5``). An existing directory at ``path`` is moved aside
    (``old.<name>``) and removed only once the new one is in place. ``fault_point`` names the
    :func:`keras_relational.faults.point` reached between the write and the rename (where the
    fault tests kill an export: the old output must survive).

    Example:

    >>> write_whole("/tmp/run/model.keras", model.save)  # doctest: +SKIP
    >>> write_whole("/tmp/run/saved_model", lambda p: model.export(p))  # doctest: +SKIP
    """
    folder, name = os.path.split(os.path.normpath(path))
    partial = os.path.join(folder, f"partial.{name}")
    old = os.path.join(folder, f"old.{name}")
    _remove(partial)  # a leftover of an interrupted write
    if folder:
        os.makedirs(folder, exist_ok=True)
    write(partial)
    if fault_point is not None:
        faults.point(fault_point)
    if os.path.isdir(partial):
        _remove(old)
        if os.path.lexists(path):
            os.replace(path, old)
        os.replace(partial, path)
        _remove(old)
    else:
        os.replace(partial, path)  # atomic for files
    return path
