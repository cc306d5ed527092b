"""Environment steps per second of BoxWorld: single env, NumPy-batched env, two processes.

Every figure steps levels of the training distribution (L ~ U{1..4}, D ~ U{0..4} distractor
branches of length 1, 120-step limit) with uniformly random actions drawn before the timer
starts. Resets (level generation) and the RGB observation of every step are included; nothing
else (no agent). "steps/s" counts level-steps: a batched step of N levels counts N. Batched
runs are timed after 120 untimed steps (the levels' episodes de-synchronise) for 1,200 batched
steps (10 step limits, so every level is reset about 10 times). Each figure is the best of
`--repeats` timed runs, because the machine may be shared; the CPU-time column (steps per
second of CPU time used by the stepping process) is much less sensitive to other load. The
two-process rows run one batched env per process at the same time (a barrier aligns the starts)
and add their rates. Prints a markdown table (`--output`: also a results file for the docs).

    .venv/bin/python benchmarks/boxworld_speed.py [--repeats 3] [--batch-sizes 256 1024] \\
        [--output benchmarks/results/boxworld_speed.md]
"""

import argparse
import multiprocessing
import os
import platform
import time

import numpy as np
import results_io  # benchmarks/results_io.py, beside this script

from keras_relational.environments import (
    BatchedBoxWorld,
    BatchedBridgeBoxWorld,
    BoxWorld,
    BridgeBoxWorld,
)

GOAL_SINGLE = 5e4  # the goals
GOAL_BATCHED = 5e5
WARMUP_STEPS = 120  # untimed batched steps after reset() (one step limit)


def _timed(function):
    """(wall seconds, CPU seconds of this process) of `function()`."""
    wall, cpu = time.perf_counter(), time.process_time()
    function()
    return time.perf_counter() - wall, time.process_time() - cpu


def single_rate(make, steps, seed):
    """(steps per wall second, steps per CPU second) of one env."""
    env = make(seed)
    actions = np.random.RandomState(seed).randint(4, size=steps).tolist()
    env.reset()

    def run():
        for action in actions:
            env.step(action)

    wall, cpu = _timed(run)
    return steps / wall, steps / cpu


def batched_rate(make, batch_size, steps, seed, barrier=None):
    env = make(batch_size, seed)
    actions = np.random.RandomState(seed).randint(4, size=(steps, batch_size))
    env.reset()
    for action in actions[:WARMUP_STEPS]:  # de-synchronise the levels' episodes first
        env.step(action)
    if barrier is not None:
        barrier.wait()

    def run():
        for action in actions[WARMUP_STEPS:]:
            env.step(action)

    wall, cpu = _timed(run)
    level_steps = batch_size * (steps - WARMUP_STEPS)
    return level_steps / wall, level_steps / cpu


def _make_single(seed):
    return BoxWorld(seed=seed)


def _make_batched(batch_size, seed):
    return BatchedBoxWorld(batch_size, seed=seed)


def _make_bridge(seed):
    return BridgeBoxWorld(seed=seed)


def _make_batched_bridge(batch_size, seed):
    return BatchedBridgeBoxWorld(batch_size, seed=seed)


def _worker(args):
    batch_size, steps, seed, barrier = args
    return batched_rate(_make_batched, batch_size, steps, seed, barrier)


def parallel_rates(processes, batch_size, steps, repeats):
    """Best summed rate of `processes` batched envs stepped at the same time, per repeat."""
    context = multiprocessing.get_context("spawn")  # the parent has imported TensorFlow
    with context.Manager() as manager, context.Pool(processes) as pool:
        barrier = manager.Barrier(processes)
        rates = [pool.map(_worker, [(batch_size, steps, 100 * repeat + i, barrier)
                                    for i in range(processes)]) for repeat in range(repeats)]
    # Each process's rates are summed: wall-clock (they ran at the same time) and per CPU second
    # (what `processes` dedicated cores would give).
    return tuple(max(sum(rate[k] for rate in run) for run in rates) for k in (0, 1))


