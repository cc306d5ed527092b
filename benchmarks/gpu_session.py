r"""One command for a GPU session: install, measure, profile, train a piece of a queued run.

    python3 benchmarks/gpu_session.py --out=$OUT --wheels=gpu_wheels --plan=measure
    python3 benchmarks/gpu_session.py --out=$OUT --wheels=gpu_wheels --plan=train
    python3 benchmarks/gpu_session.py --plan=measure --plan_only     # what fits, from the costs

For a machine lent for minutes (docs/contributing.md, "A GPU session in one command"): it installs
the carried wheels and the package into ``--site`` (``pip install --no-index --no-deps --target``;
without pip, the wheels are unzipped and the package folders copied), asks the device what it is,
then runs each part in priority order as a subprocess (``python -P``, ``KERAS_BACKEND=jax``,
``PYTHONPATH=<site>:benchmarks``) under its own time box, from a plan fixed at the start that fits
``--budget_seconds`` (default 540, at most 590):

==================  =======================================================================
part                what it runs (results in benchmarks/results/, ``<suffix>`` "gpu" on a GPU)
==================  =======================================================================
lane_layers         ``pytest -m accelerator tests/test_accelerator.py``, one group of tests a
lane_16bit          part (float32 layers on GPU vs CPU; the layers' 16-bit paths; one jit fit
lane_models         step of each paper's model); tests not started in its box are skipped and
                    counted apart (``accelerator_lane_<group>_<suffix>.md``); ``lane`` in
                    ``--parts`` names all three
accelerator         ``benchmarks/accelerator.py --time_budget=...``: XLA rows only on a GPU, at
                    batches that fill it, each row within its share of the budget
env_speed           ``benchmarks/tensor_boxworld_speed.py``, JAX, 1 to 65,536 levels
loop_speed          ``benchmarks/compiled_loop_speed.py``: the compiled trainer at
                    ``zambaldi_fig3_relational``'s settings, ``--level_source=device``, 256
                    and 1,024 environments, one process and box each
simplicial          ``benchmarks/sequence_simplicial_speed.py --dtype=bfloat16 --batch=8`` up to
                    N = 16,384, within a time budget
simplicial_kernel   ``benchmarks/simplicial_kernel_speed.py`` up to N = 16,384, within a budget
profile             ``benchmarks/profile_update.py``: a ``jax.profiler`` trace of a few compiled
                    updates of the trainer, summarised as text (top kernels, the time split,
                    host gaps, compile seconds, peak memory)
predinet            ``benchmarks/reproduce_predinet.py --mode=table1 --centrals=relation_net
                    --retrain_capped``: RN's Table 1 cells at 100,000 batches, resumed from the
                    committed ``predinet_table1.json`` (``--predinet_cells``, ``--predinet_flags``)
long_run            one piece of ``train_boxworld --trainer=compiled --preset=...`` resumed from
                    ``--resume_archive``; takes what the other parts leave
queue               one piece of the first unfinished job of ``--queue``
                    (``benchmarks/gpu_queue.json``), continued from its archive in
                    ``--runs_dir`` (``benchmarks/results/runs/<job>.tar.gz``); takes what the
                    other parts leave
==================  =======================================================================

The named plans (``--plan``): ``measure`` (the whole lane, the accelerator, env and loop sweeps,
both simplicial sweeps, a profile) and ``train`` (a profile, then a queue piece with the rest).

Sizing: each part's box comes from the cost table ``--costs`` (``benchmarks/gpu_costs.json``:
seconds measured on the H200 per part, from earlier sessions' ``session.json``); a part whose
cost is unknown gets its nominal box (the plan says which). Parts that size their own work (a
time budget) shrink towards their smallest useful box when the budget is short; the others (the
lane, env_speed) keep theirs; a part never starts unless its smallest useful box fits, and the
lowest-priority parts are dropped first. ``--update_costs=SESSION_JSON`` folds a session's
measured seconds into the table and exits.

A part that overruns its box is stopped (SIGINT, then SIGKILL) and the session goes on; whatever a
part wrote is kept. After every part ``--out`` is brought up to date, so the command always ends
before ``--budget_seconds`` and always returns what it has, in at most 5 files: ``session.json``
(device, plan, per part: command, exit code, seconds, CPU seconds of its processes, results
files), ``summary.md`` (the plan's outcome and every results table), ``logs.txt`` (the tail of
each part's log), ``results.tar.gz`` (the results files as ``benchmarks/results/...``: unpack in
the repository root) and the run's ``<run name>.tar.gz`` (its newest checkpoint, learning curve,
``result.json`` and ``gpu_session_run.json``: the run's fixed settings and its pieces).

``--smoke`` runs the same plan at tiny sizes and seconds on the CPU (the test of this script;
without ``--wheels`` it uses the running interpreter's packages), with TensorFlow (and the other
packages the device lacks) hidden from the parts, XLA's CPU optimisations lowered (-O0; -O1 where
a part trains) and JAX's compiled programs kept in a cache that its parts share (the caller's
``JAX_COMPILATION_CACHE_DIR``, else one of its own): its Box-World parts train one tiny update,
compiled once, for a second. ``--plan_only`` prints the plan.

Pure standard library: it starts where Keras is not installed yet. Imported by pytest as a plugin
(``-p gpu_session``) it only adds the lane's deadline.
"""

import argparse
import configparser
import datetime
import json
import math
import os
import re
import resource
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
PARTS = ("lane_layers", "lane_16bit", "lane_models", "accelerator", "env_speed", "loop_speed",
         "simplicial", "simplicial_kernel", "profile", "predinet", "long_run", "queue")
ALIASES = {"lane": ("lane_layers", "lane_16bit", "lane_models")}
TAKES_THE_REST = ("long_run", "queue")  # at most one a session: the last part, with what is left
# The named plans, in priority order (the order they run in).
# env_speed last: the first H200 window measured it already (and it cannot shrink); it starts
# when the parts before it leave its box.
PLANS = {"measure": ("lane_layers", "lane_16bit", "lane_models", "accelerator", "profile",
                     "loop_speed", "simplicial", "simplicial_kernel", "env_speed"),
         "train": ("profile", "queue")}
# The lane's groups: the test function each part runs (tests/test_accelerator.py), and the
# seconds before the end of its box after which no test starts (the longest test seen, 21.8 s of
# SimplicialAttention[virtual]'s 16-bit case, must end in the box; the report follows).
# The float32 group also runs the fused 2-simplicial kernel compiled by Triton against its dense
# reference: SequenceSimplicialAttention uses it by default under JAX on a GPU.
LANE_FILES = {"lane_layers": ("tests/test_accelerator.py",
                              "tests/layers/test_pallas_simplicial.py"),
              "lane_16bit": ("tests/test_accelerator.py",),
              "lane_models": ("tests/test_accelerator.py",)}
LANE_MARGIN = {"lane_layers": 10, "lane_16bit": 25, "lane_models": 20}
LANE_TESTS = {"lane_layers": "test_layer_forward_and_backward_on_gpu_match_cpu or "
                             "test_compiled_kernel_on_a_gpu_matches_the_dense_reference",
              "lane_16bit": "test_layer_16bit_paths_on_gpu_are_finite or "
                            "test_mhdpa_flash_path_on_gpu_is_as_accurate_as_the_einsum_path",
              "lane_models": "test_paper_model_jit_fit_step_on_gpu"}
