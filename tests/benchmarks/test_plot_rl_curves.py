"""benchmarks/plot_rl_curves.py: two runs' curves (one in two pieces) next to a paper's numbers."""

import os

import benchmark_scripts
import pytest

from keras_relational.agents import curves


def _write_run(root, rates, start_step=0):
    writer = curves.CurveFile(str(root), start_step)
    for i, rate in enumerate(rates, start=start_step + 1):
        writer.append(dict(step=i, frames=i * 100, solve_rate=rate, average_return=rate * 10,
                           fps=100.0, seconds=float(i - start_step)))
    return writer


def test_plots_runs_with_the_papers_reference_lines(tmp_path):
    pytest.importorskip("matplotlib")
    relational, baseline = tmp_path / "relational", tmp_path / "baseline"
    relational.mkdir(), baseline.mkdir()
    _write_run(relational, [0.1, 0.5, float("nan")])  # no episode finished: null, not drawn
    # A resumed piece drops the lines past its checkpoint and continues the wall time.
    _write_run(baseline, [0.1, 0.2, 0.3])
    _write_run(baseline, [0.25], start_step=2)
    rows = curves.read_curve(str(baseline))
    assert [row["step"] for row in rows] == [1, 2, 3] and rows[-1]["solve_rate"] == 0.25
    assert rows[-1]["wall_seconds"] == 3.0
    assert curves.read_curve(str(relational))[-1]["solve_rate"] is None
    script = benchmark_scripts.load("plot_rl_curves")
    output = str(tmp_path / "curves.png")
    script.main([str(relational), f"the baseline={baseline}", "--paper=zambaldi_fig3",
                 f"--output={output}"])
    assert os.path.getsize(output) > 0
    figure = script.plot([("b", str(baseline))], str(tmp_path / "wall.png"), "clift_fig6",
                         x="wall_seconds")
    texts = [t.get_text() for t in figure.axes[0].texts]
    assert any("simplicial ~0.99" in text for text in texts), texts
    with pytest.raises(SystemExit, match="does not exist"):
        script.parse_run(str(tmp_path / "missing"))
