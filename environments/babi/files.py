"""Atomic text files: a reader sees the old file or the whole new one, never a part of it."""

import os
import tempfile


def write_text_atomically(path, text):
    """Writes ``text`` (UTF-8) to ``path`` through a temporary file in the same folder.

    A process killed while writing leaves at most a stray ``*.tmp`` file, never a truncated
    ``path`` that a later run would take for complete data.
    """
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
