"""Train-step cost of 2-simplicial attention (Clift et al. 2020), printed as markdown tables.

1. Agent widths (N = 40 standard + M = 2 virtual entities, model width 64, 2 x 32 1-simplicial
   heads, one 48-wide 2-simplicial head, 2 iterations with shared weights): one jit-compiled
   train step (forward, backward, RMSProp update, MSE loss) of ``SimplicialTransformerBlock``
   against (a) the same block with the 2-simplicial branch switched off (Clift et al.'s
   relational block) and (b) ``keras_relational.RelationalBlock`` (Zambaldi et al.'s layout)
   applied twice with shared weights. Clift et al. report 80 ms vs 35 ms per gradient step
   (2.3x) for their whole agents on a GPU; this measures the blocks alone on the CPU.
2. ``SimplicialAttention`` alone in virtual mode (M = 2) for N = 64 .. 1024, and in full mode for
   small N: train-step time, its growth relative to the smallest N, and (JAX backend) the peak
   temporary memory XLA plans for the compiled step (``memory_analysis().temp_size_in_bytes``).

The models are timed in interleaved rounds (each round runs every model for ``--steps`` steps),
and every ratio is the median over rounds of the per-round ratio, so load from other processes
on a shared machine affects numerator and denominator alike. By default XLA runs on one thread
and the clock is the CPU time of this process (``time.process_time``), which other processes'
load barely changes; ``--threads 0 --clock wall`` measures multi-threaded wall time instead.
Under JAX the agent table also gives the ratio of the FLOPs XLA counts for the compiled steps
(``cost_analysis()``): the ratio of arithmetic work, to compare the time ratio against.

Usage::

    python benchmarks/simplicial_speed.py --backend jax
    python benchmarks/simplicial_speed.py --backend tensorflow --part agent
"""

import argparse
import os
import statistics
import sys
import time


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=("jax", "tensorflow"), default="jax")
    parser.add_argument("--part", choices=("agent", "scaling", "all"), default="all")
    parser.add_argument("--batch", type=int, default=128, help="batch size of the agent part")
    parser.add_argument("--scaling_batch", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--steps", type=int, default=5, help="train steps per model per round")
    parser.add_argument("--virtual_sizes", default="64,128,256,512,1024")
    parser.add_argument("--full_sizes", default="8,16,32,64")
    parser.add_argument("--threads", type=int, default=1,
                        help="intra-op threads (1: CPU time = work done, robust to other load)")
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                        help="time.process_time (CPU time of this process) or perf_counter")
    parser.add_argument("--output", default=None,
                        help="also write the tables to this markdown file")
    return parser.parse_args(argv)


ARGS = parse_args(sys.argv[1:])
os.environ["KERAS_BACKEND"] = ARGS.backend
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
if ARGS.threads == 1:
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                               + " --xla_cpu_multi_thread_eigen=false"
                               + " intra_op_parallelism_threads=1")
if ARGS.backend == "tensorflow":
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(ARGS.threads)
    tf.config.threading.set_inter_op_parallelism_threads(ARGS.threads)

import keras  # noqa: E402
import numpy as np  # noqa: E402
import results_io  # noqa: E402  (benchmarks/results_io.py, beside this script)

import keras_relational  # noqa: E402


def train_step(model, x, y):
    """A compiled train step ``run(steps)`` (blocks until done) and its peak temp memory."""
    optimizer = keras.optimizers.RMSprop(1e-4)
    optimizer.build(model.trainable_variables)
    if keras.backend.backend() == "jax":
        import jax
        import jax.numpy as jnp

        def loss_fn(trainable, non_trainable, x, y):
            out, non_trainable = model.stateless_call(trainable, non_trainable, x, training=True)
            return jnp.mean(jnp.square(out - y)), non_trainable

        def step(trainable, non_trainable, opt_vars, x, y):
            (loss, non_trainable), grads = jax.value_and_grad(loss_fn, has_aux=True)(
                trainable, non_trainable, x, y)
            trainable, opt_vars = optimizer.stateless_apply(opt_vars, grads, trainable)
            return loss, trainable, non_trainable, opt_vars

        state = [[v.value for v in model.trainable_variables],
                 [v.value for v in model.non_trainable_variables],
                 [v.value for v in optimizer.variables]]
        x, y = jnp.asarray(x), jnp.asarray(y)
        compiled = jax.jit(step, donate_argnums=(0, 1, 2)).lower(*state, x, y).compile()
        memory = compiled.memory_analysis()
        cost = compiled.cost_analysis()
        cost = cost[0] if isinstance(cost, (list, tuple)) else cost
        peak = None if memory is None else memory.temp_size_in_bytes
        flops = None if not cost else cost.get("flops")

        def run(steps):
            nonlocal state
            for _ in range(steps):
                loss, *state = compiled(*state, x, y)
            loss.block_until_ready()

        return run, peak, flops

    import tensorflow as tf

    @tf.function(jit_compile=True)
    def tf_step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x, training=True) - y))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply(grads, model.trainable_variables)
        return loss

    x, y = tf.constant(x), tf.constant(y)

    def run(steps):
        for _ in range(steps):
            loss = tf_step(x, y)
        loss.numpy()

    return run, None, None


