"""Directories replaced whole: the one atomic swap of every exported policy directory.

Pure Python (the export functions that call it load TensorFlow, this module does not).
"""

import os
import shutil

from keras_relational import faults


def replace_directory(path, write):
    """Replaces the directory ``path`` by what ``write(partial)`` writes into a new directory.

    ``write`` is called with ``path + ".partial"`` (removed first if a killed run left one);
    then ``path`` is swapped for it with ``os.replace``, the old one kept as ``path + ".old"``
    until the new one is in place. An interrupted export (a crash, or the ``export`` fault point
    of :mod:`keras_relational.faults` that the fault tests kill at) therefore never leaves a
    half-written directory at ``path``: the previous one, or none. Returns ``path``.
    """
    partial = path + ".partial"
    shutil.rmtree(partial, ignore_errors=True)
    write(partial)
    faults.point("export")  # the fault tests kill here: the old export must survive
    old = path + ".old"
    shutil.rmtree(old, ignore_errors=True)
    if os.path.exists(path):
        os.replace(path, old)
    os.replace(partial, path)
    shutil.rmtree(old, ignore_errors=True)
    return path
