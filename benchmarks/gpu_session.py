r"""One command for a GPU session: install, measure, train a piece of the long run, pack it all.

    python3 benchmarks/gpu_session.py --out=$OUT --budget_seconds=540 --wheels=gpu_wheels \
        [--parts=lane,accelerator,env_speed,loop_speed,simplicial,predinet,long_run] \
        [--resume_archive=benchmarks/results/runs/zambaldi_fig3_relational.tar.gz]

For a machine lent for minutes (docs/contributing.md, "A GPU session in one command"): it installs
the carried wheels and the package into ``--site`` (``pip install --no-index --no-deps --target``;
without pip, the wheels are unzipped and the package folders copied), asks the device what it is,
then runs each part in priority order as a subprocess (``python -P``, ``KERAS_BACKEND=jax``,
``PYTHONPATH=<site>:benchmarks``) under its own time box, from a plan fixed at the start that fits
``--budget_seconds``:

==============  ===========================================================================
part            what it runs (results in benchmarks/results/, ``<suffix>`` "gpu" on a GPU)
==============  ===========================================================================
lane            ``pytest -m accelerator tests/test_accelerator.py``; tests not started in its
                time box are skipped and counted apart (``accelerator_lane_<suffix>.md``)
accelerator     ``benchmarks/accelerator.py --quick --time_budget=...``
env_speed       ``benchmarks/tensor_boxworld_speed.py``, JAX, 1 to 65,536 levels, level sources
loop_speed      ``benchmarks/compiled_loop_speed.py``: the compiled trainer at
                ``zambaldi_fig3_relational``'s settings, ``--level_source=device``, 256, 1,024
                and 4,096 environments
simplicial      ``benchmarks/sequence_simplicial_speed.py --dtype=bfloat16 --batch=8`` up to
                N = 16,384, within a time budget
predinet        ``benchmarks/reproduce_predinet.py --mode=table1 --centrals=relation_net
                --retrain_capped``: RN's Table 1 cells at 100,000 batches (the CPU's time cap
                stopped them at 10,000-20,000), resumed from the committed
                ``predinet_table1.json``; ``--predinet_cells`` cells at most a box (default
                1), each capped at its share (``--predinet_flags`` replaces the cells' flags;
                with ``--mode=curricula`` among them, RN's transfer curricula, the four stages
                sharing a cell's share); writes the whole
                ``predinet_table1.{md,json}``
long_run        one piece of ``train_boxworld --trainer=compiled --preset=...`` (default
                ``zambaldi_fig3_relational``), resumed from ``--resume_archive``; it takes what
                the other parts leave, stops cleanly with ``--max_seconds`` and is packed as
                ``<run name>.tar.gz``
==============  ===========================================================================

A part that overruns its box is stopped (SIGINT, then SIGKILL) and the session goes on; whatever a
part wrote is kept. After every part ``--out`` is brought up to date, so the command always ends
before ``--budget_seconds`` (at most 590) and always returns what it has, in at most 5 files:
``session.json`` (device, plan, per part: command, exit code, seconds, results files),
``summary.md`` (the plan's outcome and every results table), ``logs.txt`` (the tail of each
part's log), ``results.tar.gz`` (the results files as ``benchmarks/results/...``: unpack in the
repository root) and the long run's ``<run name>.tar.gz`` (its newest checkpoint, learning curve,
``result.json`` and ``gpu_session_run.json``: the run's fixed settings and its pieces).

``--smoke`` runs the same plan at tiny sizes and seconds on the CPU (the test of this script;
without ``--wheels`` it uses the running interpreter's packages). ``--plan_only`` prints the plan.

Pure standard library: it starts where Keras is not installed yet. Imported by pytest as a plugin
(``-p gpu_session``) it only adds the lane's deadline.
"""

import argparse
import configparser
import datetime
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ElementTree
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PARTS = ("lane", "accelerator", "env_speed", "loop_speed", "simplicial", "predinet", "long_run")
MAX_BUDGET = 590  # a device command runs at most 600 s
# (nominal box, smallest box worth running), seconds, on a GPU and in --smoke.
BOXES = {"lane": (150, 60), "accelerator": (120, 60), "env_speed": (180, 100),
         "loop_speed": (300, 100), "simplicial": (90, 60), "predinet": (420, 200),
         "long_run": (None, 150)}
SMOKE_BOXES = {"lane": (60, 20), "accelerator": (60, 20), "env_speed": (90, 30),
               "loop_speed": (120, 40), "simplicial": (60, 20), "predinet": (90, 40),
               "long_run": (None, 40)}
SETUP_RESERVE = {"wheels": 60, "none": 25, "smoke": 15}  # install + asking the device
FINAL_RESERVE = 10  # the last writes to --out
GRACE = 5  # between SIGINT and SIGKILL when a part overruns
# The long run: the process's start before its training loop, and its end after it (checkpoint,
# evaluation, export), on a GPU and in --smoke; --max_seconds is the rest of the box.
LONG_RUN_ALLOWANCE = {"gpu": (45, 75), "smoke": (25, 15)}
SMOKE_TRAIN_SECONDS = 3  # the smoke's training loop: a first update or two
RUN_META = "gpu_session_run.json"
ARCHIVE_LIMIT = 15 * 2**20  # bytes; what comes back from the device: at most 16 MiB a file
LOG_TAIL_LINES = 300
# The predinet part: Table 1 cells of reproduce_predinet that the CPU's 15-minute cap stopped
# early (RN's), at the paper's 100,000 batches, all five tasks; per cell, the seconds a cell
# spends outside its training time cap (generating 250,000 images, compiling, the final
# evaluation), on a GPU and in --smoke; --predinet_cells cells share the box.
PREDINET_FLAGS = {"gpu": ["--centrals=relation_net", "--retrain_capped"],
                  "smoke": ["--centrals=relation_net", "--tasks=same", "--num_batches=2",
                            "--eval_interval=1", "--num_train_examples=20",
                            "--num_eval_examples=10", "--retrain_capped"]}
