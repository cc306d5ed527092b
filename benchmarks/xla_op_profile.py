"""How fast the matrix products of a Box-World agent's XLA-compiled learner step run.

Compiles the agent's forward and backward pass on one learner batch (``--batch`` frames, 32 x 41
in ``rl_throughput.py``'s setting; a log-softmax + squared-value loss, whose own cost is
negligible) with XLA, reads the optimised HLO XLA dumps for it, and times **every dot (matrix
product) of that HLO alone**, XLA-compiled, with operands of its shapes and its operand form:
NN, NT (right operand transposed) or TN (left operand transposed), as autodiff emits them for the
backward pass, less the cost of calling a compiled function. Prints

1. the wall time per step and the sum of the dots' times alone, which leaves an estimate of the
   time in everything else (elementwise fusions, reductions, copies);
2. every dot: output shape, form, GFLOP, ms alone, GFLOP/s; and the totals per form;
3. the ceiling this implies against ``rl_throughput.py``'s FLOP bound: the step's dot FLOPs
   divided by the dots' own time, as a share of this machine's float32 matmul rate (2048 x 2048),
   i.e. the most the step could reach if every other op cost nothing.

Timings are the best of ``--repeats``; treat them as ±20 % on a shared machine. A dot timed
alone is only an estimate of its cost inside the step: there XLA may overlap it with other work,
and thin dots (an axis of a few entries) may cost less in the step than alone.

    .venv/bin/python benchmarks/xla_op_profile.py [--agent relational|simplicial] [--batch 1312]
"""

import argparse
import collections
import glob
import os
import re
import shutil
import tempfile
import time

_INSTRUCTION = re.compile(r"\s*(?:ROOT )?%?([\w.\-]+) = (\w+)\[([\d,]*)\]\S* (\w[\w\-]*)\(")


def parse_entry(hlo_text):
    """``{name: (opcode, dims, line)}`` for the instructions of the HLO module's ENTRY."""
    entry = hlo_text[hlo_text.index("\nENTRY "):]
    instructions = {}
    for line in entry.splitlines()[1:]:
        if line.startswith("}"):
            break
        match = _INSTRUCTION.match(line)
        if match:
            dims = tuple(int(d) for d in match.group(3).split(",") if d)
            instructions[match.group(1)] = (match.group(4), dims, line)
    return instructions


def parse_dot(line, instructions):
    """``(lhs dims, rhs dims, transpose_lhs, transpose_rhs)`` of a rank-2 or batched dot whose
    batch dimensions lead (what ``tf.matmul`` with ``adjoint_a/b`` computes)."""
    operands = re.search(r"dot\(%?([\w.\-]+), %?([\w.\-]+)\)", line)
    lhs = instructions[operands.group(1)][1]
    rhs = instructions[operands.group(2)][1]
    lhs_contracting = int(re.search(r"lhs_contracting_dims=\{(\d+)\}", line).group(1))
    rhs_contracting = int(re.search(r"rhs_contracting_dims=\{(\d+)\}", line).group(1))
    if len(lhs) != len(rhs) or lhs_contracting < len(lhs) - 2 or rhs_contracting < len(rhs) - 2:
        raise ValueError(f"Unexpected dot layout in the HLO: {line.strip()[:200]}")
    return lhs, rhs, lhs_contracting != len(lhs) - 1, rhs_contracting == len(rhs) - 1


def form_name(transpose_lhs, transpose_rhs):
    return ("T" if transpose_lhs else "N") + ("T" if transpose_rhs else "N")


def time_dot(tf, lhs, rhs, transpose_lhs, transpose_rhs, repeats):
    """Best wall seconds of one call of an XLA-compiled ``tf.matmul`` of these shapes and form
    (including the call's own overhead, see ``call_overhead``)."""
    a = tf.random.normal(lhs)
    b = tf.random.normal(rhs)
    product = tf.function(lambda a, b: tf.matmul(a, b, transpose_a=transpose_lhs,
                                                 transpose_b=transpose_rhs), jit_compile=True)
    product(a, b)  # compile; CPU eager calls return when the result is computed
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        product(a, b)
        best = min(best, time.perf_counter() - start)
    return best


