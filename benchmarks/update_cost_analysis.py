r"""XLA's cost analysis of one compiled update of the compiled trainer, and a roofline for an H200.

    KERAS_BACKEND=jax python benchmarks/update_cost_analysis.py \
        --preset=zambaldi_fig3_relational --num_envs=32,256,1024 \
        --output=benchmarks/results/update_cost_analysis

For each number of environments the update of
:class:`keras_relational.agents.compiled.loop.CompiledLoop` at the preset's network, levels and
unroll length is lowered and compiled by ``jax.jit`` (shapes only: nothing runs), and so is each
of its parts on its own:

* ``environment``: one ``TensorBoxWorld.step`` of every environment, times ``unroll_length``;
* ``acting``: one forward pass and a sampled action per environment, times ``unroll_length``;
* ``learning``: the V-trace loss, its gradients and the optimizer step on the whole unroll.

``compiled.cost_analysis()`` gives the FLOPs and the bytes accessed of each, and the compiled HLO
text the fusions and kernels (the instructions a GPU launches: fusions, matmuls, convolutions,
custom calls and unfused ops, outside fused computations). XLA counts a ``while`` loop's body once,
whatever its trip count, so the whole update's own figures (its ``lax.scan`` over the unroll's
steps) undercount the acting and the environment; the per-part sums are the update's figures.
FLOPs do not depend on the device (the same HLO); bytes accessed and kernel counts do (fusion is
the compiler's choice), so they are read on the device named in the results. The roofline of an
NVIDIA H200 (989 TFLOP/s dense bf16, 4.8 TB/s of HBM3e; float32 matmuls run at about half of the
bf16 rate on tensor cores) bounds each part's time from below: ``max(FLOPs / peak, bytes /
bandwidth)``, and the trained frames/s no update can beat.

Writes ``OUTPUT.md`` and ``OUTPUT.json`` (``--output``, a path without extension).
"""

import argparse
import os
import re
import subprocess
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "jax")

HERE = os.path.dirname(os.path.abspath(__file__))
# Beside this script, also when a test loads it by path or gpu_session runs it under `python -P`
# (neither puts the script's folder on sys.path).
sys.path.insert(0, HERE)

import results_io  # noqa: E402  (benchmarks/results_io.py, beside this script)

# NVIDIA H200 SXM datasheet: dense bf16 tensor-core rate and HBM3e bandwidth.
H200_BF16_FLOPS = 989e12
H200_BYTES_PER_SECOND = 4.8e12

PARTS = ("environment", "acting", "learning")

# Instructions that launch nothing on a GPU (bookkeeping of the HLO graph).
_NOT_KERNELS = {"parameter", "constant", "get-tuple-element", "tuple", "bitcast", "while",
                "conditional", "call", "after-all", "opt-barrier", "partition-id", "replica-id",
                "copy-start", "copy-done", "add-dependency"}