PREDINET_OVERHEAD = {"gpu": 75, "smoke": 20}
FIRST_CELL_START = 5  # seconds: the latest start of the first cell (session_minutes)
DEFAULT_PRESET = "zambaldi_fig3_relational"
# The run's settings beyond its preset, fixed when it is created (stored in RUN_META).
LONG_RUN_FLAGS = {"gpu": ["--level_source=device"],
                  "smoke": ["--level_source=device", "--room_size=6", "--goal_length=1",
                            "--num_distractors=0", "--num_envs=2", "--unroll_length=4",
                            "--key_dim=8", "--head_width=8", "--log_interval=1"]}
# Per piece (not stored): a cheap evaluation at the end of each piece; the zero-shot tests of the
# finished run are for its last piece (`--test_presets`, docs/rl.md).
PIECE_FLAGS = {"gpu": ["--eval_episodes=256", "--eval_num_envs=256", "--test_presets=",
                       "--checkpoint_interval=100"],
               "smoke": ["--eval_episodes=0", "--test_presets=", "--checkpoint_interval=1"]}
_PROBE = """
import json, platform, sys
import jax, keras, numpy
import keras_relational
from keras_relational.agents.compiled import train_eval
from keras_relational.environments import TensorBoxWorld
devices = jax.devices()
print(json.dumps({"python": platform.python_version(), "jax": jax.__version__,
                  "keras": keras.__version__, "numpy": numpy.__version__,
                  "keras_relational": keras_relational.__file__,
                  "platform": devices[0].platform, "device_kind": devices[0].device_kind,
                  "devices": [str(d) for d in devices]}))
"""


# ---------------------------------------------------------------------------------------------
# The pytest plugin (`-p gpu_session`): tests not started before the lane's deadline are skipped.

def pytest_runtest_setup(item):
    deadline = os.environ.get("GPU_SESSION_DEADLINE")
    if deadline and time.time() > float(deadline):
        import pytest

        pytest.skip("gpu_session: the lane's time box is spent")


# ---------------------------------------------------------------------------------------------
# Arguments and the plan.

def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="where the session's files go ($OUT on the device)")
    parser.add_argument("--budget_seconds", type=float, default=540.0,
                        help=f"the whole command's wall clock, at most {MAX_BUDGET}")
    parser.add_argument("--wheels", default=None,
                        help="a folder of wheels to install (benchmarks/gpu_wheels.sh); without "
                        "it the running interpreter's packages are used")
    parser.add_argument("--site", default="/tmp/site", help="where --wheels are installed")
    parser.add_argument("--parts", default=",".join(PARTS),
                        help=f"comma-separated, run in the order {','.join(PARTS)}")
    parser.add_argument("--boxes", default="",
                        help="comma-separated PART=SECONDS overriding the nominal time boxes")
    parser.add_argument("--resume_archive", default=None,
                        help="a long run's .tar.gz from an earlier session: the piece continues it")
    parser.add_argument("--run_name", default=None,
                        help="the long run's folder and archive name (default: its preset)")
    parser.add_argument("--long_run_preset", default=None,
                        help=f"a new long run's preset (default {DEFAULT_PRESET})")
    parser.add_argument("--long_run_flags", default=None,
                        help="a new long run's train_boxworld flags beyond its preset, "
                        "space-separated (fixed for the run's later pieces)")
    parser.add_argument("--piece_flags", default=None,
                        help="train_boxworld flags for this piece only (default: "
                        f"{' '.join(PIECE_FLAGS['gpu'])})")
    parser.add_argument("--predinet_flags", default=None,
                        help="reproduce_predinet flags for the predinet part (default: "
                        f"{' '.join(PREDINET_FLAGS['gpu'])})")
    parser.add_argument("--predinet_cells", type=int, default=1,
                        help="the predinet part's cells a box, each capped at its share")
    parser.add_argument("--smoke", action="store_true",
                        help="the same plan at tiny sizes and seconds, on the CPU")
    parser.add_argument("--plan_only", action="store_true", help="print the plan and exit")
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    if not args.plan_only and not args.out:
        parser.error("--out: required (the folder the session's files go to)")
    if args.out and os.path.exists(args.out) and not os.path.isdir(args.out):
        parser.error(f"--out: expected a folder, received the file {args.out!r}")
    if not 0 < args.budget_seconds <= MAX_BUDGET:
        parser.error(f"--budget_seconds: expected seconds in (0, {MAX_BUDGET}] (a device command "
                     f"runs at most 600 s, and the files must still come back), received "
                     f"{args.budget_seconds:g}")
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = [p for p in parts if p not in PARTS]
    if unknown or not parts:
        parser.error(f"--parts: unknown part(s) {unknown or args.parts!r}; known: "
                     f"{','.join(PARTS)}")
    args.parts = [p for p in PARTS if p in parts]
    args.boxes = _parse_boxes(parser, args.boxes)
    if args.wheels is not None:
        if not os.path.isdir(args.wheels):
            parser.error(f"--wheels: no such folder {args.wheels!r} (fetch the wheels with `bash "
                         f"benchmarks/gpu_wheels.sh gpu_wheels 3.12` and carry the folder)")
        if not any(name.endswith(".whl") for name in os.listdir(args.wheels)):
            parser.error(f"--wheels: no .whl file in {args.wheels!r}")
    args.resumed = None
    if args.resume_archive is not None:
        if not os.path.isfile(args.resume_archive):
            parser.error(f"--resume_archive: not found: {args.resume_archive!r}")
        if "long_run" not in args.parts:
            parser.error("--resume_archive: the long_run part is not among --parts")
        try:
            args.resumed = read_archive(args.resume_archive)
        except (OSError, tarfile.TarError, ValueError) as error:
            parser.error(f"--resume_archive: {args.resume_archive!r} is not a run archive "
                         f"({error})")
        for flag, given in (("--long_run_preset", args.long_run_preset),
                            ("--long_run_flags", args.long_run_flags)):
            if given is not None and args.resumed["meta"] is not None:
                parser.error(f"{flag}: a resumed run keeps the settings it was created with "
                             f"({RUN_META} in the archive: {args.resumed['meta']}); received "
                             f"{given!r}")
        if args.run_name is not None and args.run_name != args.resumed["name"]:
            parser.error(f"--run_name: the archive holds the run {args.resumed['name']!r}, "
                         f"received {args.run_name!r}")
    if args.predinet_cells < 1:
        parser.error(f"--predinet_cells: expected at least 1, received {args.predinet_cells}")
    if args.run_name is not None and not re.fullmatch(r"[\w.-]+", args.run_name):
        parser.error(f"--run_name: expected letters, digits, '_', '.' or '-', received "
                     f"{args.run_name!r}")
    return args


