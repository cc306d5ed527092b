"""Writes a benchmark's results file: atomically, its first line naming the command that wrote it.

Every figure in the docs comes from a file under ``benchmarks/results/`` written this way, so the
docs can show the command next to the figure (``tests/test_docs.py`` checks the first line).
"""

import json
import os
import shlex
import sys

from keras_relational import json_files

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(REPO, "benchmarks", "results")


def command_line(argv=None):
    """The command that started this process, as typed from the repository root."""
    argv = list(sys.argv if argv is None else argv)
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None and spec.name != "__main__":  # started with `python -m module`
        head = ["python", "-m", spec.name]
    else:
        head = ["python", os.path.relpath(os.path.abspath(argv[0]), REPO)]
    return " ".join(head + [shlex.quote(arg) for arg in argv[1:]])


def _write_atomically(path, text):
    json_files.write_text(path, text)  # readers never see a half-written file


def write_markdown(path, body, command=None):
    """Writes ``body`` to ``path`` after a first line naming the command."""
    _write_atomically(path, f"Written by `{command or command_line()}`.\n\n{body.strip()}\n")


def write_json(path, data, command=None):
    """Writes ``data`` (a dict) to ``path`` as JSON with a ``"command"`` key."""
    json_files.write_json(path, {"command": command or command_line(), **data}, default=str)


def read_results_json(path, mode, runs_type):
    """The data of ``<output>.json`` written by a reproduction script in ``mode``, for
    ``--resume_from``: a dict whose ``"mode"`` is ``mode`` and whose ``"runs"`` is a
    ``runs_type`` (``dict`` or ``list``).

    Raises:
        ValueError: naming ``--resume_from`` when the file is unreadable, not JSON, or of another
            mode or shape.
    """
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as error:
        raise ValueError(f"--resume_from expects a results file written by this script "
                         f"(<output>.json), received {path!r} ({error}).") from None
    found = data.get("mode") if isinstance(data, dict) else None
    if found != mode or not isinstance(data.get("runs"), runs_type):
        raise ValueError(f"--resume_from expects a results file of --mode={mode}, received "
                         f"{path!r} (mode {found!r}).")
    return data


class StdoutCapture:
    """Tees everything printed from its creation on, to write it as a results file at the end.

    For scripts that print their tables piece by piece::

        captured = results_io.StdoutCapture()
        print(...)  # the tables
        captured.write_markdown(args.output)  # nothing is written if the script fails before
    """

    def __init__(self):
        self._chunks = []
        self._stdout = sys.stdout
        sys.stdout = self

    def write(self, text):
        self._chunks.append(text)
        return self._stdout.write(text)

    def flush(self):
        self._stdout.flush()

    def stop(self):
        """Stops capturing and returns what was printed."""
        sys.stdout = self._stdout
        return "".join(self._chunks)

    def write_markdown(self, path, command=None):
        """Stops capturing and, when ``path`` is set, writes what was printed to it.

        A last line gives the machine's load, which the figures of a shared machine depend on.
        """
        text = self.stop()
        if path:
            load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
            write_markdown(path, f"{text.strip()}\n\nLoad average at the end (1/5/15 min): "
                                 f"{load}; {os.cpu_count()} CPUs.", command)
