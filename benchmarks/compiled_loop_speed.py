r"""End-to-end trained frames/s of the compiled actor-learner loop at a preset's settings.

    python benchmarks/compiled_loop_speed.py --preset=zambaldi_fig3_relational \
        --num_envs=256,1024,4096 --level_sources=device --seconds=90 \
        --output=benchmarks/results/compiled_loop_speed_gpu

Every configuration (a level source and a number of environments) trains in its own process
through the binary, ``python -P -m keras_relational.experiments.train_boxworld
--trainer=compiled --preset=PRESET --level_source=S --num_envs=N`` under ``KERAS_BACKEND=jax``
(the preset's agent, levels, unroll length and optimizer), with a progress line every
``--log_interval`` updates, no evaluation and ``--max_seconds`` set to ``--seconds`` less
``--allowance`` (the process's start before the training loop, the final checkpoint and the
export), and is killed if it runs past ``--seconds``. Trained frames/s is measured from the
learning curve (``root_dir/curves.jsonl``) between the first progress line, whose interval
includes the compilation, and the last. A configuration that fails (out of device memory, say) is
recorded with the last line of its error; when it measured nothing, the larger batches of its
level source are then skipped. The device is named in the results (a separate short process asks
JAX).

Writes ``OUTPUT.md`` and ``OUTPUT.json`` (``--output``, a path without extension).
"""

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import results_io  # noqa: E402  (benchmarks/results_io.py, beside this script)

# Asks JAX for the device in a process of its own: this process never holds device memory that
# the training processes need.
_DEVICE_CODE = ("import jax; d = jax.devices()[0]; "
                "print(f'{d.platform} ({d.device_kind}), {len(jax.devices())} device(s)')")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="zambaldi_fig3_relational",
                        help="a preset of keras_relational.agents.presets")
    parser.add_argument("--num_envs", default="256,1024,4096",
                        help="comma-separated numbers of environments, in increasing order")
    parser.add_argument("--level_sources", default="device", help="comma-separated: device, numpy")
    parser.add_argument("--seconds", type=float, default=90.0,
                        help="wall-clock limit of each configuration's process")
    parser.add_argument("--allowance", type=float, default=30.0,
                        help="seconds of each process outside the training loop (start, final "
                        "checkpoint, export): --max_seconds is --seconds less this")
    parser.add_argument("--log_interval", type=int, default=4, help="updates between lines")
    parser.add_argument("--flags", default="",
                        help="more train_boxworld flags, space-separated (e.g. a smaller room)")
    parser.add_argument("--output", default=None, help="writes OUTPUT.md and OUTPUT.json")
    args = parser.parse_args(argv)
    try:
        args.num_envs = [int(n) for n in args.num_envs.split(",") if n]
    except ValueError:
        parser.error(f"--num_envs: expected comma-separated integers, received "
                     f"{args.num_envs!r}")
    args.level_sources = [s for s in args.level_sources.split(",") if s]
    unknown = sorted(set(args.level_sources) - {"device", "numpy"})
    if unknown:
        parser.error(f"--level_sources: expected device and/or numpy, received {unknown}")
    if args.seconds <= args.allowance:
        parser.error(f"--seconds must exceed --allowance ({args.allowance:g}), received "
                     f"{args.seconds:g}")
    return args


def device_name():
    """The device JAX sees, asked in a short process of its own (None if that fails)."""
    done = subprocess.run([sys.executable, "-P", "-c", _DEVICE_CODE], capture_output=True,
                          text=True, check=False, timeout=120)
    lines = done.stdout.strip().splitlines()
    return lines[-1] if done.returncode == 0 and lines else None


