"""benchmarks/long_run_report.py: a run archive's state next to the paper's numbers."""

import json
import os

import benchmark_scripts
import pytest

from keras_relational.agents import curves


@pytest.fixture
def scripts():
    return benchmark_scripts.load("gpu_session"), benchmark_scripts.load("long_run_report")


def _write_run(run_dir, rates, frames_per_update=1280):
    os.makedirs(run_dir)
    writer = curves.CurveFile(str(run_dir), 0)
    for step, rate in enumerate(rates, start=1):
        writer.append(dict(step=step * 50, frames=step * 50 * frames_per_update,
                           solve_rate=rate, average_return=rate * 10,
                           fps=1000.0 if step == 1 else 80000.0, seconds=float(step),
                           losses={"entropy": 1280.0 * (1.0 + step / 10), "transitions": 1280.0}))
    with open(os.path.join(run_dir, "result.json"), "w") as f:
        json.dump({"eval_solve_rate": 0.25, "test_solve_rates": {"L=6": 0.5},
                   "backend": "jax", "dtype_policy": "float32"}, f)
    with open(os.path.join(run_dir, "gpu_session_run.json"), "w") as f:
        json.dump({"preset": "zambaldi_fig3_relational", "flags": [], "pieces": [
            {"device": "NVIDIA H200", "start_step": 0, "end_step": len(rates) * 50,
             "seconds": 30.0, "exit_code": 0}]}, f)


def test_reports_an_archive_beside_the_papers_numbers(tmp_path, scripts):
    gpu_session, long_run_report = scripts
    run_dir = tmp_path / "runs" / "fig3"
    _write_run(str(run_dir), [0.0, 0.5, 0.25, 1.0])
    archive = tmp_path / "fig3.tar.gz"
    gpu_session.pack_run(str(run_dir), str(archive))
    output = tmp_path / "out" / "report"
    os.makedirs(output.parent)
    long_run_report.main([str(archive), "--paper=zambaldi_fig3", f"--output={output}",
                          f"--plot={tmp_path / 'curve.png'}"])
    text = (tmp_path / "out" / "report.md").read_text()
    assert text.startswith("Written by `")
    assert "Zambaldi Fig. 3: relational > 98 %" in text
    row = [line for line in text.splitlines() if line.startswith("| fig3 ")]
    assert row == ["| fig3 | zambaldi_fig3_relational | 1 (NVIDIA H200) | 200 | 256,000 | 80,000 "
                   "| 0.0 % / 100.0 % (256,000) / 43.8 % | 1.1000 / 1.2500 | 25.0 % "
                   "| L=6 50.0 % |"]
    data = json.loads((tmp_path / "out" / "report.json").read_text())
    assert data["runs"][0]["frames"] == 256_000 and data["paper"] == "zambaldi_fig3"


def test_a_folder_without_a_curve_is_refused(tmp_path, scripts):
    _, long_run_report = scripts
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit):
        long_run_report.main([str(tmp_path / "empty"), f"--output={tmp_path / 'report'}"])
    assert not (tmp_path / "report.md").exists()