MAX_BUDGET = 590  # a device command runs at most 600 s
# (nominal box, smallest box worth running), seconds, on a GPU and in --smoke. The nominal box
# stands for a part whose cost the cost table does not know.
BOXES = {"lane_layers": (55, 55), "lane_16bit": (100, 100), "lane_models": (85, 85),
         "accelerator": (50, 30), "env_speed": (95, 95), "loop_speed": (180, 150),
         "simplicial": (40, 20), "simplicial_kernel": (40, 20), "profile": (45, 35),
         "predinet": (420, 200), "long_run": (None, 150), "queue": (None, 150)}
# The smoke's boxes are upper bounds for a 2-core CPU loaded about three times over: each part
# is a fresh process that imports Keras and JAX (5 s of CPU) and compiles tiny programs; most of
# a part's seconds are XLA compiling (the Box-World update and level generator, Pallas'
# interpreted kernel: 15-20 s of CPU each). On an idle machine a part ends within half its box
# (the parts that size their own work take what earlier parts leave, up to the first number).
SMOKE_BOXES = {"lane_layers": (45, 45), "lane_16bit": (45, 45), "lane_models": (50, 50),
               "accelerator": (75, 30), "env_speed": (130, 130), "loop_speed": (80, 45),
               "simplicial": (70, 25), "simplicial_kernel": (80, 25), "profile": (150, 45),
               "predinet": (90, 40), "long_run": (None, 60), "queue": (None, 60)}
# Parts whose work is fixed (no time budget of their own): their smallest box is their need.
FIXED_WORK = ("lane_layers", "lane_16bit", "lane_models", "env_speed")
# What each part runs, as a version: a cost measured for another version does not apply. Bump a
# part's number when its command's work changes.
WORK = {"setup": 1, "lane_layers": 1, "lane_16bit": 1, "lane_models": 1, "accelerator": 2,
        "env_speed": 1, "loop_speed": 3, "simplicial": 1, "simplicial_kernel": 1, "profile": 1,
        "predinet": 1, "long_run": 1, "queue": 1}
COSTS = os.path.join(HERE, "gpu_costs.json")
QUEUE = os.path.join(HERE, "gpu_queue.json")
RUNS = os.path.join(HERE, "results", "runs")
# A measured cost becomes a box of cost * COST_MARGIN + COST_SLACK seconds (run to run spread,
# the process's start).
COST_MARGIN, COST_SLACK = 1.15, 5
SETUP_RESERVE = {"wheels": 60, "none": 25, "smoke": 15}  # install + asking the device (nominal)
FINAL_RESERVE = 10  # the last writes to --out
GRACE = 5  # between SIGINT and SIGKILL when a part overruns
# A Box-World piece: the process's start before its training loop, and its end after it
# (checkpoint, evaluation, export), on a GPU and in --smoke, while the cost table does not know
# it (``overhead_seconds`` of ``long_run``); --max_seconds is the rest of the box.
LONG_RUN_ALLOWANCE = {"gpu": (45, 75), "smoke": (25, 15)}
SMOKE_TRAIN_SECONDS = 1  # the smoke's training loop (whole seconds): a first few updates
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
# seconds: the latest start of the first cell (session_minutes), after the script's start and
# its --resume_from writes (on a 2-core CPU loaded 20 times over, more than 5 s: no cell ran)
FIRST_CELL_START = 30
DEFAULT_PRESET = "zambaldi_fig3_relational"
# --smoke's Box-World (train_boxworld flags over DEFAULT_PRESET): one tiny update, the same in
# the loop sweep, the long run's and the queue's pieces and profile_update.py's --smoke (its
# SMOKE), so that the smoke's compilation cache compiles it once.
SMOKE_BOXWORLD_FLAGS = ("--room_size=6", "--goal_length=1", "--num_distractors=0",
                        "--unroll_length=4", "--key_dim=8", "--head_width=8")
SMOKE_NUM_ENVS = 2
# The run's settings beyond its preset, fixed when it is created (stored in RUN_META).
LONG_RUN_FLAGS = {"gpu": ["--level_source=device"],
                  "smoke": ["--level_source=device", *SMOKE_BOXWORLD_FLAGS,
                            f"--num_envs={SMOKE_NUM_ENVS}", "--log_interval=1"]}
# Per piece (not stored): a cheap evaluation at the end of each piece; the zero-shot tests of the
# finished run are for its last piece (`--test_presets`, docs/rl.md).
PIECE_FLAGS = {"gpu": ["--eval_episodes=256", "--eval_num_envs=256", "--test_presets=",
                       "--checkpoint_interval=100"],
               "smoke": ["--eval_episodes=0", "--test_presets=", "--checkpoint_interval=1"]}
# The queue's jobs: a Box-World run, or a reproduction script resumed from its results file
# (the module, and its flag capping one run's minutes).
JOB_KINDS = ("boxworld", "reproduce_tpr_babi", "reproduce_predinet")
REPRODUCE = {"reproduce_tpr_babi": ("benchmarks.reproduce_tpr_babi", "--max_minutes"),
             "reproduce_predinet": ("benchmarks.reproduce_predinet", "--max_minutes_per_cell")}
REPRODUCE_OVERHEAD = {"gpu": 60, "smoke": 20}  # seconds of a piece outside its runs' caps
# The loop sweep (loop_speed): one process and box per number of environments, the box split in
# these proportions (the larger batches take longer a first update). Each process needs
# LOOP_ALLOWANCE seconds outside its training loop on a GPU: the 2026-11-30 H200 window's
# profile part took 11.1 s to build (network, levels) and 12.3 s to compile the update at 256
# environments, after the process's start (JAX's device probe: 5-6 s); its sweep of 256-16,384
# environments in boxes of 24-66 s measured no row (none printed a progress line). At 256
# environments an update peaked at 17.7 GiB of device memory; if memory grows with the batch,
# 4,096 and more need over 16 times that, more than one H200's 141 GiB in one learner batch.
LOOP_ENVS = {"gpu": (256, 1024), "smoke": (SMOKE_NUM_ENVS,)}
LOOP_SHARES = {256: 1, 1024: 1.25, SMOKE_NUM_ENVS: 1}
LOOP_ALLOWANCE = 45  # seconds, on a GPU: the process's start, build and compile, its end
LOOP_SHORTEST = {"gpu": 8, "smoke": SMOKE_TRAIN_SECONDS}  # the shortest training loop worth it
# --smoke runs every part as the device would, where its CPU can: without TensorFlow (the
# device has none; here importing it costs a process 10 s: Keras' set_random_seed, a trainer's
# SavedModel export), nor matplotlib, pandas and requests (gpu_wheels.sh carries none of them;
# `import keras` imports each where it is installed: 1.2 s of CPU a process). The parts' Python
# processes load this from the front of PYTHONPATH; it hides those packages from every finder,
# so that `importlib.util.find_spec` answers None and an import fails, as where they are not
# installed.
SMOKE_SITECUSTOMIZE = """\
# Written by benchmarks/gpu_session.py --smoke: these are not installed, as on the device.
import sys

HIDDEN = ("tensorflow", "tf_keras", "tf_agents", "tensorflow_probability", "matplotlib",
          "pandas", "requests")


class Hiding:
    def __init__(self, finder):
        self.finder = finder

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in HIDDEN:
            return None
        find = getattr(self.finder, "find_spec", None)
        return find(name, path, target) if find else None

    def __getattr__(self, attribute):
        return getattr(self.finder, attribute)


sys.meta_path[:] = [Hiding(finder) for finder in sys.meta_path]
"""
# And --smoke keeps JAX's compiled programs in a persistent cache shared by its parts (the
# caller's JAX_COMPILATION_CACHE_DIR if set, else one in the session's temporary folder): the
# parts that train Box-World share their settings (SMOKE_BOXWORLD_FLAGS), so the profile, the
# loop sweep and the pieces compile the update once. On the device every part compiles its own
# (compile seconds are among its figures).
SMOKE_CACHE_ENV = {"JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"}
# And --smoke compiles fast and runs slow (its programs are tiny; most of a part's seconds are
# XLA compiling), after the caller's XLA_FLAGS: XLA's CPU backend at -O0 without LLVM's
# expensive passes (tests/mixed_precision_cases.py's flags), and without its fusion emitters
# (SMOKE_NEWER_XLA_FLAGS: the older emitters compile the same programs in a third less time);
# the parts that train (TRAINING_PARTS) at -O1: at -O0 the compiled Box-World update's first
# gradient is NaN on the CPU (jax 0.10.2; finite at -O1 and XLA's default -O2). On the device
# every part compiles with XLA's defaults.
SMOKE_XLA_FLAGS = {False: ("--xla_backend_optimization_level=0",
                           "--xla_llvm_disable_expensive_passes=true"),
                   True: ("--xla_backend_optimization_level=1",
                          "--xla_llvm_disable_expensive_passes=true")}