def _parse_boxes(parser, text):
    boxes = {}
    for item in filter(None, (i.strip() for i in text.split(","))):
        name, _, value = item.partition("=")
        if name not in PARTS or name == "long_run":
            parser.error(f"--boxes: expected PART=SECONDS for a part among "
                         f"{','.join(PARTS[:-1])} (the long run takes what is left), received "
                         f"{item!r}")
        try:
            boxes[name] = float(value)
        except ValueError:
            parser.error(f"--boxes: expected PART=SECONDS, received {item!r}")
        if boxes[name] <= 0:
            parser.error(f"--boxes: expected seconds > 0, received {item!r}")
    return boxes


def make_plan(parts, budget, smoke=False, wheels=False, boxes=None):
    """``[(part, box seconds or None: skipped, why)]``: the time boxes, in priority order.

    The parts before the long run get their nominal box while the budget (less the setup and
    final reserves, and the long run's smallest box when it is asked for) allows, a smaller one
    down to their smallest, or none; the long run gets the rest.
    """
    table = SMOKE_BOXES if smoke else BOXES
    setup = SETUP_RESERVE["smoke" if smoke else "wheels" if wheels else "none"]
    left = budget - setup - FINAL_RESERVE
    reserve = table["long_run"][1] if "long_run" in parts else 0
    plan = []
    for part in parts:
        nominal, smallest = table[part]
        if part == "long_run":
            box = left if left >= smallest else None
        else:
            nominal = (boxes or {}).get(part, nominal)
            box = min(nominal, left - reserve)
            box = box if box >= min(smallest, nominal) else None
        plan.append((part, box, None if box else f"the budget leaves {max(left, 0):.0f} s"))
        left -= box or 0
    return plan


def format_plan(plan, budget, smoke, wheels):
    setup = SETUP_RESERVE["smoke" if smoke else "wheels" if wheels else "none"]
    lines = [f"Plan for {budget:g} s ({'smoke, CPU' if smoke else 'device'}): setup {setup} s "
             f"(install, the device), then"]
    lines += [f"  {part:<12} {f'{box:.0f} s' if box else 'skipped: ' + why}"
              for part, box, why in plan]
    lines.append(f"  {'(final)':<12} {FINAL_RESERVE} s")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Archives of the long run.

def read_archive(path):
    """``{"name": top folder, "meta": its RUN_META (or None)}`` of a run archive; checks that
    every member is a plain file or folder under one top folder."""
    with tarfile.open(path, "r:gz") as archive:
        members = archive.getmembers()
        tops = {m.name.split("/")[0] for m in members}
        if len(tops) != 1:
            raise ValueError(f"expected one top folder, found {sorted(tops)[:5]}")
        for member in members:
            parts = member.name.split("/")
            if member.name.startswith("/") or ".." in parts or not (member.isfile()
                                                                     or member.isdir()):
                raise ValueError(f"unexpected member {member.name!r}")
        (name,) = tops
        meta = None
        try:
            meta_file = archive.extractfile(f"{name}/{RUN_META}")
            meta = json.load(meta_file)
        except KeyError:
            pass
    return {"name": name, "meta": meta}


def extract_archive(path, destination):
    """Unpacks a run archive (checked by :func:`read_archive`) into ``destination``; returns the
    run's folder."""
    name = read_archive(path)["name"]
    with tarfile.open(path, "r:gz") as archive:
        if sys.version_info >= (3, 12):
            archive.extractall(destination, filter="data")
        else:  # members were checked: plain files and folders under one top folder
            archive.extractall(destination)  # noqa: S202
    return os.path.join(destination, name)