def build(layer_fn, input_shape, seed=0):
    """A functional model around ``layer_fn(inputs)``, random inputs and regression targets."""
    rng = np.random.RandomState(seed)
    inputs = keras.Input(input_shape[1:])
    model = keras.Model(inputs, layer_fn(inputs))
    x = rng.normal(size=input_shape).astype("float32")
    y = rng.normal(size=(input_shape[0], *model.output_shape[1:])).astype("float32")
    return model, x, y


def time_interleaved(runs, rounds, steps):
    """Per-step seconds ``[rounds][model]`` on ``--clock`` (one warm-up round first)."""
    clock = time.process_time if ARGS.clock == "cpu" else time.perf_counter
    for run in runs:
        run(2)
    times = []
    for _ in range(rounds):
        row = []
        for run in runs:
            start = clock()
            run(steps)
            row.append((clock() - start) / steps)
        times.append(row)
    return times


def agent_widths():
    n, features = 40, 64  # Clift et al. 2020, Sec. 4: N = 40 entities of width 64
    shape = (ARGS.batch, n, features)

    def relational_block_twice(inputs):
        block = keras_relational.RelationalBlock(num_heads=2, key_dim=32, mlp_hidden_units=(64,))
        return block(block(inputs))

    candidates = [
        ("SimplicialTransformerBlock (M=2, d2=48)",
         lambda i: keras_relational.SimplicialTransformerBlock()(i)),
        ("same block, 2-simplicial branch off (M=0)",
         lambda i: keras_relational.SimplicialTransformerBlock(use_simplicial=False)(i)),
        ("RelationalBlock x2, shared weights", relational_block_twice),
    ]
    runs, params, flops = [], [], []
    for _, layer_fn in candidates:
        model, x, y = build(layer_fn, shape)
        run, _, step_flops = train_step(model, x, y)
        runs.append(run)
        flops.append(step_flops)
        params.append(model.count_params())
    times = np.array(time_interleaved(runs, ARGS.rounds, ARGS.steps))
    print(f"\n### Train step at agent widths ({ARGS.backend}, batch {ARGS.batch}, N=40, M=2, "
          f"D=64, 2 iterations; median of {ARGS.rounds} interleaved rounds x {ARGS.steps} "
          "steps)\n")
    print(f"| model | parameters | {ARGS.clock} ms / train step | simplicial / this (time) | "
          "simplicial / this (XLA flops) |")
    print("|---|---:|---:|---:|---:|")
    for i, (label, _) in enumerate(candidates):
        ratio = statistics.median(times[:, 0] / times[:, i])
        flops_ratio = "n/a" if not flops[i] else f"{flops[0] / flops[i]:.2f}x"
        print(f"| {label} | {params[i]:,} | {1e3 * np.median(times[:, i]):.2f} | "
              f"{ratio:.2f}x | {flops_ratio} |")


def scaling():
    features, m = 64, 2
    rows = []
    for mode, sizes in (("virtual", ARGS.virtual_sizes), ("full", ARGS.full_sizes)):
        sizes = [int(s) for s in sizes.split(",")]
        runs, peaks = [], []
        for n in sizes:
            count = n + m if mode == "virtual" else n

            def layer_fn(inputs, mode=mode):
                return keras_relational.SimplicialAttention(num_heads=1, key_dim=48,
                                                            mode=mode)(inputs)

            model, x, y = build(layer_fn, (ARGS.scaling_batch, count, features))
            run, peak, _ = train_step(model, x, y)
            runs.append(run)
            peaks.append(peak)
        times = np.array(time_interleaved(runs, ARGS.rounds, ARGS.steps))
        for i, n in enumerate(sizes):
            growth = statistics.median(times[:, i] / times[:, 0])
            rows.append((mode, n, 1e3 * np.median(times[:, i]), n / sizes[0], growth, peaks[i],
                         peaks[i] / peaks[0] if peaks[i] and peaks[0] else None))
    print(f"\n### SimplicialAttention train step vs N ({ARGS.backend}, batch "
          f"{ARGS.scaling_batch}, D=64, one 48-wide head, M=2 in virtual mode; median of "
          f"{ARGS.rounds} interleaved rounds x {ARGS.steps} steps)\n")
    print(f"| mode | N | {ARGS.clock} ms / train step | N / N_0 | time / time_0 | "
          "peak temp memory (MiB) | memory / memory_0 |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for mode, n, ms, size_ratio, growth, peak, peak_ratio in rows:
        peak_text = "n/a" if peak is None else f"{peak / 2**20:.2f}"
        peak_ratio_text = "n/a" if peak_ratio is None else f"{peak_ratio:.1f}x"
        print(f"| {mode} | {n} | {ms:.2f} | {size_ratio:g}x | {growth:.1f}x | {peak_text} | "
              f"{peak_ratio_text} |")


def main():
    captured = results_io.StdoutCapture()
    print(f"keras {keras.__version__}, backend {keras.backend.backend()}, "
          f"{os.cpu_count()} CPUs visible")
    if ARGS.part in ("agent", "all"):
        agent_widths()
    if ARGS.part in ("scaling", "all"):
        scaling()
    captured.write_markdown(ARGS.output)


if __name__ == "__main__":
    main()
