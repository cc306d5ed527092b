"""Train-step time, FLOPs and achieved FLOP/s of every layer and paper model on the device at hand.

    KERAS_BACKEND=jax python benchmarks/accelerator.py [--quick] [--only NAME,...]

For each layer at the papers' sizes and each paper's whole model (``benchmarks/paper_models.py``):
one Keras train step (Adam, mean squared error against random targets of the output shapes) in
float32 and under ``mixed_bfloat16``, with ``jit_compile=True`` (XLA) and, on a CPU, ``False``
(JAX op by op: on a GPU those steps are launch-bound, 24-36 times the XLA step in the first H200
session, and say little; ``--op_by_op=yes`` times them anyway). The FLOPs of a step are XLA's
cost analysis of the compiled loss gradient
(``jax.jit(grad).lower(...).compile().cost_analysis()``; the optimizer update, a few FLOPs per
weight, is left out); the achieved FLOP/s is that over the XLA step time, and its share of the
device's matmul rate measured in the same run (a square matmul, per dtype, at JAX's default
precision), per row. On a GPU the batch fills the device (``GPU_BATCH``: 1,024 examples a layer
step, 256 a model step, unless ``--batch``); every row reports its batch and its compile seconds.
With ``--time_budget`` every row gets an equal share of what is left when it starts: its timed steps
stop at the end of its share (after one at least); a row starts only if the longest row so far would
still end within the budget, the others are listed as skipped. A row that fails (out of device
memory, say) is listed with its error. Writes ``benchmarks/results/accelerator_<device>.{json,md}``,
naming the device and the machine's load. ``--quick``: fewer repeats, the main models, op by op for
the layers only, a 240 s budget.
"""

import argparse
import os
import re
import sys
import time

import numpy as np

# The repository root last: `benchmarks` from the checkout, keras_relational as installed (a
# checkout on sys.path first would shadow the installed package and its mapped folders).
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks import paper_models, results_io  # noqa: E402

POLICIES = ("float32", "mixed_bfloat16")
_QUICK_MODELS = ("relational_agent", "simplicial_agent", "relations_game[predinet]", "tpr_rnn",
                 "atari_predinet_agent")
# Batches on a GPU: the papers' batches (32 and less) leave an H200 launch-bound (the first H200
# session: RelationalBlock N = 196 at batch 32 ran at 0.29 % of the float32 matmul rate).
GPU_BATCH = {"layer": 1024, "model": 256}


def layers(batch):
    """``[(name, make_layer(), inputs)]`` at the papers' sizes."""
    import keras_relational as kr
    from keras_relational.models import relations_game

    rng = np.random.RandomState(0)

    def normal(*shape):
        return rng.normal(size=shape).astype("float32")

    return [
        # Zambaldi et al. 2019: Box-World 14x14 -> N = 196 entities of 24 conv + 2 coordinate
        # features (App. B), as in the StarCraft II setting's 64x64 / stride maps.
        ("RelationalBlock[N=196]", lambda: kr.RelationalBlock(), normal(batch, 196, 26)),
        # Issue 45: the attention's two paths. This row keeps its name and the matmul form it
        # timed before (flash_attention=False); the next one goes through
        # keras.ops.dot_product_attention (cuDNN flash under a 16-bit policy on a GPU, Keras'
        # XLA form in float32), the default's choice on a GPU in 16 bits.
        ("MultiHeadDotProductAttention[N=196]",
         lambda: kr.MultiHeadDotProductAttention(2, 64, flash_attention=False),
         normal(batch, 196, 26)),
        ("MultiHeadDotProductAttention[N=196][dot_product_attention]",
         lambda: kr.MultiHeadDotProductAttention(2, 64, flash_attention=True),
         normal(batch, 196, 26)),
        # Shanahan et al. 2020, Table S2: 5x5 = 25 entities of 32 + 2 features.
        ("PrediNet", lambda: relations_game.make_central("predinet"), normal(batch, 25, 34)),
        ("MultiHeadAttentionCentral", lambda: relations_game.make_central("mha"),
         normal(batch, 25, 34)),
        ("RelationNetCentral", lambda: relations_game.make_central("relation_net"),
         normal(batch, 25, 34)),
        # Clift et al. 2020, Sec. 4: 5x8 = 40 entities (7x10 through two valid 2x2 convs), D = 64.
        ("SimplicialTransformerBlock",
         lambda: kr.SimplicialTransformerBlock(num_virtual_entities=2), normal(batch, 40, 64)),
        ("SimplicialAttention[virtual]",
         lambda: kr.SimplicialAttention(1, 48, num_virtual_entities=2), normal(batch, 40, 64)),
        # Schlag & Schmidhuber 2018, Sec. 7: E = 15, R = 10, H = 40; 20 sentences.
        ("TPRMemory", lambda: kr.TPRMemory(15, 10, 40),
         [normal(batch, 20, 40), normal(batch, 40)]),
        # Mitchell & Bowers 2020, Table II: N = 10 units, depth 20, 20 steps.
        ("ConvStackMemory", lambda: kr.ConvStackMemory(10, stack_depth=20, return_sequences=True),
         normal(batch, 20, 10)),
    ]


