r"""End-to-end trained frames/s of the compiled actor-learner loop at a preset's settings.

    python benchmarks/compiled_loop_speed.py --preset=zambaldi_fig3_relational \
        --num_envs=256,1024,4096 --level_sources=device --seconds=90 \
        --output=benchmarks/results/compiled_loop_speed_gpu

Every configuration (a level source, a dtype policy, a number of learner minibatches and a
number of environments) trains in its own process through the binary's flags,
``train_boxworld --trainer=compiled --preset=PRESET --level_source=S --num_envs=N
[--dtype_policy=P] [--learner_minibatches=K]`` under ``KERAS_BACKEND=jax`` (the preset's agent,
levels, unroll length and optimizer; ``--learner_minibatches`` and ``--num_devices``, compiled-loop
fields, are added to the binary's flags by the child process), with a progress line every
``--log_interval`` updates, no evaluation and ``--max_seconds`` set to ``--seconds`` less
``--allowance`` (the process's start before the training loop, the final checkpoint and the
export), and is killed if it runs past ``--seconds``. Trained frames/s is measured from the
learning curve (``root_dir/curves.jsonl``) between the first progress line, whose interval
includes the first update, and the last; the compile time the process prints (the update is
compiled ahead, timed apart) is recorded. A configuration that fails (out of device memory, say)
is recorded with the last line of its error; when it measured nothing, the larger batches of its
sweep are then skipped. The device is named in the results (a separate short process asks JAX).

The FLOP rate of each row is its trained frames/s times the FLOPs of a trained frame from XLA's
cost analysis (``--cost_analysis``, written by ``benchmarks/update_cost_analysis.py``), as a
fraction of the device's measured matmul rate in the row's compute dtype (``--matmul_results``:
the accelerator benchmark's results file of this device, ``matmul_flops_per_s``).

Writes ``OUTPUT.md`` and ``OUTPUT.json`` (``--output``, a path without extension).
"""

import argparse
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# Beside this script, also when a test loads it by path or gpu_session runs it under `python -P`
# (neither puts the script's folder on sys.path).
sys.path.insert(0, HERE)

import results_io  # noqa: E402  (benchmarks/results_io.py, beside this script)

# Asks JAX for the device in a process of its own: this process never holds device memory that
# the training processes need.
_DEVICE_CODE = ("import jax; d = jax.devices()[0]; "
                "print(f'{d.platform} ({d.device_kind}), {len(jax.devices())} device(s)')")

# The training process: train_boxworld's flags plus the compiled loop's fields that the binary
# does not define (yet), passed to compiled.train_eval.train_eval.
_CHILD_CODE = """
from absl import app, flags, logging
from keras_relational.agents import presets
from keras_relational.experiments import train_boxworld

EXTRA = ("learner_minibatches", "num_devices")
for name, default in zip(EXTRA, (1, None)):
    if name not in flags.FLAGS:
        flags.DEFINE_integer(name, default, "CompiledConfig." + name)


def main(argv):
    del argv
    logging.set_verbosity(logging.ERROR)
    FLAGS = flags.FLAGS
    config = train_boxworld.config_from_flags()
    if FLAGS.preset is not None:
        print(presets.describe(FLAGS.preset))
    from keras_relational.agents.compiled import train_eval

    extra = {name: FLAGS[name].value for name in EXTRA if FLAGS[name].present}
    train_eval.train_eval(FLAGS.root_dir, config, **extra)


app.run(main)
"""


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="zambaldi_fig3_relational",
                        help="a preset of keras_relational.agents.presets")
    parser.add_argument("--num_envs", default="256,1024,4096",
                        help="comma-separated numbers of environments, in increasing order")
    parser.add_argument("--level_sources", default="device", help="comma-separated: device, numpy")
    parser.add_argument("--dtype_policies", default="",
                        help="comma-separated dtype policies (empty: the preset's)")
    parser.add_argument("--learner_minibatches", default="",
                        help="comma-separated learner minibatch counts (empty: 1)")
    parser.add_argument("--cost_analysis",
                        default=os.path.join(results_io.RESULTS, "update_cost_analysis.json"),
                        help="update_cost_analysis.py's results (FLOPs a trained frame)")
    parser.add_argument("--matmul_results", default=None,
                        help="a results file with matmul_flops_per_s (default: "
                        "benchmarks/results/accelerator_<device>.json)")
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
    from keras_relational import validation

    args.dtype_policies = [p for p in args.dtype_policies.split(",") if p] or [None]
    unknown = sorted(set(args.dtype_policies) - set(validation.DTYPE_POLICIES) - {None})
    if unknown:
        parser.error(f"--dtype_policies: expected some of {validation.DTYPE_POLICIES}, "
                     f"received {unknown}")
    try:
        args.learner_minibatches = [int(k) for k in args.learner_minibatches.split(",")
                                    if k] or [None]
    except ValueError:
        parser.error(f"--learner_minibatches: expected comma-separated integers, received "
                     f"{args.learner_minibatches!r}")
    for k in args.learner_minibatches:
        bad = [n for n in args.num_envs if k is not None and (k < 1 or n % k)]
        if bad:
            parser.error(f"--learner_minibatches: {k} must be positive and divide every "
                         f"--num_envs, received --num_envs={bad}")
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


