"""benchmarks/simplicial_kernel_speed.py: its --smoke run (CPU, the kernel in Pallas' interpreter)
writes both results files, naming the device and the commit, with the kernel's rows, its
accuracy against float32, and why lucidrains' kernel did not run here."""

import json
import os
import subprocess
import sys

import benchmark_scripts
import pytest

_SCRIPT = benchmark_scripts.path("simplicial_kernel_speed")


@pytest.mark.slow
@pytest.mark.subprocess
def test_smoke_run_writes_both_results_files(tmp_path):
    output = tmp_path / "kernel_speed"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", JAX_PLATFORMS="cpu")
    result = subprocess.run([sys.executable, _SCRIPT, "--smoke", "--sizes=40",
                             f"--output={output}"], env=env, cwd=benchmark_scripts.REPO_ROOT,
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    with open(f"{output}.json") as f:
        data = json.load(f)
    assert data["device"].startswith("cpu") and data["commit"]
    paths = {row["path"] for row in data["rows"]}
    assert {"kernel", "layer, keras.ops"} <= paths, paths
    assert any(path.startswith("MHA") for path in paths), paths
    for row in data["rows"]:
        assert row["forward_ms"] > 0 and row["step_ms"] > 0, row
    (accuracy,) = [e for e in data["errors"] if e["what"] == "kernel bf16 vs kernel float32"]
    assert 0 < accuracy["outputs"] < 0.05 and 0 < accuracy["dq"] < 0.05, accuracy
    assert any("lucidrains" in note for note in data["notes"]), data["notes"]
    markdown = (tmp_path / "kernel_speed.md").read_text()
    assert "| 40 | kernel |" in markdown and "Device: cpu" in markdown
