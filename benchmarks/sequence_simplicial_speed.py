"""Time, peak memory and FLOP/s of sliding-window 2-simplicial attention vs MultiHeadAttention.

``keras_relational.SequenceSimplicialAttention`` (trilinear logits, causal windows, Roy et al.
2025) against ``keras.layers.MultiHeadAttention`` (causal mask), both jit-compiled under JAX
(forward and backward: the gradient of ``sum(outputs**2)`` with respect to the weights and the
inputs), at the same batch, width, number of query heads and head width:

1. "as N grows": the 2-simplicial window fixed (``--window``), N from ``--sizes``: its time and
   memory grow linearly in N, dot-product attention's quadratically;
2. "equal FLOPs": at each N a window with ``w1 * w2 = N``, so both layers' attention does the
   same arithmetic (``2 w1 w2 (dk + dv)`` vs ``2 N (dk + dv)`` FLOPs per query and head).

Peak memory is what XLA plans for the compiled program's temporaries
(``memory_analysis().temp_size_in_bytes``), for the forward pass alone and for forward and
backward; FLOPs are XLA's count (``cost_analysis()``) of the compiled forward-and-backward
program (for the 2-simplicial layer, of the same layer without query chunks: XLA counts a
loop's body once); FLOP/s are those FLOPs over the median wall time of a step. ``--dtype=bfloat16``
runs both layers under Keras' ``mixed_bfloat16`` policy (the 2-simplicial logits and softmax
stay in float32); the device is named in the results. Runs unchanged on a GPU under JAX, where
the 2-simplicial layer takes its fused Pallas kernel (``--flash_attention``, default: where it
can run; each row names the path that ran). XLA does not count the FLOPs of a Pallas kernel:
on the kernel path a step's FLOPs are the model's count of the attention (forward
``4 B H N w1 w2 d``, forward + backward 3x that) plus XLA's count of the rest of the compiled
step (the projections), and no query-chunk-free twin is compiled. The sizes run in the order
given: with ``--time_budget`` (seconds) the measurements (one layer at one size) not started
within it are left out, and a size that runs out of device memory ends the list (both listed in
the results).

Usage::

    python benchmarks/sequence_simplicial_speed.py \
        --output=benchmarks/results/sequence_simplicial_speed_cpu
    python benchmarks/sequence_simplicial_speed.py --dtype=bfloat16 --batch=8 \
        --sizes=1024,2048,4096,8192,16384 --output=benchmarks/results/sequence_simplicial_speed_gpu
"""

import argparse
import math
import os
import statistics
import sys
import time


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="256,512,1024,2048,4096", help="sequence lengths N")
    parser.add_argument("--window", default="32,32", help="w1,w2 of the 'as N grows' table")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--width", type=int, default=128, help="model width F")
    parser.add_argument("--heads", type=int, default=4, help="query heads of both layers")
    parser.add_argument("--kv_heads", type=int, default=1,
                        help="key/value heads of the 2-simplicial layer")
    parser.add_argument("--key_dim", type=int, default=32, help="head width (keys and values)")
    parser.add_argument("--chunk", type=int, default=256, help="query_chunk_size")
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    parser.add_argument("--flash_attention", choices=("auto", "true", "false"), default="auto",
                        help="the 2-simplicial layer's flash_attention: auto (None: its fused "
                        "kernel on a GPU where it can run), true or false")
    parser.add_argument("--steps", type=int, default=3, help="timed steps per measurement")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (median)")
    parser.add_argument("--time_budget", type=float, default=None,
                        help="seconds: the sizes not started within it are left out (listed in "
                        "the results)")
    parser.add_argument("--output", default=None,
                        help="writes OUTPUT.md and OUTPUT.json (a path without extension)")
    return parser.parse_args(argv)


ARGS = parse_args(sys.argv[1:])
os.environ["KERAS_BACKEND"] = "jax"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402

# Beside this script, also under `python -P` (which leaves the script's folder off sys.path).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import results_io  # noqa: E402  (benchmarks/results_io.py)

import keras_relational  # noqa: E402

MIB = 2.0**20


def simplicial(window, chunk=-1, flash_attention=-1):
    flash = {"auto": None, "true": True, "false": False}[ARGS.flash_attention]
    return keras_relational.SequenceSimplicialAttention(
        num_heads=ARGS.heads, key_dim=ARGS.key_dim, num_key_value_heads=ARGS.kv_heads,
        window=window, query_chunk_size=ARGS.chunk if chunk == -1 else chunk, dtype=POLICY,
        flash_attention=flash if flash_attention == -1 else flash_attention)