def run_one(args, source, num_envs, root, dtype_policy=None, learner_minibatches=None):
    """Trains one configuration in its own process; returns its row."""
    max_seconds = args.seconds - args.allowance
    command = [sys.executable, "-P", "-c", _CHILD_CODE,
               "--trainer=compiled", f"--preset={args.preset}", f"--level_source={source}",
               f"--num_envs={num_envs}", f"--root_dir={root}", f"--max_seconds={max_seconds:g}",
               f"--log_interval={args.log_interval}", "--eval_episodes=0", "--test_presets=",
               *([f"--dtype_policy={dtype_policy}"] if dtype_policy else []),
               *([f"--learner_minibatches={learner_minibatches}"] if learner_minibatches
                 else []),
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
    print(f"  {source} levels, {dtype_policy or 'preset dtype'}, {learner_minibatches or 1} "
          f"minibatch(es), {num_envs} envs: exit {code} after {seconds:.0f} s; last lines:",
          *(f"    {line}" for line in lines[-5:]), sep="\n", flush=True)
    curve = _read_curve(root)
    row = {"level_source": source, "num_envs": num_envs, "dtype_policy": dtype_policy,
           "learner_minibatches": learner_minibatches or 1, "exit_code": code,
           "process_seconds": round(seconds, 1), "max_seconds": max_seconds,
           "progress_lines": len(curve)}
    compiled = [line for line in lines if line.startswith("compiled the update in ")]
    if compiled:
        row["compile_seconds"] = float(compiled[0].split()[4])
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


def device_slug(device):
    """``"cpu"`` or the device kind in lower case with dashes (``"nvidia-h200"``): the suffix of
    the accelerator benchmark's results file (``accelerator_<slug>.json``)."""
    match = re.match(r"^(\w+) \(([^)]*)\)", device or "")
    if not match:
        return None
    return "cpu" if match.group(1) == "cpu" else match.group(2).lower().replace(" ", "-")


def flops_per_frame(path, preset):
    """FLOPs of a trained frame from update_cost_analysis.py's results (None if absent)."""
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    if data.get("preset") != preset or not data.get("rows"):
        return None
    return data["rows"][-1]["sum_of_parts"]["flops_per_frame"]


def matmul_rates(path):
    """``{dtype: FLOP/s}`` of the device's matmuls from a results file (None if absent)."""
    try:
        with open(path) as f:
            return json.load(f).get("matmul_flops_per_s")
    except (OSError, ValueError):
        return None


def add_flop_rates(rows, flops, rates):
    """Each measured row's FLOP/s and its fraction of the matmul rate in its compute dtype."""
    for row in rows:
        fps = row.get("frames_per_second")
        if not fps or flops is None:
            continue
        row["flops_per_second"] = fps * flops
        dtype = "bfloat16" if (row.get("dtype_policy") or "").endswith("bfloat16") else (
            "float16" if (row.get("dtype_policy") or "").endswith("float16") else "float32")
        if rates and rates.get(dtype):
            row["matmul_dtype"] = dtype
            row["matmul_fraction"] = row["flops_per_second"] / rates[dtype]


def _markdown(args, device, rows, load, flops=None, rates_path=None):
    lines = [
        f"Device: {device or 'unknown (JAX did not answer)'}; host {platform.machine()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}; load average "
        f"{load[0]:.1f} before, {load[1]:.1f} after. `train_boxworld --trainer=compiled "
        f"--preset={args.preset}` under JAX, one process per row, each limited to "
        f"{args.seconds:g} s of wall clock (`--max_seconds={args.seconds - args.allowance:g}`, "
        f"no evaluation, a progress line every {args.log_interval} updates and after the first"
        + (f", extra flags `{args.flags}`" if args.flags else "") + "). Trained frames/s "
        "between the first progress line (after the first update; the update is compiled "
        "before it, timed apart) and the last. FLOP rate: trained frames/s x "
        + (f"{flops / 1e6:,.1f} MFLOP a trained frame (XLA's cost analysis, "
           f"`{os.path.relpath(args.cost_analysis, results_io.REPO)}`)" if flops else
           "the FLOPs a trained frame (no cost analysis found)")
        + (f", as a share of the matmul rate in `{os.path.relpath(rates_path, results_io.REPO)}`"
           if rates_path else ", no matmul rate of this device found") + ".",
        "", "| level source | dtype policy | learner minibatches | envs | frames / update | "
        "compile (s) | first line after (s) | updates timed | seconds timed | trained frames/s "
        "| TFLOP/s | % of matmul rate | exit |", "|---" * 13 + "|"]
    for row in rows:
        head = (f"| {row['level_source']} | {row.get('dtype_policy') or 'preset'} | "
                f"{row.get('learner_minibatches') or 1} | {row['num_envs']:,} |")
        if "skipped" in row:
            lines.append(f"{head} | | | | | | | | skipped: {row['skipped']} |")
            continue
        fps = row.get("frames_per_second")
        exit_text = "0" if row["exit_code"] == 0 else f"{row['exit_code']}: {row.get('error', '')}"
        flop_rate = row.get("flops_per_second")
        fraction = row.get("matmul_fraction")
        lines.append(
            f"{head} {_cell(row.get('frames_per_update'))} | {row.get('compile_seconds', '')} | "
            f"{row.get('first_line_seconds', '')} | "
            f"{row.get('timed_updates', '')} | {row.get('timed_seconds', '')} | "
            + (f"{fps:,.0f}" if fps else "not measured")
            + f" | {'' if flop_rate is None else f'{flop_rate / 1e12:,.3f}'} | "
            + ("" if fraction is None else f"{100 * fraction:.2f} %")
            + f" | {exit_text.replace('|', '/')} |")
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
            for dtype_policy in args.dtype_policies:
                for minibatches in args.learner_minibatches:
                    failed = None
                    for num_envs in args.num_envs:
                        if failed is not None:
                            rows.append({"level_source": source, "num_envs": num_envs,
                                         "dtype_policy": dtype_policy,
                                         "learner_minibatches": minibatches or 1,
                                         "skipped": f"{failed} envs did not finish"})
                            continue
                        name = f"{source}_{dtype_policy}_{minibatches}_{num_envs}"
                        row = run_one(args, source, num_envs, os.path.join(work, name),
                                      dtype_policy, minibatches)
                        rows.append(row)
                        if row["exit_code"] != 0 and "frames_per_second" not in row:
                            failed = num_envs
    finally:
        shutil.rmtree(work, ignore_errors=True)
    load = (load_before[0], os.getloadavg()[0])
    # --flags may change the network: then the preset's FLOPs a frame are not this run's.
    flops = None if args.flags else flops_per_frame(args.cost_analysis, args.preset)
    slug = device_slug(device)
    rates_path = args.matmul_results or (
        os.path.join(results_io.RESULTS, f"accelerator_{slug}.json") if slug else None)
    rates = matmul_rates(rates_path) if rates_path else None
    add_flop_rates(rows, flops, rates)
    text = _markdown(args, device, rows, load, flops, rates_path if rates else None)
    print()
    print(text)
    if args.output:
        results_io.write_markdown(args.output + ".md", text)
        results_io.write_json(args.output + ".json", {
            "device": device, "args": vars(args), "load_average": list(load),
            "flops_per_frame": flops, "matmul_flops_per_s": rates, "rows": rows})


if __name__ == "__main__":
    main()
