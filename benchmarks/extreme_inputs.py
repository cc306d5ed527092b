"""Which input scales every entity layer survives: finite outputs and finite input gradients.

For each layer, dtype policy (float32, mixed_float16, mixed_bfloat16) and scale ``s`` in
``--scales``, the inputs are ``s * u`` with ``u`` uniform in ``[-1, 1]`` (so ``|x| <= s``, the
most negative entries near ``-s``); the check is that the outputs and the gradient of
``sum(outputs * r)`` (``r`` a fixed random cotangent) with respect to the inputs are all finite.
The results file gives, per layer and policy, the largest scale of the sweep up to which every
scale is finite (outputs, gradients), and the first scale that is not.

Under a 16-bit policy a layer casts its inputs to float16 (largest finite value 65504) or
bfloat16 (about 3.4e38, as float32) before its first matmul, so no float16 layer can be finite
past 6.5e4 whatever it computes in float32 afterwards.

Usage::

    python benchmarks/extreme_inputs.py            # writes benchmarks/results/extreme_inputs.*
    python benchmarks/extreme_inputs.py --before old.json   # adds a 'before' column

The results file's 'before' column came from this script run on a checkout of the commit
before the layer-norm change (``--commit`` names it, since an exported tree has no git).
"""

import argparse
import json
import os
import sys

import results_io  # benchmarks/results_io.py, beside this script

POLICIES = ("float32", "mixed_float16", "mixed_bfloat16")
DEFAULT_SCALES = "1,1e2,1e3,1e4,1e5,1e6,1e8,1e12,1e16,1e24,1e32,1e36,1e37,1e38"


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scales", default=DEFAULT_SCALES)
    parser.add_argument("--layers", default="", help="comma-separated subset of the layer names")
    parser.add_argument("--before", default=None,
                        help="a JSON file this script wrote on older code: adds its columns")
    parser.add_argument("--commit", default=None,
                        help="the commit of the code measured (default: git HEAD of this tree)")
    parser.add_argument("--output", default=os.path.join(results_io.RESULTS, "extreme_inputs"),
                        help="results path without extension (.md and .json are written)")
    return parser.parse_args(argv)


def layer_factories():
    """``name -> make(dtype)``: small configurations of every layer over entities [B, N, F]."""
    import keras_relational as kr

    return {
        "MultiHeadDotProductAttention": lambda d: kr.MultiHeadDotProductAttention(2, 4, dtype=d),
        "MultiHeadDotProductAttention[none]": lambda d: kr.MultiHeadDotProductAttention(
            2, 4, qkv_norm="none", dtype=d),
        "RelationalBlock": lambda d: kr.RelationalBlock(2, 4, mlp_hidden_units=(8,), dtype=d),
        "RelationalModule": lambda d: kr.RelationalModule(
            num_blocks=2, num_heads=2, key_dim=4, mlp_hidden_units=(8,), dtype=d),
        "SimplicialAttention": lambda d: kr.SimplicialAttention(1, 4, dtype=d),
        "SimplicialAttention[full]": lambda d: kr.SimplicialAttention(1, 4, mode="full",
                                                                      dtype=d),
        "SimplicialTransformerBlock": lambda d: kr.SimplicialTransformerBlock(
            2, 4, simplicial_key_dim=4, mlp_hidden_units=(8,), dtype=d),
        "SequenceSimplicialAttention": lambda d: kr.SequenceSimplicialAttention(
            2, 4, window=(3, 2), dtype=d),
        "SequenceSimplicialAttention[triple_product]": lambda d: kr.SequenceSimplicialAttention(
            2, 4, window=(3, 2), logit_form="triple_product", dtype=d),
        "EntityMaxPool": lambda d: kr.EntityMaxPool(dtype=d),
        "PrediNet": lambda d: kr.PrediNet(num_heads=2, key_dim=4, num_relations=3,
                                          position_dims=0, dtype=d),
        "MultiHeadAttentionCentral": lambda d: kr.MultiHeadAttentionCentral(2, 4, 4, dtype=d),
        "RelationNetCentral": lambda d: kr.RelationNetCentral(8, 4, dtype=d),
        "MLPCentral": lambda d: kr.MLPCentral((8,), dtype=d),
    }