def best(function, repeats):
    """The best wall-clock rate and the best CPU rate over `repeats` runs."""
    rates = [function(repeat) for repeat in range(repeats)]
    return max(r[0] for r in rates), max(r[1] for r in rates)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--single-steps", type=int, default=200_000)
    parser.add_argument("--batched-steps", type=int, default=1200,
                        help="timed batched steps (10 step limits, so resets are included)")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[256, 1024])
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--output", default=None,
                        help="also write the table to this markdown file (and .json beside it)")
    args = parser.parse_args()
    load_before = os.getloadavg()
    rows = []

    def add(env, form, levels, processes, rates):
        rows.append((env, form, levels, processes) + tuple(rates))
        print(f"  {env} {form} ({levels} levels, {processes} process(es)): {rates[0]:,.0f} "
              f"steps/s, {rates[1]:,.0f} steps per CPU second", flush=True)

    single = best(lambda r: single_rate(_make_single, args.single_steps, r), args.repeats)
    add("BoxWorld", "`BoxWorld`", "1", 1, single)
    steps = WARMUP_STEPS + args.batched_steps
    for size in args.batch_sizes:
        rate = best(lambda r, size=size: batched_rate(_make_batched, size, steps, r),
                    args.repeats)
        add("BoxWorld", "`BatchedBoxWorld`", str(size), 1, rate)
    if args.processes > 1:
        size = args.batch_sizes[0]
        rate = parallel_rates(args.processes, size, steps, args.repeats)
        add("BoxWorld", f"{args.processes} x `BatchedBoxWorld`",
            f"{args.processes} x {size}", args.processes, rate)
    bridge = best(lambda r: single_rate(_make_bridge, args.single_steps // 4, r), args.repeats)
    add("bridge BoxWorld", "`BridgeBoxWorld`", "1", 1, bridge)
    size = args.batch_sizes[0]
    # Random bridge episodes last ~575 steps (no step limit): time 2 x as many batched steps.
    rate = best(lambda r: batched_rate(_make_batched_bridge, size, 2 * steps, r), args.repeats)
    add("bridge BoxWorld", "`BatchedBridgeBoxWorld`", str(size), 1, rate)
    load_after = os.getloadavg()

    lines = [
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, NumPy {np.__version__}; load average "
        f"{load_before[0]:.1f} before, {load_after[0]:.1f} after. Random actions, training "
        f"distribution, resets and RGB observations included; best of {args.repeats} runs.", "",
        "| environment | form | levels stepped together | processes | steps/s (wall clock) "
        "| steps per CPU second (per process, summed) |",
        "|---|---|---|---|---|---|"]
    for env, form, levels, processes, rate, cpu_rate in rows:
        lines.append(f"| {env} | {form} | {levels} | {processes} | {rate:,.0f} | {cpu_rate:,.0f} |")
    batched_best = max(row[4] for row in rows if row[0] == "BoxWorld" and "Batched" in row[1])
    lines += [
        "", "Reference point (quoted, not measured here): DeepMind's pycolab Box-World runs about "
        "1.1-1.7e4 steps/s on one core without rendering pixels.",
        f"Goals (wall clock): single env >= {GOAL_SINGLE:.0e} steps/s: "
        f"{'met' if single[0] >= GOAL_SINGLE else 'NOT met'} ({single[0]:,.0f}); batched "
        f"(>= 256 levels) >= {GOAL_BATCHED:.0e} steps/s on 2 cores: "
        f"{'met' if batched_best >= GOAL_BATCHED else 'NOT met'} ({batched_best:,.0f})."]
    text = "\n".join(lines)
    print()
    print(text)
    if args.output:
        results_io.write_markdown(args.output, text)
        results_io.write_json(os.path.splitext(args.output)[0] + ".json", {
            "args": vars(args), "load_average": [load_before[0], load_after[0]],
            "rows": [dict(zip(("environment", "form", "levels", "processes", "steps_per_s",
                               "steps_per_cpu_s"), row, strict=True)) for row in rows]})

if __name__ == "__main__":
    main()
