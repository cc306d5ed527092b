r"""A ``jax.profiler`` trace of a few compiled updates of the compiled trainer, summarised as text.

    KERAS_BACKEND=jax python benchmarks/profile_update.py --preset=zambaldi_fig3_relational \
        --num_envs=1024 --updates=5 --output=benchmarks/results/profile_update_gpu

Builds the preset's agent, levels and loop as ``train_eval`` does (device level banks), compiles
the update ahead (timed apart), runs one update to warm up, then traces ``--updates`` updates
(each followed by the host's read of its metrics, as in training) under
``jax.profiler.trace(create_perfetto_trace=True)`` and reads the trace's JSON with the standard
library. The summary (``OUTPUT.md`` and ``OUTPUT.json``, well under 1 MB) gives:

* the top 30 kernels by total time (events carrying an ``hlo_op``: a GPU's kernels on its device
  rows; on a CPU the XLA thunks the host runs, the only ops a CPU trace holds);
* the time split between the environment steps, acting and learning: each kernel's HLO op is
  looked up in the compiled update's HLO, whose ``op_name`` metadata carries the loop's
  ``named_scope`` s (``environment``, ``acting``, ``learning``; ``other``: outside them);
* the device's busy time (the union of kernel intervals) against the traced wall time, the idle
  gaps between kernels (the largest ``updates - 1`` are those between updates) and the host's
  time per update;
* compile seconds, and the peak device memory (``device.memory_stats()``, where the device
  reports it: not on a CPU).

``--smoke`` runs the same code on a tiny network, levels and unroll, for a CPU check.
"""

import argparse
import collections
import glob
import gzip
import json
import os
import re
import sys
import tempfile
import time

os.environ.setdefault("KERAS_BACKEND", "jax")

HERE = os.path.dirname(os.path.abspath(__file__))
# Beside this script, also when a test loads it by path or gpu_session runs it under `python -P`
# (neither puts the script's folder on sys.path).
sys.path.insert(0, HERE)

import results_io  # noqa: E402  (benchmarks/results_io.py, beside this script)
import update_cost_analysis  # noqa: E402

PARTS = ("environment", "acting", "learning", "other")
TOP_KERNELS = 30
MAX_GAPS_LISTED = 20
# --smoke: gpu_session.py --smoke's Box-World (its SMOKE_BOXWORLD_FLAGS and SMOKE_NUM_ENVS), so
# that its parts compile one update (its compilation cache).
SMOKE = dict(num_envs=2, unroll_length=4, test_presets=(),
             level=dict(goal_length=(1,), num_distractors=(0,), room_size=6),
             model=dict(key_dim=8, head_units=(8,) * 4))

_CONTROL_FLOW = re.compile(r"^(while|conditional|call)(\.\d+)?$")
_OP_NAME = re.compile(r'^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=.*op_name="([^"]*)"')


def scope_of_ops(hlo_text):
    """``{hlo op name: part}`` from the compiled HLO's ``op_name`` metadata (the loop's
    ``named_scope`` s); ops without metadata are left out (counted as ``other``)."""
    parts = {}
    for line in hlo_text.splitlines():
        match = _OP_NAME.match(line)
        if not match:
            continue
        path = match.group(2).split("/")
        parts[match.group(1)] = next((p for p in ("learning", "acting", "environment")
                                      if p in path), "other")
    return parts


def _events(trace_dir):
    """The complete (``ph == "X"``) events and the process names of the perfetto JSON trace."""
    found = sorted(glob.glob(os.path.join(trace_dir, "**", "perfetto_trace.json.gz"),
                             recursive=True))
    if not found:
        found = sorted(glob.glob(os.path.join(trace_dir, "**", "*.trace.json.gz"),
                                 recursive=True))
    if not found:
        raise FileNotFoundError(f"No perfetto_trace.json.gz or *.trace.json.gz under "
                                f"{trace_dir}: the profiler wrote no JSON trace.")
    with gzip.open(found[-1], "rt") as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    processes = {e["pid"]: e.get("args", {}).get("name", "") for e in events
                 if e.get("ph") == "M" and e.get("name") == "process_name"}
    return [e for e in events if e.get("ph") == "X"], processes


