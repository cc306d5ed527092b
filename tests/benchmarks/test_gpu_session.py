"""benchmarks/gpu_session.py: bad input fails at once, the plan fits the budget, and a smoke session
(the long run's first piece, then a second piece resumed from the first one's archive)."""

import importlib.util
import io
import json
import os
import subprocess
import sys
import tarfile

import pytest

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_SCRIPT = os.path.join(_REPO_ROOT, "benchmarks", "gpu_session.py")


def _load():
    spec = importlib.util.spec_from_file_location("gpu_session_under_test", _SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gpu_session = _load()


def _archive(path, members):
    """A .tar.gz of {name: bytes}."""
    with tarfile.open(path, "w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return str(path)


@pytest.mark.parametrize("argv, message", [
    (["--budget_seconds=600"], "--budget_seconds: expected seconds in (0, 590]"),
    (["--parts=lane,warp_drive"], "--parts: unknown part(s) ['warp_drive']"),
    (["--wheels=/nonexistent/gpu_wheels"], "--wheels: no such folder '/nonexistent/gpu_wheels'"),
    (["--resume_archive=/nonexistent/run.tar.gz"], "--resume_archive: not found"),
    (["--boxes=long_run=100"], "--boxes: expected PART=SECONDS for a part among"),
    (["--predinet_cells=0"], "--predinet_cells: expected at least 1, received 0"),
])
def test_bad_input_fails_at_once_naming_the_flag(tmp_path, capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        gpu_session.main([f"--out={tmp_path / 'out'}", *argv])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # nothing ran


def test_an_archive_must_be_one_run_folder(tmp_path, capsys):
    two = _archive(tmp_path / "two.tar.gz", {"a/x": b"1", "b/y": b"2"})
    escaping = _archive(tmp_path / "up.tar.gz", {"run/../../etc/x": b"1"})
    for path in (two, escaping):
        with pytest.raises(SystemExit):
            gpu_session.main([f"--out={tmp_path / 'out'}", f"--resume_archive={path}"])
        assert "is not a run archive" in capsys.readouterr().err
    good = _archive(tmp_path / "run.tar.gz", {
        "run/gpu_session_run.json": json.dumps({"preset": "p", "flags": []}).encode()})
    with pytest.raises(SystemExit):  # a resumed run keeps its settings
        gpu_session.main([f"--out={tmp_path / 'out'}", f"--resume_archive={good}",
                          "--long_run_flags=--num_envs=64"])
    assert "--long_run_flags: a resumed run keeps the settings" in capsys.readouterr().err


@pytest.mark.parametrize("budget", [120, 300, 540, 590])
@pytest.mark.parametrize("smoke", [False, True])
@pytest.mark.parametrize("parts", [gpu_session.PARTS, ("lane", "accelerator", "env_speed"),
                                   ("loop_speed", "long_run"), ("long_run",)])
def test_the_plan_fits_the_budget_in_priority_order(budget, smoke, parts):
    plan = gpu_session.make_plan(list(parts), budget, smoke=smoke, wheels=True)
    assert [part for part, _, _ in plan] == list(parts)
    table = gpu_session.SMOKE_BOXES if smoke else gpu_session.BOXES
    setup = gpu_session.SETUP_RESERVE["smoke" if smoke else "wheels"]
    boxes = [box or 0 for _, box, _ in plan]
    assert sum(boxes) + setup + gpu_session.FINAL_RESERVE <= budget
    for (part, box, why), _ in zip(plan, boxes, strict=True):
        if box:
            assert box >= min(table[part][1], table[part][0] or box)
        else:
            assert why.startswith("the budget leaves")
    if "long_run" in parts and plan[-1][1]:  # the long run takes everything that is left
        assert sum(boxes) + setup + gpu_session.FINAL_RESERVE == budget


def test_the_lane_summary_counts_the_time_box_apart(tmp_path):
    junit = tmp_path / "lane.xml"
    junit.write_text(
        '<testsuites><testsuite name="pytest" time="12.5">'
        '<testcase name="test_a" time="1.0"/>'
        '<testcase name="test_b" time="2.0"><failure message="assert 1 == 2">x</failure>'
        '</testcase><testcase name="test_c" time="0.0">'
        '<skipped message="gpu_session: the lane\'s time box is spent"/></testcase>'
        '<testcase name="test_d" time="0.0"><skipped message="no GPU"/></testcase>'
        '</testsuite></testsuites>')
    summary = gpu_session.summarise_junit(str(junit))
    assert summary["counts"] == dict(passed=1, failed=1, errors=0, skipped=2, time_box=1)
    assert summary["seconds"] == 12.5
    assert summary["tests"][1] == {"name": "test_b", "outcome": "failed", "seconds": 2.0,
                                   "message": "assert 1 == 2"}


def test_the_run_archive_keeps_the_newest_checkpoint_only(tmp_path):
    run = tmp_path / "myrun"
    (run / "train" / "checkpoints").mkdir(parents=True)
    for step in (100, 200):
        (run / "train" / "checkpoints" / f"ckpt-{step}.npz").write_bytes(b"0" * 10)
    (run / "train" / "checkpoints" / "tmpx.tmp").write_bytes(b"")
    (run / "curves.jsonl").write_text('{"step": 200}\n')
    size, left_out = gpu_session.pack_run(str(run), str(tmp_path / "myrun.tar.gz"))
    assert size == os.path.getsize(tmp_path / "myrun.tar.gz") and left_out == ["older checkpoints"]
    with tarfile.open(tmp_path / "myrun.tar.gz") as archive:
        assert sorted(archive.getnames()) == ["myrun/curves.jsonl",
                                              "myrun/train/checkpoints/ckpt-200.npz"]
    unpacked = gpu_session.extract_archive(str(tmp_path / "myrun.tar.gz"), str(tmp_path / "x"))
    assert gpu_session.newest_checkpoint_step(unpacked) == 200


def _smoke(out, *argv):
    command = [sys.executable, _SCRIPT, "--smoke", f"--out={out}", "--budget_seconds=240",
               *argv]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    with open(os.path.join(out, "session.json")) as f:
        return json.load(f)


@pytest.mark.slow
@pytest.mark.subprocess
def test_a_smoke_session_and_a_second_piece_from_its_archive(tmp_path):
    # The lane (one layer case on the CPU), a Table 1 cell of RN and the long run's first piece.
    first = _smoke(tmp_path / "one", "--parts=lane,predinet,long_run")
    files = sorted(os.listdir(tmp_path / "one"))
    assert files == ["logs.txt", "results.tar.gz", "session.json", "summary.md",
                     "zambaldi_fig3_relational.tar.gz"]
    assert first["device"]["platform"] == "cpu" and first["smoke"]
    assert [p["part"] for p in first["plan"]] == ["lane", "predinet", "long_run"]
    lane = first["parts"]["lane"]
    assert lane["exit_code"] == 0 and lane["summary"]["counts"]["passed"] == 1
    assert lane["results"] == ["accelerator_lane_smoke.json", "accelerator_lane_smoke.md"]
    predinet = first["parts"]["predinet"]
    assert predinet["exit_code"] == 0 and not predinet["timed_out"]
    assert predinet["results"] == ["predinet_table1.json", "predinet_table1.md"]
    with tarfile.open(tmp_path / "one" / "results.tar.gz") as archive:
        assert "smoke/benchmarks/results/accelerator_lane_smoke.md" in archive.getnames()
        table = json.load(archive.extractfile("smoke/benchmarks/results/predinet_table1.json"))
    # The committed table's runs (--resume_from) and the new cell, trained under JAX.
    new = [r for r in table["runs"] if r.get("backend") == "jax"]
    assert [(r["task"], r["central"], r["num_batches"], r["input_pipeline"]) for r in new] == [
        ("same", "relation_net", 2, "numpy")]
    assert len(table["runs"]) > 1
    run = first["parts"]["long_run"]
    assert run["exit_code"] == 0 and not run["timed_out"]
    assert run["start_step"] == 0 and run["end_step"] >= 1
    assert run["archive_bytes"] < gpu_session.ARCHIVE_LIMIT
    assert first["wall_seconds"] < 240
    archive = str(tmp_path / "one" / "zambaldi_fig3_relational.tar.gz")
    with tarfile.open(archive) as packed:
        names = packed.getnames()
    assert {"zambaldi_fig3_relational/curves.jsonl", "zambaldi_fig3_relational/result.json",
            "zambaldi_fig3_relational/gpu_session_run.json",
            f"zambaldi_fig3_relational/train/checkpoints/ckpt-{run['end_step']}.npz"} <= set(names)

    # The next session's piece continues the run's step count.
    second = _smoke(tmp_path / "two", "--parts=long_run", f"--resume_archive={archive}")
    piece = second["parts"]["long_run"]
    assert piece["exit_code"] == 0 and piece["start_step"] == run["end_step"]
    assert piece["end_step"] > run["end_step"]
    with open(tmp_path / "two" / "logs.txt") as f:
        assert f"train step {run['end_step']}" in f.read()  # "Resuming from ...: train step N"
    meta = gpu_session.read_archive(str(tmp_path / "two" / "zambaldi_fig3_relational.tar.gz"))
    pieces = meta["meta"]["pieces"]
    assert [(p["start_step"], p["end_step"]) for p in pieces] == [
        (0, run["end_step"]), (run["end_step"], piece["end_step"])]
    assert meta["meta"]["flags"][0] == "--level_source=device"


def test_the_predinet_part_splits_its_box_between_cells_and_stages(tmp_path):
    (tmp_path / "predinet_table1.json").write_text("{}")
    command, cap = gpu_session.predinet_command(["--centrals=relation_net"], 475, 1, 75,
                                                "/r", str(tmp_path))
    assert cap == pytest.approx((475 - gpu_session.GRACE - 75) / 60)
    assert command == ["-m", "benchmarks.reproduce_predinet", "--mode=table1",
                       "--centrals=relation_net", "--root_dir=/r",
                       f"--resume_from={tmp_path / 'predinet_table1.json'}",
                       f"--max_minutes_per_cell={cap:.2f}", "--session_minutes=0.08",
                       "--output=benchmarks/results/predinet_table1"]
    # (The one cell starts within its first 5 s.) Two cells: each gets half of what the
    # overheads leave, and the second starts only while a whole one still fits.
    command, cap = gpu_session.predinet_command([], 475, 2, 75, "/r", str(tmp_path))
    assert cap == pytest.approx((475 - gpu_session.GRACE - 150) / 2 / 60)
    assert f"--session_minutes={(475 - 5 - 75) / 60 - cap:.2f}" in command
    # Curricula: four stages share a cell, two tasks' overheads; no committed curricula file.
    command, cap = gpu_session.predinet_command(["--mode=curricula", "--combinations=A"], 475,
                                                1, 75, "/r", str(tmp_path))
    assert cap == pytest.approx((475 - gpu_session.GRACE - 150) / 4 / 60)
    assert command[2:4] == ["--mode=curricula", "--combinations=A"]
    assert not any(flag.startswith("--resume_from") for flag in command)
    assert command[-1] == "--output=benchmarks/results/predinet_curricula"