def newest_checkpoint_step(run_dir):
    """The step of the newest ``ckpt-<step>.npz`` of a compiled run (0 when none)."""
    folder = os.path.join(run_dir, "train", "checkpoints")
    steps = [int(m.group(1)) for m in (re.fullmatch(r"ckpt-(\d+)\.npz", n)
                                        for n in (os.listdir(folder)
                                                  if os.path.isdir(folder) else ())) if m]
    return max(steps, default=0)


def pack_run(run_dir, archive_path):
    """Packs a run's folder (only its newest checkpoint) as ``archive_path``; drops the Keras
    export if the archive would exceed ARCHIVE_LIMIT. Returns ``(bytes, what was left out)``."""
    newest = newest_checkpoint_step(run_dir)
    name = os.path.basename(run_dir)

    def keep(relative, drop_exports):
        base = os.path.basename(relative)
        if base.endswith((".tmp", ".corrupt")):
            return False
        if re.fullmatch(r"ckpt-\d+\.npz", base) and base != f"ckpt-{newest}.npz":
            return False
        return not (drop_exports and relative.split(os.sep)[0] in ("keras_model.keras",
                                                                    "keras_model"))

    for drop_exports in (False, True):
        with tarfile.open(archive_path, "w:gz") as archive:
            for directory, folders, files in os.walk(run_dir):
                folders.sort()
                for file in sorted(files):
                    full = os.path.join(directory, file)
                    relative = os.path.relpath(full, run_dir)
                    if keep(relative, drop_exports) and not os.path.islink(full):
                        archive.add(full, arcname=f"{name}/{relative}", recursive=False)
        size = os.path.getsize(archive_path)
        if size <= ARCHIVE_LIMIT:
            return size, (["older checkpoints"] + (["the Keras model"] if drop_exports else []))
    return size, ["older checkpoints", "the Keras model", "nothing more: over the limit"]


# ---------------------------------------------------------------------------------------------
# Running things.

