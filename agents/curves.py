"""The learning curve of a training run, across the pieces of a resumed run: ``curves.jsonl``.

One JSON object a line, one line per progress line: ``step``, ``frames``, ``solve_rate`` and
``average_return`` of the training episodes finished since the previous line (null when none
finished) and their number ``episodes`` (a rate over a handful of episodes, as on the first line
of a run or piece, says little; lines written before it was recorded lack it),
``frames_per_second``, ``wall_seconds``: training-loop wall time summed over every
piece of the run, and from the compiled trainer ``losses``: its learner scalars (loss terms,
gradient norms, value error, rewards; ``agents/compiled/progress.py``) over the same updates.
The file is rewritten atomically (temporary file + ``os.replace``) at every line,
so a run killed at any moment leaves a whole file. On a resume, the lines past the checkpoint the
run resumes from (written after it, then lost) are dropped, and the wall time continues from the
last kept line. ``benchmarks/plot_rl_curves.py`` draws these files.
"""

import json
import math
import os

FILENAME = "curves.jsonl"
# A row's training solve rate counts (frames to a solve rate, a run's stop_solve_rate) when it is
# over at least this many episodes: a rate over 50 episodes is within ~7 % (one sigma at 50 %).
MIN_EPISODES = 50


def counted_rows(rows, min_episodes=MIN_EPISODES, log_interval=25):
    """The curve rows whose solve rate counts: over at least ``min_episodes`` episodes, or, in
    a row written before the curves recorded their ``episodes``, over a whole progress interval
    (``log_interval`` updates; the first row of a run or piece covers one update)."""
    previous_step = 0
    for row in rows:
        if row.get("solve_rate") is not None and (
                row["episodes"] >= min_episodes if row.get("episodes") is not None
                else row["step"] - previous_step >= log_interval):
            yield row
        previous_step = row["step"]


def first_frames(counted, threshold):
    """Frames of the first of the ``counted`` rows whose solve rate is at least ``threshold``
    (None when there is none)."""
    return next((row["frames"] for row in counted if row["solve_rate"] >= threshold), None)


def frames_to(rows, threshold, min_episodes=MIN_EPISODES, log_interval=25):
    """Frames of the first counted row (:func:`counted_rows`) whose training solve rate is at
    least ``threshold``; None when there is none."""
    return first_frames(counted_rows(rows, min_episodes, log_interval), threshold)


def read_curve(path, warn=print):
    """The rows of a ``curves.jsonl`` file (or of ``root_dir/curves.jsonl`` for a directory).

    A damaged line (not UTF-8, not JSON, or not a row with a ``step``: a disk fault or an edit,
    since the file is written atomically) is skipped, and one warning line names the file and
    the line numbers; the next rewrite of the file leaves them out.
    """
    if os.path.isdir(path):
        path = os.path.join(path, FILENAME)
    with open(path, "rb") as f:
        lines = f.read().split(b"\n")
    rows, damaged = [], []
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw.decode("utf-8"))
            if not isinstance(row, dict) or not isinstance(row.get("step"), int):
                raise ValueError("not a row with an integer step")
        except ValueError as error:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
            damaged.append((number, type(error).__name__))
            continue
        rows.append(row)
    if damaged:
        numbers = ", ".join(f"{n} ({why})" for n, why in damaged[:10]) + (
            f" and {len(damaged) - 10} more" if len(damaged) > 10 else "")
        warn(f"WARNING: skipping {len(damaged)} damaged line(s) of {path}: line {numbers}; "
             f"the curve continues without them.")
    return rows


def _finite_or_none(value):
    value = float(value)
    return value if math.isfinite(value) else None


class CurveFile:
    """Appends progress-history entries to ``root_dir/curves.jsonl``, continuing across pieces.

    Args:
        root_dir: the run's directory.
        start_step: the train step this piece starts (or resumes) from.
        warn: prints the warning about damaged lines (see :func:`read_curve`).
    """

    def __init__(self, root_dir, start_step, warn=print):
        self.path = os.path.join(root_dir, FILENAME)
        self.rows = []
        if start_step and os.path.exists(self.path):
            self.rows = [row for row in read_curve(self.path, warn) if row["step"] <= start_step]
        wall = self.rows[-1].get("wall_seconds") if self.rows else None
        self._wall_offset = float(wall) if isinstance(wall, (int, float)) else 0.0

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
        if "episodes" in entry:  # both trainers' progress; a hand-made entry may leave it out
            self.rows[-1]["episodes"] = int(entry["episodes"])
        if "losses" in entry:  # the compiled trainer's learner scalars (compiled/progress.py)
            self.rows[-1]["losses"] = {name: _finite_or_none(value)
                                       for name, value in entry["losses"].items()}
        temporary = f"{self.path}.tmp"
        with open(temporary, "w") as f:
            f.writelines(json.dumps(row) + "\n" for row in self.rows)
        os.replace(temporary, self.path)  # readers never see a half-written file
