"""The learning curve of a training run, across the pieces of a resumed run: ``curves.jsonl``.

One JSON object a line, one line per progress line: ``step``, ``frames``, ``solve_rate`` and
``average_return`` of the training episodes finished since the previous line (null when none
finished), ``frames_per_second``, and ``wall_seconds``: training-loop wall time summed over every
piece of the run. The file is rewritten atomically (temporary file + ``os.replace``) at every line,
so a run killed at any moment leaves a whole file. On a resume, the lines past the checkpoint the
run resumes from (written after it, then lost) are dropped, and the wall time continues from the
last kept line. ``benchmarks/plot_rl_curves.py`` draws these files.
"""

import json
import math
import os

FILENAME = "curves.jsonl"


def read_curve(path):
    """The rows of a ``curves.jsonl`` file (or of ``root_dir/curves.jsonl`` for a directory)."""
    if os.path.isdir(path):
        path = os.path.join(path, FILENAME)
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def _finite_or_none(value):
    value = float(value)
    return value if math.isfinite(value) else None


class CurveFile:
    """Appends progress-history entries to ``root_dir/curves.jsonl``, continuing across pieces.

    Args:
        root_dir: the run's directory.
        start_step: the train step this piece starts (or resumes) from.
    """

    def __init__(self, root_dir, start_step):
        self.path = os.path.join(root_dir, FILENAME)
        self.rows = []
        if start_step and os.path.exists(self.path):
            self.rows = [row for row in read_curve(self.path) if row["step"] <= start_step]
        self._wall_offset = self.rows[-1]["wall_seconds"] if self.rows else 0.0

    @property
    def last_step(self):
        """The step of the last kept line (0 when there is none)."""
        return self.rows[-1]["step"] if self.rows else 0

    def append(self, entry):
        """Adds one ``Progress.history`` entry and rewrites the file atomically."""
        self.rows.append(dict(
            step=int(entry["step"]), frames=int(entry["frames"]),
            solve_rate=_finite_or_none(entry["solve_rate"]),
            average_return=_finite_or_none(entry.get("average_return", float("nan"))),
            frames_per_second=_finite_or_none(entry["fps"]),
            wall_seconds=self._wall_offset + float(entry["seconds"])))
        temporary = f"{self.path}.tmp"
        with open(temporary, "w") as f:
            f.writelines(json.dumps(row) + "\n" for row in self.rows)
        os.replace(temporary, self.path)  # readers never see a half-written file