def _read_curve(root):
    path = os.path.join(root, "curves.jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def run_one(args, source, num_envs, root):
    """Trains one configuration in its own process; returns its row."""
    max_seconds = args.seconds - args.allowance
    command = [sys.executable, "-P", "-m", "keras_relational.experiments.train_boxworld",
               "--trainer=compiled", f"--preset={args.preset}", f"--level_source={source}",
               f"--num_envs={num_envs}", f"--root_dir={root}", f"--max_seconds={max_seconds:g}",
               f"--log_interval={args.log_interval}", "--eval_episodes=0", "--test_presets=",
               *args.flags.split()]
    env = dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="3")
    log_path = root + ".log"
    start = time.perf_counter()
    with open(log_path, "w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env,
                                   start_new_session=True)
        try:
            code = process.wait(timeout=args.seconds)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            code = "killed at --seconds"
    seconds = time.perf_counter() - start
    with open(log_path, errors="replace") as f:
        lines = f.read().splitlines()
    print(f"  {source} levels, {num_envs} envs: exit {code} after {seconds:.0f} s; last lines:",
          *(f"    {line}" for line in lines[-5:]), sep="\n", flush=True)
    curve = _read_curve(root)
    row = {"level_source": source, "num_envs": num_envs, "exit_code": code,
           "process_seconds": round(seconds, 1), "max_seconds": max_seconds,
           "progress_lines": len(curve)}
    params = [line for line in lines if line.startswith("Training ")]
    if params:
        row["training_line"] = params[0]
    if curve:
        first, last = curve[0], curve[-1]
        row.update(first_line_seconds=round(first["wall_seconds"], 2), updates=last["step"],
                   frames=last["frames"], frames_per_update=last["frames"] // last["step"],
                   solve_rate=last["solve_rate"])
        if len(curve) >= 2 and last["wall_seconds"] > first["wall_seconds"]:
            row["timed_updates"] = last["step"] - first["step"]
            row["timed_seconds"] = round(last["wall_seconds"] - first["wall_seconds"], 2)
            row["frames_per_second"] = ((last["frames"] - first["frames"])
                                        / (last["wall_seconds"] - first["wall_seconds"]))
    if code != 0:
        errors = [line for line in lines if "Error" in line or "error" in line]
        row["error"] = (errors or lines or [""])[-1][:300]
    return row


def _cell(value):
    return "" if value is None else f"{value:,}"


def _markdown(args, device, rows, load):
    lines = [
        f"Device: {device or 'unknown (JAX did not answer)'}; host {platform.machine()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}; load average "
        f"{load[0]:.1f} before, {load[1]:.1f} after. `train_boxworld --trainer=compiled "
        f"--preset={args.preset}` under JAX, one process per row, each limited to "
        f"{args.seconds:g} s of wall clock (`--max_seconds={args.seconds - args.allowance:g}`, "
        f"no evaluation, a progress line every {args.log_interval} updates"
        + (f", extra flags `{args.flags}`" if args.flags else "") + "). Trained frames/s "
        "between the first progress line (its interval includes the compilation) and the last.",
        "", "| level source | envs | frames / update | first line after (s) | updates timed | "
        "seconds timed | trained frames/s | exit |", "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        if "skipped" in row:
            lines.append(f"| {row['level_source']} | {row['num_envs']:,} | | | | | | "
                         f"skipped: {row['skipped']} |")
            continue
        fps = row.get("frames_per_second")
        exit_text = "0" if row["exit_code"] == 0 else f"{row['exit_code']}: {row.get('error', '')}"
        lines.append(
            f"| {row['level_source']} | {row['num_envs']:,} | "
            f"{_cell(row.get('frames_per_update'))} | {row.get('first_line_seconds', '')} | "
            f"{row.get('timed_updates', '')} | {row.get('timed_seconds', '')} | "
            + (f"{fps:,.0f}" if fps else "not measured") + f" | {exit_text.replace('|', '/')} |")
    return "\n".join(lines)


def main(argv=None):
    args = parse_args(argv)
    load_before = os.getloadavg()
    device = device_name()
    print(f"Device: {device}", flush=True)
    rows = []
    work = tempfile.mkdtemp(prefix="compiled_loop_speed_")
    try:
        for source in args.level_sources:
            failed = None
            for num_envs in args.num_envs:
                if failed is not None:
                    rows.append({"level_source": source, "num_envs": num_envs,
                                 "skipped": f"{failed} envs did not finish"})
                    continue
                row = run_one(args, source, num_envs, os.path.join(work, f"{source}_{num_envs}"))
                rows.append(row)
                if row["exit_code"] != 0 and "frames_per_second" not in row:
                    failed = num_envs
    finally:
        shutil.rmtree(work, ignore_errors=True)
    load = (load_before[0], os.getloadavg()[0])
    text = _markdown(args, device, rows, load)
    print()
    print(text)
    if args.output:
        results_io.write_markdown(args.output + ".md", text)
        results_io.write_json(args.output + ".json", {
            "device": device, "args": vars(args), "load_average": list(load), "rows": rows})


if __name__ == "__main__":
    main()
