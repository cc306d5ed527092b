"""Train-step time of RelationalBlock vs keras.layers.MultiHeadAttention + the same MLP.

Both models map entities [B, N, F] through one attention block (2 heads of 64, MLP 256 -> F,
residual, LayerNorm), then a max-pool and a linear readout, and are trained with Adam on MSE.
Keras' layer is used at its cheapest equivalent setting: its own output projection back to F,
so its MLP reads F features where ours reads the H * d concatenated heads (the paper's block has
no output projection); the FLOP column gives the resulting ratio of arithmetic work.

For each N the four compiled train steps (ours / Keras, without / with ``jit_compile``) are timed
in rounds, each round running every step ``--steps`` times in a rotating order after a warm-up
(tracing and XLA compilation excluded); every ratio is computed within a round and the table
gives the median over the rounds, so load from other processes hits both sides alike. The FLOPs
are XLA's cost analysis of the same train steps (JAX backend, in a subprocess), with the share
done by matmuls (``dot_general``) counted from the jaxpr.

    .venv/bin/python benchmarks/relational_speed.py [--entities 49 196 784] [--batch 16]
    .venv/bin/python benchmarks/relational_speed.py --threads 1 --clock cpu  # on a busy machine
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import time

import keras
import numpy as np
import results_io  # benchmarks/results_io.py, beside this script

import keras_relational

HEADS, KEY_DIM, HIDDEN = 2, 64, 256


def relational_model(n, f, heads=HEADS, key_dim=KEY_DIM):
    inputs = keras.Input((n, f))
    x = keras_relational.RelationalBlock(num_heads=heads, key_dim=key_dim,
                                         mlp_hidden_units=(HIDDEN,))(inputs)
    outputs = keras.layers.Dense(1)(keras_relational.EntityMaxPool()(x))
    return keras.Model(inputs, outputs)


def keras_mha_model(n, f, heads=HEADS, key_dim=KEY_DIM):
    inputs = keras.Input((n, f))
    attended = keras.layers.MultiHeadAttention(num_heads=heads, key_dim=key_dim)(inputs, inputs)
    hidden = keras.layers.Dense(HIDDEN, activation="relu")(attended)
    x = keras.layers.LayerNormalization(epsilon=1e-6)(inputs + keras.layers.Dense(f)(hidden))
    outputs = keras.layers.Dense(1)(keras.layers.GlobalMaxPooling1D()(x))
    return keras.Model(inputs, outputs)


BUILDERS = {"ours": relational_model, "keras": keras_mha_model}

_FLOPS_CODE = r"""
import json, sys
import jax, jax.numpy as jnp
sys.path.insert(0, sys.argv[1])
import relational_speed

def dot_flops(jaxpr):
    total = 0
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "dot_general":
            (lhs_contract, _), _ = eqn.params["dimension_numbers"]
            out = eqn.outvars[0].aval.shape
            k = 1
            for axis in lhs_contract:
                k *= eqn.invars[0].aval.shape[axis]
            size = 1
            for dim in out:
                size *= dim
            total += 2 * size * k
        for value in eqn.params.values():
            if hasattr(value, "jaxpr") and hasattr(value.jaxpr, "eqns"):
                total += dot_flops(value.jaxpr)
    return total

batch, features = int(sys.argv[2]), int(sys.argv[3])
result = {}
for n in json.loads(sys.argv[4]):
    for name, build in relational_speed.BUILDERS.items():
        model = build(n, features)
        trainable = [v.value for v in model.trainable_variables]
        x, y = jnp.zeros((batch, n, features)), jnp.zeros((batch, 1))

        def loss(trainable, x, y):
            out, _ = model.stateless_call(trainable, [], x, training=True)
            return jnp.mean((out - y) ** 2)

        step = jax.value_and_grad(loss)
        cost = jax.jit(step).lower(trainable, x, y).compile().cost_analysis()
        cost = cost[0] if isinstance(cost, (list, tuple)) else cost
        dots = dot_flops(jax.make_jaxpr(step)(trainable, x, y).jaxpr)
        result[f"{name}/{n}"] = {"flops": float(cost["flops"]), "dot_flops": float(dots)}