def path_of(layer):
    """Which form of ``layer`` runs: "kernel" (its fused Pallas kernel) or "keras.ops"."""
    if not isinstance(layer, keras_relational.SequenceSimplicialAttention):
        return "-"
    settings = layer._kernel_settings(keras.backend.standardize_dtype(layer.compute_dtype),
                                      False)
    return "keras.ops" if settings is None else "kernel"


def attention_model_flops(layer, length):
    """Forward + backward FLOPs of the 2-simplicial attention alone, the model's count."""
    w1, w2 = (min(w, length) for w in layer.window)
    return 3 * 2.0 * ARGS.batch * ARGS.heads * length * w1 * w2 * 2 * ARGS.key_dim


class CausalMultiHeadAttention(keras.layers.Layer):
    """Keras' MultiHeadAttention as causal self-attention (one input, like the other layer)."""

    def __init__(self, **kwargs):
        super().__init__(dtype=POLICY)
        self.attention = keras.layers.MultiHeadAttention(dtype=POLICY, **kwargs)

    def call(self, x):
        return self.attention(x, x, use_causal_mask=True)


def dot_product():
    return CausalMultiHeadAttention(num_heads=ARGS.heads, key_dim=ARGS.key_dim, use_bias=False)


def compiled_programs(layer, length, with_forward=True):
    """(forward, forward-and-backward) compiled for ``[batch, length, width]`` inputs (forward
    None unless ``with_forward``)."""
    x = jnp.asarray(np.random.RandomState(0).normal(
        size=(ARGS.batch, length, ARGS.width)).astype("float32"))
    layer(keras.KerasTensor(x.shape, x.dtype))  # builds; symbolic: runs no op (nor compiles)
    trainable = [v.value for v in layer.trainable_variables]
    non_trainable = [v.value for v in layer.non_trainable_variables]

    def forward(trainable, x):
        out, _ = layer.stateless_call(trainable, non_trainable, x)
        return out

    def loss(trainable, x):
        return jnp.sum(jnp.square(forward(trainable, x).astype("float32")))

    grad = jax.grad(loss, argnums=(0, 1))
    forward_c = jax.jit(forward).lower(trainable, x).compile() if with_forward else None
    step_c = jax.jit(grad).lower(trainable, x).compile()
    return (forward_c, step_c), (trainable, x)


def cost(compiled):
    analysis = compiled.cost_analysis()
    analysis = analysis[0] if isinstance(analysis, (list, tuple)) else analysis
    return float(analysis.get("flops", float("nan"))) if analysis else float("nan")


def measure(make_layer, length, make_unchunked=None):
    """Timer, XLA FLOPs and temp memory of one layer's compiled step.

    XLA's cost analysis counts a loop's body once, so the FLOPs of a chunked layer are counted
    on ``make_unchunked()``, the same layer without chunks (the same arithmetic, no loop).
    """
    layer = make_layer()
    path = path_of(layer)
    (forward, step), args = compiled_programs(layer, length)
    if path == "kernel":  # XLA counts the projections, not the Pallas kernel
        flops = cost(step) + attention_model_flops(layer, length)
    else:
        flops = cost(step if make_unchunked is None
                     else compiled_programs(make_unchunked(), length, with_forward=False)[0][1])
    jax.block_until_ready(step(*args))  # warm-up

    def run():
        start = time.perf_counter()
        for _ in range(ARGS.steps):
            out = step(*args)
        jax.block_until_ready(out)
        return (time.perf_counter() - start) / ARGS.steps

    return {"run": run, "flops": flops, "path": path,
            "forward_mib": forward.memory_analysis().temp_size_in_bytes / MIB,
            "step_mib": step.memory_analysis().temp_size_in_bytes / MIB}


def out_of_memory(error):
    """Whether ``error`` is XLA running out of device memory."""
    text = str(error)
    return "RESOURCE_EXHAUSTED" in text or "Out of memory" in text or "out of memory" in text


def equal_flops_window(length):
    """``(w1, w2)`` with ``w1 * w2 = length`` (a power of two), w1 the larger."""
    w1 = 2 ** math.ceil(math.log2(length) / 2)
    return w1, length // w1