def _as_model(make_layer, inputs):
    import keras

    flat = keras.tree.flatten(inputs)
    symbols = [keras.Input(np.shape(x)[1:]) for x in flat]
    outputs = make_layer()(keras.tree.pack_sequence_as(inputs, symbols))
    return keras.Model(keras.tree.pack_sequence_as(inputs, symbols), outputs)


def _targets(model, inputs):
    import keras

    outputs = model(inputs)
    rng = np.random.RandomState(1)
    flat = [rng.normal(size=tuple(o.shape)).astype("float32") for o in keras.tree.flatten(outputs)]
    return keras.tree.pack_sequence_as(outputs, flat)


def _step_flops(model, inputs, targets):
    """XLA's FLOPs of one loss gradient (the train step without the optimizer update)."""
    import jax
    import keras

    def loss(trainable, non_trainable, x, y):
        outputs, _ = model.stateless_call(trainable, non_trainable, x, training=True)
        return sum(keras.ops.mean(keras.ops.square(keras.ops.cast(o, "float32") - t))
                   for o, t in zip(keras.tree.flatten(outputs), keras.tree.flatten(y),
                                   strict=True))

    args = ([v.value for v in model.trainable_variables],
            [v.value for v in model.non_trainable_variables], inputs, targets)
    cost = jax.jit(jax.grad(loss)).lower(*args).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost  # older jax: a list per device
    return float(cost.get("flops", float("nan"))) if cost else float("nan")


def _time_steps(model, inputs, targets, jit_compile, warmup, repeats, deadline=float("inf")):
    """``(median step seconds, seconds of the first step: compilation, timed steps)``; the timed
    steps stop at ``deadline`` (``time.perf_counter``), after one at least."""
    import keras

    model.compile(optimizer=keras.optimizers.Adam(1e-4), loss="mse", jit_compile=jit_compile)
    start = time.perf_counter()
    model.train_on_batch(inputs, targets)  # compiles; returns the loss as a float: synchronises
    compile_s = time.perf_counter() - start
    for _ in range(warmup - 1):
        model.train_on_batch(inputs, targets)
    times = []
    while len(times) < repeats and (not times or time.perf_counter() < deadline):
        start = time.perf_counter()
        model.train_on_batch(inputs, targets)
        times.append(time.perf_counter() - start)
    return float(np.median(times)), compile_s, len(times)


def matmul_rate(size, dtype, repeats):
    """FLOP/s of a jitted ``[size, size] @ [size, size]`` in ``dtype`` (the median of
    ``repeats``)."""
    import jax
    import jax.numpy as jnp

    a = jnp.asarray(np.random.RandomState(0).normal(size=(size, size)), dtype)
    f = jax.jit(lambda x: x @ x)
    f(a).block_until_ready()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        f(a).block_until_ready()
        times.append(time.perf_counter() - start)
    return 2.0 * size ** 3 / float(np.median(times))


def device_name():
    import jax

    device = jax.devices()[0]
    kind = device.device_kind if device.platform != "cpu" else "cpu"
    count = len(jax.devices())
    return f"{kind} ({device.platform}, {count} device{'s' * (count > 1)})", (
        re.sub(r"[^a-z0-9]+", "-", kind.lower()).strip("-"))