TRAINING_PARTS = ("profile", "loop_speed", "predinet", "long_run", "queue")
# Flags that an older (or later) XLA may not know: an unknown flag aborts the process, so where
# the setup's probe aborts with UNKNOWN_XLA_FLAG the session goes on without them.
SMOKE_NEWER_XLA_FLAGS = ("--xla_cpu_use_fusion_emitters=false",)
UNKNOWN_XLA_FLAG = "Unknown flag in XLA_FLAGS"
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
    parser.add_argument("--plan", default=None, choices=sorted(PLANS),
                        help="a named plan: " + "; ".join(f"{name}: {','.join(parts)}"
                                                          for name, parts in PLANS.items()))
    parser.add_argument("--parts", default=None,
                        help=f"comma-separated, run in the order {','.join(PARTS)} ('lane': "
                        f"{','.join(ALIASES['lane'])}); default: the measure plan's")
    parser.add_argument("--boxes", default="",
                        help="comma-separated PART=SECONDS overriding the boxes of the plan")
    parser.add_argument("--costs", default=COSTS, help="the cost table (JSON)")
    parser.add_argument("--update_costs", default=None, metavar="SESSION_JSON",
                        help="fold a GPU session's session.json into --costs, then exit")
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
    parser.add_argument("--queue", default=QUEUE, help="the queue of long jobs (JSON)")
    parser.add_argument("--runs_dir", default=None,
                        help="where the queue's archives are (<job name>.tar.gz; default "
                        "benchmarks/results/runs; in --smoke none: every job starts afresh)")
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
    if args.update_costs is not None:
        return args
    if not args.plan_only and not args.out:
        parser.error("--out: required (the folder the session's files go to)")
    if args.out and os.path.exists(args.out) and not os.path.isdir(args.out):
        parser.error(f"--out: expected a folder, received the file {args.out!r}")
    if not 0 < args.budget_seconds <= MAX_BUDGET:
        parser.error(f"--budget_seconds: expected seconds in (0, {MAX_BUDGET}] (a device command "
                     f"runs at most 600 s, and the files must still come back), received "
                     f"{args.budget_seconds:g}")
    if args.plan is not None and args.parts is not None:
        parser.error(f"--parts: the plan {args.plan!r} names its parts "
                     f"({','.join(PLANS[args.plan])}); received --parts={args.parts!r} too")
    if args.plan is not None:
        args.parts = list(PLANS[args.plan])
    else:
        args.parts = _parse_parts(parser, args.parts or ",".join(PLANS["measure"]))
    taking_rest = [p for p in args.parts if p in TAKES_THE_REST]
    if len(taking_rest) > 1:
        parser.error(f"--parts: {' and '.join(taking_rest)} both take what the other parts "
                     f"leave; expected one of them")
    args.boxes = _parse_boxes(parser, args.boxes)
    try:
        args.cost_table = load_costs(args.costs)
    except (OSError, ValueError) as error:
        parser.error(f"--costs: {error}")
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
            parser.error("--resume_archive: the long_run part is not among --parts (the queue "
                         "finds its archives in --runs_dir)")
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
    if args.runs_dir is None and not args.smoke:
        args.runs_dir = RUNS
    args.job = None
    if "queue" in args.parts:
        try:
            jobs = load_queue(args.queue)
            args.job = next_job(jobs, args.runs_dir)
        except (OSError, ValueError, tarfile.TarError) as error:
            parser.error(f"--queue: {error}")
    return args


def _parse_parts(parser, text):
    parts = []
    for part in (p.strip() for p in text.split(",")):
        parts += ALIASES.get(part, [part] if part else [])
    unknown = [p for p in parts if p not in PARTS]
    if unknown or not parts:
        parser.error(f"--parts: unknown part(s) {unknown or text!r}; known: {','.join(PARTS)} "
                     f"and {','.join(ALIASES)}")
    return [p for p in PARTS if p in parts]


def _parse_boxes(parser, text):
    boxes = {}
    for item in filter(None, (i.strip() for i in text.split(","))):
        name, _, value = item.partition("=")
        if name not in PARTS or name in TAKES_THE_REST:
            parser.error(f"--boxes: expected PART=SECONDS for a part among "
                         f"{','.join(p for p in PARTS if p not in TAKES_THE_REST)} "
                         f"({' and '.join(TAKES_THE_REST)} take what is left), received "
                         f"{item!r}")
        try:
            boxes[name] = float(value)
        except ValueError:
            parser.error(f"--boxes: expected PART=SECONDS, received {item!r}")
        if boxes[name] <= 0:
            parser.error(f"--boxes: expected seconds > 0, received {item!r}")
    return boxes


# ---------------------------------------------------------------------------------------------
# The cost table.

def load_costs(path):
    """The cost table at ``path``: ``{"device": ..., "parts": {part: {"work", "seconds",
    "compile_seconds", "source", ...}}}``; a missing file is an empty table."""
    if not os.path.exists(path):
        return {"device": None, "parts": {}}
    with open(path) as f:
        try:
            table = json.load(f)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path!r} is not JSON ({error})") from None
    if not isinstance(table, dict) or not isinstance(table.get("parts"), dict):
        raise ValueError(f"{path!r}: expected an object with 'parts' (part -> cost)")
    unknown = sorted(set(table["parts"]) - set(WORK))
    if unknown:
        raise ValueError(f"{path!r}: unknown part(s) {unknown}; known: {sorted(WORK)}")
    return table


def known_cost(costs, part):
    """The cost table's entry of ``part`` if it was measured on the part's current work, else
    None."""
    entry = (costs or {}).get("parts", {}).get(part)
    return entry if entry and entry.get("work") == WORK[part] else None