def call_overhead(tf, repeats):
    """Best wall seconds of a call of an XLA-compiled 1 x 1 matmul: the dispatch cost that every
    timed dot includes and that the dots inside one compiled step do not pay."""
    return time_dot(tf, (1, 1), (1, 1), False, False, 20 * repeats)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--agent", choices=("relational", "simplicial"), default="relational")
    parser.add_argument("--batch", type=int, default=32 * 41, help="frames per learner step")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs (best shown)")
    parser.add_argument("--top", type=int, default=12, help="dots listed (0: all)")
    parser.add_argument("--output", default=None,
                        help="also write the tables to this markdown file")
    args = parser.parse_args()
    dump_dir = tempfile.mkdtemp(prefix="xla_dump_")
    os.environ["XLA_FLAGS"] = " ".join([
        os.environ.get("XLA_FLAGS", ""), f"--xla_dump_to={dump_dir}", "--xla_dump_hlo_as_text",
        "--xla_dump_hlo_module_re=.*inference_learner_step.*"]).strip()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf
    from rl_throughput import matmul_gflops  # beside this script

    from keras_relational.models import boxworld_agents

    if args.agent == "relational":
        model, shape = boxworld_agents.relational_agent(), (14, 14, 3)
    else:
        model, shape = boxworld_agents.simplicial_agent(), (7, 10, 3)
    frames = tf.constant(np.random.RandomState(0).randint(0, 256, (args.batch,) + shape)
                         .astype("uint8"))

    @tf.function(jit_compile=True)
    def learner_step(observation):
        with tf.GradientTape() as tape:
            logits, value = model(observation, training=True)
            loss = tf.reduce_sum(tf.nn.log_softmax(logits)[:, 0]) + tf.reduce_sum(value**2)
        return tape.gradient(loss, model.trainable_variables)

    try:
        learner_step(frames)  # compiles, and XLA dumps the optimised HLO
        dumps = glob.glob(os.path.join(dump_dir, "*cpu_after_optimizations.txt"))
        if not dumps:
            raise RuntimeError(f"XLA wrote no optimised HLO to {dump_dir}.")
        with open(max(dumps, key=os.path.getsize)) as f:
            instructions = parse_entry(f.read())
    finally:
        shutil.rmtree(dump_dir, ignore_errors=True)
    wall = float("inf")
    for _ in range(args.repeats):
        start = time.perf_counter()
        tf.nest.map_structure(lambda t: t.numpy(), learner_step(frames))
        wall = min(wall, time.perf_counter() - start)

    overhead = call_overhead(tf, args.repeats)
    dots = []
    for name, (opcode, dims, line) in instructions.items():
        if opcode != "dot":
            continue
        lhs, rhs, transpose_lhs, transpose_rhs = parse_dot(line, instructions)
        contraction = lhs[-2] if transpose_lhs else lhs[-1]
        flop = 2 * int(np.prod(dims)) * contraction
        seconds = max(time_dot(tf, lhs, rhs, transpose_lhs, transpose_rhs, args.repeats)
                      - overhead, 1e-6)
        dots.append((seconds, name, dims, form_name(transpose_lhs, transpose_rhs), flop))
    matmul_rate = matmul_gflops()
    dot_seconds = sum(d[0] for d in dots)
    dot_flop = sum(d[4] for d in dots)
    dot_rate = dot_flop / dot_seconds / 1e9

    # Imported here: tests load this file by path, without benchmarks/ on sys.path.
    import results_io  # benchmarks/results_io.py, beside this script

    captured = results_io.StdoutCapture()
    print(f"\n{args.agent} agent, XLA-compiled forward + backward on {args.batch} frames: "
          f"{wall * 1e3:,.0f} ms per step ({wall * 1e3 / args.batch:.3f} ms per frame); its "
          f"{len(dots)} dots alone: {dot_seconds * 1e3:,.0f} ms, so about "
          f"{max(wall - dot_seconds, 0) * 1e3:,.0f} ms in everything else (each dot's time "
          f"less {overhead * 1e3:.2f} ms, the cost of calling a compiled function); this machine's "
          f"matmul rate {matmul_rate:.1f} GFLOP/s\n")
    print("| dot | output shape | form | GFLOP | ms alone | GFLOP/s |\n|---|---|---|---|---|---|")
    for seconds, name, dims, form, flop in sorted(dots, reverse=True)[:args.top or None]:
        print(f"| {name} | {list(dims)} | {form} | {flop / 1e9:.1f} | {seconds * 1e3:.1f} | "
              f"{flop / seconds / 1e9:.0f} |")
    forms = collections.defaultdict(lambda: [0.0, 0.0])
    for seconds, _, _, form, flop in dots:
        forms[form][0] += seconds
        forms[form][1] += flop
    print("\n| form | dots' ms alone | GFLOP | GFLOP/s |\n|---|---|---|---|")
    for form, (seconds, flop) in sorted(forms.items()):
        print(f"| {form} | {seconds * 1e3:,.0f} | {flop / 1e9:.1f} | {flop / seconds / 1e9:.0f} |")
    print(f"\nDots: {dot_flop / args.batch / 1e6:.1f} MFLOP per frame at {dot_rate:.0f} GFLOP/s "
          f"on average when each runs alone = {dot_rate / matmul_rate:.0%} of the matmul rate, "
          f"the most the step could reach if every other op cost nothing. The whole step: "
          f"{dot_flop / wall / 1e9:.0f} GFLOP/s = {dot_flop / wall / 1e9 / matmul_rate:.0%} of "
          f"the matmul rate; the dots alone take {dot_seconds / wall:.0%} of its time.")
    captured.write_markdown(args.output)


if __name__ == "__main__":
    main()