_COMPUTATION = re.compile(r"^(?:ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$")  # unindented
_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*.*?\s([a-z][\w\-]*)\(")
_CALLED = re.compile(r"(?:calls|to_apply)=%?([\w.\-]+)")


def kernel_counts(hlo_text):
    """``dict(fusions, kernels, instructions)`` of a compiled module's HLO text.

    Fused computations (called by a fusion) and reducers (``to_apply``) are left out: their
    instructions run inside one kernel. ``kernels`` counts the rest that launch work.
    """
    computations, current = {}, None
    for line in hlo_text.splitlines():
        match = _COMPUTATION.match(line)
        if match and not line[:1].isspace():
            current = computations.setdefault(match.group(1), [])
            continue
        if current is not None:
            op = _INSTRUCTION.match(line)
            if op:
                current.append((op.group(1), line))
    inner = {name for ops in computations.values() for _, line in ops
             for name in _CALLED.findall(line)}
    fusions = kernels = instructions = 0
    for name, ops in computations.items():
        if name in inner:
            continue
        for op, _ in ops:
            instructions += 1
            fusions += op == "fusion"
            kernels += op not in _NOT_KERNELS
    return dict(fusions=fusions, kernels=kernels, instructions=instructions)


def _cost(compiled):
    """FLOPs and bytes accessed of a compiled function (``cost_analysis()`` over its modules)."""
    analysis = compiled.cost_analysis()
    if isinstance(analysis, dict):
        analysis = [analysis]
    flops = sum(float(a.get("flops", 0.0)) for a in analysis or [])
    transcendentals = sum(float(a.get("transcendentals", 0.0)) for a in analysis or [])
    bytes_accessed = sum(float(a.get("bytes accessed", 0.0)) for a in analysis or [])
    return dict(flops=flops, transcendentals=transcendentals, bytes_accessed=bytes_accessed,
                **kernel_counts(compiled.as_text()))


def build(preset, num_envs, dtype_policy=None, level_source="numpy", **overrides):
    """``(config, environment, model, compiled_loop)`` of ``preset`` with ``num_envs``
    environments (None: the preset's), as ``train_eval`` builds them (the model's weights from
    the config's seed); ``overrides``: config fields (``CompiledConfig``'s too), and ``level`` /
    ``model`` as in ``presets.train_config``."""
    import keras

    from keras_relational.agents import presets
    from keras_relational.agents.compiled.train_eval import build_loop

    if dtype_policy is not None:
        overrides["dtype_policy"] = dtype_policy
    if num_envs is not None:
        overrides["num_envs"] = num_envs
    config = presets.train_config(preset, trainer="compiled", level_source=level_source,
                                  **overrides)
    keras.utils.set_random_seed(config.seed)
    return (config, *build_loop(config))


def abstract_bank(environment, num_levels):
    """The shapes of a bank of ``num_levels`` levels (``jax.ShapeDtypeStruct`` s)."""
    import jax
    import numpy as np

    bank = environment.level_bank(1, seed=0)
    return {key: jax.ShapeDtypeStruct((num_levels, *np.shape(value)[1:]),
                                      np.asarray(value).dtype) for key, value in bank.items()}


def _lower_and_compile(fn, *args):
    import jax

    start = time.perf_counter()
    lowered = jax.jit(fn).lower(*args)
    lowered_at = time.perf_counter()
    compiled = lowered.compile()
    done = time.perf_counter()
    return compiled, dict(lower_seconds=lowered_at - start, compile_seconds=done - lowered_at)


def analyse(preset, num_envs, dtype_policy=None, **overrides):
    """The cost analysis of one update and its parts: a dict (a row of the results)."""
    import jax

    from keras_relational.agents.compiled import acting

    config, environment, model, compiled_loop = build(preset, num_envs, dtype_policy,
                                                      **overrides)
    bank = abstract_bank(environment, config.levels_per_bank)
    state = jax.eval_shape(compiled_loop.initial_state, bank)
    steps = config.unroll_length
    frames = num_envs * steps
    parts = {}

    update, timing = _lower_and_compile(compiled_loop._update_fn, state, bank)
    whole = dict(_cost(update), **timing)

    params = (state["trainable"], state["non_trainable"])
    observation = state["timestep"].observation
    actions = jax.ShapeDtypeStruct((num_envs,), "int32")

    def env_step(env_state, actions, bank):
        return environment.step(env_state, actions, bank)

    def act(params, observation, seed):
        return acting.act(model, params, observation, compiled_loop.seed_generator, seed)

    _, unroll, _ = jax.eval_shape(compiled_loop._unroll, state, bank)

    def learn(params, optimizer_values, unroll):
        return compiled_loop.learner.update(params, optimizer_values, unroll)

    for name, fn, args, repeats in (
            ("environment", env_step, (state["env"], actions, bank), steps),
            ("acting", act, (params, observation, state["seed"]), steps),
            ("learning", learn, (params, state["optimizer"], unroll), 1)):
        compiled, timing = _lower_and_compile(fn, *args)
        cost = _cost(compiled)
        parts[name] = dict(
            calls_per_update=repeats, **timing,
            **{key: cost[key] * repeats for key in ("flops", "transcendentals",
                                                    "bytes_accessed", "kernels", "fusions")},
            kernels_per_call=cost["kernels"], fusions_per_call=cost["fusions"])
    total = {key: sum(part[key] for part in parts.values())
             for key in ("flops", "transcendentals", "bytes_accessed", "kernels", "fusions")}
    for part in (*parts.values(), total):
        part["flops_per_frame"] = part["flops"] / frames
        part["bytes_per_frame"] = part["bytes_accessed"] / frames
        compute = part["flops"] / H200_BF16_FLOPS
        memory = part["bytes_accessed"] / H200_BYTES_PER_SECOND
        part["h200_roofline_seconds"] = max(compute, memory)
        part["h200_bound"] = "compute" if compute >= memory else "memory"
    total["h200_roofline_frames_per_second"] = frames / total["h200_roofline_seconds"]
    return dict(num_envs=num_envs, unroll_length=steps, frames_per_update=frames,
                dtype_policy=config.dtype_policy, parameters=model.count_params(),
                whole_update=whole, parts=parts, sum_of_parts=total)


def device_and_commit():
    """``(device description, commit)`` of this process and repository."""
    import jax

    device = jax.devices()[0]
    described = f"{device.platform} ({device.device_kind}), {len(jax.devices())} device(s)"
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=results_io.REPO,
                          capture_output=True, text=True, check=False)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                           cwd=results_io.REPO, capture_output=True, text=True, check=False)
    commit = done.stdout.strip() or "unknown"
    return described, commit + (" (with uncommitted changes)" if dirty.stdout.strip() else "")


def _mega(x):
    return f"{x / 1e6:,.1f}"