def run(entries, args, deadline, matmul, op_by_op):
    """The rows: per entry ``(name, kind, build(), make_inputs(), batch)``, per policy, XLA and
    (``op_by_op``) op by op; each row within its share of the time left to ``deadline``."""
    import keras

    from keras_relational.models import precision

    configurations = [(entry, policy, jit) for entry in entries for policy in POLICIES
                      for jit in (True, False)
                      if jit or (op_by_op and not (args.quick and entry[1] == "model"))]
    rows = []
    for i, ((name, kind, build, make_inputs, batch), policy, jit) in enumerate(configurations):
        row = {"name": name, "kind": kind, "policy": policy, "xla": jit, "batch": batch}
        now = time.perf_counter()
        # A row's compilation cannot be stopped: one starts only if the longest row so far
        # (its compile seconds and timed steps) would still end within the budget.
        longest = max((r["row_s"] for r in rows if "row_s" in r), default=0.0)
        if now + longest > deadline:
            rows.append(dict(row, skipped="time budget"))
            continue
        row_deadline = now + (deadline - now) / (len(configurations) - i)
        try:
            keras.utils.set_random_seed(0)
            with precision.dtype_policy_scope(policy):
                model = build()
            inputs = make_inputs()
            targets = _targets(model, inputs)
            row["params"] = int(model.count_params())
            row["step_s"], row["compile_s"], row["steps_timed"] = _time_steps(
                model, inputs, targets, jit, args.warmup, args.repeats, row_deadline)
            if jit:
                start = time.perf_counter()
                row["flops"] = _step_flops(model, inputs, targets)
                row["compile_s"] += time.perf_counter() - start  # the cost analysis compiles
                rate = matmul["bfloat16" if "bfloat16" in policy else "float32"]
                row["matmul_fraction"] = row["flops"] / row["step_s"] / rate
        except Exception as error:  # out of device memory, say: the other rows still run
            row = dict(row, failed=f"{type(error).__name__}: {str(error).splitlines()[0][:200]}")
        row["row_s"] = time.perf_counter() - now
        print(row, flush=True)
        rows.append(row)
    return rows