def now_iso():
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def run_command(command, log_path, box, cwd, env):
    """Runs ``command`` with its output appended to ``log_path``, stopped after ``box`` seconds
    (SIGINT to its process group, SIGKILL GRACE seconds later). Returns ``(exit code, seconds,
    timed out)``; exit code None when it could not start."""
    start = time.monotonic()
    with open(log_path, "a") as log:
        log.write(f"$ {shlex.join(command)}\n")
        log.flush()
        try:
            process = subprocess.Popen(command, cwd=cwd, env=env, stdout=log,
                                       stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as error:
            log.write(f"could not start: {error}\n")
            return None, time.monotonic() - start, False
        timed_out = False
        try:
            process.wait(timeout=max(box - GRACE, 1))
        except subprocess.TimeoutExpired:
            timed_out = True
            _signal_group(process, signal.SIGINT)
            try:
                process.wait(timeout=GRACE)
            except subprocess.TimeoutExpired:
                _signal_group(process, signal.SIGKILL)
                process.wait()
        seconds = time.monotonic() - start
        log.write(f"[exit {process.returncode} after {seconds:.1f} s"
                  f"{', stopped at its time box' if timed_out else ''}]\n")
    return process.returncode, seconds, timed_out


def _signal_group(process, sig):
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        pass


def tail(path, lines=LOG_TAIL_LINES):
    if not os.path.exists(path):
        return ""
    with open(path, errors="replace") as f:
        return "".join(f.readlines()[-lines:])


class Session:
    """The state of one session: its folders, environment, plan and record (session.json)."""

    def __init__(self, args):
        self.args = args
        self.start = time.monotonic()
        self.deadline = self.start + args.budget_seconds
        self.mode = "smoke" if args.smoke else "gpu"
        self.out = os.path.abspath(args.out)
        os.makedirs(self.out, exist_ok=True)
        self.work = tempfile.mkdtemp(prefix="gpu_session_")
        self.results_dir = os.path.join(self.work, "benchmarks", "results")
        os.makedirs(self.results_dir)
        self.logs_dir = os.path.join(self.work, "logs")
        os.makedirs(self.logs_dir)
        self.python = sys.executable
        self.site = os.path.abspath(args.site) if args.wheels else None
        self.suffix = "smoke" if args.smoke else "gpu"
        self.plan = make_plan(args.parts, args.budget_seconds, args.smoke, bool(args.wheels),
                              args.boxes)
        self.record = {
            "command": self.command_line(), "started": now_iso(),
            "budget_seconds": args.budget_seconds, "smoke": args.smoke,
            "plan": [{"part": p, "box_seconds": b, "skipped": w} for p, b, w in self.plan],
            "setup": {}, "device": {}, "parts": {}}

    def command_line(self):
        return "python " + " ".join([os.path.relpath(os.path.abspath(__file__), REPO)]
                                    + [shlex.quote(a) for a in self.args.argv])

    def env(self, **extra):
        env = dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="3",
                   PYTHONUNBUFFERED="1")
        path = [p for p in (self.site, HERE, os.environ.get("PYTHONPATH")) if p]
        env["PYTHONPATH"] = os.pathsep.join(path)
        env.update(extra)
        return env

    def left(self):
        """Seconds left before the final reserve."""
        return self.deadline - FINAL_RESERVE - time.monotonic()

    def log_path(self, name):
        return os.path.join(self.logs_dir, f"{name}.log")

    # --- setup ---------------------------------------------------------------------------

    def setup(self):
        """Installs the wheels and the package (with --wheels), then asks the device. Returns
        whether the parts can run."""
        setup, start = self.record["setup"], time.monotonic()
        log = self.log_path("setup")
        if self.args.wheels:
            setup.update(self._install(log))
        setup["seconds"] = round(time.monotonic() - start, 1)
        device = self.record["device"]
        smi = shutil.which("nvidia-smi")
        if smi:
            done = subprocess.run([smi, "--query-gpu=name,memory.total,driver_version",
                                   "--format=csv,noheader"], capture_output=True, text=True,
                                  check=False, timeout=60)
            device["nvidia_smi"] = done.stdout.strip() or done.stderr.strip()
            run_command([smi], self.log_path("device"), 60, self.work, self.env())
        else:
            device["nvidia_smi"] = None
        probe_log = self.log_path("device")
        code, seconds, _ = run_command([self.python, "-P", "-c", _PROBE], probe_log,
                                       min(120, max(self.left(), 10)), self.work, self.env())
        device["probe_seconds"] = round(seconds, 1)
        lines = [line for line in tail(probe_log, 50).splitlines() if line.startswith("{")]
        if code != 0 or not lines:
            device["error"] = f"the probe exited {code}: see logs.txt (device)"
            return False
        device.update(json.loads(lines[-1]))
        if not self.args.smoke and device["platform"] != "gpu":
            self.suffix = device["platform"]  # never name CPU figures "_gpu"
        return True

    def _install(self, log):
        wheels = os.path.abspath(self.args.wheels)
        files = sorted(n for n in os.listdir(wheels) if n.endswith(".whl"))
        names = sorted({f.split("-")[0] for f in files})
        os.makedirs(self.site, exist_ok=True)
        pip = [self.python, "-m", "pip", "install", "--no-index", "--no-deps", "--upgrade",
               "--disable-pip-version-check", "--target", self.site]
        env = dict(os.environ, PYTHONPATH=self.site)  # setuptools from the wheels, if carried
        result = {"wheels": files}
        code, seconds, _ = run_command([*pip, "--find-links", wheels, *names], log,
                                       min(180, max(self.left(), 10)), REPO, env)
        result["wheels_method"] = "pip"
        if code != 0:
            result["wheels_method"] = "unzip (pip failed)"
            result["unzipped"] = unzip_wheels(wheels, self.site)
        code, seconds, _ = run_command([*pip, "--no-build-isolation", REPO], log,
                                       min(180, max(self.left(), 10)), REPO, env)
        result["package_method"] = "pip"
        if code != 0:
            result["package_method"] = "copied (pip failed)"
            copy_package(REPO, self.site)
        return result

    # --- parts ---------------------------------------------------------------------------

    def run_part(self, part, planned):
        entry = self.record["parts"][part] = {"box_seconds": None}
        if planned is None:
            entry["skipped"] = dict((p, w) for p, _, w in self.plan)[part]
            return
        smallest = (SMOKE_BOXES if self.args.smoke else BOXES)[part][1]
        box = self.left() if part == "long_run" else min(planned, self.left())
        if box < min(smallest, planned):
            entry["skipped"] = f"{max(box, 0):.0f} s left, less than its smallest box"
            return
        entry["box_seconds"] = round(box, 1)
        before = set(os.listdir(self.results_dir))
        start = time.monotonic()
        try:
            getattr(self, f"_part_{part}")(entry, box)
        except Exception as error:  # a fault of this script: the next parts still run
            entry["error"] = f"{type(error).__name__}: {error}"
            with open(self.log_path(part), "a") as log:
                log.write(f"gpu_session.py: {entry['error']}\n")
        entry["seconds"] = round(time.monotonic() - start, 1)
        entry["results"] = sorted(set(os.listdir(self.results_dir)) - before)

    def _script(self, name, *arguments):
        return [self.python, "-P", os.path.join(HERE, name), *arguments]

    def _run(self, entry, part, command, box, cwd=None, **env):
        code, seconds, timed_out = run_command(command, self.log_path(part), box,
                                               cwd or self.work, self.env(**env))
        entry.update(command=shlex.join(command), exit_code=code, timed_out=timed_out)
        return code

    def _part_lane(self, entry, box):
        smoke = self.args.smoke
        junit = os.path.join(self.work, "lane.xml")
        lane = ["-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider", "-m",
                "accelerator", "tests/test_accelerator.py"]
        command = [self.python, "-P", *lane, "-p", "gpu_session", f"--junitxml={junit}", "-rfE"]
        if smoke:
            command += ["-k", "EntityMaxPool and forward"]
        margin = 5 if smoke else 25  # for the test in flight and the report
        extra = {"GPU_SESSION_DEADLINE": str(time.time() + box - margin)}
        if smoke:
            extra["KERAS_RELATIONAL_ACCELERATOR_ON_CPU"] = "1"
        self._run(entry, "lane", command, box, cwd=REPO, **extra)
        if os.path.exists(junit):
            entry["summary"] = summarise_junit(junit)
            self.write_lane_results(entry, "KERAS_BACKEND=jax python -P " + " ".join(lane), box,
                                    margin)

    def write_lane_results(self, entry, pytest_command, box, margin):
        summary, device = entry["summary"], self.record["device"]
        counts = summary["counts"]
        name = os.path.join(self.results_dir, f"accelerator_lane_{self.suffix}")
        text = [f"Written by `{self.command_line()}`.", "",
                f"Device: {device.get('device_kind')} ({device.get('platform')}), JAX "
                f"{device.get('jax')}, Keras {device.get('keras')}, Python "
                f"{device.get('python')}. `{pytest_command}` within a time box of {box:.0f} s "
                f"(tests not started {margin} s before its end are skipped, counted apart): "
                f"{counts['passed']} passed, {counts['failed']} failed, {counts['errors']} "
                f"errors, {counts['skipped']} skipped ({counts['time_box']} for the time box) in "
                f"{summary['seconds']:.0f} s.", "", "| test | outcome | seconds | message |",
                "|---|---|---|---|"]
        text += [f"| `{t['name']}` | {t['outcome']} | {t['seconds']:.1f} | "
                 f"{t['message'].replace('|', '/')} |" for t in summary["tests"]]
        _write_text(name + ".md", "\n".join(text) + "\n")
        _write_text(name + ".json", json.dumps(
            {"command": self.command_line(), "pytest": pytest_command, "device": device,
             "box_seconds": box, **summary}, indent=1) + "\n")

    def _part_accelerator(self, entry, box):
        if self.args.smoke:
            arguments = ["--only=PrediNet", "--batch=2", "--repeats=1", "--warmup=1",
                         "--matmul_size=64", f"--time_budget={max(box - 30, 5):.0f}"]
        else:
            arguments = ["--quick", f"--time_budget={max(box - 45, 10):.0f}"]
        self._run(entry, "accelerator", self._script(
            "accelerator.py", *arguments, "--output_dir=benchmarks/results"), box)

    def _part_env_speed(self, entry, box):
        if self.args.smoke:
            arguments = ["--levels", "1", "8", "--seconds", "0.2", "--source-levels", "8"]
        else:
            arguments = ["--levels", "1", "256", "4096", "65536", "--seconds", "1",
                         "--source-levels", "256", "4096"]
        self._run(entry, "env_speed", self._script(
            "tensor_boxworld_speed.py", *arguments, "--backends", "jax", "--train-updates", "0",
            "--output", f"benchmarks/results/tensor_boxworld_speed_{self.suffix}.md"), box)

    def _part_loop_speed(self, entry, box):
        if self.args.smoke:
            num_envs, allowance = ["2", "4"], 25
            extra = ["--flags=--room_size=6 --goal_length=1 --num_distractors=0 "
                     "--unroll_length=4 --key_dim=8 --head_width=8"]
        else:
            num_envs, allowance, extra = ["256", "1024", "4096"], 30, []
        seconds = (box - 20) / len(num_envs)  # 20: the script asks JAX for the device first
        if self.args.smoke:
            seconds = allowance + 5  # a few seconds of training each
        allowance = min(allowance, seconds / 2)
        self._run(entry, "loop_speed", self._script(
            "compiled_loop_speed.py", f"--preset={DEFAULT_PRESET}",
            f"--num_envs={','.join(num_envs)}", "--level_sources=device",
            f"--seconds={seconds:.0f}", f"--allowance={allowance:.0f}", *extra,
            f"--output=benchmarks/results/compiled_loop_speed_{self.suffix}"), box)

    def _part_simplicial(self, entry, box):
        if self.args.smoke:
            arguments = ["--sizes=64,128", "--batch=1", "--width=16", "--heads=2", "--key_dim=8",
                         "--chunk=32", "--window=4,4", "--steps=1", "--rounds=1",
                         f"--time_budget={max(box - 30, 1):.0f}"]
        else:
            arguments = ["--batch=8", "--sizes=1024,2048,4096,8192,16384",
                         f"--time_budget={max(box - 40, 10):.0f}"]
        self._run(entry, "simplicial", self._script(
            "sequence_simplicial_speed.py", "--dtype=bfloat16", *arguments,
            f"--output=benchmarks/results/sequence_simplicial_speed_{self.suffix}"), box)

    def _part_predinet(self, entry, box):
        flags = (shlex.split(self.args.predinet_flags) if self.args.predinet_flags is not None
                 else PREDINET_FLAGS[self.mode])
        command, cap_minutes = predinet_command(
            flags, box, self.args.predinet_cells, PREDINET_OVERHEAD[self.mode],
            os.path.join(self.work, "predinet"), os.path.join(REPO, "benchmarks", "results"))
        path = os.pathsep.join(p for p in (self.site, REPO) if p)  # `benchmarks` is a package
        self._run(entry, "predinet", [self.python, "-P", *command], box, PYTHONPATH=path)
        entry["max_minutes_per_cell"] = round(cap_minutes, 2)

    def _part_long_run(self, entry, box):
        args, runs = self.args, os.path.join(self.work, "runs")
        os.makedirs(runs, exist_ok=True)
        if args.resume_archive:
            run_dir = extract_archive(args.resume_archive, runs)
            meta = args.resumed["meta"] or {}
        else:
            meta = {}
        preset = meta.get("preset") or args.long_run_preset or DEFAULT_PRESET
        if not meta:
            flags = LONG_RUN_FLAGS[self.mode] + shlex.split(args.long_run_flags or "")
            meta = {"preset": preset, "flags": flags, "created": now_iso(), "pieces": []}
        if not args.resume_archive:
            run_dir = os.path.join(runs, args.run_name or preset)
            os.makedirs(run_dir, exist_ok=True)
        meta.setdefault("pieces", [])
        startup, finish = LONG_RUN_ALLOWANCE[self.mode]
        max_seconds = box - GRACE - 5 - startup - finish  # 5: packing
        if args.smoke:
            max_seconds = min(max_seconds, SMOKE_TRAIN_SECONDS)
        if max_seconds < 1:
            entry["skipped"] = f"a box of {box:.0f} s leaves no training time"
            return
        piece_flags = (shlex.split(args.piece_flags) if args.piece_flags is not None
                       else PIECE_FLAGS[self.mode])
        command = [self.python, "-P", "-m", "keras_relational.experiments.train_boxworld",
                   "--trainer=compiled", f"--preset={preset}", *meta["flags"],
                   f"--root_dir={run_dir}", f"--max_seconds={max_seconds:.0f}", *piece_flags]
        start_step = newest_checkpoint_step(run_dir)
        started, tick = now_iso(), time.monotonic()
        _write_text(os.path.join(run_dir, RUN_META), json.dumps(meta, indent=1) + "\n")
        code = self._run(entry, "long_run", command, box - 5)
        end_step, curve = newest_checkpoint_step(run_dir), _last_curve_row(run_dir)
        meta["pieces"].append({
            "started": started, "device": self.record["device"].get("device_kind"),
            "smoke": args.smoke, "start_step": start_step, "end_step": end_step,
            "max_seconds": round(max_seconds), "seconds": round(time.monotonic() - tick, 1),
            "exit_code": code, "timed_out": entry["timed_out"], "last_curve_row": curve})
        meta["seconds_total"] = round(sum(p["seconds"] for p in meta["pieces"]), 1)
        _write_text(os.path.join(run_dir, RUN_META), json.dumps(meta, indent=1) + "\n")
        archive = os.path.join(self.out, f"{os.path.basename(run_dir)}.tar.gz")
        size, left_out = pack_run(run_dir, archive)
        entry.update(run=os.path.basename(run_dir), preset=preset, start_step=start_step,
                     end_step=end_step, last_curve_row=curve, archive=os.path.basename(archive),
                     archive_bytes=size, archive_left_out=left_out)

    # --- the files that come back ------------------------------------------------------

    def write_out(self):
        """Brings --out up to date: session.json, summary.md, logs.txt, results.tar.gz."""
        self.record["wall_seconds"] = round(time.monotonic() - self.start, 1)
        _write_text(os.path.join(self.out, "session.json"),
                    json.dumps(self.record, indent=1, default=str) + "\n")
        logs = []
        for name in ["setup", "device", *PARTS]:
            text = tail(self.log_path(name))
            if text:
                logs.append(f"===== {name} (last {LOG_TAIL_LINES} lines) =====\n{text}")
        _write_text(os.path.join(self.out, "logs.txt"), "\n".join(logs))
        results = sorted(os.listdir(self.results_dir))
        prefix = "smoke/" if self.args.smoke else ""
        with tarfile.open(os.path.join(self.out, "results.tar.gz"), "w:gz") as archive:
            for name in results:
                archive.add(os.path.join(self.results_dir, name),
                            arcname=f"{prefix}benchmarks/results/{name}")
        _write_text(os.path.join(self.out, "summary.md"), self.summary(results))

    def summary(self, results):
        device = self.record["device"]
        lines = [f"# GPU session {self.record['started']}", "",
                 f"`{self.record['command']}`", "",
                 f"Device: {device.get('nvidia_smi') or device.get('device_kind')} "
                 f"({device.get('platform')}); JAX {device.get('jax')}, Keras "
                 f"{device.get('keras')}, Python {device.get('python')}. Setup "
                 f"{self.record['setup'].get('seconds')} s; wall "
                 f"{self.record.get('wall_seconds')} s of {self.args.budget_seconds:g}.", "",
                 "| part | box (s) | seconds | exit | stopped at its box | results |",
                 "|---|---|---|---|---|---|"]
        for part, _, _ in self.plan:
            e = self.record["parts"].get(part)
            if e is None:
                lines.append(f"| {part} | | | not reached | | |")
            elif "skipped" in e:
                lines.append(f"| {part} | | | skipped: {e['skipped']} | | |")
            else:
                lines.append(f"| {part} | {e['box_seconds']} | {e.get('seconds')} | "
                             f"{e.get('exit_code')} | {e.get('timed_out')} | "
                             f"{', '.join(e.get('results', []))} |")
        for name in results:
            if name.endswith(".md"):
                with open(os.path.join(self.results_dir, name)) as f:
                    lines += ["", f"## {name}", "", f.read()]
        return "\n".join(lines) + "\n"


