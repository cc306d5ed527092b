"""Level-steps per second of `TensorBoxWorld` (compiled; JAX, TensorFlow) vs `BatchedBoxWorld`.

Every figure steps levels of the training distribution (L ~ U{1..4}, D ~ U{0..4}, 120-step limit)
with uniformly random actions drawn before the timer starts; RGB observations and auto-resets are
included. "steps/s" counts level-steps: a batched step of N levels counts N. For each number of
levels N, in one run on the same machine:

* `BatchedBoxWorld` (NumPy, host), after 121 untimed steps (past the first wave of truncations
  and restarts: the episodes de-synchronise);
* `TensorBoxWorld.step` compiled once (`jax.jit`, `tf.function(jit_compile=True)`), called once
  per step ("one call per step");
* K = `--loop-steps` steps in one compiled call (`keras.ops.fori_loop` over `step`; every
  observation is reduced into a checksum so that the compiler cannot drop it), what a compiled
  actor-learner loop does ("K steps per call").

Level sources (issue 24: where fresh levels come from, `TensorBoxWorld(level_source=...)`), for
each N and backend:

* the on-device generator's levels per second (`sample_levels` compiled, banks of
  max(N, 256) levels), against the NumPy generator's (one host thread);
* level-steps per second *including the levels the episodes consume* (random actions, so nearly
  every episode runs to the 120-step truncation): every compiled call of K steps plays a fresh
  bank of R levels, R = 1.5 x the levels K steps of N slots start (measured on
  `BatchedBoxWorld`); "numpy": the banks come from `bank_stream` (the NumPy generator in a host
  thread, drawing ahead while the device steps); "device": the compiled call draws its bank
  itself (`sample_levels` inside the same compiled function).

And the compiled actor-learner loop (`train_boxworld --trainer=compiled`, JAX) at the demo's
settings (`benchmarks/demo_flags.txt`) for `--train-updates` updates with each `--level_source`:
trained frames per second between the first and the last progress line (compilation excluded).

The tensor environment's work per step does not depend on the levels or on how many episodes end
(every rule is computed for every slot), so its levels come from one bank of at most 4,096
levels (reused modulo the bank's size when N is larger). Each point runs for about `--seconds`
after compilation (compile time reported apart); the JAX and TensorFlow points run in one child
process per backend (KERAS_BACKEND is fixed at import). The load average before and after is
printed: the machine may be shared.

    python benchmarks/tensor_boxworld_speed.py [--levels 1 256 4096 65536] [--seconds 8] \\
        [--source-levels 1 256 4096] [--output benchmarks/results/tensor_boxworld_speed_cpu.md]

``--smoke`` plays tiny levels instead (``SMOKE_LEVELS``: the Box-World of
``benchmarks/gpu_session.py --smoke``), whose generator compiles in a third of the time: a CPU
check of the code, not a figure (the compiled loop's rows, ``--train-updates``, keep the demo's
settings).
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np

# Beside this script, also under `python -P` (which leaves the script's folder off sys.path).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import results_io  # noqa: E402  (benchmarks/results_io.py)

# One step limit and the restart after it: the NumPy levels' episodes de-synchronise, and the
# timed steps come after the wave of truncations that ends the episodes nobody finished.
WARMUP_STEPS = 121
MAX_BANK = 4096
# --smoke's levels (BoxWorldConfig fields): gpu_session.py --smoke's SMOKE_BOXWORLD_FLAGS.
SMOKE_LEVELS = dict(room_size=6, goal_length=(1,), num_distractors=(0,))
LEVELS = {}  # the BoxWorldConfig fields of every environment here: SMOKE_LEVELS with --smoke


def _timed_rate(step_once, levels, seconds, steps_per_call=1):
    """Level-steps per second of repeated `step_once()` for about `seconds`."""
    calls, start = 0, time.perf_counter()
    while True:
        step_once()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return calls * steps_per_call * levels / elapsed


def numpy_rate(levels, seconds, seed=0):
    """(level-steps per second, episodes started per level-step) of `BatchedBoxWorld`."""
    from keras_relational.environments import BatchedBoxWorld

    env = BatchedBoxWorld(levels, seed=seed, **LEVELS)
    rng = np.random.RandomState(seed)
    actions = rng.randint(4, size=(64, levels))
    env.reset()
    for t in range(WARMUP_STEPS):
        env.step(actions[t % 64])
    counter = iter(range(10**12))
    firsts = []

    def one_step():
        firsts.append(int((env.step(actions[next(counter) % 64]).step_type == 0).sum()))

    rate = _timed_rate(one_step, levels, seconds)
    return rate, sum(firsts) / (levels * len(firsts))


def generation_rate(seconds, seed=0):
    """Levels per second of the NumPy generator (one thread), training distribution."""
    from keras_relational.environments.boxworld import BoxWorldConfig, Draws, generate_level

    config, draws = BoxWorldConfig(**LEVELS), Draws(np.random.RandomState(seed))
    return _timed_rate(lambda: generate_level(config, draws), 1, seconds)


def tensor_rates(backend, levels, seconds, loop_steps, seed=0):
    """{"step": rate, "loop": rate, "compile_step": s, "compile_loop": s} of one N."""
    import keras
    from keras import ops

    from keras_relational.environments import TensorBoxWorld

    assert keras.backend.backend() == backend, keras.backend.backend()
    env = TensorBoxWorld(**LEVELS)
    bank = {k: ops.convert_to_tensor(v) for k, v in
            env.level_bank(min(max(2 * levels, 64), MAX_BANK), seed).items()}
    rng = np.random.RandomState(seed)
    actions = ops.convert_to_tensor(rng.randint(4, size=(loop_steps, levels)).astype(np.int32))

    def loop(state, actions, bank):
        def body(i, carry):
            state, checksum = carry
            state, timestep = env.step(state, ops.take(actions, i, axis=0), bank)
            checksum = checksum + ops.sum(ops.cast(timestep.observation, "int32"))
            return state, checksum

        return ops.fori_loop(0, loop_steps, body, (state, ops.convert_to_tensor(0, "int32")))

    step, loop = _compile(backend, env.step), _compile(backend, loop)
    state, _ = env.reset(bank, levels)
    result = {}
    start = time.perf_counter()
    state, timestep = step(state, ops.take(actions, 0, axis=0), bank)
    ops.convert_to_numpy(timestep.reward)
    result["compile_step"] = time.perf_counter() - start
    box = {"state": state, "t": 0}

    def one_step():
        box["state"], timestep = step(box["state"], ops.take(actions, box["t"] % loop_steps,
                                                              axis=0), bank)
        box["t"] += 1
        if box["t"] % 16 == 0:  # wait for the device now and then (asynchronous dispatch)
            ops.convert_to_numpy(timestep.reward)

    result["step"] = _timed_rate(one_step, levels, seconds)
    start = time.perf_counter()
    state, checksum = loop(box["state"], actions, bank)
    ops.convert_to_numpy(checksum)
    result["compile_loop"] = time.perf_counter() - start
    box["state"] = state

    def one_loop():
        box["state"], checksum = loop(box["state"], actions, bank)
        ops.convert_to_numpy(checksum)

    result["loop"] = _timed_rate(one_loop, levels, seconds, steps_per_call=loop_steps)
    return result


def source_rates(backend, levels, seconds, loop_steps, per_step, with_sources, seed=0):
    """{"generate": levels/s of the device generator, "numpy"/"device": level-steps/s of the
    K-step loop fed fresh banks by each source (when `with_sources`)}."""
    import math

    from keras import ops

    from keras_relational.environments import TensorBoxWorld
    from keras_relational.environments.tensor_random import seed_state

    device_env = TensorBoxWorld(level_source="device", **LEVELS)
    size = max(levels, 256)
    sample = _compile(backend, lambda s: device_env.sample_levels(s, size))
    bank, _, state_seed = sample(seed_state(seed))
    ops.convert_to_numpy(bank["agent"])
    box = {"seed": state_seed}

    def one_bank():
        bank, _, box["seed"] = sample(box["seed"])
        ops.convert_to_numpy(bank["agent"])

    result = {"generate": _timed_rate(one_bank, size, seconds)}
    if not with_sources:
        return result
    per_call = max(1, math.ceil(1.5 * per_step * levels * loop_steps))
    result["bank_levels"] = per_call
    rng = np.random.RandomState(seed)
    actions = ops.convert_to_tensor(rng.randint(4, size=(loop_steps, levels)).astype(np.int32))

    def steps(state, bank):
        def body(i, carry):
            state, checksum = carry
            state, timestep = device_env.step(state, ops.take(actions, i, axis=0), bank)
            return state, checksum + ops.sum(ops.cast(timestep.observation, "int32"))

        return ops.fori_loop(0, loop_steps, body, (state, ops.convert_to_tensor(0, "int32")))

    def device_call(state, seed):
        bank, _, seed = device_env.sample_levels(seed, per_call)
        state = dict(state, cursor=ops.zeros_like(state["cursor"]))
        state, checksum = steps(state, bank)
        return state, checksum, seed

    numpy_env = TensorBoxWorld(**LEVELS)
    stream = numpy_env.bank_stream(per_call, seed)
    numpy_call = _compile(backend, steps)
    device_call = _compile(backend, device_call)
    first = {k: ops.convert_to_tensor(v) for k, v in next(stream).items()}
    for name in ("numpy", "device"):
        state, _ = device_env.reset(first, levels)
        box = {"state": state, "seed": seed_state(seed + 1)}
        if name == "numpy":
            def one_call(box=box):
                bank = {k: ops.convert_to_tensor(v) for k, v in next(stream).items()}
                box["state"] = dict(box["state"], cursor=ops.zeros_like(box["state"]["cursor"]))
                box["state"], checksum = numpy_call(box["state"], bank)
                ops.convert_to_numpy(checksum)
        else:
            def one_call(box=box):
                box["state"], checksum, box["seed"] = device_call(box["state"], box["seed"])
                ops.convert_to_numpy(checksum)
        one_call()  # compiles
        result[name] = _timed_rate(one_call, levels, seconds, steps_per_call=loop_steps)
    stream.close()
    return result


def train_worker(source, updates):
    """One compiled-loop run at the demo's settings: prints a JSON line with its frames/s."""
    import tempfile

    from keras_relational.experiments import train_boxworld

    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "demo_flags.txt")) as f:
        demo = f.read().split()
    log_interval = max(updates // 6, 1)
    train_boxworld.FLAGS([sys.argv[0], *demo, "--trainer=compiled", f"--level_source={source}",
                          f"--num_iterations={updates}", f"--log_interval={log_interval}",
                          "--eval_episodes=0", f"--checkpoint_interval={10 * updates}"])
    config = train_boxworld.config_from_flags()
    from keras_relational.agents.compiled import train_eval

    with tempfile.TemporaryDirectory() as root:
        history = train_eval.train_eval(root, config, print_fn=lambda line: None)["history"]
    first, last = history[0], history[-1]
    print(json.dumps({"source": source, "fps": (last["frames"] - first["frames"])
                      / (last["seconds"] - first["seconds"])}))


def _train_rows(args):
    """{source: frames/s} of the compiled loop at the demo's settings, one process each."""
    rows = {}
    for source in ("numpy", "device"):
        env = dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="3")
        command = [sys.executable, os.path.abspath(__file__), "--train-worker", source,
                   "--train-updates", str(args.train_updates)]
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        if done.returncode:
            raise RuntimeError(f"the {source} training run failed:\n{done.stderr[-3000:]}")
        rows[source] = json.loads(done.stdout.strip().splitlines()[-1])["fps"]
        print(f"  compiled loop, {source} levels: {rows[source]:,.0f} frames/s", flush=True)
    return rows


