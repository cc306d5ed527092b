"""benchmarks/gpu_session.py: bad input fails at once, the plan fits the budget, and a smoke session
(the long run's first piece, then a second piece resumed from the first one's archive)."""

import io
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tarfile

import benchmark_scripts
import pytest

_SCRIPT = benchmark_scripts.path("gpu_session")
gpu_session = benchmark_scripts.load("gpu_session")


def _archive(path, members):
    """A .tar.gz of {name: bytes}."""
    with tarfile.open(path, "w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return str(path)


def _queue(path, jobs):
    path.write_text(json.dumps({"jobs": jobs}))
    return str(path)


_JOB = {"name": "fig3", "kind": "boxworld", "preset": "zambaldi_fig3_relational",
        "flags": ["--level_source=device"], "frame_target": 1000}


@pytest.mark.parametrize("argv, message", [
    (["--budget_seconds=600"], "--budget_seconds: expected seconds in (0, 590]"),
    (["--parts=lane,warp_drive"], "--parts: unknown part(s) ['warp_drive']"),
    (["--parts=long_run,queue"], "--parts: long_run and queue both take what the other parts"),
    (["--plan=train", "--parts=lane"], "--parts: the plan 'train' names its parts"),
    (["--plan=fast"], "argument --plan: invalid choice: 'fast'"),
    (["--wheels=/nonexistent/gpu_wheels"], "--wheels: no such folder '/nonexistent/gpu_wheels'"),
    (["--parts=long_run", "--resume_archive=/nonexistent/run.tar.gz"],
     "--resume_archive: not found"),
    (["--boxes=queue=100"], "--boxes: expected PART=SECONDS for a part among"),
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
            gpu_session.main([f"--out={tmp_path / 'out'}", "--parts=long_run",
                              f"--resume_archive={path}"])
        assert "is not a run archive" in capsys.readouterr().err
    good = _archive(tmp_path / "run.tar.gz", {
        "run/gpu_session_run.json": json.dumps({"preset": "p", "flags": []}).encode()})
    with pytest.raises(SystemExit):  # a resumed run keeps its settings
        gpu_session.main([f"--out={tmp_path / 'out'}", "--parts=long_run",
                          f"--resume_archive={good}", "--long_run_flags=--num_envs=64"])
    assert "--long_run_flags: a resumed run keeps the settings" in capsys.readouterr().err


@pytest.mark.parametrize("queue, message", [
    ("{not json", "is not JSON"),
    ('{"jobs": {}}', "expected an object with a list 'jobs'"),
    (json.dumps({"jobs": [dict(_JOB, kind="reproduce_everything")]}),
     "(fig3): unknown kind 'reproduce_everything'; known: boxworld, reproduce_tpr_babi"),
    (json.dumps({"jobs": [dict(_JOB, frame_target=0)]}),
     "a boxworld job needs 'preset' (a string) and 'frame_target'"),
    (json.dumps({"jobs": [_JOB, _JOB]}), "'name' must be a new name"),
    (json.dumps({"jobs": [dict(_JOB, flags="--num_envs=64")]}), "'flags' must be a list"),
])
def test_a_bad_queue_fails_before_anything_runs(tmp_path, capsys, queue, message):
    (tmp_path / "queue.json").write_text(queue)
    with pytest.raises(SystemExit) as exit_info:
        gpu_session.main([f"--out={tmp_path / 'out'}", "--plan=train",
                          f"--queue={tmp_path / 'queue.json'}", f"--runs_dir={tmp_path}"])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert "--queue: " in error and message in error
    assert not (tmp_path / "out").exists()


def _run_archive(path, name, meta):
    return _archive(path, {f"{name}/gpu_session_run.json": json.dumps(meta).encode()})


def test_the_queue_continues_its_first_unfinished_job(tmp_path, capsys):
    other = dict(_JOB, name="baseline", preset="zambaldi_fig3_baseline")
    queue = _queue(tmp_path / "queue.json", [_JOB, other])
    runs = tmp_path / "runs"
    runs.mkdir()
    jobs = gpu_session.load_queue(queue)
    assert gpu_session.next_job(jobs, str(runs))["name"] == "fig3"  # no archive: a new run
    assert gpu_session.next_job(jobs, str(runs))["archive"] is None

    def piece(frames):
        return {"preset": "zambaldi_fig3_relational", "flags": [],
                "pieces": [{"last_curve_row": {"frames": frames}}]}

    _run_archive(runs / "fig3.tar.gz", "fig3", piece(999))
    job = gpu_session.next_job(jobs, str(runs))
    assert job["name"] == "fig3" and job["archive"] == str(runs / "fig3.tar.gz")
    _run_archive(runs / "fig3.tar.gz", "fig3", piece(1000))  # its frame target: finished
    assert gpu_session.next_job(jobs, str(runs))["name"] == "baseline"
    gpu_session.main(["--plan=train", "--plan_only", f"--queue={queue}", f"--runs_dir={runs}"])
    assert "job: baseline (boxworld zambaldi_fig3_baseline, 0 of 1,000 frames), a new run" in (
        capsys.readouterr().out)
    # An archive of another run, under the job's name: refused before anything runs.
    _run_archive(runs / "fig3.tar.gz", "baseline", piece(10))
    with pytest.raises(SystemExit):
        gpu_session.main([f"--out={tmp_path / 'out'}", "--plan=train", f"--queue={queue}",
                          f"--runs_dir={runs}"])
    assert "is an archive of another run ('baseline'), not of the job 'fig3'" in (
        capsys.readouterr().err)
    _run_archive(runs / "fig3.tar.gz", "fig3", dict(piece(10), preset="zambaldi_fig3_baseline"))
    with pytest.raises(SystemExit):
        gpu_session.main([f"--out={tmp_path / 'out'}", "--plan=train", f"--queue={queue}",
                          f"--runs_dir={runs}"])
    assert "is an archive of another run (preset 'zambaldi_fig3_baseline')" in (
        capsys.readouterr().err)


def test_the_repository_queue_and_cost_table_load():
    from keras_relational.agents import presets

    jobs = gpu_session.load_queue(gpu_session.QUEUE)
    # The fast presets first (issue 46: fewest frames), then the papers' own settings.
    assert jobs[0]["name"] == "zambaldi_fig3_relational_fast" and jobs[0]["kind"] == "boxworld"
    faithful = {job["name"]: job for job in jobs}["zambaldi_fig3_relational"]
    # the preset's 400,000 updates of 32 environments x 40 steps
    assert faithful["frame_target"] == 400_000 * 32 * 40
    for job in jobs:  # gpu_session.py runs without Keras: the presets are checked here
        assert job["kind"] != "boxworld" or job["preset"] in presets.PRESETS, job
    costs = gpu_session.load_costs(gpu_session.COSTS)
    assert costs["device"] == "NVIDIA H200"
    assert set(costs["parts"]) == set(gpu_session.WORK) - {"queue"}
    for part, entry in costs["parts"].items():  # a figure always names its session
        assert entry["seconds"] is None or entry["source"].startswith("session_"), part


@pytest.mark.parametrize("plan", sorted(gpu_session.PLANS))
def test_each_named_plan_fits_540_seconds_on_the_h200(plan, capsys):
    costs = gpu_session.load_costs(gpu_session.COSTS)
    boxes = gpu_session.make_plan(list(gpu_session.PLANS[plan]), 540, wheels=True, costs=costs)
    setup, _ = gpu_session.setup_reserve(False, True, costs)
    assert setup + sum(box or 0 for _, box, _, _ in boxes) + gpu_session.FINAL_RESERVE <= 540
    # Every part has its box, but the last of the measuring plan (env_speed, measured in the
    # first window and 105 s that cannot shrink) may wait for the time the others leave.
    waiting = [p for p, box, _, _ in boxes if not box]
    assert waiting in ([], ["env_speed"]), boxes
    if plan == "train":
        assert dict((p, b) for p, b, _, _ in boxes)["queue"] >= 400
    gpu_session.main([f"--plan={plan}", "--plan_only"])
    out = capsys.readouterr().out
    assert "skipped:" not in out and "Plan for 540 s (device)" in out


@pytest.mark.parametrize("budget", [120, 300, 540, 590])
@pytest.mark.parametrize("smoke", [False, True])
@pytest.mark.parametrize("parts", [gpu_session.PARTS[:-1], gpu_session.PLANS["measure"],
                                   gpu_session.PLANS["train"], ("loop_speed", "long_run"),
                                   ("queue",)])
def test_the_plan_fits_the_budget_in_priority_order(budget, smoke, parts):
    plan = gpu_session.make_plan(list(parts), budget, smoke=smoke, wheels=True)
    assert [part for part, _, _, _ in plan] == list(parts)
    setup = gpu_session.SETUP_RESERVE["smoke" if smoke else "wheels"]
    boxes = [box or 0 for _, box, _, _ in plan]
    assert sum(boxes) + setup + gpu_session.FINAL_RESERVE <= budget
    started = [box is not None for part, box, _, _ in plan
               if part not in gpu_session.TAKES_THE_REST]
    assert started == sorted(started, reverse=True)  # the lowest priorities are dropped first
    for _, box, note, smallest in plan:
        if box:
            assert box >= smallest
        else:
            assert note.startswith("the budget leaves")
    if plan[-1][0] in gpu_session.TAKES_THE_REST and plan[-1][1]:  # it takes the rest
        assert sum(boxes) + setup + gpu_session.FINAL_RESERVE == budget


def test_the_plan_sizes_parts_from_the_cost_table():
    costs = {"device": "NVIDIA H200", "parts": {
        "env_speed": {"work": gpu_session.WORK["env_speed"], "seconds": 40.0},
        "accelerator": {"work": gpu_session.WORK["accelerator"] - 1, "seconds": 10.0},
        "simplicial": {"work": gpu_session.WORK["simplicial"], "seconds": None,
                       "at_least": 60.0}}}
    plan = {p: (b, n) for p, b, n, _ in gpu_session.make_plan(
        ["accelerator", "env_speed", "simplicial"], 590, costs=costs)}
    assert plan["env_speed"][0] == math.ceil(40 * gpu_session.COST_MARGIN
                                             + gpu_session.COST_SLACK)
    assert plan["env_speed"][1].startswith("cost table: 40 s")
    # measured on other work: unknown, the nominal box
    assert plan["accelerator"] == (gpu_session.BOXES["accelerator"][0],
                                   "cost unknown: nominal box")
    assert plan["simplicial"] == (75, "cost table: more than 60 s, None")  # stopped at its box
    # Short of time: the parts that size their own work shrink towards their smallest box, the
    # fixed ones keep theirs, and a part whose smallest box does not fit is dropped.
    fixed = gpu_session.part_box("lane_16bit")[0]
    plan = gpu_session.make_plan(["lane_16bit", "accelerator", "simplicial"],
                                 fixed + 30 + 21 + 25 + 10, wheels=False)
    assert [(p, b) for p, b, _, _ in plan] == [("lane_16bit", fixed), ("accelerator", 30),
                                               ("simplicial", 20)]
    assert "shrunk from 50 s to fit" in plan[1][2]
    plan = gpu_session.make_plan(["lane_16bit", "accelerator", "simplicial"],
                                 fixed + 30 + 19 + 25 + 10, wheels=False)
    assert [(p, b) for p, b, _, _ in plan] == [("lane_16bit", fixed), ("accelerator", 49),
                                               ("simplicial", None)]  # it takes the time left


def _fake_session(tmp_path, plan, left):
    """A Session with ``plan`` and ``left()`` seconds left whose parts record their box."""
    session = gpu_session.Session.__new__(gpu_session.Session)
    session.args = gpu_session.parse_args(["--plan_only", "--parts=lane_layers"])
    session.plan, session.record, session.results_dir = plan, {"parts": {}}, str(tmp_path)
    session.left = lambda: left
    ran = {}
    for part in gpu_session.PARTS:
        setattr(session, f"_part_{part}", lambda entry, box, part=part: ran.update({part: box}))
    return session, ran


def test_a_part_left_out_of_the_plan_starts_when_earlier_parts_leave_its_box(tmp_path):
    waiting = "the budget leaves 1 s, less than its smallest box 105 s; it starts if ..."
    plan = [("env_speed", None, waiting, 105), ("simplicial", 20, "nominal", 20)]
    session, ran = _fake_session(tmp_path, plan, left=150)
    session.run_part("env_speed", None)
    assert ran == {"env_speed": 105}  # its box, with the later part's box kept for it
    session, ran = _fake_session(tmp_path, plan, left=120)
    session.run_part("env_speed", None)
    assert ran == {} and session.record["parts"]["env_speed"]["skipped"] == waiting
    # A part that sizes its own work takes what earlier parts left, up to the box it wants.
    session, ran = _fake_session(tmp_path, [("simplicial", 20, "nominal", 20),
                                            ("profile", 35, "nominal", 35)], left=200)
    session.run_part("simplicial", 20)
    assert ran == {"simplicial": gpu_session.BOXES["simplicial"][0]}
    session, ran = _fake_session(tmp_path, [("simplicial", 20, "nominal", 20),
                                            ("profile", 35, "nominal", 35)], left=60)
    session.run_part("simplicial", 20)
    assert ran == {"simplicial": 25}


def _session(**parts):
    return {"started": "2026-12-01T10:00:00+00:00", "smoke": False,
            "device": {"device_kind": "NVIDIA H200", "probe_seconds": 5.0},
            "setup": {"seconds": 7.0}, "parts": parts}


def test_update_costs_takes_what_a_session_measured(tmp_path, capsys):
    work = gpu_session.WORK
    session = _session(
        env_speed={"work": work["env_speed"], "box_seconds": 105, "seconds": 80.5,
                   "exit_code": 0, "timed_out": False, "compile_seconds": 3.0},
        loop_speed={"work": work["loop_speed"], "box_seconds": 61, "seconds": 61.2,
                    "exit_code": -2, "timed_out": True},
        lane_16bit={"work": work["lane_16bit"], "box_seconds": 100, "seconds": 99.0,
                    "exit_code": 0, "timed_out": False,
                    "summary": {"counts": {"time_box": 3}}},
        accelerator={"work": work["accelerator"] - 1, "box_seconds": 50, "seconds": 20.0,
                     "exit_code": 0, "timed_out": False},
        profile={"work": work["profile"], "box_seconds": 45, "seconds": 1.0, "exit_code": None,
                 "error": "benchmarks/profile_update.py is missing"},
        simplicial={"box_seconds": None, "work": work["simplicial"], "skipped": "budget"},
        queue={"work": work["queue"], "box_seconds": 400, "seconds": 390.0, "exit_code": 0,
               "timed_out": False, "kind": "boxworld", "overhead_seconds": 31.5})
    before = {"device": "NVIDIA H200", "parts": {
        "profile": {"work": work["profile"], "seconds": 30.0, "source": "old"},
        "accelerator": {"work": work["accelerator"], "seconds": 44.0, "source": "old"}}}
    after = gpu_session.update_costs(before, session)
    parts = after["parts"]
    assert parts["env_speed"]["seconds"] == 80.5 and parts["env_speed"]["compile_seconds"] == 3.0
    assert "2026-12-01T10:00:00+00:00" in parts["env_speed"]["source"]
    assert parts["loop_speed"]["seconds"] is None and parts["loop_speed"]["at_least"] == 61
    assert parts["lane_16bit"]["at_least"] == 100  # tests skipped at its box: unfinished
    assert parts["accelerator"]["seconds"] == 44.0  # older work, failed, skipped: kept
    assert parts["profile"]["seconds"] == 30.0 and "simplicial" not in parts
    assert parts["long_run"]["overhead_seconds"] == 31.5
    assert parts["setup"]["seconds"] == 12.0
    assert before["parts"].keys() == {"profile", "accelerator"}  # not changed in place
    with pytest.raises(ValueError, match="--smoke session"):
        gpu_session.update_costs(before, dict(session, smoke=True))
    with pytest.raises(ValueError, match="the cost table is of 'NVIDIA H200'"):
        gpu_session.update_costs(before, dict(session, device={"device_kind": "NVIDIA B200"}))
    # The flag: the table file updated, then the plan sized from it.
    (tmp_path / "costs.json").write_text(json.dumps(before))
    (tmp_path / "session.json").write_text(json.dumps(session))
    assert gpu_session.main([f"--costs={tmp_path / 'costs.json'}",
                             f"--update_costs={tmp_path / 'session.json'}"]) == 0
    assert json.loads((tmp_path / "costs.json").read_text()) == after
    capsys.readouterr()
    gpu_session.main([f"--costs={tmp_path / 'costs.json'}", "--parts=env_speed", "--plan_only"])
    assert re.search(r"env_speed +98 s +cost table: 80.5 s, session.json of 2026-12-01",
                     capsys.readouterr().out)
    (tmp_path / "costs.json").write_text("{")
    with pytest.raises(SystemExit) as exit_info:
        gpu_session.main([f"--costs={tmp_path / 'costs.json'}", "--plan_only"])
    assert exit_info.value.code == 2 and "--costs: " in capsys.readouterr().err


def test_the_scripts_of_other_parts_are_called_with_their_flags(tmp_path):
    assert gpu_session.profile_command(60, False, "benchmarks/results/profile_update_gpu") == [
        "profile_update.py", "--preset=zambaldi_fig3_relational", "--num_envs=256",
        "--updates=5", "--output=benchmarks/results/profile_update_gpu"]
    assert gpu_session.profile_command(60, True, "o")[-1] == "--smoke"
    assert gpu_session.simplicial_kernel_command(60, False, "o") == [
        "simplicial_kernel_speed.py", "--sizes=16384,4096,65536,8192,32768", "--time_budget=45",
        "--output=o"]
    assert gpu_session.simplicial_kernel_command(20, True, "o")[-1] == "--smoke"
    # A missing script: a clear failure of its part, and the session goes on.
    session = gpu_session.Session.__new__(gpu_session.Session)
    session.logs_dir = str(tmp_path)
    entry = {}
    session._run_script(entry, "simplicial_kernel", 60, ["no_such_script.py", "--smoke"])
    assert entry["exit_code"] is None
    assert entry["error"] == ("benchmarks/no_such_script.py is missing: this checkout has no "
                              "such script")
    assert entry["error"] in (tmp_path / "simplicial_kernel.log").read_text()


def test_compile_seconds_are_read_from_results_files(tmp_path):
    (tmp_path / "a.json").write_text('{"compile_seconds": 12.5, "rows": []}')
    (tmp_path / "b.json").write_text('{"rows": [{"compile_seconds": 10.0}, {"x": 1}, '
                                     '{"compile_seconds": 2.5}]}')
    (tmp_path / "c.json").write_text('{"rows": [{"x": 1}]}')
    (tmp_path / "d.json").write_text('[1, 2]')
    assert [gpu_session._compile_seconds(str(tmp_path / f"{n}.json")) for n in "abcd"] == [
        12.5, 12.5, None, None]


def test_a_queued_reproduction_resumes_from_its_results_and_fits_its_box(tmp_path):
    command, cap = gpu_session.reproduce_command(
        "reproduce_tpr_babi", ["--mode=table2", "--tasks=1,2", "--max_minutes=3"], 400, 60,
        str(tmp_path))
    assert cap == 3  # the job's own cap, smaller than what the box leaves
    available = (400 - gpu_session.GRACE - 5 - 60) / 60
    assert command == ["-m", "benchmarks.reproduce_tpr_babi", "--mode=table2", "--tasks=1,2",
                       f"--root_dir={tmp_path / 'root'}", "--max_minutes=3.00",
                       f"--session_minutes={available - 3:.2f}",
                       f"--output={tmp_path / 'results.md'}"]
    (tmp_path / "results.json").write_text('{"runs": [1, 2]}')
    command, cap = gpu_session.reproduce_command("reproduce_predinet", [], 400, 60,
                                                 str(tmp_path))
    assert cap == pytest.approx(available)  # one run, the whole box; no other starts
    assert f"--resume_from={tmp_path / 'results.json'}" in command
    assert command[-2:] == ["--session_minutes=0.50", f"--output={tmp_path / 'results'}"]
    assert gpu_session._count_runs(str(tmp_path / "results.json")) == 2


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


def test_the_smoke_runs_its_parts_without_tensorflow_and_with_a_compilation_cache(tmp_path):
    """--smoke's parts see no TensorFlow (nor matplotlib, pandas, requests), as on the device
    (`find_spec` answers None, an import fails), keep JAX's compiled programs in one cache (the
    caller's, or the session's) and compile at XLA's -O0, -O1 where they train."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(gpu_session.SMOKE_SITECUSTOMIZE)
    env = dict(os.environ, **gpu_session.smoke_env(
        {"PYTHONPATH": os.pathsep.join(["/x", str(site)])}, str(site), "/session/cache"))
    assert env["PYTHONPATH"] == os.pathsep.join([str(site), "/x"])
    assert env["JAX_COMPILATION_CACHE_DIR"] == "/session/cache"
    assert env["XLA_FLAGS"] == ("--xla_backend_optimization_level=0 "
                                "--xla_llvm_disable_expensive_passes=true "
                                "--xla_cpu_use_fusion_emitters=false")
    mine = gpu_session.smoke_env({"JAX_COMPILATION_CACHE_DIR": "/mine", "XLA_FLAGS": "--a=1"},
                                 str(site), "/cache", trains=True, newer=False)
    assert mine["JAX_COMPILATION_CACHE_DIR"] == "/mine"
    assert mine["XLA_FLAGS"] == ("--a=1 --xla_backend_optimization_level=1 "
                                 "--xla_llvm_disable_expensive_passes=true")
    hidden = ("tensorflow", "tf_keras", "matplotlib", "pandas", "requests")
    code = ("import importlib.util, json, sys\n"
            f"hidden = [importlib.util.find_spec(n) for n in {hidden!r}]\n"
            "try:\n    import tensorflow\nexcept ModuleNotFoundError as error:\n"
            "    refused = str(error)\n"
            "print(json.dumps([hidden, refused, importlib.util.find_spec('tarfile') is not None,"
            " 'tensorflow' in sys.modules]))")
    done = subprocess.run([sys.executable, "-P", "-c", code], env=env, capture_output=True,
                          text=True, timeout=60, check=True)
    assert json.loads(done.stdout) == [[None] * len(hidden), "No module named 'tensorflow'", True,
                                       False]


@pytest.mark.subprocess
def test_the_smoke_goes_on_without_the_xla_flags_that_xla_does_not_know(tmp_path, monkeypatch):
    """Where the probe aborts on one of SMOKE_NEWER_XLA_FLAGS (an XLA that does not know it),
    the setup asks again without them, and the parts run without them."""
    monkeypatch.setattr(gpu_session, "SMOKE_NEWER_XLA_FLAGS", ("--xla_cpu_no_such_flag=true",))
    # A short probe: JAX parses XLA_FLAGS when it asks for its devices.
    monkeypatch.setattr(gpu_session, "_PROBE", "import jax, json; jax.devices(); "
                                               "print(json.dumps({'platform': 'cpu'}))")
    session = gpu_session.Session(gpu_session.parse_args(
        ["--smoke", f"--out={tmp_path / 'out'}", "--parts=lane_layers"]))
    try:
        assert "--xla_cpu_no_such_flag=true" in session.env("lane_layers")["XLA_FLAGS"]
        assert session.setup()
        assert session.record["device"]["smoke_xla_flags_left_out"] == [
            "--xla_cpu_no_such_flag=true"]
        assert "--xla_cpu_no_such_flag" not in session.env("lane_layers")["XLA_FLAGS"]
        with open(session.log_path("device")) as f:
            assert gpu_session.UNKNOWN_XLA_FLAG + ": --xla_cpu_no_such_flag=true" in f.read()
    finally:
        shutil.rmtree(session.work, ignore_errors=True)


@pytest.fixture(scope="module")
def smoke_cache(tmp_path_factory):
    """One JAX compilation cache for this module's smoke sessions: their Box-World parts train
    one tiny update (gpu_session.SMOKE_BOXWORLD_FLAGS), compiled by the first of them."""
    return str(tmp_path_factory.mktemp("jax_cache"))


def _smoke(out, *argv, cache, budget=540):
    command = [sys.executable, _SCRIPT, "--smoke", f"--out={out}", f"--budget_seconds={budget}",
               *argv]
    done = subprocess.run(command, capture_output=True, text=True, timeout=budget + 60,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3",
                                   JAX_COMPILATION_CACHE_DIR=cache))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    with open(os.path.join(out, "session.json")) as f:
        return json.load(f)


@pytest.mark.slow
@pytest.mark.subprocess
def test_a_smoke_session_and_a_second_piece_from_its_archive(tmp_path, smoke_cache):
    # The lane (one layer case on the CPU), a Table 1 cell of RN and the long run's first piece.
    first = _smoke(tmp_path / "one", "--parts=lane_layers,predinet,long_run", budget=300,
                   cache=smoke_cache)
    files = sorted(os.listdir(tmp_path / "one"))
    assert files == ["logs.txt", "results.tar.gz", "session.json", "summary.md",
                     "zambaldi_fig3_relational.tar.gz"]
    assert first["device"]["platform"] == "cpu" and first["smoke"]
    assert [p["part"] for p in first["plan"]] == ["lane_layers", "predinet", "long_run"]
    lane = first["parts"]["lane_layers"]
    assert lane["exit_code"] == 0 and lane["summary"]["counts"]["passed"] == 1
    assert lane["results"] == ["accelerator_lane_layers_smoke.json",
                               "accelerator_lane_layers_smoke.md"]
    predinet = first["parts"]["predinet"]
    assert predinet["exit_code"] == 0 and not predinet["timed_out"]
    assert predinet["results"] == ["predinet_table1.json", "predinet_table1.md"]
    with tarfile.open(tmp_path / "one" / "results.tar.gz") as archive:
        assert "smoke/benchmarks/results/accelerator_lane_layers_smoke.md" in archive.getnames()
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
    assert first["wall_seconds"] < 300
    archive = str(tmp_path / "one" / "zambaldi_fig3_relational.tar.gz")
    with tarfile.open(archive) as packed:
        names = packed.getnames()
    assert {"zambaldi_fig3_relational/curves.jsonl", "zambaldi_fig3_relational/result.json",
            "zambaldi_fig3_relational/gpu_session_run.json",
            f"zambaldi_fig3_relational/train/checkpoints/ckpt-{run['end_step']}.npz"} <= set(names)

    # The next session's piece continues the run's step count.
    second = _smoke(tmp_path / "two", "--parts=long_run", f"--resume_archive={archive}",
                    budget=240, cache=smoke_cache)
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


@pytest.mark.slow
@pytest.mark.subprocess
def test_the_train_plan_continues_its_queued_job_from_the_archive(tmp_path, smoke_cache):
    queue = _queue(tmp_path / "queue.json", [dict(_JOB, frame_target=10**9)])
    runs = tmp_path / "runs"
    runs.mkdir()
    flags = [f"--queue={queue}", f"--runs_dir={runs}"]
    first = _smoke(tmp_path / "one", *flags, "--plan=train", cache=smoke_cache)
    assert [p["part"] for p in first["plan"]] == ["profile", "queue"]
    profile = first["parts"]["profile"]
    assert profile["exit_code"] == 0 and not profile["timed_out"], profile
    assert profile["results"] == ["profile_update_smoke.json", "profile_update_smoke.md"]
    piece = first["parts"]["queue"]
    assert piece["job"] == "fig3" and piece["exit_code"] == 0 and not piece["timed_out"]
    assert piece["start_step"] == 0 and piece["end_step"] >= 1 and not piece["finished"]
    assert sorted(os.listdir(tmp_path / "one")) == ["fig3.tar.gz", "logs.txt", "results.tar.gz",
                                                    "session.json", "summary.md"]
    # The archive comes back to the runs folder (the lead commits it): the next piece goes on.
    os.replace(tmp_path / "one" / "fig3.tar.gz", runs / "fig3.tar.gz")
    second = _smoke(tmp_path / "two", *flags, "--parts=queue", cache=smoke_cache)
    again = second["parts"]["queue"]
    assert again["exit_code"] == 0 and again["start_step"] == piece["end_step"]
    assert again["end_step"] > piece["end_step"]
    meta = gpu_session.read_archive(str(tmp_path / "two" / "fig3.tar.gz"))["meta"]
    assert [(p["start_step"], p["end_step"]) for p in meta["pieces"]] == [
        (0, piece["end_step"]), (piece["end_step"], again["end_step"])]
    assert meta["frame_target"] == 10**9 and meta["preset"] == "zambaldi_fig3_relational"


@pytest.mark.slow
@pytest.mark.subprocess
def test_the_measure_plan_completes_every_part_it_starts_in_smoke(tmp_path, smoke_cache):
    session = _smoke(tmp_path / "out", "--plan=measure", cache=smoke_cache)
    assert [p["part"] for p in session["plan"]] == list(gpu_session.PLANS["measure"])
    assert session["wall_seconds"] < 540
    for part in ("lane_layers", "lane_16bit", "lane_models"):  # first: their time is planned
        entry = session["parts"][part]
        assert entry["exit_code"] == 0 and entry["summary"]["counts"]["passed"] == 1, entry
    for part, entry in session["parts"].items():
        script = {"simplicial_kernel": "simplicial_kernel_speed.py"}.get(part)
        if script and not os.path.exists(os.path.join(benchmark_scripts.BENCHMARKS, script)):
            assert entry["error"] == (f"benchmarks/{script} is missing: this checkout has no "
                                      f"such script")
        elif "skipped" not in entry and not entry["timed_out"]:
            # (a part stopped at its box is the plan's business: on an idle 2-core CPU every
            # part ends well inside its box, on one loaded ten times over some do not)
            assert entry["exit_code"] == 0 and entry["results"], (part, entry)
    # What a part's exit code does not show: the loop sweep's training run ended well (a
    # failed run is a row of its table) and the profiled updates' loss is finite.
    ended = {part for part, entry in session["parts"].items()
             if "skipped" not in entry and not entry["timed_out"]}
    with tarfile.open(tmp_path / "out" / "results.tar.gz") as archive:
        def result(name):
            return json.load(archive.extractfile(f"smoke/benchmarks/results/{name}.json"))

        if "loop_speed" in ended:
            rows = result("compiled_loop_speed_smoke_2envs")["rows"]
            assert [(r["exit_code"], r["progress_lines"] > 0) for r in rows] == [(0, True)], rows
        if "profile" in ended:
            assert math.isfinite(result("profile_update_smoke")["final_loss"])


def test_a_loop_sweep_row_that_measured_nothing_asks_for_a_larger_box(tmp_path):
    # compiled_loop_speed exits 0 where its training process printed no progress line before
    # its --seconds (the 2026-11-30 H200 window's sweep): the cost is not the seconds it took
    measured, unmeasured = tmp_path / "measured.json", tmp_path / "unmeasured.json"
    measured.write_text(json.dumps({"rows": [{"exit_code": 0, "frames_per_second": 1.5e5}]}))
    unmeasured.write_text(json.dumps({"rows": [{"exit_code": "killed at --seconds",
                                                "progress_lines": 0}]}))
    assert gpu_session._loop_row_measured(str(measured))
    assert not gpu_session._loop_row_measured(str(unmeasured))
    assert not gpu_session._loop_row_measured(str(tmp_path / "missing.json"))
    work = gpu_session.WORK["loop_speed"]

    def loop_entry(*measured_rows):
        rows = [{"num_envs": n, "measured": m}
                for n, m in zip((256, 1024), measured_rows, strict=True)]
        return {"work": work, "box_seconds": 180, "seconds": 168.1, "exit_code": 0,
                "timed_out": False, "rows": rows}

    costs = gpu_session.update_costs({}, _session(loop_speed=loop_entry(True, False)))
    assert costs["parts"]["loop_speed"]["seconds"] is None
    assert costs["parts"]["loop_speed"]["at_least"] == 180
    costs = gpu_session.update_costs({}, _session(loop_speed=loop_entry(True, True)))
    assert costs["parts"]["loop_speed"]["seconds"] == 168.1
    failed = dict(loop_entry(True, False), exit_code=1)  # a failure, not a box too small
    assert "loop_speed" not in gpu_session.update_costs({}, _session(loop_speed=failed))["parts"]


def test_the_predinet_part_splits_its_box_between_cells_and_stages(tmp_path):
    (tmp_path / "predinet_table1.json").write_text("{}")
    command, cap = gpu_session.predinet_command(["--centrals=relation_net"], 475, 1, 75,
                                                "/r", str(tmp_path))
    assert cap == pytest.approx((475 - gpu_session.GRACE - 75) / 60)
    assert command == ["-m", "benchmarks.reproduce_predinet", "--mode=table1",
                       "--centrals=relation_net", "--root_dir=/r",
                       f"--resume_from={tmp_path / 'predinet_table1.json'}",
                       f"--max_minutes_per_cell={cap:.2f}", "--session_minutes=0.50",
                       "--output=benchmarks/results/predinet_table1"]
    # (The one cell starts within its first 30 s.) Two cells: each gets half of what the
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


@pytest.mark.parametrize("smoke", [False, True])
def test_the_float32_lane_also_checks_the_compiled_simplicial_kernel(tmp_path, smoke):
    """lane_layers runs the Triton-compiled 2-simplicial kernel's GPU test beside the layers'
    (the layer uses the kernel by default under JAX on a GPU); the smoke selection narrows the
    whole selection, not only its last alternative."""
    session = gpu_session.Session.__new__(gpu_session.Session)
    session.args = gpu_session.parse_args(["--plan_only", "--parts=lane_layers"]
                                          + (["--smoke"] if smoke else []))
    session.work, session.python = str(tmp_path), "python"
    commands = []
    session._run = lambda entry, part, command, box, **kwargs: commands.append(command)
    session._lane({}, 60, "lane_layers", "EntityMaxPool")
    (command,) = commands
    assert "tests/test_accelerator.py" in command
    assert "tests/layers/test_pallas_simplicial.py" in command
    selection = command[command.index("-k") + 1]
    assert selection.startswith("(test_layer_forward_and_backward_on_gpu_match_cpu or "
                                "test_compiled_kernel_on_a_gpu_matches_the_dense_reference)")
    assert selection.endswith(" and EntityMaxPool") == smoke
