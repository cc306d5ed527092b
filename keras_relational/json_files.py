"""Strict JSON results files, written atomically: the one writer of every ``*.json`` result.

``json.dump`` writes NaN and infinities as the bare tokens ``NaN`` / ``Infinity``, which are not
JSON (strict parsers, ``jq`` and browsers reject the file). :func:`write_json` writes them as
``null`` instead, refuses anything else that is not JSON (``allow_nan=False``), and replaces the
file atomically (a temporary file in the same directory, then ``os.replace``), so a reader or a
killed process never sees half a file. Pure Python: importing it loads neither Keras nor
TensorFlow.
"""

import json
import math
import numbers
import os
import tempfile


def strict_json_value(value):
    """``value`` with every non-finite float (NumPy's included) replaced by None, recursively.

    NumPy scalars become Python numbers and tuples become lists; other values are unchanged.
    """
    if isinstance(value, dict):
        return {key: strict_json_value(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict_json_value(item) for item in value]
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        value = float(value)
        return value if math.isfinite(value) else None
    return value


def write_text(path, text):
    """Writes ``text`` to ``path`` atomically, creating the parent directory."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".", suffix=".tmp")
    try:
        with os.fdopen(handle, "w") as f:
            f.write(text)
        os.replace(temporary, path)  # readers never see a half-written file
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
    return path


def dumps(data, indent=1, sort_keys=False, default=None):
    """Strict JSON text of ``data``: non-finite floats as ``null``, a trailing newline."""
    return json.dumps(strict_json_value(data), indent=indent, sort_keys=sort_keys,
                      allow_nan=False, default=default) + "\n"


def write_json(path, data, indent=1, sort_keys=False, default=None):
    """Writes ``data`` to ``path`` as strict JSON (see :func:`dumps`), atomically."""
    return write_text(path, dumps(data, indent=indent, sort_keys=sort_keys, default=default))