def _markdown(result):
    lines = [f"Device: **{result['device']}**, Keras backend {result['backend']}, median of up "
             f"to {result['repeats']} steps (within each row's share of the time budget) after "
             f"{result['warmup']} warm-up; load average at the start {result['load_start']}, at "
             f"the end {result['load_end']}. Compile: each row's first step and XLA's cost "
             f"analysis, {result['compile_seconds']:.1f} s in all.", "",
             "Measured matmul rate ([n, n] @ [n, n], n = "
             f"{result['matmul_size']}): " + ", ".join(
                 f"{d}: {r / 1e12:.3g} TFLOP/s" for d, r in result["matmul_flops_per_s"].items()),
             "", "| layer / model | policy | XLA | batch | step (ms) | GFLOP / step | TFLOP/s | "
             "% of matmul rate | compile (s) | params |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for row in result["rows"]:
        head = (f"| {row['name']} | {row['policy']} | {'yes' if row['xla'] else 'no'} | "
                f"{row['batch']} | ")
        if "skipped" in row or "failed" in row:
            why = f"skipped: {row['skipped']}" if "skipped" in row else f"failed: {row['failed']}"
            lines.append(head + why.replace("|", "/") + " | | | | | |")
            continue
        flops = row.get("flops")
        rate = flops / row["step_s"] if flops else None
        matmul = result["matmul_flops_per_s"]["bfloat16" if "bfloat16" in row["policy"]
                                              else "float32"]
        lines.append(
            head + f"{row['step_s'] * 1e3:.3g} | {flops / 1e9:.3g} | {rate / 1e12:.3g} | "
            f"{100 * rate / matmul:.2g} | {row['compile_s']:.1f} | {row['params']:,} |" if rate
            else head + f"{row['step_s'] * 1e3:.3g} | | | | {row['compile_s']:.1f} | "
            f"{row['params']:,} |")
    times = {(r["name"], r["policy"], r["xla"]): r["step_s"] for r in result["rows"]
             if "step_s" in r}
    lines += ["", "bfloat16 speed-up (float32 step time / mixed_bfloat16 step time, XLA):", "",
              "| layer / model | speed-up |", "|---|---|"]
    for (name, policy, xla), step in times.items():
        if policy == "float32" and xla and (name, "mixed_bfloat16", True) in times:
            lines.append(f"| {name} | {step / times[(name, 'mixed_bfloat16', True)]:.2f}x |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="5 repeats, the main models, a 240 s budget")
    parser.add_argument("--only", default="", help="comma-separated layer/model names")
    parser.add_argument("--batch", type=int, default=None,
                        help="examples a step, every row (default: 32 on a CPU, GPU_BATCH on a "
                        "GPU)")
    parser.add_argument("--op_by_op", choices=("auto", "yes", "no"), default="auto",
                        help="also time op-by-op steps (jit_compile=False); auto: on a CPU only")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--matmul_size", type=int, default=None,
                        help="default: 8192 on a GPU, 1024 on a CPU")
    parser.add_argument("--time_budget", type=float, default=None,
                        help="seconds; later configurations are listed as skipped")
    parser.add_argument("--output_dir", default=results_io.RESULTS)
    args = parser.parse_args(argv)
    import keras

    if keras.backend.backend() != "jax":
        raise SystemExit(f"benchmarks/accelerator.py needs KERAS_BACKEND=jax (XLA's cost "
                         f"analysis), received {keras.backend.backend()!r}")
    import jax

    args.repeats = args.repeats or (5 if args.quick else 20)
    budget = args.time_budget or (240.0 if args.quick else float("inf"))
    on_gpu = jax.devices()[0].platform == "gpu"
    size = args.matmul_size or (8192 if on_gpu else 1024)
    load_start = [round(x, 2) for x in os.getloadavg()]
    start = time.perf_counter()
    matmul = {dtype: matmul_rate(size, dtype, max(3, args.repeats))
              for dtype in ("float32", "bfloat16")}
    print({"matmul_flops_per_s": matmul}, flush=True)
    if args.batch is not None and args.batch < 1:
        raise SystemExit(f"--batch: expected at least 1, received {args.batch}")
    batches = {kind: args.batch or (GPU_BATCH[kind] if on_gpu else 32) for kind in GPU_BATCH}
    op_by_op = args.op_by_op == "yes" or (args.op_by_op == "auto" and not on_gpu)
    entries = [(name, "layer", (lambda m=make, x=x: _as_model(m, x)), (lambda x=x: x),
                batches["layer"]) for name, make, x in layers(batches["layer"])]
    entries += [(name, "model", build, (lambda f=make_inputs: f(np.random.RandomState(0),
                                                                 batches["model"])),
                 batches["model"])
                for name, build, make_inputs in paper_models.models()
                if not args.quick or name in _QUICK_MODELS]
    only = [n for n in args.only.split(",") if n]
    unknown = sorted(set(only) - {e[0] for e in entries})
    if unknown:
        raise SystemExit(f"--only: unknown names {unknown}; known: {[e[0] for e in entries]}")
    entries = [e for e in entries if not only or e[0] in only]
    rows = run(entries, args, start + budget, matmul, op_by_op)
    device, slug = device_name()
    result = {"device": device, "backend": "jax", "jax": jax.__version__,
              "keras": keras.__version__, "batches": batches, "op_by_op": op_by_op,
              "repeats": args.repeats,
              "warmup": args.warmup, "matmul_size": size, "matmul_flops_per_s": matmul,
              "load_start": load_start, "load_end": [round(x, 2) for x in os.getloadavg()],
              "cpu_count": os.cpu_count(), "wall_s": round(time.perf_counter() - start, 1),
              "compile_seconds": round(sum(r.get("compile_s", 0) for r in rows), 1),
              "rows": rows}
    path = os.path.join(args.output_dir, f"accelerator_{slug}")
    results_io.write_json(path + ".json", result)
    results_io.write_markdown(path + ".md", _markdown(result))
    print(f"wrote {path}.json and .md")


if __name__ == "__main__":
    main()
