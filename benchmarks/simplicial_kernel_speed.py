"""Speed, memory and accuracy of the fused Pallas kernel of 2-simplicial attention on a GPU.

At Roy et al. 2025's shapes (head dim 128, causal window (512, 32), Sec. 6; bf16 inputs), for
each N of ``--sizes``, under JAX (the device is named in the results):

* ``kernel``: ``keras_relational``'s fused Pallas kernel (the attention alone: q, k1, k2, v1, v2
  in, outputs out), forward and forward + backward (the gradients of all five inputs);
* ``layer, kernel`` and ``layer, keras.ops``: ``SequenceSimplicialAttention`` with
  ``flash_attention=True`` and ``False`` (projections included), the same weights;
* ``flash MHA``: ``keras.ops.dot_product_attention(..., is_causal=True,
  flash_attention=True)`` (cuDNN) with the same batch, query heads, head dim and N; its causal
  FLOPs equal the 2-simplicial ones at ``N = 2 w1 w2`` (32,768 for (512, 32));
* ``lucidrains``: ``simplicial-attention`` 0.1.6's Triton kernel (PyTorch), on the same inputs,
  in a subprocess; skipped, with the reason, where PyTorch, Triton, CUDA or the package is
  missing.

FLOPs are the model's count: forward ``4 B H N w1 w2 d`` (a multiply-add per head dim for the
logit and for the value of each pair; windows counted whole), forward + backward 3x that (the
backward's products, not its recomputation), the same for every 2-simplicial path;
flash MHA's forward ``2 B H N^2 d`` (causal half). Memory: JAX paths, XLA's planned
temporaries of the compiled program (``memory_analysis().temp_size_in_bytes``); lucidrains,
``torch.cuda.max_memory_allocated`` less its inputs. Accuracy: the largest absolute difference
relative to the largest value, of the bf16 outputs (and input gradients) against the kernel
on the same inputs in float32 (IEEE products), and of lucidrains' outputs against the bf16
kernel's.

``--time_budget`` (seconds): a measurement that would start after it is left out (listed);
``--smoke`` runs tiny shapes on the CPU (the kernel in Pallas' interpreter).

Usage::

    python benchmarks/simplicial_kernel_speed.py --sizes=4096,8192,16384,32768,65536 \
        --time_budget=500 --output=benchmarks/results/simplicial_kernel_speed_gpu
    python benchmarks/simplicial_kernel_speed.py --smoke --sizes=64 --output=/tmp/smoke
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="4096,8192,16384,32768,65536",
                        help="sequence lengths N")
    parser.add_argument("--window", default="512,32", help="w1,w2 (Roy et al. 2025, Sec. 6)")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--heads", type=int, default=8, help="query heads")
    parser.add_argument("--kv_heads", type=int, default=1, help="key/value heads")
    parser.add_argument("--head_dim", type=int, default=128)
    parser.add_argument("--steps", type=int, default=5, help="timed steps per measurement")
    parser.add_argument("--ops_max_size", type=int, default=16384,
                        help="the largest N of the keras.ops form (its backward keeps "
                        "O(N H w1 w2) pair weights)")
    parser.add_argument("--time_budget", type=float, default=None,
                        help="seconds: measurements not started within it are left out")
    parser.add_argument("--smoke", action="store_true",
                        help="tiny shapes on the CPU, the kernel in Pallas' interpreter")
    parser.add_argument("--output", default=None,
                        help="writes OUTPUT.md and OUTPUT.json (a path without extension)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.window, args.heads, args.kv_heads, args.head_dim, args.steps = "8,4", 2, 1, 16, 1
    return args


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
from keras_relational.layers import _pallas_simplicial  # noqa: E402

MIB = 2.0**20
ON_GPU = jax.default_backend() == "gpu"
INTERPRET = not ON_GPU
BLOCK = 64 if ON_GPU else 16

# lucidrains' kernel in a fresh PyTorch process: inputs and outputs as bfloat16 bits (uint16).
_LUCIDRAINS = r"""
import json, sys, time, numpy as np
folder, w1, w2, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
try:
    import triton, torch  # noqa: F401  (triton first: where it is missing, no torch import)
    from simplicial_attention.triton_two_simplicial_attention import sliding_two_simplicial_attn
    import simplicial_attention
    assert torch.cuda.is_available(), "no CUDA device"
except Exception as error:
    print(json.dumps({"skipped": f"{type(error).__name__}: {error}"})); sys.exit(0)
