r"""Reproduces the `make demo` figure: the demo's training for several seeds, each one timed.

    .venv/bin/python benchmarks/reproduce_demo.py --seeds=0,1,2

Every seed runs ``python -m keras_relational.experiments.train_boxworld`` with the demo's flags,
read from ``benchmarks/demo_flags.txt`` (the file the Makefile's ``DEMO_FLAGS`` read too, so the
two cannot drift), in a fresh root directory, one seed after the other, each with the whole
machine. The wall time is that of the whole training process as ``make demo`` runs it (imports,
training, evaluation on fresh levels, checkpoint and export). The demo's goal: at least 85 % of
the evaluation levels solved in under 10 minutes on 2 CPU cores, for every seed.

Writes ``results/demo.json`` (per seed: evaluation solve rate, frames, wall seconds, the exact
command; the device, platform, date and load averages) and ``results/demo.md`` (a table whose
first line is the command that wrote it), each atomically, after every seed.
``--override`` appends training flags after the demo's (the later flag wins); the tests use it
for a tiny run, whose results then no longer describe the demo (``overrides`` in the JSON).
"""

import datetime
import importlib.metadata
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import time

from absl import app, flags

from keras_relational import json_files
from keras_relational.experiments import flag_checks
from keras_relational.progress_bar import ProgressBar, format_duration

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(HERE)
FLAGS_FILE = os.path.join(HERE, "demo_flags.txt")
TRAIN_MODULE = "keras_relational.experiments.train_boxworld"
GOAL_SOLVE_RATE = 0.85  # issue 22: at least 85 % of the evaluation levels
GOAL_WALL_SECONDS = 600.0  # issue 22: in under 10 minutes on 2 CPU cores

FLAGS = flags.FLAGS
flag_checks.define_int_list("seeds", [0, 1, 2], "Seeds, trained one after the other.", minimum=0)
flags.DEFINE_string("root_dir", "/tmp/keras_relational_demo_reproduce",
                    "Runs go to root_dir/seed<N>, emptied first.")
flags.DEFINE_string("output", os.path.join(HERE, "results", "demo"),
                    "Results prefix: writes <output>.json and <output>.md.")
flags.DEFINE_multi_string("override", [], "A training flag appended after the demo's, e.g. "
                          "--override=--num_iterations=2 (tests; the results then no longer "
                          "describe the demo).")


def read_demo_flags(path=FLAGS_FILE):
    """The demo's training flags: whitespace-separated in ``path`` (one a line there)."""
    with open(path) as f:
        return f.read().split()


def _display_path(path):
    """``path`` relative to the repository when inside it (no machine-specific prefix)."""
    path = os.path.abspath(path)
    if path.startswith(REPO_ROOT + os.sep):
        return os.path.relpath(path, REPO_ROOT)
    return path


def training_command(root_dir, seed, overrides=()):
    """The argv of one seed's training process."""
    return [sys.executable, "-m", TRAIN_MODULE, f"--root_dir={root_dir}", *read_demo_flags(),
            *overrides, f"--seed={seed}"]


def _platform_info():
    try:
        tensorflow = importlib.metadata.version("tensorflow")
    except importlib.metadata.PackageNotFoundError:
        tensorflow = None
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f
                        if line.startswith("model name")), cpu)
    except OSError:
        pass
    return dict(platform=platform.platform(), cpu=cpu, cpu_count=os.cpu_count(),
                python=platform.python_version(), tensorflow=tensorflow)


def run_seed(seed, root_dir, overrides=(), print_fn=print):
    """Trains one seed in a fresh ``root_dir``; returns its row of the results."""
    shutil.rmtree(root_dir, ignore_errors=True)
    os.makedirs(root_dir)
    argv = training_command(root_dir, seed, overrides)
    # Unbuffered: the progress lines stream through as the training prints them.
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
    load_before = os.getloadavg()
    log_path = os.path.join(root_dir, "train.log")
    started = time.perf_counter()
    with open(log_path, "w") as log, subprocess.Popen(
            argv, env=env, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True) as process:
        for line in process.stdout:
            log.write(line)
            print_fn(f"[seed {seed}] {line.rstrip()}")
    wall_seconds = time.perf_counter() - started
    if process.returncode:
        with open(log_path) as f:
            tail = f.read()[-3000:]
        raise RuntimeError(f"Seed {seed}: training exited with {process.returncode}:\n{tail}")
    with open(os.path.join(root_dir, "result.json")) as f:
        result = json.load(f)
    history = result["history"]
    return dict(
        seed=seed, eval_solve_rate=result["eval_solve_rate"],
        last_window_solve_rate=history[-1]["solve_rate"] if history else None,
        train_step=result["train_step"], frames=result["frames"],
        frames_per_second=result["frames_per_second"], wall_seconds=round(wall_seconds, 1),
        load_average_before=round(load_before[0], 2),
        load_average_after=round(os.getloadavg()[0], 2),
        command="PYTHONUNBUFFERED=1 TF_CPP_MIN_LOG_LEVEL=2 "
        + shlex.join([_display_path(argv[0]), *argv[1:]]))


