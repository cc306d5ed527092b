"""Train-step time of RelationalBlock vs keras.layers.MultiHeadAttention + the same MLP.

Both models map entities [B, N, F] through one attention block (2 heads of 64, MLP 256 -> F,
residual, LayerNorm), then a max-pool and a linear readout, and are trained with Adam on MSE.
For each N the two models are timed alternately in the same process (median of repeated
``train_on_batch`` calls after warm-up), with and without ``jit_compile``, so the ratios are
robust to a noisy shared machine. Prints a markdown table for the README.

    .venv/bin/python benchmarks/relational_speed.py [--entities 49 196 784] [--batch 16]
"""

import argparse
import time

import keras
import numpy as np

import keras_relational


def relational_model(n, f, heads, key_dim):
    inputs = keras.Input((n, f))
    x = keras_relational.RelationalBlock(num_heads=heads, key_dim=key_dim,
                                         mlp_hidden_units=(256,))(inputs)
    outputs = keras.layers.Dense(1)(keras_relational.EntityMaxPool()(x))
    return keras.Model(inputs, outputs)


def keras_mha_model(n, f, heads, key_dim):
    inputs = keras.Input((n, f))
    attended = keras.layers.MultiHeadAttention(num_heads=heads, key_dim=key_dim)(inputs, inputs)
    hidden = keras.layers.Dense(256, activation="relu")(attended)
    x = keras.layers.LayerNormalization(epsilon=1e-6)(inputs + keras.layers.Dense(f)(hidden))
    outputs = keras.layers.Dense(1)(keras.layers.GlobalMaxPooling1D()(x))
    return keras.Model(inputs, outputs)


def step_seconds(models, x, y, repeats):
    """Median train-step seconds of each model, timing them alternately."""
    for model in models:  # warm-up (tracing / XLA compilation)
        for _ in range(2):
            model.train_on_batch(x, y)
    times = [[] for _ in models]
    for _ in range(repeats):
        for i, model in enumerate(models):
            start = time.perf_counter()
            model.train_on_batch(x, y)
            times[i].append(time.perf_counter() - start)
    return [float(np.median(t)) for t in times]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--entities", type=int, nargs="+", default=[49, 196, 784])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--features", type=int, default=26)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    heads, key_dim = 2, 64
    rows = []
    for n in args.entities:
        rng = np.random.RandomState(0)
        x = rng.normal(size=(args.batch, n, args.features)).astype("float32")
        y = rng.normal(size=(args.batch, 1)).astype("float32")
        timings = {}
        for jit in (False, True):
            models = []
            for build in (relational_model, keras_mha_model):
                keras.utils.set_random_seed(0)
                model = build(n, args.features, heads, key_dim)
                model.compile(optimizer="adam", loss="mse", jit_compile=jit)
                models.append(model)
            timings[jit] = step_seconds(models, x, y, args.repeats)
        ours, theirs = timings[False]
        ours_xla, theirs_xla = timings[True]
        rows.append((n, ours, theirs, ours_xla, theirs_xla))
        print(f"N={n}: done", flush=True)
    print(f"\nTrain step, batch {args.batch}, F={args.features}, {heads} heads x {key_dim}, "
          f"MLP 256, median of {args.repeats} ({keras.backend.backend()} backend, CPU)\n")
    print("| N | ours (ms) | Keras MHA (ms) | ours / Keras | ours XLA (ms) | Keras MHA XLA (ms) "
          "| ours/Keras XLA | XLA speed-up (ours) |")
    print("|---|---|---|---|---|---|---|---|")
    for n, ours, theirs, ours_xla, theirs_xla in rows:
        print(f"| {n} | {1e3 * ours:.1f} | {1e3 * theirs:.1f} | {ours / theirs:.2f}x | "
              f"{1e3 * ours_xla:.1f} | {1e3 * theirs_xla:.1f} | {ours_xla / theirs_xla:.2f}x | "
              f"{ours / ours_xla:.2f}x |")


if __name__ == "__main__":
    main()