def markdown(args, device, commit, rows):
    lines = [
        f"Device: {device}; commit {commit}; JAX under Keras "
        f"{__import__('keras').__version__}. `--preset={args.preset}` (its network, levels and "
        f"unroll length), each update lowered and compiled by `jax.jit` (nothing runs). Parts "
        "compiled on their own: one environment step and one acting step (x unroll length), "
        "the learner's loss, gradients and optimizer step on the unroll (x 1). FLOPs are "
        "the device-independent HLO's; bytes and kernels are this device's compiler's. "
        f"Roofline: an NVIDIA H200 at {H200_BF16_FLOPS / 1e12:g} TFLOP/s (dense bf16) and "
        f"{H200_BYTES_PER_SECOND / 1e12:g} TB/s.", ""]
    for row in rows:
        total = row["sum_of_parts"]
        lines += [
            f"### {row['num_envs']:,} environments x {row['unroll_length']} steps "
            f"({row['frames_per_update']:,} trained frames an update, {row['dtype_policy']}, "
            f"{row['parameters']:,} parameters)", "",
            "| part | MFLOP / frame | MB accessed / frame | kernels / update | fusions / update "
            "| compile (s) | H200 roofline (ms / update) | bound |",
            "|---|---|---|---|---|---|---|---|"]
        for name in PARTS:
            part = row["parts"][name]
            lines.append(
                f"| {name} | {_mega(part['flops_per_frame'])} | "
                f"{part['bytes_per_frame'] / 1e6:,.3f} | {part['kernels']:,} | "
                f"{part['fusions']:,} | {part['compile_seconds']:.1f} | "
                f"{1e3 * part['h200_roofline_seconds']:,.3f} | {part['h200_bound']} |")
        whole = row["whole_update"]
        lines += [
            f"| **update (sum of parts)** | **{_mega(total['flops_per_frame'])}** | "
            f"{total['bytes_per_frame'] / 1e6:,.3f} | {total['kernels']:,} | "
            f"{total['fusions']:,} | | {1e3 * total['h200_roofline_seconds']:,.3f} | "
            f"{total['h200_bound']} |", "",
            f"H200 roofline bound: {total['h200_roofline_frames_per_second']:,.0f} trained "
            f"frames/s. The whole update compiled as one function: "
            f"{whole['compile_seconds']:.1f} s to compile ({whole['lower_seconds']:.1f} s to "
            f"lower), {whole['kernels']:,} kernels and {whole['fusions']:,} fusions in its HLO "
            f"(a scan's body counted once), cost analysis {_mega(whole['flops'])} MFLOP (the "
            "scan's body once).", ""]
    return "\n".join(lines)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="zambaldi_fig3_relational",
                        help="a preset of keras_relational.agents.presets")
    parser.add_argument("--num_envs", default="32,256,1024",
                        help="comma-separated numbers of environments")
    parser.add_argument("--dtype_policy", default=None,
                        help="the network's dtype policy (default: the preset's)")
    parser.add_argument("--output", default=None, help="writes OUTPUT.md and OUTPUT.json")
    args = parser.parse_args(argv)
    try:
        args.num_envs = [int(n) for n in args.num_envs.split(",") if n]
    except ValueError:
        parser.error(f"--num_envs: expected comma-separated integers, received "
                     f"{args.num_envs!r}")
    if not args.num_envs or min(args.num_envs) < 1:
        parser.error(f"--num_envs: expected positive integers, received {args.num_envs}")
    if args.dtype_policy is not None:
        from keras_relational import validation

        if args.dtype_policy not in validation.DTYPE_POLICIES:
            parser.error(f"--dtype_policy: expected one of {validation.DTYPE_POLICIES}, "
                         f"received {args.dtype_policy!r}")
    return args


def main(argv=None):
    args = parse_args(argv)
    import keras

    if keras.backend.backend() != "jax":
        raise SystemExit(f"update_cost_analysis.py reads XLA's cost analysis through JAX: run it "
                         f"with KERAS_BACKEND=jax, received {keras.backend.backend()!r}.")
    device, commit = device_and_commit()
    rows = []
    for num_envs in args.num_envs:
        row = analyse(args.preset, num_envs, args.dtype_policy)
        rows.append(row)
        total = row["sum_of_parts"]
        print(f"{num_envs} envs: {_mega(total['flops_per_frame'])} MFLOP / frame, "
              f"{total['bytes_per_frame'] / 1e6:.3f} MB / frame, whole update compiled in "
              f"{row['whole_update']['compile_seconds']:.1f} s", flush=True)
    text = markdown(args, device, commit, rows)
    print(text)
    if args.output:
        results_io.write_markdown(args.output + ".md", text)
        results_io.write_json(args.output + ".json", {
            "device": device, "commit": commit, "preset": args.preset,
            "h200": {"bf16_flops": H200_BF16_FLOPS, "bytes_per_second": H200_BYTES_PER_SECOND},
            "rows": rows})


if __name__ == "__main__":
    main()