def predinet_command(flags, box, cells, overhead, root_dir, committed_results):
    """The predinet part's ``reproduce_predinet`` command (after ``python -P``) and the time cap
    of each run in minutes: ``cells`` cells share ``box`` seconds; a cell spends ``overhead``
    seconds outside its cap per task it trains on (one for Table 1, two for a curriculum, whose
    four stages share the cell's time). ``--mode=curricula`` among ``flags`` resumes from and
    writes ``predinet_curricula``, otherwise ``predinet_table1``."""
    mode = "curricula" if "--mode=curricula" in flags else "table1"
    stages, tasks = (4, 2) if mode == "curricula" else (1, 1)
    cell_overhead = tasks * overhead
    cap_minutes = max(box - GRACE - cells * cell_overhead, 1) / cells / stages / 60
    committed = os.path.join(committed_results, f"predinet_{mode}.json")
    resume = [f"--resume_from={committed}"] if os.path.exists(committed) else []
    # A next cell starts only while a whole capped one still fits the box; the first always
    # starts (a few seconds in: the overhead allows for it).
    session_minutes = max((box - GRACE - cell_overhead) / 60 - stages * cap_minutes,
                          FIRST_CELL_START / 60)
    command = ["-m", "benchmarks.reproduce_predinet", f"--mode={mode}",
               *[flag for flag in flags if not flag.startswith("--mode=")],
               f"--root_dir={root_dir}", *resume, f"--max_minutes_per_cell={cap_minutes:.2f}",
               f"--session_minutes={session_minutes:.2f}",
               f"--output=benchmarks/results/predinet_{mode}"]
    return command, cap_minutes