def summarise_trace(trace_dir, op_parts, updates):
    """The summary of a trace: kernels, the split by part, the device's busy time and gaps."""
    events, processes = _events(trace_dir)
    # A CPU trace nests a loop's thunks inside its `while` event: control flow is no kernel.
    kernels = [e for e in events if "hlo_op" in e.get("args", {})
               and not e["name"].startswith("end: ")
               and not _CONTROL_FLOW.match(e["args"]["hlo_op"])]
    device_pids = {pid for pid, name in processes.items() if "/device:" in name}
    on_device = [e for e in kernels if e["pid"] in device_pids]
    where = "device" if on_device else "host (a CPU trace: XLA's thunks on host threads)"
    kernels = on_device or kernels
    by_kernel = collections.defaultdict(lambda: [0, 0.0, ""])
    by_part = dict.fromkeys(PARTS, 0.0)
    for event in kernels:
        op = event["args"]["hlo_op"]
        part = op_parts.get(op, "other")
        entry = by_kernel[(event["name"], op)]
        entry[0] += 1
        entry[1] += float(event.get("dur", 0.0))
        entry[2] = part
        by_part[part] += float(event.get("dur", 0.0))
    total = sum(by_part.values())
    top = sorted(by_kernel.items(), key=lambda item: -item[1][1])[:TOP_KERNELS]
    intervals = sorted((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0.0)))
                       for e in kernels)
    busy, gaps, end = 0.0, [], None
    for start, stop in intervals:
        if end is None or start > end:
            if end is not None:
                gaps.append(start - end)
            busy += stop - start
            end = stop
        elif stop > end:
            busy += stop - end
            end = stop
    wall = (intervals[-1][1] - intervals[0][0]) if intervals else 0.0
    gaps.sort(reverse=True)
    between = gaps[:max(updates - 1, 0)]
    return dict(
        kernels_from=where, kernel_events=len(kernels), distinct_kernels=len(by_kernel),
        kernel_microseconds=total,
        parts={part: dict(microseconds=us, share=us / total if total else None)
               for part, us in by_part.items()},
        top_kernels=[dict(name=name[:200], hlo_op=op, calls=calls, microseconds=us,
                          share=us / total if total else None, part=part)
                     for (name, op), (calls, us, part) in top],
        traced_wall_microseconds=wall, busy_microseconds=busy,
        busy_share=busy / wall if wall else None,
        gaps_between_updates_microseconds=between,
        largest_gaps_microseconds=gaps[:MAX_GAPS_LISTED],
        idle_gaps=len(gaps), idle_microseconds=sum(gaps))


def peak_memory(device):
    """``(peak bytes in use, bytes limit)`` of ``device`` where it reports them, else Nones."""
    try:
        stats = device.memory_stats() or {}
    except (AttributeError, NotImplementedError, RuntimeError):
        stats = {}
    return stats.get("peak_bytes_in_use"), stats.get("bytes_limit")


def profile(args):
    """Builds, compiles, warms up and traces; returns the results dict."""
    import jax
    import keras

    from keras_relational.agents.compiled import levels

    overrides = dict(SMOKE) if args.smoke else {}
    num_envs = overrides.pop("num_envs", None) if args.smoke else args.num_envs
    if args.smoke and args.num_envs is not None:
        num_envs = args.num_envs
    if args.learner_minibatches is not None:
        overrides["learner_minibatches"] = args.learner_minibatches
    started = time.perf_counter()
    config, environment, model, compiled = update_cost_analysis.build(
        args.preset, num_envs, args.dtype_policy, level_source=args.level_source, **overrides)
    banks = levels.LevelBanks.for_config(environment, config)
    try:
        state = compiled.initial_state(banks.bank)
        banks.record(config.num_envs)
        built_seconds = time.perf_counter() - started
        state, compile_seconds = compiled.compile(state, banks.bank)
        op_parts = scope_of_ops(compiled._compiled_update.as_text())

        def one_update(state):
            bank = banks.for_update()
            state, metrics = compiled.update(state, bank)
            metrics = type(metrics)(*(keras.ops.convert_to_numpy(m) for m in metrics))
            banks.record(metrics.levels_started)
            return state, metrics

        tick = time.perf_counter()
        state, _ = one_update(state)
        first_update_seconds = time.perf_counter() - tick
        trace_dir = tempfile.mkdtemp(prefix="profile_update_")
        seconds = []
        with jax.profiler.trace(trace_dir, create_perfetto_trace=True):
            for _ in range(args.updates):
                tick = time.perf_counter()
                state, metrics = one_update(state)
                seconds.append(time.perf_counter() - tick)
    finally:
        banks.close()
    summary = summarise_trace(trace_dir, op_parts, args.updates)
    peak, limit = peak_memory(jax.devices()[0])
    frames = config.num_envs * config.unroll_length
    device, commit = update_cost_analysis.device_and_commit()
    return dict(
        device=device, commit=commit, preset=args.preset, smoke=args.smoke,
        num_envs=config.num_envs, unroll_length=config.unroll_length,
        learner_minibatches=config.learner_minibatches, dtype_policy=config.dtype_policy,
        devices_used=len(compiled.data_parallel.devices), frames_per_update=frames,
        parameters=model.count_params(), build_seconds=built_seconds,
        compile_seconds=compile_seconds, first_update_seconds=first_update_seconds,
        updates=args.updates, update_seconds=seconds,
        frames_per_second=frames * len(seconds) / sum(seconds),
        peak_device_bytes=peak, device_bytes_limit=limit, trace_dir=trace_dir,
        final_loss=float(metrics.loss), **summary)


