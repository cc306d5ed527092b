r"""The CPU learning curve at reduced scale: a Box-World run trained in pieces, and its curve.

    python benchmarks/rl_cpu_curve.py --output benchmarks/results/rl_cpu_curve

Runs ``train_boxworld --trainer=compiled`` with the demo's flags (``benchmarks/demo_flags.txt``:
6x6 room, one goal box, no distractors, one-hot cells, Adam 1e-3) in pieces of
``--piece_seconds`` (``--max_seconds``, each piece a fresh process resuming from the checkpoint of
the previous one, as a long run cut into 10-minute pieces is) until the run is done or
``--budget_minutes`` of wall time are spent. It then reads the run's ``curves.jsonl`` (fraction of
the training episodes solved, frames, wall time summed over the pieces) and writes
``<output>.md`` (the table), ``<output>.json`` (the curve rows, the pieces, the load) and
``<figures>_frames.png`` / ``<figures>_wall_seconds.png`` (``plot_rl_curves.py``, the docs'
figures; needs matplotlib). Every
training episode is a freshly generated level, so the curve measures generalisation. The machine
load (1-minute load average before and after every piece) goes into the results: on a shared
machine the wall-time axis is slower than on an idle one.
"""

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time

import results_io  # benchmarks/results_io.py, beside this script

HERE = os.path.dirname(os.path.abspath(__file__))


def _demo_value(name):
    """The value of ``--name`` in the demo's flags."""
    with open(os.path.join(HERE, "demo_flags.txt")) as f:
        (value,) = [flag.split("=", 1)[1] for flag in f.read().split()
                    if flag.startswith(f"--{name}=")]
    return value


def _train_command(root_dir, args):
    return [sys.executable, "-m", "keras_relational.experiments.train_boxworld",
            f"--flagfile={os.path.join(HERE, 'demo_flags.txt')}", "--trainer=compiled",
            f"--root_dir={root_dir}", f"--max_seconds={args.piece_seconds}",
            f"--log_interval={args.log_interval}", f"--seed={args.seed}",
            f"--num_iterations={args.num_iterations}", "--eval_episodes=200"]


def train_in_pieces(root_dir, args):
    """Runs the training command until ``result.json`` says done or the budget is spent."""
    pieces, started = [], time.time()
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    while time.time() - started < args.budget_minutes * 60:
        load_before = os.getloadavg()[0]
        tick = time.time()
        done = subprocess.run(_train_command(root_dir, args), env=env, capture_output=True,
                              text=True)
        if done.returncode:
            raise SystemExit(f"piece {len(pieces) + 1} failed:\n{done.stderr[-3000:]}")
        with open(os.path.join(root_dir, "result.json")) as f:
            result = json.load(f)
        pieces.append(dict(seconds=round(time.time() - tick, 1), train_step=result["train_step"],
                           eval_solve_rate=result["eval_solve_rate"],
                           load_before=load_before, load_after=os.getloadavg()[0]))
        print(f"piece {len(pieces)}: step {result['train_step']}, "
              f"{pieces[-1]['seconds']:.0f} s, load {load_before:.1f} -> "
              f"{pieces[-1]['load_after']:.1f}", flush=True)
        if result["train_step"] >= args.num_iterations:
            break
    return pieces, result


def _percent(value):
    return "—" if value is None else f"{100 * value:.1f} %"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", default=os.path.join(HERE, "results", "rl_cpu_curve"),
                        help="results path without extension (.md, .json and .png are written)")
    parser.add_argument("--figures", default=os.path.join(os.path.dirname(HERE), "docs",
                                                          "images", "rl_cpu_curve"),
                        help="PNG path without extension (_frames.png, _wall_seconds.png)")
    parser.add_argument("--root_dir", default=None, help="the run's directory (default: a "
                        "temporary one)")
    parser.add_argument("--budget_minutes", type=float, default=15.0)
    parser.add_argument("--piece_seconds", type=float, default=240.0)
    parser.add_argument("--num_iterations", type=int, default=int(_demo_value("num_iterations")))
    parser.add_argument("--log_interval", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    root_dir = args.root_dir or tempfile.mkdtemp(prefix="rl_cpu_curve_")
    pieces, result = train_in_pieces(root_dir, args)

    from keras_relational.agents import curves

    rows = curves.read_curve(root_dir)
    command = results_io.command_line()
    # The flag file as the repository names it, not this checkout's absolute path.
    train_command = " ".join(shlex.quote(a) for a in _train_command("RUN_DIR", args)[1:]).replace(
        HERE, "benchmarks")
    loads = [p["load_before"] for p in pieces] + [p["load_after"] for p in pieces]
    niceness = os.nice(0)
    machine = (f"{platform.machine()}, {os.cpu_count()} cores: 1-minute load average "
               f"{min(loads):.1f} to {max(loads):.1f} during the run, at niceness {niceness} (a "
               f"load above the training's own slows the wall-time axis)")
    finished = result["train_step"] >= args.num_iterations
    lines = [
        f"The demo's setting (`benchmarks/demo_flags.txt`: 6×6 room, goal length 1, no "
        f"distractors, one-hot cells, Adam 1e-3, {_demo_value('num_envs')} envs × "
        f"{_demo_value('unroll_length')} steps per update) with "
        f"`--trainer=compiled` (TensorFlow backend), trained in {len(pieces)} pieces of at most "
        f"{args.piece_seconds:g} s (`--max_seconds`), each a new process resuming from the "
        f"previous piece's checkpoint: `python {train_command}`. Solve rate of the training "
        f"episodes (fresh levels) over the updates since the previous row; wall time summed over "
        f"the pieces (training loop only).", "",
        "| update | frames | wall time (s) | frames/s | training episodes solved |",
        "|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['step']} | {r['frames']:,} | {r['wall_seconds']:.0f} | "
              f"{r['frames_per_second']:.0f} | {_percent(r['solve_rate'])} |" for r in rows]
    stop = ("the run finished" if finished else
            f"stopped at update {result['train_step']} of {args.num_iterations}: the "
            f"{args.budget_minutes:g}-minute budget was spent")
    lines += ["", f"Evaluation after the last piece on 200 fresh levels (sampling policy): "
              f"{_percent(result['eval_solve_rate'])}; {stop}. Measured "
              f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {machine}."]
    body = "\n".join(lines)
    results_io.write_markdown(args.output + ".md", body, command)
    results_io.write_json(args.output + ".json", dict(
        setting="benchmarks/demo_flags.txt --trainer=compiled", train_command=train_command,
        pieces=pieces, curve=rows, eval_solve_rate=result["eval_solve_rate"],
        finished=finished, machine=machine), command)
    import plot_rl_curves  # beside this script

    for x in ("frames", "wall_seconds"):
        plot_rl_curves.plot([("relational (compiled, CPU)", root_dir)],
                            f"{args.figures}_{x}.png", x=x)
    print(body)


if __name__ == "__main__":
    main(sys.argv[1:])