print(json.dumps(result))
"""


def count_flops(entities, batch, features):
    """XLA's FLOPs of each forward + backward pass (no optimizer update), and the matmul FLOPs."""
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
    out = subprocess.run(
        [sys.executable, "-c", _FLOPS_CODE, os.path.dirname(os.path.abspath(__file__)),
         str(batch), str(features), json.dumps(entities)],
        env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def time_rounds(steps, x, y, rounds, steps_per_round, clock=time.perf_counter):
    """Seconds per train step of every compiled model, per round (rotating order)."""
    for step in steps.values():  # warm-up: tracing / XLA compilation
        for _ in range(3):
            step.train_on_batch(x, y)
    names = list(steps)
    times = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            start = clock()
            for _ in range(steps_per_round):
                steps[name].train_on_batch(x, y)
            times[name].append((clock() - start) / steps_per_round)
    return {name: np.array(t) for name, t in times.items()}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--entities", type=int, nargs="+", default=[49, 196, 784])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--features", type=int, default=26)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--steps", type=int, default=3, help="train steps per model per round")
    parser.add_argument("--threads", type=int, default=None,
                        help="TensorFlow intra- and inter-op threads (default: TensorFlow's)")
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                        help="wall-clock time, or the process' CPU time (less sensitive to other "
                             "processes; use with --threads 1)")
    parser.add_argument("--no-flops", dest="flops", action="store_false")
    parser.add_argument("--output", default=None,
                        help="also write the tables to this markdown file")
    args = parser.parse_args()
    if args.threads:
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    load_before = os.getloadavg()
    flops = count_flops(args.entities, args.batch, args.features) if args.flops else None
    rows = []
    for n in args.entities:
        rng = np.random.RandomState(0)
        x = rng.normal(size=(args.batch, n, args.features)).astype("float32")
        y = rng.normal(size=(args.batch, 1)).astype("float32")
        models = {}
        for jit in (False, True):
            for name, build in BUILDERS.items():
                keras.utils.set_random_seed(0)
                model = build(n, args.features)
                model.compile(optimizer="adam", loss="mse", jit_compile=jit)
                models[(name, jit)] = model
        t = time_rounds(models, x, y, args.rounds, args.steps, clock)
        med = {key: 1e3 * float(np.median(v)) for key, v in t.items()}
        ratio = {
            "ours/keras": np.median(t["ours", False] / t["keras", False]),
            "ours/keras xla": np.median(t["ours", True] / t["keras", True]),
            "xla ours": np.median(t["ours", False] / t["ours", True]),
            "xla keras": np.median(t["keras", False] / t["keras", True]),
        }
        rows.append((n, med, ratio))
        print(f"N={n}: done (load {os.getloadavg()[0]:.1f})", flush=True)
    load_after = os.getloadavg()
    captured = results_io.StdoutCapture()
    print(f"\n{datetime.date.today()}: train step, batch {args.batch}, F={args.features}, "
          f"{HEADS} heads x {KEY_DIM}, MLP {HIDDEN}; {args.clock} time, median over {args.rounds} "
          f"interleaved rounds of {args.steps} steps ({keras.backend.backend()} backend, CPU, "
          f"{args.threads or 'default'} threads, {os.cpu_count()} cores); load average "
          f"{load_before[0]:.1f} before, {load_after[0]:.1f} after (1-min), {load_after[2]:.1f} "
          f"(15-min)\n")
    header = ("| N | ours (ms) | Keras MHA (ms) | ours ÷ Keras | ours, XLA (ms) | "
              "Keras MHA, XLA (ms) | ours ÷ Keras, XLA | XLA speed-up (ours) | "
              "XLA speed-up (Keras) |")
    if flops:
        header += " FLOPs ours ÷ Keras | matmul share of FLOPs (ours / Keras) |"
    print(header)
    print("|---" * (header.count("|") - 1) + "|")
    for n, med, ratio in rows:
        line = (f"| {n} | {med['ours', False]:.1f} | {med['keras', False]:.1f} | "
                f"{ratio['ours/keras']:.2f}× | {med['ours', True]:.1f} | "
                f"{med['keras', True]:.1f} | "
                f"{ratio['ours/keras xla']:.2f}× | {ratio['xla ours']:.2f}× | "
                f"{ratio['xla keras']:.2f}× |")
        if flops:
            ours, theirs = flops[f"ours/{n}"], flops[f"keras/{n}"]
            line += (f" {ours['flops'] / theirs['flops']:.2f}× | "
                     f"{100 * ours['dot_flops'] / ours['flops']:.0f} % / "
                     f"{100 * theirs['dot_flops'] / theirs['flops']:.0f} % |")
        print(line)
    captured.write_markdown(args.output)


if __name__ == "__main__":
    main()