def update_costs(costs, session, name="session.json"):
    """The cost table ``costs`` with the seconds a GPU session measured (its ``session.json``,
    parsed; ``name``, the file's name, goes into each figure's ``source``): per part that ran
    its current work, ``seconds`` when it finished inside its box, else ``at_least`` (its box:
    it needs more; also a loop sweep with a row that measured nothing); the Box-World pieces'
    ``overhead_seconds`` (their process's seconds outside ``--max_seconds``); the setup's
    seconds (install and device probe).
    Parts that were skipped, failed or ran older work keep their entry."""
    if session.get("smoke"):
        raise ValueError("a --smoke session measured CPU seconds at tiny sizes, not the device's")
    device = session.get("device", {}).get("device_kind")
    if costs.get("device") not in (None, device):
        raise ValueError(f"the session ran on {device!r}, the cost table is of "
                         f"{costs['device']!r}")
    costs = json.loads(json.dumps(costs))  # a copy
    costs["device"] = device
    parts = costs.setdefault("parts", {})
    source = f"{name} of {session.get('started')} ({device})"
    setup = session.get("setup", {})
    if setup.get("seconds") is not None and session["device"].get("probe_seconds") is not None:
        parts["setup"] = {"work": WORK["setup"], "source": source, "compile_seconds": None,
                          "seconds": round(setup["seconds"] + session["device"]["probe_seconds"],
                                           1)}
    for part, entry in session.get("parts", {}).items():
        if part not in WORK or entry.get("work") != WORK[part] or "skipped" in entry:
            continue
        if entry.get("error") or entry.get("seconds") is None:
            continue
        if part in TAKES_THE_REST:
            overhead = entry.get("overhead_seconds")
            if overhead is not None and entry.get("kind", "boxworld") == "boxworld":
                parts["long_run"] = {"work": WORK["long_run"], "source": f"{part} part of {source}",
                                     "seconds": None, "compile_seconds": None,
                                     "overhead_seconds": overhead}
            continue
        lane = entry.get("summary", {}).get("counts", {})
        # a loop sweep's row that measured nothing but exited 0 ran out of its share of the box
        unmeasured = entry.get("exit_code") == 0 and any(
            row.get("measured") is False for row in entry.get("rows") or ())
        finished = (entry.get("exit_code") == 0 and not entry.get("timed_out")
                    and not lane.get("time_box") and not unmeasured)
        stopped = entry.get("timed_out") or lane.get("time_box") or unmeasured
        if finished:
            parts[part] = {"work": WORK[part], "source": source, "seconds": entry["seconds"],
                           "compile_seconds": entry.get("compile_seconds")}
        elif stopped:
            parts[part] = {"work": WORK[part], "source": source, "seconds": None,
                           "at_least": entry["box_seconds"],
                           "compile_seconds": entry.get("compile_seconds")}
    return costs


def part_box(part, smoke=False, costs=None, boxes=None):
    """``(box wanted, smallest useful box, where the box comes from)`` of ``part``."""
    nominal, smallest = (SMOKE_BOXES if smoke else BOXES)[part]
    entry = None if smoke else known_cost(costs, part)
    if boxes and part in boxes:
        need, note = boxes[part], "--boxes"
    elif entry and entry.get("seconds") is not None:
        need = math.ceil(entry["seconds"] * COST_MARGIN + COST_SLACK)
        note = f"cost table: {entry['seconds']:g} s, {entry.get('source')}"
    elif entry and entry.get("at_least") is not None:
        need = max(nominal, math.ceil(entry["at_least"] * 1.25))
        note = f"cost table: more than {entry['at_least']:g} s, {entry.get('source')}"
    else:
        need = nominal
        note = "smoke box" if smoke else "cost unknown: nominal box"
    if need is None:
        return None, smallest, note
    if part in FIXED_WORK:
        smallest = need
    return need, min(smallest, need), note


def setup_reserve(smoke, wheels, costs):
    entry = None if smoke else known_cost(costs, "setup")
    if entry and entry.get("seconds") is not None:  # measured with wheels: without, less
        return math.ceil(entry["seconds"] * COST_MARGIN + COST_SLACK), "cost table"
    return SETUP_RESERVE["smoke" if smoke else "wheels" if wheels else "none"], "nominal"


def make_plan(parts, budget, smoke=False, wheels=False, boxes=None, costs=None):
    """``[(part, box seconds or None: skipped, note, smallest box)]`` in priority order.

    Every part gets its box (:func:`part_box`) when the budget (less the setup and final
    reserves, and the smallest box of a part that takes the rest) allows; else the parts that
    size their own work shrink, in proportion, towards their smallest box; where even the
    smallest boxes do not fit, the lowest-priority parts are dropped. The part that takes the
    rest (long_run, queue) gets what is left.
    """
    setup, _ = setup_reserve(smoke, wheels, costs)
    left = budget - setup - FINAL_RESERVE
    rest = next((p for p in parts if p in TAKES_THE_REST), None)
    wanted = {p: part_box(p, smoke, costs, boxes) for p in parts}
    reserve = wanted[rest][1] if rest else 0
    if left - reserve < 0:
        reserve = 0  # not even the rest's smallest box: the other parts may use it all
    chosen = [p for p in parts if p != rest]
    while chosen and sum(wanted[p][1] for p in chosen) > left - reserve:
        chosen.pop()
    spare = left - reserve - sum(wanted[p][1] for p in chosen)
    extra = sum(wanted[p][0] - wanted[p][1] for p in chosen)
    scale = 1.0 if extra <= spare else spare / extra
    plan, used = [], 0
    for part in parts:
        need, smallest, note = wanted[part]
        if part == rest:
            continue
        if part in chosen:
            box = math.floor(smallest + (need - smallest) * scale)
            if scale < 1 and box < need:
                note += f"; shrunk from {need:g} s to fit"
            used += box
            plan.append((part, box, note, smallest))
        else:
            plan.append((part, None, f"the budget leaves {max(left - used, 0):.0f} s, less than "
                         f"its smallest box {smallest:g} s ({note}); it starts if the parts "
                         f"before it leave that", smallest))
    if rest:
        box = left - used
        smallest = wanted[rest][1]
        plan.append((rest, box if box >= smallest else None,
                     "the rest" if box >= smallest else
                     f"the budget leaves {max(box, 0):.0f} s, less than its smallest box "
                     f"{smallest:g} s", smallest))
    return plan


def format_plan(plan, budget, smoke, wheels, costs=None, job=None):
    setup, source = setup_reserve(smoke, wheels, costs)
    lines = [f"Plan for {budget:g} s ({'smoke, CPU' if smoke else 'device'}): setup {setup} s "
             f"(install, the device; {source}), then"]
    for part, box, note, _ in plan:
        label = f"{box:.0f} s" if box else "if left:" if "it starts if" in note else "skipped:"
        lines.append(f"  {part:<18} {label:>8}  {note}")
        if part == "queue" and job is not None:
            lines.append(f"  {'':<18} {'':>8}  job: {describe_job(job)}")
    lines.append(f"  {'(final)':<18} {f'{FINAL_RESERVE} s':>8}")
    total = setup + sum(box or 0 for _, box, _, _ in plan) + FINAL_RESERVE
    lines.append(f"  {'(total)':<18} {f'{total:.0f} s':>8}  of {budget:g} s")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# The queue of long jobs.

def load_queue(path):
    """The jobs of the queue file at ``path``, checked: ``[{"name", "kind", ...}]``."""
    with open(path) as f:
        try:
            queue = json.load(f)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path!r} is not JSON ({error})") from None
    jobs = queue.get("jobs") if isinstance(queue, dict) else None
    if not isinstance(jobs, list):
        raise ValueError(f"{path!r}: expected an object with a list 'jobs'")
    names = set()
    for i, job in enumerate(jobs):
        where = f"{path!r}, job {i}"
        if not isinstance(job, dict):
            raise ValueError(f"{where}: expected an object, received {job!r}")
        name, kind = job.get("name"), job.get("kind")
        if not isinstance(name, str) or not re.fullmatch(r"[\w.-]+", name) or name in names:
            raise ValueError(f"{where}: 'name' must be a new name of letters, digits, '_', '.' "
                             f"or '-', received {name!r}")
        names.add(name)
        if kind not in JOB_KINDS:
            raise ValueError(f"{where} ({name}): unknown kind {kind!r}; known: "
                             f"{', '.join(JOB_KINDS)}")
        flags = job.get("flags", [])
        if not isinstance(flags, list) or not all(isinstance(f, str) for f in flags):
            raise ValueError(f"{where} ({name}): 'flags' must be a list of strings, received "
                             f"{flags!r}")
        if kind == "boxworld":
            target = job.get("frame_target")
            if not isinstance(job.get("preset"), str) or not isinstance(target, int) or (
                    isinstance(target, bool) or target <= 0):
                raise ValueError(f"{where} ({name}): a boxworld job needs 'preset' (a string) "
                                 f"and 'frame_target' (frames, an integer > 0), received "
                                 f"{job.get('preset')!r} and {target!r}")
    return jobs