def finite_at(layer, x, cotangent):
    """``(outputs finite, input gradient finite)`` of ``layer`` at ``x`` (TensorFlow tape)."""
    import numpy as np
    import tensorflow as tf

    x = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(x)
        outputs = tf.cast(layer(x), tf.float32)
        size = int(np.prod(outputs.shape))
        loss = tf.reduce_sum(outputs * cotangent.reshape(-1)[:size].reshape(outputs.shape))
    gradient = tape.gradient(loss, x)
    return bool(np.all(np.isfinite(outputs.numpy()))), bool(np.all(np.isfinite(gradient.numpy())))


def largest_finite(scales, flags):
    """The largest scale up to which every scale is finite (None: not even the first)."""
    largest = None
    for scale, ok in zip(scales, flags, strict=True):
        if not ok:
            break
        largest = scale
    return largest


def measure(names, scales):
    import keras
    import numpy as np

    rng = np.random.RandomState(0)
    unit = rng.uniform(-1.0, 1.0, size=(2, 6, 8)).astype("float32")
    cotangent = rng.normal(size=(2, 64, 64)).astype("float32")
    factories = layer_factories()
    rows = []
    for name in names:
        for policy in POLICIES:
            keras.utils.set_random_seed(0)  # the same weights before and after a change
            layer = factories[name](policy)
            flags = [finite_at(layer, (scale * unit).astype("float32"), cotangent)
                     for scale in scales]
            outputs, gradients = ([f[0] for f in flags], [f[1] for f in flags])
            rows.append({
                "layer": name, "policy": policy,
                "outputs_finite_up_to": largest_finite(scales, outputs),
                "gradients_finite_up_to": largest_finite(scales, gradients),
                "outputs_finite": outputs, "gradients_finite": gradients,
            })
            print(f"{name:45s} {policy:15s} outputs <= {rows[-1]['outputs_finite_up_to']}, "
                  f"gradients <= {rows[-1]['gradients_finite_up_to']}", flush=True)
    return rows


def _scale(value):
    return "none" if value is None else f"{value:.0e}".replace("e+0", "e").replace("e+", "e")


def markdown(rows, scales, before, commit):
    old = {(r["layer"], r["policy"]): r for r in (before or {}).get("rows", [])}
    header = "| layer | policy | outputs finite up to | gradients finite up to |"
    rule = "|---|---|---|---|"
    if old:
        header = ("| layer | policy | outputs finite up to (before) | gradients finite up to "
                  "(before) |")
    lines = [header, rule]
    for row in rows:
        cells = [_scale(row["outputs_finite_up_to"]), _scale(row["gradients_finite_up_to"])]
        previous = old.get((row["layer"], row["policy"]))
        if previous:
            cells = [f"{cells[0]} ({_scale(previous['outputs_finite_up_to'])})",
                     f"{cells[1]} ({_scale(previous['gradients_finite_up_to'])})"]
        lines.append(f"| {row['layer']} | {row['policy']} | {cells[0]} | {cells[1]} |")
    sweep = ", ".join(_scale(s) for s in scales)
    intro = (f"Inputs `s * u`, `u` uniform in [-1, 1], entities [2, 6, 8]; scales swept: {sweep}. "
             "'Up to' is the largest swept scale with every smaller one finite too"
             + (f"; in brackets the same on commit {before.get('commit') or '(unknown)'}"
                if old else "")
             + f". Measured on commit {commit}; backend TensorFlow, CPU.")
    return intro + "\n\n" + "\n".join(lines)


def main(argv):
    args = parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ["KERAS_BACKEND"] = "tensorflow"
    import subprocess

    scales = [float(s) for s in args.scales.split(",")]
    names = [n for n in args.layers.split(",") if n] or list(layer_factories())
    rows = measure(names, scales)
    commit = args.commit or subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
        cwd=results_io.REPO).stdout.strip()
    before = None
    if args.before:
        with open(args.before) as f:
            before = json.load(f)
    data = {"commit": commit, "scales": scales, "rows": rows,
            "before_commit": before.get("commit") if before else None}
    results_io.write_json(args.output + ".json", data)
    results_io.write_markdown(args.output + ".md", markdown(rows, scales, before, commit))


if __name__ == "__main__":
    main(sys.argv[1:])