def _value(flag_list, name):
    """The last value of ``--name=value`` in ``flag_list`` (later flags win, as in absl)."""
    values = [f.split("=", 1)[1] for f in flag_list if f.startswith(f"--{name}=")]
    return values[-1] if values else None


def write_atomically(path, text):
    json_files.write_text(path, text)


def _markdown(report):
    runs = report["runs"]
    lines = [
        f"`{report['command']}`", "",
        f"`make demo` (flags in `benchmarks/demo_flags.txt`) for seeds "
        f"{', '.join(str(r['seed']) for r in runs)}, one after the other; evaluation on "
        f"{report['eval_episodes']} fresh levels with the sampling policy; wall time of the whole "
        f"training process (imports, training, evaluation, export). Goal: at least "
        f"{100 * GOAL_SOLVE_RATE:.0f} % in under {GOAL_WALL_SECONDS / 60:.0f} minutes.", "",
        "| seed | eval solved | training episodes solved (last window) | frames | wall | "
        "frames/s | load average before / after |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in runs:
        last = r["last_window_solve_rate"]
        minutes, seconds = divmod(round(r["wall_seconds"]), 60)
        lines.append(
            f"| {r['seed']} | {100 * r['eval_solve_rate']:.1f} % | "
            f"{'-' if last is None else f'{100 * last:.1f} %'} | {r['frames']:,} | "
            f"{minutes} min {seconds:02d} s | {r['frames_per_second']:,.0f} | "
            f"{r['load_average_before']:.1f} / {r['load_average_after']:.1f} |")
    info = report["platform"]
    lines += ["", f"Measured {report['date']} on a {report['device']} ({info['cpu']}; "
              f"{info['platform']}; Python {info['python']}, TensorFlow {info['tensorflow']}). "
              f"Goal met for every seed: {'yes' if report['goal_met'] else 'no'}."]
    if report["overrides"]:
        lines.append(f"Not the demo: training flags overridden by {report['overrides']}.")
    return "\n".join(lines) + "\n"


def main(argv):
    del argv
    seeds = [int(s) for s in FLAGS.seeds]
    overrides = list(FLAGS.override)
    demo_flags = read_demo_flags()
    eval_episodes = _value(demo_flags + overrides, "eval_episodes")
    command = shlex.join(["python", _display_path(sys.argv[0]), *sys.argv[1:]])
    report = dict(command=command, seeds=seeds, demo_flags=demo_flags, overrides=overrides,
                  eval_episodes=int(eval_episodes) if eval_episodes else None,
                  goal=dict(eval_solve_rate=GOAL_SOLVE_RATE, wall_seconds=GOAL_WALL_SECONDS),
                  device=f"{os.cpu_count()}-core CPU", platform=_platform_info(), runs=[])
    os.makedirs(os.path.dirname(os.path.abspath(FLAGS.output)), exist_ok=True)
    # One bar over the seeds (on a terminal; the trainings' own lines scroll above it).
    bar = ProgressBar(len(seeds), "seeds")
    for done, seed in enumerate(seeds):
        bar.update(done, f"seed {seed} training", force=True)
        report["runs"].append(run_seed(seed, os.path.join(FLAGS.root_dir, f"seed{seed}"),
                                       overrides, print_fn=bar.print))
        bar.update(done + 1, f"seed {seed} done", force=True)
        bar.print(f"seed {seed} done ({done + 1}/{len(seeds)}) | ETA "
                  f"{format_duration(bar.eta())}")
        report["date"] = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
        report["complete"] = len(report["runs"]) == len(seeds)
        report["goal_met"] = report["complete"] and all(
            r["eval_solve_rate"] >= GOAL_SOLVE_RATE and r["wall_seconds"] < GOAL_WALL_SECONDS
            for r in report["runs"])
        json_files.write_json(FLAGS.output + ".json", report)
        write_atomically(FLAGS.output + ".md", _markdown(report))
    bar.close()
    print(_markdown(report))


if __name__ == "__main__":
    app.run(main)
