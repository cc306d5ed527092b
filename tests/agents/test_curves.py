"""``curves.jsonl`` with damaged lines (issue 48): reported and skipped, never unresumable."""

import json
import os

from keras_relational.agents import curves


def _row(step):
    return dict(step=step, frames=10 * step, solve_rate=0.5, average_return=1.0,
                frames_per_second=100.0, wall_seconds=float(step))


def _entry(step):
    return dict(step=step, frames=10 * step, solve_rate=0.25, fps=100.0, seconds=0.5)


def test_damaged_lines_are_reported_skipped_and_rewritten_away(tmp_path):
    path = tmp_path / curves.FILENAME
    good = [json.dumps(_row(step)) for step in (1, 2, 3, 4)]
    with open(path, "wb") as f:
        f.write((good[0] + "\n" + good[1] + "\n").encode())
        f.write(b'{"step": 2, "frames": oops}\n')  # a bad text line in the middle
        f.write(bytes(range(128, 256)) + b"\n")  # binary garbage (not UTF-8)
        f.write((good[2] + "\n" + good[3][:len(good[3]) // 2]).encode())  # last line cut
    warnings = []
    rows = curves.read_curve(str(tmp_path), warn=warnings.append)
    assert [row["step"] for row in rows] == [1, 2, 3]
    assert len(warnings) == 1, warnings
    assert str(path) in warnings[0] and "3 damaged line(s)" in warnings[0], warnings
    assert "line 3 (JSONDecodeError), 4 (UnicodeDecodeError), 6 (JSONDecodeError)" in warnings[0]
    # A resume from step 3 keeps the good rows up to it, continues the wall time and rewrites the
    # file whole: the next reader sees no damage.
    warnings.clear()
    writer = curves.CurveFile(str(tmp_path), start_step=3, warn=warnings.append)
    assert len(warnings) == 1 and writer.last_step == 3
    writer.append(_entry(4))
    rows = curves.read_curve(str(path), warn=warnings.append)
    assert [row["step"] for row in rows] == [1, 2, 3, 4] and len(warnings) == 1
    assert rows[-1]["wall_seconds"] == 3.5
    assert not os.path.exists(f"{path}.tmp")


def test_rows_without_a_step_are_damaged_lines(tmp_path):
    path = tmp_path / curves.FILENAME
    path.write_text('[1, 2]\n{"frames": 3}\n' + json.dumps(_row(5)) + "\n")
    warnings = []
    assert [row["step"] for row in curves.read_curve(str(path), warnings.append)] == [5]
    assert "line 1 (ValueError), 2 (ValueError)" in warnings[0], warnings


def test_a_row_keeps_how_many_episodes_its_rates_are_over(tmp_path):
    writer = curves.CurveFile(str(tmp_path), start_step=0)
    writer.append(dict(_entry(1), episodes=1))  # the first line of a run: one update
    writer.append(_entry(2))  # an entry made by hand, without the count
    first, second = curves.read_curve(str(tmp_path))
    assert first["episodes"] == 1 and "episodes" not in second