def _ms(microseconds):
    return f"{microseconds / 1e3:,.2f}"


def markdown(result):
    share = lambda x: "" if x is None else f"{100 * x:.1f} %"  # noqa: E731
    peak = result["peak_device_bytes"]
    mean_seconds = sum(result["update_seconds"]) / len(result["update_seconds"])
    lines = [
        f"Device: {result['device']}; commit {result['commit']}. `--preset={result['preset']}`"
        + (" `--smoke` (a tiny network, levels and unroll)" if result["smoke"] else "")
        + f": {result['num_envs']:,} environments x {result['unroll_length']} steps "
        f"({result['frames_per_update']:,} frames an update), {result['learner_minibatches']} "
        f"learner minibatch(es), {result['dtype_policy']}, {result['devices_used']} device(s), "
        f"{result['parameters']:,} parameters.", "",
        f"- Build (network, levels, initial state): {result['build_seconds']:.1f} s; compile "
        f"of the update: {result['compile_seconds']:.1f} s; first update (after it): "
        f"{result['first_update_seconds']:.2f} s.",
        f"- {result['updates']} traced updates: {1e3 * mean_seconds:,.1f} ms "
        f"each on the host's clock (dispatch to metrics read), "
        f"{result['frames_per_second']:,.0f} trained frames/s.",
        f"- Kernels from the {result['kernels_from']}: {result['kernel_events']:,} events, "
        f"{result['distinct_kernels']:,} distinct; busy {_ms(result['busy_microseconds'])} ms "
        f"of {_ms(result['traced_wall_microseconds'])} ms traced "
        f"({share(result['busy_share'])}); {result['idle_gaps']:,} idle gaps, "
        f"{_ms(result['idle_microseconds'])} ms in all; between updates (the largest "
        f"{max(result['updates'] - 1, 0)}): "
        + (", ".join(_ms(g) for g in result["gaps_between_updates_microseconds"]) or "none")
        + " ms.",
        "- Peak device memory: " + (f"{peak / 2**30:,.2f} GiB" if peak is not None
                                    else "not reported by this device") + ".", "",
        "| part | ms (kernels) | share |", "|---|---|---|"]
    for part, entry in result["parts"].items():
        lines.append(f"| {part} | {_ms(entry['microseconds'])} | {share(entry['share'])} |")
    lines += ["", f"Top {TOP_KERNELS} kernels by total time:", "",
              "| kernel | HLO op | part | calls | ms | share |", "|---|---|---|---|---|---|"]
    for kernel in result["top_kernels"]:
        name = kernel["name"].replace("|", "/")
        lines.append(f"| `{name[:80]}` | `{kernel['hlo_op']}` | {kernel['part']} | "
                     f"{kernel['calls']:,} | {_ms(kernel['microseconds'])} | "
                     f"{share(kernel['share'])} |")
    return "\n".join(lines)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="zambaldi_fig3_relational",
                        help="a preset of keras_relational.agents.presets")
    parser.add_argument("--num_envs", type=int, default=None,
                        help="environments (default: the preset's; --smoke: 2)")
    parser.add_argument("--updates", type=int, default=5, help="updates traced")
    parser.add_argument("--level_source", default="device", choices=("device", "numpy"))
    parser.add_argument("--dtype_policy", default=None, help="default: the preset's")
    parser.add_argument("--learner_minibatches", type=int, default=None,
                        help="default: the config's (1)")
    parser.add_argument("--output", required=True,
                        help="writes OUTPUT.md and OUTPUT.json (a path without extension)")
    parser.add_argument("--smoke", action="store_true",
                        help="a tiny network, levels and unroll (a check of this script)")
    args = parser.parse_args(argv)
    if args.updates < 1:
        parser.error(f"--updates: expected a positive integer, received {args.updates}")
    if args.num_envs is not None and args.num_envs < 1:
        parser.error(f"--num_envs: expected a positive integer, received {args.num_envs}")
    from keras_relational import validation

    if args.dtype_policy is not None and args.dtype_policy not in validation.DTYPE_POLICIES:
        parser.error(f"--dtype_policy: expected one of {validation.DTYPE_POLICIES}, received "
                     f"{args.dtype_policy!r}")
    return args


def main(argv=None):
    args = parse_args(argv)
    import keras

    if keras.backend.backend() != "jax":
        raise SystemExit(f"profile_update.py traces with jax.profiler: run it with "
                         f"KERAS_BACKEND=jax, received {keras.backend.backend()!r}.")
    result = profile(args)
    text = markdown(result)
    print(text)
    results_io.write_markdown(args.output + ".md", text)
    results_io.write_json(args.output + ".json", result)


if __name__ == "__main__":
    main()