def job_archive(job, runs_dir):
    return os.path.join(runs_dir, f"{job['name']}.tar.gz") if runs_dir else None


def job_finished(job, meta):
    """Whether the job whose run's RUN_META is ``meta`` is done: a Box-World run when its last
    piece reached the frame target, a reproduction when a piece added no run."""
    if not meta:
        return False
    if job["kind"] == "boxworld":
        row = (meta.get("pieces") or [{}])[-1].get("last_curve_row") or {}
        return row.get("frames", 0) >= job["frame_target"]
    return bool(meta.get("finished"))


def next_job(jobs, runs_dir):
    """The first unfinished job with its archive (checked: the job's run, its settings), or
    None when every job is finished."""
    for job in jobs:
        archive = job_archive(job, runs_dir)
        meta = None
        if archive and os.path.exists(archive):
            read = read_archive(archive)
            meta = read["meta"]
            if read["name"] != job["name"]:
                raise ValueError(f"{archive!r} is an archive of another run ({read['name']!r}), "
                                 f"not of the job {job['name']!r}")
            if meta and meta.get("kind", "boxworld") != job["kind"]:
                raise ValueError(f"{archive!r} is a {meta.get('kind', 'boxworld')} run, the job "
                                 f"{job['name']!r} is of kind {job['kind']!r}")
            if meta and job["kind"] == "boxworld" and meta.get("preset") != job["preset"]:
                raise ValueError(f"{archive!r} is an archive of another run (preset "
                                 f"{meta.get('preset')!r}), the job {job['name']!r} trains "
                                 f"{job['preset']!r}")
        else:
            archive = None
        if not job_finished(job, meta):
            return dict(job, archive=archive, meta=meta)
    return None


def describe_job(job):
    where = f"resumed from {os.path.relpath(job['archive'], REPO)}" if job["archive"] else (
        "a new run")
    if job["kind"] == "boxworld":
        row = ((job["meta"] or {}).get("pieces") or [{}])[-1].get("last_curve_row") or {}
        return (f"{job['name']} (boxworld {job['preset']}, {row.get('frames', 0):,} of "
                f"{job['frame_target']:,} frames), {where}")
    return f"{job['name']} ({job['kind']}), {where}"


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


def smoke_env(env, site, cache, trains=False, newer=True):
    """The variables that --smoke sets in a part's environment ``env``: ``site`` (the folder of
    SMOKE_SITECUSTOMIZE) first on PYTHONPATH; JAX's persistent compilation cache in ``cache``
    unless ``env`` names one; SMOKE_XLA_FLAGS (of a part that ``trains`` or not), and the
    ``newer`` ones, after ``env``'s XLA_FLAGS."""
    path = [site, *(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != site)]
    xla_flags = [*env.get("XLA_FLAGS", "").split(), *SMOKE_XLA_FLAGS[trains],
                 *(SMOKE_NEWER_XLA_FLAGS if newer else ())]
    return {"PYTHONPATH": os.pathsep.join(path),
            "JAX_COMPILATION_CACHE_DIR": env.get("JAX_COMPILATION_CACHE_DIR") or cache,
            "XLA_FLAGS": " ".join(xla_flags), **SMOKE_CACHE_ENV}


def _signal_group(process, sig):
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        pass