def _compile(backend, function):
    if backend == "jax":
        import jax

        return jax.jit(function)
    import tensorflow as tf

    return tf.function(function, jit_compile=True, autograph=False)


def worker(args):
    """The child process of one backend: prints one JSON line of rates."""
    rows = {}
    for levels in args.levels:
        rows[levels] = tensor_rates(args.worker, levels, args.seconds, args.loop_steps)
        if args.worker in args.source_backends:
            rows[levels]["sources"] = source_rates(
                args.worker, levels, args.seconds, args.loop_steps, args.per_step,
                levels in args.source_levels)
        print(f"  {args.worker} {levels}: {rows[levels]}", file=sys.stderr, flush=True)
    import keras

    print(json.dumps({"backend": args.worker, "keras": keras.__version__,
                      "device": _device_name(args.worker), "rows": rows}))


def _device_name(backend):
    """The device a backend computes on, e.g. "gpu (NVIDIA H100 80GB HBM3)"."""
    if backend == "jax":
        import jax

        device = jax.devices()[0]
        return f"{device.platform} ({device.device_kind})"
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    return f"gpu ({len(gpus)})" if gpus else "cpu"


def _source_table(args, tensor, numpy_rates, levels_per_second):
    """The level-source comparison: generator rates and the loop fed by each source."""
    lines = [
        f"Level sources. Generators: levels per second (NumPy generator: "
        f"{levels_per_second:,.0f} levels/s on one host thread). Loop: level-steps per second "
        f"of {args.loop_steps} steps per compiled call, every call playing a fresh bank (R "
        f"levels, 1.5 x what its episodes start): 'numpy' banks drawn ahead by the NumPy "
        f"generator in a host thread (`bank_stream`), 'device' banks drawn inside the compiled "
        f"call (`sample_levels`).", "",
        "| levels N | backend | device generator, levels/s (x NumPy's) | loop, numpy banks | "
        "loop, device banks | faster |", "|---|---|---|---|---|---|"]
    for levels in args.levels:
        for backend in tensor:
            if "sources" not in tensor[backend]["rows"][str(levels)]:
                continue
            row = tensor[backend]["rows"][str(levels)]["sources"]
            cells = [f"{levels:,}", backend,
                     f"{row['generate']:,.0f} ({row['generate'] / levels_per_second:.2g}x)"]
            if "numpy" in row:
                fast, slow = sorted((row["device"], row["numpy"]), reverse=True)
                faster = "device" if row["device"] > row["numpy"] else "numpy"
                cells += [f"{row['numpy']:,.0f}", f"{row['device']:,.0f}",
                          f"{faster} ({fast / slow:.2g}x)"]
            else:
                cells += ["-", "-", "-"]
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 256, 4096, 65536])
    parser.add_argument("--seconds", type=float, default=8.0, help="timed seconds per point")
    parser.add_argument("--loop-steps", type=int, default=32, help="steps per compiled call")
    parser.add_argument("--backends", nargs="+", default=["jax", "tensorflow"])
    parser.add_argument("--source-levels", type=int, nargs="+", default=[1, 256, 4096],
                        help="the N at which the loop is timed with each level source")
    parser.add_argument("--source-backends", nargs="+", default=["jax"],
                        help="the backends whose level sources are timed (XLA compiles the "
                        "TensorFlow generator slowly)")
    parser.add_argument("--per-step", type=float, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--train-updates", type=int, default=300,
                        help="updates of the compiled loop per level source (0: skip)")
    parser.add_argument("--train-worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--output", default=None,
                        help="also write the table to this markdown file (and .json beside it)")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--smoke", action="store_true",
                        help=f"tiny levels ({SMOKE_LEVELS}), for a CPU check of the code")
    args = parser.parse_args()
    if args.smoke:
        LEVELS.update(SMOKE_LEVELS)
    if args.worker:
        return worker(args)
    if args.train_worker:
        return train_worker(args.train_worker, args.train_updates)
    load_before = os.getloadavg()
    numpy_rates, episodes = {}, {}
    for levels in args.levels:
        numpy_rates[levels], episodes[levels] = numpy_rate(levels, args.seconds)
        print(f"  numpy {levels}: {numpy_rates[levels]:,.0f} steps/s", flush=True)
    levels_per_second = generation_rate(args.seconds)
    tensor = {}
    for backend in args.backends:
        env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3")
        command = [sys.executable, os.path.abspath(__file__), "--worker", backend,
                   "--seconds", str(args.seconds), "--loop-steps", str(args.loop_steps),
                   "--per-step", str(max(episodes.values())),
                   "--source-levels", *map(str, args.source_levels),
                   "--source-backends", *args.source_backends,
                   "--levels", *map(str, args.levels), *(["--smoke"] if args.smoke else [])]
        # The worker's per-N lines (stderr) pass straight through, so a run stopped part way
        # still shows what it measured.
        sys.stdout.flush()
        done = subprocess.run(command, env=env, stdout=subprocess.PIPE, text=True, check=False)
        if done.returncode:
            raise RuntimeError(f"the {backend} worker failed (its messages are above)")
        tensor[backend] = json.loads(done.stdout.strip().splitlines()[-1])
    train = _train_rows(args) if args.train_updates else {}
    load_after = os.getloadavg()

    lines = [
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs (shared), "
        f"Python {platform.python_version()}, NumPy {np.__version__}, Keras "
        f"{next(iter(tensor.values()))['keras'] if tensor else '-'}; devices: "
        + (", ".join(f"{b} on {t.get('device', '-')}" for b, t in tensor.items()) or "-")
        + f"; load average "
        f"{load_before[0]:.1f} before, {load_after[0]:.1f} after. Random actions, "
        + (f"--smoke's tiny levels ({SMOKE_LEVELS})" if args.smoke else "training distribution")
        + f", RGB observations and auto-resets included; about {args.seconds:g} s "
        f"per point. Level-steps per second (wall clock); in brackets: the tensor "
        f"environment's rate over `BatchedBoxWorld`'s.", "",
        "| levels N | `BatchedBoxWorld` (NumPy) | " + " | ".join(
            f"`TensorBoxWorld` {b}, one call per step | `TensorBoxWorld` {b}, "
            f"{args.loop_steps} steps per call" for b in tensor) + " |",
        "|---|---|" + "---|---|" * len(tensor)]
    for levels in args.levels:
        base = numpy_rates[levels]
        cells = [f"{levels:,}", f"{base:,.0f}"]
        for backend in tensor:
            row = tensor[backend]["rows"][str(levels)]
            cells += [f"{row['step']:,.0f} ({row['step'] / base:.2g}x)",
                      f"{row['loop']:,.0f} ({row['loop'] / base:.2g}x)"]
        lines.append("| " + " | ".join(cells) + " |")
    compile_times = "; ".join(
        f"{b}: " + ", ".join(f"{row['compile_step']:.1f} / {row['compile_loop']:.1f} s"
                             for row in tensor[b]["rows"].values()) for b in tensor)
    lines += ["", f"Compile times (one step / the {args.loop_steps}-step loop, per N in the "
              f"order of the table): {compile_times}."]
    # Banks: the NumPy generator on one host thread against the levels a loop consumes.
    per_step = max(episodes.values())
    best_rate = max([row["loop"] for t in tensor.values() for row in t["rows"].values()]
                    + [0.0])
    lines += ["", f"Level banks: the NumPy generator draws {levels_per_second:,.0f} levels/s on "
              f"one thread; random-action episodes start at most {per_step:.4f} new levels "
              f"per level-step (`BatchedBoxWorld` above), so the fastest rate above "
              f"({best_rate:,.0f} level-steps/s) consumes about "
              f"{best_rate * per_step:,.0f} levels/s."]
    lines += ["", *_source_table(args, tensor, numpy_rates, levels_per_second)]
    if train:
        lines += ["", f"Compiled loop (`train_boxworld --trainer=compiled`, JAX, demo settings, "
                  f"{args.train_updates} updates): " + "; ".join(
                      f"{source} levels {fps:,.0f} frames/s" for source, fps in train.items())
                  + "."]
    text = "\n".join(lines)
    print()
    print(text)
    if args.output:
        results_io.write_markdown(args.output, text)
        results_io.write_json(os.path.splitext(args.output)[0] + ".json", {
            "args": vars(args), "load_average": [load_before[0], load_after[0]],
            "numpy": numpy_rates, "episodes_per_level_step": episodes,
            "levels_per_second": levels_per_second, "tensor": tensor, "train": train})


if __name__ == "__main__":
    main()
