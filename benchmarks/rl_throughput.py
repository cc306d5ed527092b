"""End-to-end training throughput of the Box-World agents vs the FLOP bound of this CPU.

For each agent (relational on BoxWorld, simplicial on bridge BoxWorld, at the papers' sizes):

1. FLOPs per trained frame = actor forward on one frame + learner forward and backward on one
   frame, counted by XLA's cost analysis (JAX backend, in a subprocess) of the same Keras model;
2. the machine's float32 matmul throughput (TensorFlow, 2048 x 2048 matmuls);
3. the FLOP-bound frame rate = throughput / FLOPs per frame;
4. the measured frames/s of ``agents.train_eval`` (V-trace, ``--num_envs`` x ``--unroll_length``
   frames per update) over the second half of the run (tracing and XLA compilation excluded).

    .venv/bin/python benchmarks/rl_throughput.py [--iterations 20]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

_FLOPS_CODE = r"""
import json, sys
import jax, jax.numpy as jnp, numpy as np
import keras
from keras_relational.models import boxworld_agents
name, shape = sys.argv[1], tuple(json.loads(sys.argv[2]))
model = getattr(boxworld_agents, name)(observation_shape=shape)
batch = 64
x = jnp.zeros((batch, *shape), jnp.float32)
trainable = [v.value for v in model.trainable_variables]
non_trainable = [v.value for v in model.non_trainable_variables]

def forward(trainable, x):
    (logits, value), _ = model.stateless_call(trainable, non_trainable, x)
    return logits, value

def loss(trainable, x):
    logits, value = forward(trainable, x)
    return jnp.sum(jax.nn.log_softmax(logits)[:, 0]) + jnp.sum(value ** 2)

def flops(fn, *args):
    analysis = jax.jit(fn).lower(*args).compile().cost_analysis()
    analysis = analysis[0] if isinstance(analysis, list) else analysis
    return float(analysis["flops"])

print(json.dumps({"forward": flops(forward, trainable, x) / batch,
                  "train": flops(jax.value_and_grad(loss), trainable, x) / batch,
                  "parameters": model.count_params()}))
"""


def count_flops(builder, shape):
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("TF_USE_LEGACY_KERAS", None)
    out = subprocess.run([sys.executable, "-c", _FLOPS_CODE, builder, json.dumps(shape)],
                         env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def matmul_gflops(size=2048, repeats=10):
    import tensorflow as tf

    a = tf.random.normal((size, size))
    b = tf.random.normal((size, size))
    (a @ b).numpy()
    start = time.perf_counter()
    for _ in range(repeats):
        c = a @ b
    c.numpy()
    return 2 * size**3 * repeats / (time.perf_counter() - start) / 1e9


def measured_frames_per_second(env_name, agent, iterations, num_envs, unroll_length):
    """Frames/s over the second half of ``2 * iterations`` updates (compilation excluded)."""
    from keras_relational.agents.train_eval import train_eval

    with tempfile.TemporaryDirectory() as root:
        result = train_eval(root, env_name=env_name, agent=agent, num_iterations=2 * iterations,
                            num_envs=num_envs, unroll_length=unroll_length, eval_episodes=0,
                            log_interval=iterations, checkpoint_interval=10**9,
                            policy_save_interval=10**9, print_fn=lambda line: None)
    return result["history"][-1]["fps"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--num_envs", type=int, default=32)
    parser.add_argument("--unroll_length", type=int, default=40)
    args = parser.parse_args()
    import keras_relational.agents  # noqa: F401  (tf.keras -> tf-keras before TF-Agents)

    throughput = matmul_gflops()
    rows = []
    for label, env_name, agent, builder, shape in (
            ("relational, BoxWorld 14x14", "original", "relational", "relational_agent",
             [14, 14, 3]),
            ("simplicial, bridge BoxWorld", "bridge", "simplicial", "simplicial_agent",
             [7, 10, 3])):
        flops = count_flops(builder, shape)
        per_frame = flops["forward"] + flops["train"]
        bound = throughput * 1e9 / per_frame
        fps = measured_frames_per_second(env_name, agent, args.iterations, args.num_envs,
                                         args.unroll_length)
        rows.append((label, flops["parameters"], flops["forward"], flops["train"], per_frame,
                     bound, fps))
        print(f"{label}: done", flush=True)
    print(f"\nfloat32 matmul throughput (TensorFlow, 2048^2): {throughput:.1f} GFLOP/s; "
          f"V-trace, {args.num_envs} envs x {args.unroll_length} steps per update, "
          f"{args.iterations} timed updates\n")
    print("| agent | parameters | MFLOP actor fwd / frame | MFLOP learner fwd+bwd / frame | "
          "MFLOP / trained frame | FLOP-bound frames/s | measured frames/s | measured / bound |")
    print("|---|---|---|---|---|---|---|---|")
    for label, params, fwd, train, per_frame, bound, fps in rows:
        print(f"| {label} | {params:,} | {fwd / 1e6:.1f} | {train / 1e6:.1f} | "
              f"{per_frame / 1e6:.1f} | {bound:.0f} | {fps:.0f} | {fps / bound:.0%} |")


if __name__ == "__main__":
    main()