def children_cpu_seconds():
    """User + system CPU seconds of this process's finished (waited-for) child processes and
    theirs: a part's CPU time is the difference across it (on a shared machine its wall clock
    also counts the others' load)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


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
        self.cpu_start = children_cpu_seconds()
        self.deadline = self.start + args.budget_seconds
        self.mode = "smoke" if args.smoke else "gpu"
        self.out = os.path.abspath(args.out)
        os.makedirs(self.out, exist_ok=True)
        self.work = tempfile.mkdtemp(prefix="gpu_session_")
        self.results_dir = os.path.join(self.work, "benchmarks", "results")
        os.makedirs(self.results_dir)
        self.logs_dir = os.path.join(self.work, "logs")
        os.makedirs(self.logs_dir)
        self.smoke_site = os.path.join(self.work, "smoke_site")
        if args.smoke:
            os.makedirs(self.smoke_site)
            _write_text(os.path.join(self.smoke_site, "sitecustomize.py"), SMOKE_SITECUSTOMIZE)
        self.python = sys.executable
        self.newer_xla_flags = True  # --smoke: SMOKE_NEWER_XLA_FLAGS, unless XLA refuses them
        self.site = os.path.abspath(args.site) if args.wheels else None
        self.suffix = "smoke" if args.smoke else "gpu"
        self.plan = make_plan(args.parts, args.budget_seconds, args.smoke, bool(args.wheels),
                              args.boxes, args.cost_table)
        self.record = {
            "command": self.command_line(), "started": now_iso(),
            "budget_seconds": args.budget_seconds, "smoke": args.smoke, "plan_name": args.plan,
            "plan": [{"part": p, "box_seconds": b, "skipped": None if b else note,
                      "note": note, "smallest_seconds": smallest}
                     for p, b, note, smallest in self.plan],
            "setup": {}, "device": {}, "parts": {}}

    def command_line(self):
        return "python " + " ".join([os.path.relpath(os.path.abspath(__file__), REPO)]
                                    + [shlex.quote(a) for a in self.args.argv])

    def env(self, part=None, **extra):
        env = dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="3",
                   PYTHONUNBUFFERED="1")
        path = [p for p in (self.site, HERE, os.environ.get("PYTHONPATH")) if p]
        env["PYTHONPATH"] = os.pathsep.join(path)
        env.update(extra)
        if self.args.smoke:
            env.update(smoke_env(env, self.smoke_site, os.path.join(self.work, "jax_cache"),
                                 trains=part in TRAINING_PARTS, newer=self.newer_xla_flags))
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
        cpu = children_cpu_seconds()
        code, seconds, _ = run_command([self.python, "-P", "-c", _PROBE], probe_log,
                                       min(120, max(self.left(), 10)), self.work, self.env())
        if code != 0 and self.args.smoke and UNKNOWN_XLA_FLAG in tail(probe_log, 50):
            # an XLA that does not know SMOKE_NEWER_XLA_FLAGS: the session goes on without them
            self.newer_xla_flags = False
            device["smoke_xla_flags_left_out"] = list(SMOKE_NEWER_XLA_FLAGS)
            code, again, _ = run_command([self.python, "-P", "-c", _PROBE], probe_log,
                                         min(120, max(self.left(), 10)), self.work, self.env())
            seconds += again
        device["probe_seconds"] = round(seconds, 1)
        device["probe_cpu_seconds"] = round(children_cpu_seconds() - cpu, 1)
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
        entry = self.record["parts"][part] = {"box_seconds": None, "work": WORK[part]}
        (note, smallest), = [(n, s) for p, _, n, s in self.plan if p == part]
        index = [p for p, _, _, _ in self.plan].index(part)
        later = sum(b or 0 for _, b, _, _ in self.plan[index + 1:])  # their planned boxes
        if planned is None and part not in TAKES_THE_REST:
            # Left out of the plan: it starts if the parts before it left its smallest box.
            planned = min(part_box(part, self.args.smoke, self.args.cost_table,
                                   self.args.boxes)[0], self.left() - later)
            if planned < smallest:
                entry["skipped"] = note
                return
        if planned is None:
            entry["skipped"] = note
            return
        if part in TAKES_THE_REST:
            box = self.left()
        elif part in FIXED_WORK:
            box = min(planned, self.left())
        else:  # what earlier parts left unused, up to the box it wants
            wanted = part_box(part, self.args.smoke, self.args.cost_table, self.args.boxes)[0]
            box = min(max(planned, min(wanted, self.left() - later)), self.left())
        if box < smallest:
            entry["skipped"] = (f"{max(box, 0):.0f} s left, less than its smallest box "
                                f"{smallest:g} s")
            return
        entry["box_seconds"] = round(box, 1)
        before = set(os.listdir(self.results_dir))
        cpu = children_cpu_seconds()
        start = self.part_start = time.monotonic()
        try:
            getattr(self, f"_part_{part}")(entry, box)
        except Exception as error:  # a fault of this script: the next parts still run
            entry["error"] = f"{type(error).__name__}: {error}"
            with open(self.log_path(part), "a") as log:
                log.write(f"gpu_session.py: {entry['error']}\n")
        entry["seconds"] = round(time.monotonic() - start, 1)
        entry["cpu_seconds"] = round(children_cpu_seconds() - cpu, 1)
        entry["results"] = sorted(set(os.listdir(self.results_dir)) - before)
        compile_seconds = [_compile_seconds(os.path.join(self.results_dir, name))
                           for name in entry["results"] if name.endswith(".json")]
        compile_seconds = [s for s in compile_seconds if s is not None]
        if compile_seconds:
            entry["compile_seconds"] = round(sum(compile_seconds), 1)

    def _script(self, name, *arguments):
        return [self.python, "-P", os.path.join(HERE, name), *arguments]

    def _run(self, entry, part, command, box, cwd=None, **env):
        code, seconds, timed_out = run_command(command, self.log_path(part), box,
                                               cwd or self.work, self.env(part, **env))
        entry.update(command=shlex.join(command), exit_code=code, timed_out=timed_out)
        return code

    def _part_lane_layers(self, entry, box):
        self._lane(entry, box, "lane_layers", "EntityMaxPool")

    def _part_lane_16bit(self, entry, box):
        self._lane(entry, box, "lane_16bit", "EntityMaxPool")

    def _part_lane_models(self, entry, box):
        self._lane(entry, box, "lane_models", "rule_mlp_classifier and mixed_bfloat16")

    def _lane(self, entry, box, part, smoke_selection):
        """One group of the accelerator lane (LANE_TESTS) in one pytest process; in --smoke one
        small case of it, on the CPU."""
        smoke = self.args.smoke
        junit = os.path.join(self.work, f"{part}.xml")
        selection = f"({LANE_TESTS[part]})" + (f" and {smoke_selection}" if smoke else "")
        lane = ["-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider", "-m",
                "accelerator", *LANE_FILES[part], "-k", selection]
        command = [self.python, "-P", *lane, "-p", "gpu_session", f"--junitxml={junit}", "-rfE"]
        margin = 5 if smoke else LANE_MARGIN[part]
        extra = {"GPU_SESSION_DEADLINE": str(time.time() + box - margin)}
        if smoke:
            extra["KERAS_RELATIONAL_ACCELERATOR_ON_CPU"] = "1"
        else:
            # A correctness lane: XLA's GPU autotuning (timing candidate kernels of every
            # matmul and fusion while compiling) changes only speed, and most of the lane's
            # time is compilation.
            extra["XLA_FLAGS"] = " ".join(filter(None, (os.environ.get("XLA_FLAGS"),
                                                        "--xla_gpu_autotune_level=0")))
        self._run(entry, part, command, box, cwd=REPO, **extra)
        if os.path.exists(junit):
            entry["summary"] = summarise_junit(junit)
            env = " ".join(f"{k}={shlex.quote(v)}" for k, v in extra.items()
                           if k == "XLA_FLAGS")
            self.write_lane_results(entry, part, f"KERAS_BACKEND=jax {env} python -P ".lstrip()
                                    + shlex.join(lane), box, margin)

    def write_lane_results(self, entry, part, pytest_command, box, margin):
        summary, device = entry["summary"], self.record["device"]
        counts = summary["counts"]
        group = part.removeprefix("lane_")
        name = os.path.join(self.results_dir, f"accelerator_lane_{group}_{self.suffix}")
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
        # The budget: the box less the process's start and the matmul rates (about 10 s on the
        # H200), and the writing.
        if self.args.smoke:
            # XLA rows only, as on a GPU (op by op is the CPU's default); the row that
            # compiles fastest (PrediNet's takes a third longer)
            arguments = ["--only=RelationNetCentral", "--batch=2", "--repeats=1", "--warmup=1",
                         "--matmul_size=64", "--op_by_op=no",
                         f"--time_budget={max(box - 15, 3):.0f}"]
        else:
            arguments = ["--quick", f"--time_budget={max(box - 25, 10):.0f}"]
        self._run(entry, "accelerator", self._script(
            "accelerator.py", *arguments, "--output_dir=benchmarks/results"), box)

    def _part_env_speed(self, entry, box):
        if self.args.smoke:
            # levels with and without the level sources' rows, as on the GPU; tiny levels (the
            # device generator of the training distribution compiles for 8 s of CPU, twice)
            arguments = ["--levels", "1", "8", "--seconds", "0.05", "--source-levels", "8",
                         "--smoke"]
        else:
            # What fitted the first H200 window's box (86 s, gpu_costs.json).
            arguments = ["--levels", "1", "4096", "65536", "--seconds", "1",
                         "--source-levels", "4096"]
        self._run(entry, "env_speed", self._script(
            "tensor_boxworld_speed.py", *arguments, "--backends", "jax", "--train-updates", "0",
            "--output", f"benchmarks/results/tensor_boxworld_speed_{self.suffix}.md"), box)

    def _part_loop_speed(self, entry, box):
        """One compiled_loop_speed process a number of environments (LOOP_ENVS), each in its
        share of the box: a batch that does not start in its share cannot starve the next."""
        counts = LOOP_ENVS[self.mode]
        extra = []
        if self.args.smoke:
            extra = ["--flags=" + " ".join(SMOKE_BOXWORLD_FLAGS)]
        entry["rows"] = []
        for i, num_envs in enumerate(counts):
            left = box - (time.monotonic() - self.part_start)
            # the rest of the box over the rest of the counts, by their shares
            seconds = left * LOOP_SHARES[num_envs] / sum(LOOP_SHARES[n] for n in counts[i:])
            seconds -= GRACE + 1
            # the script asks JAX for the device first (a few seconds), then trains until
            # --seconds less --allowance and writes the checkpoint; in --smoke a few updates
            # (SMOKE_TRAIN_SECONDS), the rest of its share the allowance (the process's start
            # and compilation)
            allowance = (seconds - 8 - SMOKE_TRAIN_SECONDS if self.args.smoke
                         else LOOP_ALLOWANCE)
            if seconds - 8 - allowance < LOOP_SHORTEST[self.mode] or allowance < 1:
                entry["rows"].append({"num_envs": num_envs, "skipped": f"{left:.0f} s left"})
                continue
            output = f"benchmarks/results/compiled_loop_speed_{self.suffix}_{num_envs}envs"
            code = self._run(entry, "loop_speed", self._script(
                "compiled_loop_speed.py", f"--preset={DEFAULT_PRESET}", f"--num_envs={num_envs}",
                "--level_sources=device", f"--seconds={seconds - 8:.0f}",
                f"--allowance={allowance:.0f}", *extra, f"--output={output}"), seconds)
            entry["rows"].append({"num_envs": num_envs, "box_seconds": round(seconds, 1),
                                  "command": entry["command"], "exit_code": code,
                                  "timed_out": entry["timed_out"],
                                  "measured": _loop_row_measured(os.path.join(
                                      self.results_dir, os.path.basename(output) + ".json"))})
        codes = [r["exit_code"] for r in entry["rows"] if "skipped" not in r]
        entry["exit_code"] = next((c for c in codes if c != 0), 0) if codes else None
        entry["timed_out"] = any(r.get("timed_out") for r in entry["rows"])

    def _part_simplicial(self, entry, box):
        # The budget: the box less the process's start and the writing (13 s of the first H200
        # window's 33 s with a budget of 20 s).
        if self.args.smoke:
            # two query chunks; the fixed window is N = 16's equal-FLOPs one, so that its
            # second layer's programs come from the compilation cache
            arguments = ["--sizes=16", "--batch=1", "--width=16", "--heads=2", "--key_dim=8",
                         "--chunk=8", "--window=4,4", "--steps=1", "--rounds=1",
                         f"--time_budget={max(box - 12, 1):.0f}"]
        else:
            arguments = ["--batch=8", "--sizes=1024,2048,4096,8192,16384",
                         f"--time_budget={max(box - 15, 5):.0f}"]
        self._run(entry, "simplicial", self._script(
            "sequence_simplicial_speed.py", "--dtype=bfloat16", *arguments,
            f"--output=benchmarks/results/sequence_simplicial_speed_{self.suffix}"), box)

    def _part_simplicial_kernel(self, entry, box):
        self._run_script(entry, "simplicial_kernel", box, simplicial_kernel_command(
            box, self.args.smoke, f"benchmarks/results/simplicial_kernel_speed_{self.suffix}"))

    def _part_profile(self, entry, box):
        self._run_script(entry, "profile", box, profile_command(
            box, self.args.smoke, f"benchmarks/results/profile_update_{self.suffix}"))

    def _run_script(self, entry, part, box, arguments):
        """Runs ``benchmarks/<arguments[0]>``; a clear failure where the script is missing."""
        script = os.path.join(HERE, arguments[0])
        if not os.path.exists(script):
            entry.update(command=shlex.join(arguments), exit_code=None, timed_out=False,
                         error=f"benchmarks/{arguments[0]} is missing: this checkout has no "
                         f"such script")
            with open(self.log_path(part), "a") as log:
                log.write(f"gpu_session.py: {entry['error']}\n")
            return
        self._run(entry, part, self._script(*arguments), box)

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
        args = self.args
        if args.resume_archive:
            meta = args.resumed["meta"] or {}
            name = args.resumed["name"]
        else:
            meta = {}
            name = args.run_name or args.long_run_preset or DEFAULT_PRESET
        if not meta:
            preset = args.long_run_preset or DEFAULT_PRESET
            flags = LONG_RUN_FLAGS[self.mode] + shlex.split(args.long_run_flags or "")
            meta = {"preset": preset, "flags": flags, "created": now_iso(), "pieces": []}
        self._boxworld_piece(entry, box, "long_run", name, args.resume_archive, meta)

    def _part_queue(self, entry, box):
        job = self.args.job
        if job is None:
            entry["skipped"] = f"every job of {self.args.queue} is finished"
            return
        entry.update(job=job["name"], kind=job["kind"])
        meta = job["meta"]
        if job["kind"] == "boxworld":
            if not meta:
                # --smoke: the job's run at tiny sizes (its own flags are the device's)
                flags = LONG_RUN_FLAGS["smoke"] if self.args.smoke else job.get("flags", [])
                meta = {"preset": job["preset"], "flags": flags, "created": now_iso(),
                        "pieces": []}
            meta["frame_target"] = job["frame_target"]
            self._boxworld_piece(entry, box, "queue", job["name"], job["archive"], meta)
            row = entry.get("last_curve_row") or {}
            entry["finished"] = row.get("frames", 0) >= job["frame_target"]
        else:
            self._reproduce_piece(entry, box, job)

    def _run_dir(self, name, archive):
        runs = os.path.join(self.work, "runs")
        os.makedirs(runs, exist_ok=True)
        if archive:
            return extract_archive(archive, runs)
        run_dir = os.path.join(runs, name)
        os.makedirs(run_dir, exist_ok=True)
        return run_dir

    def _boxworld_piece(self, entry, box, part, name, archive, meta):
        """One piece of a Box-World run (``meta``: its RUN_META) in ``box`` seconds, packed as
        ``--out/<name>.tar.gz``."""
        args = self.args
        run_dir = self._run_dir(name, archive)
        meta.setdefault("pieces", [])
        preset = meta["preset"]
        measured = known_cost(args.cost_table, "long_run")
        if not args.smoke and measured and measured.get("overhead_seconds") is not None:
            outside = math.ceil(measured["overhead_seconds"] * 1.5 + 10)
        else:
            outside = sum(LONG_RUN_ALLOWANCE[self.mode])
        max_seconds = box - GRACE - 5 - outside  # 5: packing
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
        code = self._run(entry, part, command, box - 5)
        seconds = time.monotonic() - tick
        end_step, curve = newest_checkpoint_step(run_dir), _last_curve_row(run_dir)
        meta["pieces"].append({
            "started": started, "device": self.record["device"].get("device_kind"),
            "smoke": args.smoke, "start_step": start_step, "end_step": end_step,
            "max_seconds": round(max_seconds), "seconds": round(seconds, 1),
            "exit_code": code, "timed_out": entry["timed_out"], "last_curve_row": curve})
        meta["seconds_total"] = round(sum(p["seconds"] for p in meta["pieces"]), 1)
        _write_text(os.path.join(run_dir, RUN_META), json.dumps(meta, indent=1) + "\n")
        archive = os.path.join(self.out, f"{os.path.basename(run_dir)}.tar.gz")
        size, left_out = pack_run(run_dir, archive)
        entry.update(run=os.path.basename(run_dir), preset=preset, start_step=start_step,
                     end_step=end_step, last_curve_row=curve, archive=os.path.basename(archive),
                     archive_bytes=size, archive_left_out=left_out)
        if code == 0 and not entry["timed_out"]:
            entry["overhead_seconds"] = round(seconds - max_seconds, 1)

    def _reproduce_piece(self, entry, box, job):
        """One piece of a reproduction script's job: its runs resumed from the results file in
        the run's folder, no new run started past the box's end; finished when a piece adds no
        run (every run done)."""
        run_dir = self._run_dir(job["name"], job["archive"])
        meta = job["meta"] or {"kind": job["kind"], "flags": job.get("flags", []),
                               "created": now_iso(), "pieces": []}
        results = os.path.join(run_dir, "results")
        before = _count_runs(results + ".json")
        command, cap = reproduce_command(job["kind"], meta["flags"], box,
                                         REPRODUCE_OVERHEAD[self.mode], run_dir)
        path = os.pathsep.join(p for p in (self.site, REPO) if p)  # `benchmarks` is a package
        started, tick = now_iso(), time.monotonic()
        _write_text(os.path.join(run_dir, RUN_META), json.dumps(meta, indent=1) + "\n")
        code = self._run(entry, "queue", [self.python, "-P", *command], box - 5,
                         PYTHONPATH=path)
        after = _count_runs(results + ".json")
        meta["pieces"].append({"started": started, "smoke": self.args.smoke,
                               "device": self.record["device"].get("device_kind"),
                               "runs_before": before, "runs_after": after,
                               "seconds": round(time.monotonic() - tick, 1), "exit_code": code,
                               "timed_out": entry["timed_out"]})
        meta["finished"] = code == 0 and not entry["timed_out"] and after == before
        _write_text(os.path.join(run_dir, RUN_META), json.dumps(meta, indent=1) + "\n")
        archive = os.path.join(self.out, f"{os.path.basename(run_dir)}.tar.gz")
        size, left_out = pack_run(run_dir, archive)
        entry.update(run=os.path.basename(run_dir), runs_before=before, runs_after=after,
                     finished=meta["finished"], max_minutes_per_run=round(cap, 2),
                     archive=os.path.basename(archive), archive_bytes=size,
                     archive_left_out=left_out)

    # --- the files that come back ------------------------------------------------------

    def write_out(self):
        """Brings --out up to date: session.json, summary.md, logs.txt, results.tar.gz."""
        self.record["wall_seconds"] = round(time.monotonic() - self.start, 1)
        self.record["cpu_seconds"] = round(children_cpu_seconds() - self.cpu_start, 1)
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
                 f"{self.record.get('wall_seconds')} s of {self.args.budget_seconds:g}; CPU "
                 f"{self.record.get('cpu_seconds')} s (the parts' processes).", "",
                 "| part | box (s) | seconds | CPU seconds | exit | stopped at its box | results |",
                 "|---|---|---|---|---|---|---|"]
        for part, _, _, _ in self.plan:
            e = self.record["parts"].get(part)
            if e is None:
                lines.append(f"| {part} | | | | not reached | | |")
            elif "skipped" in e:
                lines.append(f"| {part} | | | | skipped: {e['skipped']} | | |")
            else:
                lines.append(f"| {part} | {e['box_seconds']} | {e.get('seconds')} | "
                             f"{e.get('cpu_seconds')} | "
                             f"{e.get('exit_code')}{'; ' + e['error'] if e.get('error') else ''} | "
                             f"{e.get('timed_out')} | "
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


def profile_command(box, smoke, output):
    """The profile part's ``benchmarks/profile_update.py`` arguments: a few compiled updates of
    the trainer at the Zambaldi preset's settings, 256 environments (the loop sweep's first
    row), summarised in ``<output>.md``/``.json``."""
    if smoke:
        return ["profile_update.py", f"--preset={DEFAULT_PRESET}", "--updates=2",
                f"--output={output}", "--smoke"]
    return ["profile_update.py", f"--preset={DEFAULT_PRESET}", "--num_envs=256", "--updates=5",
            f"--output={output}"]


def simplicial_kernel_command(box, smoke, output):
    """The simplicial_kernel part's ``benchmarks/simplicial_kernel_speed.py`` arguments: Roy et
    al.'s N = 4k-64k within the box (less 15 s: the process's start and the writing), N = 16,384
    (the kernel's goal) first, so that a short box still measures it."""
    sizes = "32" if smoke else "16384,4096,65536,8192,32768"
    return ["simplicial_kernel_speed.py", f"--sizes={sizes}",
            f"--time_budget={max(box - 15, 3):.0f}", f"--output={output}",
            *(["--smoke"] if smoke else [])]


def reproduce_command(kind, flags, box, overhead, run_dir):
    """A queued reproduction's command (after ``python -P``) and the cap of each of its runs in
    minutes: its runs resumed from ``run_dir/results.json``, each capped to what the box leaves
    (or the job's own cap, if smaller), and no run started that could not end in the box."""
    module, cap_flag = REPRODUCE[kind]
    own = [float(f.split("=", 1)[1]) for f in flags if f.startswith(cap_flag + "=")]
    available = max(box - GRACE - 5 - overhead, 60) / 60
    cap = min([available, *own])
    results = os.path.join(run_dir, "results.json")
    resume = [f"--resume_from={results}"] if os.path.exists(results) else []
    output = os.path.join(run_dir, "results" + (".md" if kind == "reproduce_tpr_babi" else ""))
    command = ["-m", module, *[f for f in flags if not f.startswith(cap_flag + "=")],
               f"--root_dir={os.path.join(run_dir, 'root')}", *resume,
               f"{cap_flag}={cap:.2f}",
               f"--session_minutes={max(available - cap, FIRST_CELL_START / 60):.2f}",
               f"--output={output}"]
    return command, cap


def _count_runs(path):
    """The number of runs in a reproduction script's results file (0 when there is none)."""
    if not os.path.exists(path):
        return 0
    with open(path) as f:
        return len(json.load(f).get("runs") or ())


def _loop_row_measured(path):
    """Whether compiled_loop_speed's results file ``path`` (.json) holds a trained frames/s: the
    script exits 0 also where its training process printed no progress line before its
    --seconds (a row "not measured")."""
    try:
        with open(path) as f:
            rows = json.load(f).get("rows") or ()
    except (OSError, ValueError):
        return False
    return any(row.get("frames_per_second") is not None for row in rows)


def _compile_seconds(path):
    """A results file's ``compile_seconds``: its own, else the sum of its rows' (None if it
    reports none)."""
    try:
        with open(path) as f:
            result = json.load(f)
        value = result.get("compile_seconds")
        if value is None:
            values = [r.get("compile_seconds") for r in result.get("rows") or ()
                      if isinstance(r, dict)]
            values = [v for v in values if isinstance(v, (int, float))]
            value = sum(values) if values else None
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, (int, float)) else None


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
    if args.update_costs is not None:
        try:
            with open(args.update_costs) as f:
                session = json.load(f)
            table = update_costs(load_costs(args.costs), session,
                                 os.path.basename(args.update_costs))
        except (OSError, ValueError) as error:
            raise SystemExit(f"--update_costs: {args.update_costs!r}: {error}") from None
        _write_text(args.costs, json.dumps(table, indent=1) + "\n")
        print(f"updated {args.costs} from {args.update_costs}")
        return 0
    plan = make_plan(args.parts, args.budget_seconds, args.smoke, bool(args.wheels), args.boxes,
                     args.cost_table)
    print(format_plan(plan, args.budget_seconds, args.smoke, bool(args.wheels),
                      args.cost_table, args.job), flush=True)
    if args.plan_only:
        return 0
    session = Session(args)
    try:
        ready = session.setup()
        session.write_out()
        for part, box in ((p, b) for p, b, _, _ in session.plan):
            if not ready:
                session.record["parts"][part] = {"skipped": "setup failed (logs.txt)"}
                continue
            print(f"[{time.monotonic() - session.start:5.0f} s] {part} ...", flush=True)
            session.run_part(part, box)
            entry = session.record["parts"][part]
            print(f"[{time.monotonic() - session.start:5.0f} s] {part}: "
                  + (f"skipped ({entry['skipped']})" if "skipped" in entry else
                     f"exit {entry.get('exit_code')} in {entry.get('seconds')} s ("
                     f"{entry.get('cpu_seconds')} s CPU), results "
                     f"{entry.get('results')}" + (f", error: {entry['error']}"
                                                  if entry.get("error") else "")), flush=True)
            session.write_out()
    finally:
        session.record["finished"] = now_iso()
        session.write_out()
        shutil.rmtree(session.work, ignore_errors=True)
    print(f"wrote {sorted(os.listdir(session.out))} to {session.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