def load(name):
    return torch.from_numpy(np.load(f"{folder}/{name}.npy")).view(torch.bfloat16).cuda()
q, k1, k2, v1, v2, cot = (load(n) for n in ("q", "k1", "k2", "v1", "v2", "cot"))
inputs = [x.requires_grad_() for x in (q, k1, k2, v1, v2)]
def forward():
    return sliding_two_simplicial_attn(inputs[0], inputs[1:3], inputs[3:5], w1=w1, w2=w2)
def step():
    torch.autograd.grad((forward().float() * cot.float()).sum(), inputs)
def timed(fn):
    fn(); torch.cuda.synchronize(); start = time.perf_counter()
    for _ in range(steps): fn()
    torch.cuda.synchronize(); return (time.perf_counter() - start) / steps
in_bytes = sum(x.numel() * x.element_size() for x in (q, k1, k2, v1, v2, cot))
with torch.no_grad():
    out = forward()
np.save(f"{folder}/lucidrains_out.npy", out.float().cpu().numpy())
torch.cuda.reset_peak_memory_stats()
with torch.no_grad():
    fwd = timed(forward)
fwd_mib = (torch.cuda.max_memory_allocated() - in_bytes) / 2**20
torch.cuda.reset_peak_memory_stats()
both = timed(step)
step_mib = (torch.cuda.max_memory_allocated() - in_bytes) / 2**20
print(json.dumps({"forward_s": fwd, "step_s": both, "forward_mib": fwd_mib,
                  "step_mib": step_mib, "version": simplicial_attention.__name__ + " " +
                  __import__("importlib.metadata").metadata.version("simplicial-attention"),
                  "device": torch.cuda.get_device_name()}))