def _last_curve_row(run_dir):
    path = os.path.join(run_dir, "curves.jsonl")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        rows = [line for line in f if line.strip()]
    return json.loads(rows[-1]) if rows else None


def _write_text(path, text):
    temporary = path + ".tmp"
    with open(temporary, "w") as f:
        f.write(text)
    os.replace(temporary, path)


def summarise_junit(path):
    """Counts and per-test outcomes of a pytest JUnit XML file."""
    root = ElementTree.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    tests, counts = [], dict(passed=0, failed=0, errors=0, skipped=0, time_box=0)
    for case in (c for s in suites for c in s.iter("testcase")):
        outcome, message = "passed", ""
        for tag, name in (("failure", "failed"), ("error", "errors"), ("skipped", "skipped")):
            child = case.find(tag)
            if child is not None:
                outcome = name
                message = (child.get("message") or "").splitlines()[0][:200] if (
                    child.get("message")) else ""
                break
        counts[outcome] += 1
        if outcome == "skipped" and "time box is spent" in message:
            counts["time_box"] += 1
        tests.append({"name": case.get("name"), "outcome": outcome,
                      "seconds": float(case.get("time") or 0), "message": message})
    seconds = sum(float(s.get("time") or 0) for s in suites)
    return {"counts": counts, "seconds": seconds, "tests": tests}


