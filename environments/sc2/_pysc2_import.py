"""Imports pysc2 4.0 (the last release, 2022) on this project's stack.

Two things break ``import pysc2`` next to Python >= 3.11 and protobuf >= 4:

1. s2clientprotocol's generated ``*_pb2`` modules are too old for protobuf's upb (C) implementation
   ("Descriptors cannot be created directly"). They load with the pure-Python implementation, which
   protobuf only picks when ``PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python`` is set before
   ``google.protobuf`` is first imported - so it must be set in the environment of the process,
   before TensorFlow or anything else imports protobuf. We check and raise; we never set it late.
2. ``pysc2.lib.colors.shuffled_hue`` calls ``random.shuffle(palette, lambda: 0.5)``; Python 3.11
   removed that second argument. The call happens whenever a palette is made (at the import of
   ``pysc2.lib.features`` and later, by the renderer), not at the import of ``colors``, so a patch
   held only during that import does not help. Instead the ``random`` name inside
   ``pysc2.lib.colors`` alone is rebound to a namespace whose ``shuffle`` also accepts the legacy
   argument and then runs Python 3.10's algorithm (the palette is the one pysc2 had). The global
   ``random`` module is never touched.
"""

import importlib
import math
import os
import random
import sys
import types

PROTOBUF_VARIABLE = "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"


def _legacy_shuffle(shuffle):
    """``random.shuffle`` that also accepts Python <= 3.10's ``random`` argument."""

    def patched(x, random=None):  # noqa: A002 - the legacy argument's name
        if random is None:
            return shuffle(x)
        for i in reversed(range(1, len(x))):  # Python 3.10's Random.shuffle, verbatim
            j = math.floor(random() * (i + 1))
            x[i], x[j] = x[j], x[i]
        return None

    return patched


def check_protobuf():
    """Raises ImportError unless protobuf runs (or will run) its pure-Python implementation."""
    from google.protobuf.internal import api_implementation

    implementation = api_implementation.Type()
    if implementation != "python":
        variable = PROTOBUF_VARIABLE
        raise ImportError(
            "pysc2 needs protobuf's pure-Python implementation: its s2clientprotocol *_pb2 modules "
            f"cannot be loaded by protobuf's {implementation!r} implementation, which is already "
            f"active ({variable}={os.environ.get(variable)!r}). Set {variable}=python in the "
            "environment before Python starts (before TensorFlow or anything else imports "
            f"google.protobuf), e.g. `{variable}=python python my_sc2_script.py`.")


def import_pysc2():
    """Imports and returns the pysc2 modules the adapter needs, as a dict name -> module.

    Raises ImportError naming the fix when pysc2 is missing or protobuf's implementation is wrong.
    """
    try:
        importlib.import_module("pysc2")
    except ImportError as error:
        raise ImportError("StarCraft II needs pysc2: pip install 'keras-relational[sc2]' "
                          f"(pysc2==4.0.0); import failed with: {error}") from error
    check_protobuf()
    colors = importlib.import_module("pysc2.lib.colors")
    if sys.version_info >= (3, 11) and colors.random is random:
        colors.random = types.SimpleNamespace(shuffle=_legacy_shuffle(random.shuffle))
    names = ("pysc2.lib.actions", "pysc2.lib.features", "pysc2.env.sc2_env",
             "pysc2.env.mock_sc2_env")
    return {name.rsplit(".", 1)[1]: importlib.import_module(name) for name in names}