def table(rows, title):
    print(f"\n### {title}\n")
    print("| N | layer | path | window | ms / step | temp MiB (fwd) | temp MiB (fwd+bwd) "
          "| GFLOP / step | GFLOP/s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['N']} | {row['layer']} | {row['path']} | {row['window']} | "
              f"{row['ms']:.1f} | "
              f"{row['forward_mib']:.1f} | {row['step_mib']:.1f} | {row['gflop']:.2f} | "
              f"{row['gflops']:.1f} |")


def main():
    sizes = [int(s) for s in ARGS.sizes.split(",")]
    fixed = tuple(int(w) for w in ARGS.window.split(","))
    device = jax.devices()[0]
    captured = results_io.StdoutCapture()
    print(f"Device: {device.platform} ({device.device_kind}), JAX {jax.__version__}, Keras "
          f"{keras.__version__}, dtype policy {POLICY}. Batch {ARGS.batch}, width "
          f"{ARGS.width}, {ARGS.heads} query heads of width {ARGS.key_dim} in both layers; "
          f"the 2-simplicial layer has {ARGS.kv_heads} key/value head(s), trilinear logits, "
          f"query_chunk_size {ARGS.chunk}. One step = forward + backward (weights and "
          f"inputs), median of {ARGS.rounds} rounds x {ARGS.steps} steps.")
    start = time.perf_counter()
    measured, left_out = [], []
    for length in sizes:
        if left_out or (ARGS.time_budget is not None
                        and time.perf_counter() - start > ARGS.time_budget):
            left_out.append((length, left_out[-1][1] if left_out else "time budget"))
            continue
        window = equal_flops_window(length)
        jobs = [("grows", f"2-simplicial {fixed}", lambda: simplicial(fixed),
                 lambda: simplicial(fixed, None, False)),
                ("equal", f"2-simplicial {window}", lambda window=window: simplicial(window),
                 lambda window=window: simplicial(window, None, False)),
                ("both", "MultiHeadAttention", dot_product, None)]
        try:
            for kind, name, make, unchunked in jobs:  # the budget is checked before each one
                if (ARGS.time_budget is not None and measured
                        and time.perf_counter() - start > ARGS.time_budget):
                    left_out.append((length, f"time budget ({name} and after)"))
                    break
                measured.append((kind, length, name, measure(make, length, unchunked)))
        except Exception as error:  # XLA's RESOURCE_EXHAUSTED; larger N would not fit either
            if not out_of_memory(error):
                raise
            left_out.append((length, "out of device memory"))
            print(f"N = {length}: out of device memory ({str(error).splitlines()[0][:200]})",
                  file=sys.stderr)
    times = [[] for _ in measured]
    for _ in range(ARGS.rounds):  # interleaved, so load from other processes hits all alike
        for i, (*_, m) in enumerate(measured):
            times[i].append(m["run"]())
    rows = []
    for (kind, length, name, m), ts in zip(measured, times, strict=True):
        seconds = statistics.median(ts)
        rows.append({"kind": kind, "N": length, "layer": name.split(" (")[0],
                     "window": name[len("2-simplicial "):] if "(" in name else "-",
                     "path": m["path"], "ms": 1e3 * seconds, "forward_mib": m["forward_mib"],
                     "step_mib": m["step_mib"], "gflop": m["flops"] / 1e9,
                     "gflops": m["flops"] / 1e9 / seconds})
    table([r for r in rows if r["kind"] in ("grows", "both")],
          f"As N grows: 2-simplicial window {fixed} vs MultiHeadAttention")
    table([r for r in rows if r["kind"] in ("equal", "both")],
          "Equal FLOPs: 2-simplicial window w1 * w2 = N vs MultiHeadAttention")
    print("\nFLOP/s of the 2-simplicial layer relative to MultiHeadAttention at equal FLOPs: "
          + ", ".join(f"N = {a['N']}: {a['gflops'] / b['gflops']:.0%}"
                      for a in rows if a["kind"] == "equal"
                      for b in rows if b["kind"] == "both" and b["N"] == a["N"]) + ".")
    if left_out:
        print("\nLeft out: " + ", ".join(f"N = {n} ({why})" for n, why in left_out) + ".")
    if ARGS.output:
        captured.write_markdown(ARGS.output + ".md")
        results_io.write_json(ARGS.output + ".json", {
            "device": f"{device.platform} ({device.device_kind})", "args": vars(ARGS),
            "load_average": os.getloadavg(), "rows": rows,
            "left_out": [{"N": n, "why": why} for n, why in left_out]})
    else:
        captured.stop()


POLICY = "mixed_bfloat16" if ARGS.dtype == "bfloat16" else "float32"

if __name__ == "__main__":
    main()