def unzip_wheels(folder, site):
    """Without pip: unzips the wheels of ``folder`` that suit this interpreter into ``site``
    (pure ones, and binary ones for this CPython on Linux x86-64); returns their names."""
    version = f"cp{sys.version_info.major}{sys.version_info.minor}"
    chosen = {}
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".whl"):
            continue
        python, abi, platform_tag = name[:-4].split("-")[-3:]
        pure = platform_tag == "any"
        fits = pure or (version in python.split(".") and abi in (version, "abi3", "none")
                        and "x86_64" in platform_tag and "linux" in platform_tag)
        if fits:
            chosen[name.split("-")[0].lower()] = name  # the last (highest) version wins
    for name in chosen.values():
        with zipfile.ZipFile(os.path.join(folder, name)) as wheel:
            wheel.extractall(site)
    return sorted(chosen.values())


def copy_package(repo, site):
    """Without a build: copies the package's folders into ``site`` as setup.cfg maps them
    (``keras_relational.agents`` is ``agents/``, ...)."""
    config = configparser.ConfigParser()
    config.read(os.path.join(repo, "setup.cfg"))
    mapping = dict(line.split("=", 1) for line in
                   config["options"]["package_dir"].strip().splitlines() if "=" in line)
    mapping = {k.strip(): v.strip() for k, v in mapping.items()}
    packages = config["options"]["packages"].split()
    for package in packages:
        parent = max((k for k in mapping if package == k or package.startswith(k + ".")),
                     key=len)
        source = os.path.join(repo, mapping[parent], *package[len(parent):].split(".")[1:])
        target = os.path.join(site, *package.split("."))
        os.makedirs(target, exist_ok=True)
        for file in os.listdir(source):
            if file.endswith(".py"):
                shutil.copy2(os.path.join(source, file), target)


def main(argv=None):
    args = parse_args(argv)
    plan = make_plan(args.parts, args.budget_seconds, args.smoke, bool(args.wheels), args.boxes)
    print(format_plan(plan, args.budget_seconds, args.smoke, bool(args.wheels)), flush=True)
    if args.plan_only:
        return 0
    session = Session(args)
    try:
        ready = session.setup()
        session.write_out()
        for part, box in ((p, b) for p, b, _ in session.plan):
            if not ready:
                session.record["parts"][part] = {"skipped": "setup failed (logs.txt)"}
                continue
            print(f"[{time.monotonic() - session.start:5.0f} s] {part} ...", flush=True)
            session.run_part(part, box)
            entry = session.record["parts"][part]
            print(f"[{time.monotonic() - session.start:5.0f} s] {part}: "
                  + (f"skipped ({entry['skipped']})" if "skipped" in entry else
                     f"exit {entry.get('exit_code')} in {entry.get('seconds')} s, results "
                     f"{entry.get('results')}"), flush=True)
            session.write_out()
    finally:
        session.record["finished"] = now_iso()
        session.write_out()
        shutil.rmtree(session.work, ignore_errors=True)
    print(f"wrote {sorted(os.listdir(session.out))} to {session.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