"""


class Clock:
    """The time budget: ``allows(what)`` is False (and records ``what``) once it is spent."""

    def __init__(self, budget):
        self.budget, self.start, self.left_out = budget, time.perf_counter(), []

    def allows(self, what):
        if self.budget is not None and time.perf_counter() - self.start > self.budget:
            self.left_out.append(what)
            return False
        return True


def timed(fn, *args):
    """Median seconds of ``fn(*args)`` over ``--steps`` calls, after one warm-up call."""
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(ARGS.steps):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def temp_mib(compiled):
    return compiled.memory_analysis().temp_size_in_bytes / MIB


def relative_error(got, want):
    got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
    return float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30))


def out_of_memory(error):
    text = str(error)
    return "RESOURCE_EXHAUSTED" in text or "out of memory" in text.lower()


def attention_inputs(length, window):
    rng = np.random.RandomState(length)
    b, h, hkv, d = ARGS.batch, ARGS.heads, ARGS.kv_heads, ARGS.head_dim
    shapes = [(b, length, h, d)] + [(b, length, hkv, d)] * 4 + [(b, length, h, d)]
    arrays = [jnp.asarray(rng.normal(size=s).astype("float32")).astype(jnp.bfloat16)
              for s in shapes]
    return arrays[:5], arrays[5], jnp.ones((b, length), bool)


def kernel_programs(arrays, cotangent, valid, window, with_forward=True):
    """(forward, forward + backward) of the kernel, compiled for ``arrays``' dtype (forward None
    unless ``with_forward``)."""
    scale = 1.0 / np.sqrt(ARGS.head_dim)

    def forward(*arrays):
        return _pallas_simplicial.simplicial_attention(
            *arrays, valid, window=window, scale=scale, block=BLOCK, interpret=INTERPRET)

    def step(cotangent, *arrays):
        out, pullback = jax.vjp(forward, *arrays)
        return out, pullback(cotangent.astype(out.dtype))

    return (jax.jit(forward).lower(*arrays).compile() if with_forward else None,
            jax.jit(step).lower(cotangent, *arrays).compile())


def measure_kernel(length, window, rows, errors):
    arrays, cotangent, valid = attention_inputs(length, window)
    forward, step = kernel_programs(arrays, cotangent, valid, window)
    fwd_s = timed(forward, *arrays)
    step_s = timed(step, cotangent, *arrays)
    rows.append(row(length, "kernel", fwd_s, step_s, temp_mib(forward), temp_mib(step)))
    exact = [x.astype(jnp.float32) for x in arrays]
    out, grads = step(cotangent, *arrays)
    # the float32 reference: its forward + backward alone (compiling the kernel is most of a
    # small N's seconds, and all of them in Pallas' interpreter)
    out32, grads32 = kernel_programs(exact, cotangent, valid, window, with_forward=False)[1](
        cotangent, *exact)
    errors.append({"N": length, "what": "kernel bf16 vs kernel float32", "outputs":
                   relative_error(out, out32), **{f"d{n}": relative_error(g, g32) for n, g, g32
                                                  in zip(("q", "k1", "k2", "v1", "v2"), grads,
                                                         grads32, strict=True)}})
    return arrays, cotangent, out


def simplicial_flops(length, window):
    return _pallas_simplicial.flops(ARGS.batch, length, ARGS.heads, ARGS.head_dim,
                                    ARGS.head_dim, window)


def row(length, path, fwd_s, step_s, fwd_mib, step_mib, flops=None):
    flops = flops if flops is not None else simplicial_flops(length, WINDOW)
    return {"N": length, "path": path, "forward_ms": 1e3 * fwd_s, "step_ms": 1e3 * step_s,
            "forward_tflops": flops / fwd_s / 1e12, "step_tflops": 3 * flops / step_s / 1e12,
            "forward_mib": fwd_mib, "step_mib": step_mib}


def measure_layer(length, flash, rows, outputs):
    layer = keras_relational.SequenceSimplicialAttention(
        num_heads=ARGS.heads, key_dim=ARGS.head_dim, num_key_value_heads=ARGS.kv_heads,
        window=WINDOW, flash_attention=flash, dtype="mixed_bfloat16")
    width = ARGS.heads * ARGS.head_dim
    x = jnp.asarray(np.random.RandomState(1).normal(size=(ARGS.batch, length, width)),
                    jnp.float32)
    layer(keras.KerasTensor((ARGS.batch, 8, width)))  # builds; symbolic: runs no op
    layer.set_weights([np.random.RandomState(i).normal(size=w.shape).astype("float32")
                       / np.sqrt(w.shape[0]) for i, w in enumerate(layer.get_weights())])
    weights = [v.value for v in layer.trainable_variables]

    def forward(weights, x):
        return layer.stateless_call(weights, [], x)[0]

    def step(weights, x):
        return jax.grad(lambda w, x: jnp.sum(jnp.square(forward(w, x).astype("float32"))),
                        argnums=(0, 1))(weights, x)

    fwd_c = jax.jit(forward).lower(weights, x).compile()
    step_c = jax.jit(step).lower(weights, x).compile()
    name = "layer, kernel" if flash else "layer, keras.ops"
    rows.append(row(length, name, timed(fwd_c, weights, x), timed(step_c, weights, x),
                    temp_mib(fwd_c), temp_mib(step_c)))
    outputs[name] = fwd_c(weights, x)


def measure_flash_mha(length, rows):
    b, h, d = ARGS.batch, ARGS.heads, ARGS.head_dim
    rng = np.random.RandomState(2)
    q, k, v, cot = (jnp.asarray(rng.normal(size=(b, length, h, d)), jnp.bfloat16)
                    for _ in range(4))

    def forward(q, k, v):
        return keras.ops.dot_product_attention(q, k, v, is_causal=True,
                                               flash_attention=True if ON_GPU else None)

    def step(q, k, v):
        out, pullback = jax.vjp(forward, q, k, v)
        return pullback(cot)

    fwd_c = jax.jit(forward).lower(q, k, v).compile()
    step_c = jax.jit(step).lower(q, k, v).compile()
    flops = 2.0 * b * h * length * length * d  # 4 B H N^2 d, half of it causal
    rows.append(row(length, "flash MHA" if ON_GPU else "MHA (no flash off a GPU)",
                    timed(fwd_c, q, k, v), timed(step_c, q, k, v), temp_mib(fwd_c),
                    temp_mib(step_c), flops=flops))


def measure_lucidrains(length, arrays, cotangent, kernel_out, rows, errors, notes):
    with tempfile.TemporaryDirectory() as folder:
        for name, x in zip(("q", "k1", "k2", "v1", "v2", "cot"), (*arrays, cotangent),
                           strict=True):
            np.save(os.path.join(folder, f"{name}.npy"), np.asarray(x).view(np.uint16))
        result = subprocess.run(
            [sys.executable, "-c", _LUCIDRAINS, folder, *map(str, WINDOW), str(ARGS.steps)],
            capture_output=True, text=True, timeout=600)
        if result.returncode:
            notes.append(f"N = {length}: lucidrains failed: {result.stderr.strip()[-300:]}")
            return
        report = json.loads(result.stdout.strip().splitlines()[-1])
        if "skipped" in report:
            notes.append(f"lucidrains skipped: {report['skipped']}")
            return False
        rows.append(row(length, f"lucidrains ({report['version']})", report["forward_s"],
                        report["step_s"], report["forward_mib"], report["step_mib"]))
        theirs = np.load(os.path.join(folder, "lucidrains_out.npy"))
        ours = np.asarray(kernel_out, np.float32)
        # what a large difference is made of (the 2026-11-30 H200 window: 1.00, unexplained):
        # the two outputs' largest values and the share of lucidrains' outputs that are 0
        errors.append({"N": length, "what": "lucidrains bf16 vs kernel bf16",
                       "outputs": relative_error(theirs, kernel_out),
                       "largest |lucidrains|": float(np.max(np.abs(theirs))),
                       "largest |kernel|": float(np.max(np.abs(ours))),
                       "lucidrains' zeros": float(np.mean(theirs == 0)),
                       "kernel's zeros": float(np.mean(ours == 0))})
    return True


def main():
    global WINDOW
    WINDOW = tuple(int(w) for w in ARGS.window.split(","))
    sizes = [int(s) for s in ARGS.sizes.split(",")]
    device = jax.devices()[0]
    clock = Clock(ARGS.time_budget)
    captured = results_io.StdoutCapture()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=os.path.dirname(os.path.abspath(__file__))
                            ).stdout.strip() or "unknown"
    print(f"Device: {device.platform} ({device.device_kind}), JAX {jax.__version__}, Keras "
          f"{keras.__version__}, commit {commit}"
          f"{', Pallas interpreter (smoke)' if INTERPRET else ''}. Batch {ARGS.batch}, "
          f"{ARGS.heads} query heads, {ARGS.kv_heads} key/value head(s), head dim "
          f"{ARGS.head_dim}, window {WINDOW}, bf16 inputs; median of {ARGS.steps} steps. "
          f"2-simplicial FLOPs: forward 4 B H N w1 w2 d, forward + backward 3x; flash MHA: "
          f"forward 2 B H N^2 d.")
    rows, errors, notes = [], [], []
    lucidrains = True
    for length in sizes:
        try:
            if not clock.allows(f"N = {length}: kernel"):
                continue
            arrays, cotangent, out = measure_kernel(length, WINDOW, rows, errors)
            if lucidrains and clock.allows(f"N = {length}: lucidrains"):
                lucidrains = measure_lucidrains(length, arrays, cotangent, out, rows, errors,
                                                notes) is not False
            if clock.allows(f"N = {length}: flash MHA"):
                measure_flash_mha(length, rows)
            outputs = {}
            if not ARGS.smoke and clock.allows(f"N = {length}: layer, kernel"):
                measure_layer(length, True, rows, outputs)
            if length <= ARGS.ops_max_size and clock.allows(f"N = {length}: layer, keras.ops"):
                measure_layer(length, False, rows, outputs)
            if len(outputs) == 2:
                errors.append({"N": length, "what": "layer kernel vs layer keras.ops (bf16)",
                               "outputs": relative_error(outputs["layer, kernel"],
                                                         outputs["layer, keras.ops"])})
        except Exception as error:
            if not out_of_memory(error):
                raise
            notes.append(f"N = {length}: out of device memory "
                         f"({str(error).splitlines()[0][:200]})")
    print("\n| N | path | fwd ms | fwd TFLOP/s | fwd+bwd ms | fwd+bwd TFLOP/s | temp MiB (fwd) "
          "| temp MiB (fwd+bwd) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['N']} | {r['path']} | {r['forward_ms']:.2f} | {r['forward_tflops']:.2f} | "
              f"{r['step_ms']:.2f} | {r['step_tflops']:.2f} | {r['forward_mib']:.0f} | "
              f"{r['step_mib']:.0f} |")
    print("\nLargest difference relative to the largest value:\n")
    for e in errors:
        values = ", ".join(f"{k} {v:.2e}" for k, v in e.items() if k not in ("N", "what"))
        print(f"- N = {e['N']}, {e['what']}: {values}")
    for note in notes + [f"Left out (time budget): {what}" for what in clock.left_out]:
        print(f"\n{note}")
    if ARGS.output:
        captured.write_markdown(ARGS.output + ".md")
        results_io.write_json(ARGS.output + ".json", {
            "device": f"{device.platform} ({device.device_kind})", "commit": commit,
            "args": vars(ARGS), "rows": rows, "errors": errors, "notes": notes,
            "left_out": clock.left_out})
    else:
        captured.stop()


WINDOW = None

if __name__ == "__main__":
    main()
