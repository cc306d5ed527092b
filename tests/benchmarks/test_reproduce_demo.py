"""benchmarks/reproduce_demo.py: one tiny run of the script, and the demo's single set of flags."""

import json
import os
import shutil
import subprocess
import sys

import benchmark_scripts
import pytest

_SCRIPT = benchmark_scripts.path("reproduce_demo")
_FLAGS_FILE = os.path.join(benchmark_scripts.BENCHMARKS, "demo_flags.txt")
# Two updates of 4 environments x 4 steps of a narrow network on 5x5 rooms (a short XLA compile),
# and a 4-episode evaluation: the script's code path (training process, result.json, timing,
# both results files), not the demo's learning.
_TINY = ["--num_iterations=2", "--num_envs=4", "--unroll_length=4", "--log_interval=1",
         "--eval_episodes=4", "--room_size=5", "--key_dim=8", "--head_width=16"]


def test_the_makefile_demo_runs_the_flags_the_script_reads():
    if shutil.which("make") is None:
        pytest.skip("needs GNU make")
    with open(_FLAGS_FILE) as f:
        demo_flags = f.read().split()
    assert "--eval_episodes=200" in demo_flags
    dry_run = subprocess.run(["make", "-n", "demo", "DEMO_DIR=/tmp/demo_dry_run"],
                             cwd=benchmark_scripts.REPO_ROOT, capture_output=True, text=True,
                             check=True).stdout
    command = " ".join(dry_run.replace("\\\n", " ").split())
    assert "train_boxworld --root_dir=/tmp/demo_dry_run " + " ".join(demo_flags) in command


@pytest.mark.subprocess
def test_a_tiny_run_writes_both_results_files(tmp_path):
    output = tmp_path / "results" / "demo"
    argv = [sys.executable, _SCRIPT, "--seeds=3", f"--root_dir={tmp_path / 'runs'}",
            f"--output={output}", *(f"--override={flag}" for flag in _TINY)]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]

    with open(f"{output}.json") as f:
        report = json.load(f)
    assert report["seeds"] == [3] and report["complete"]
    assert report["overrides"] == _TINY and report["eval_episodes"] == 4
    assert report["device"] == f"{os.cpu_count()}-core CPU"
    assert report["platform"]["python"] and report["date"].endswith("UTC")
    (run,) = report["runs"]
    assert run["seed"] == 3 and run["train_step"] == 2
    assert run["frames"] == 2 * 4 * 4
    assert 0.0 <= run["eval_solve_rate"] <= 1.0
    assert 0 < run["wall_seconds"] < 600
    with open(os.path.join(tmp_path, "runs", "seed3", "result.json")) as f:
        assert json.load(f)["eval_solve_rate"] == run["eval_solve_rate"]
    # The exact command of the seed: the demo's flags, then the overrides, then the seed.
    with open(_FLAGS_FILE) as f:
        demo_flags = " ".join(f.read().split())
    assert run["command"].startswith("PYTHONUNBUFFERED=1 TF_CPP_MIN_LOG_LEVEL=2 ")
    assert f"{demo_flags} {' '.join(_TINY)} --seed=3" in run["command"]
    assert report["goal_met"] is (run["eval_solve_rate"] >= 0.85 and run["wall_seconds"] < 600)

    with open(f"{output}.md") as f:
        lines = f.read().splitlines()
    assert lines[0] == f"`{report['command']}`"
    assert "reproduce_demo.py --seeds=3" in lines[0]
    rows = [line for line in lines if line.startswith("| 3 |")]
    assert len(rows) == 1 and f"{100 * run['eval_solve_rate']:.1f} %" in rows[0]
    assert any("Not the demo" in line for line in lines)
    assert not [name for name in os.listdir(output.parent) if ".tmp" in name]
