"""End-to-end training throughput of the Box-World agents vs the FLOP bound of this CPU.

For each agent (relational on BoxWorld, simplicial on bridge BoxWorld, at the papers' sizes):

1. FLOPs per trained frame = actor forward on one frame + learner forward and backward on one
   frame, counted by XLA's cost analysis (JAX backend, in a subprocess) of the same Keras model;
2. the machine's float32 matmul throughput (TensorFlow, 2048 x 2048 matmuls);
3. the FLOP-bound frame rate = throughput / FLOPs per frame;
4. the measured frames/s of ``keras_relational.agents.tf_agents.train_eval`` (V-trace,
   ``--num_envs`` x ``--unroll_length`` frames per update) over the second half of the run (tracing
   and XLA compilation excluded), split into acting and learning time;
5. the network-only frames/s: the same policy calls and train step on fixed in-memory data, with
   no environments, observers, queue or dataset. measured / network only is what the pipeline
   costs; network only / bound is how far the kernels themselves are from the matmul rate;
6. the memory traffic: the bytes XLA's fused kernels read and write per trained frame (the same
   cost analysis), the machine's measured memory bandwidth (TensorFlow, 256 MB operands), and
   the frame rate if every one of those bytes streamed from memory at that bandwidth. It is an
   estimate, not a bound (bytes that stay in cache cost less), and says whether the work is
   bound by arithmetic or by data movement.

The in-process actor acts through its XLA-compiled policy copy, ``train_eval``'s default
(``--no-actor_jit_compile``: the plain collect policy).

    .venv/bin/python benchmarks/rl_throughput.py [--iterations 20] \
        [--output benchmarks/results/rl_throughput.md]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import results_io  # benchmarks/results_io.py, beside this script

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
    return float(analysis["flops"]), float(analysis["bytes accessed"])

forward_flops, forward_bytes = flops(forward, trainable, x)
train_flops, train_bytes = flops(jax.value_and_grad(loss), trainable, x)
print(json.dumps({"forward": forward_flops / batch, "train": train_flops / batch,
                  "forward_bytes": forward_bytes / batch, "train_bytes": train_bytes / batch,
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


def memory_gbytes_per_second(megabytes=256, repeats=5):
    """The best of two streaming rates through TensorFlow on this machine, in GB/s.

    ``a + b`` into a new tensor (12 bytes moved per element: two reads and a write, as XLA's
    byte count has them) and ``reduce_sum(a)`` (4 bytes per element, reads only), each the best
    of ``repeats`` runs on ``megabytes``-sized float32 operands, far larger than the caches.
    """
    import tensorflow as tf

    size = megabytes * 2**20 // 4
    a = tf.random.normal((size,))
    b = tf.random.normal((size,))
    rates = []
    for fn, bytes_moved in ((tf.function(lambda a, b: a + b), 12 * size),
                            (tf.function(lambda a, b: tf.reduce_sum(a)), 4 * size)):
        fn(a, b).numpy()
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            fn(a, b).numpy()
            best = min(best, time.perf_counter() - start)
        rates.append(bytes_moved / best / 1e9)
    return max(rates)


def measured_frames_per_second(env_name, agent, iterations, num_envs, unroll_length,
                               actor_jit_compile=True):
    """Frames/s over the second half of ``2 * iterations`` updates (compilation excluded)."""
    from keras_relational.agents.tf_agents.train_eval import train_eval

    with tempfile.TemporaryDirectory() as root:
        result = train_eval(root, env_name=env_name, agent=agent, num_iterations=2 * iterations,
                            num_envs=num_envs, unroll_length=unroll_length, eval_episodes=0,
                            log_interval=iterations, checkpoint_interval=10**9,
                            policy_save_interval=10**9, actor_jit_compile=actor_jit_compile,
                            print_fn=lambda line: None)
    last = result["history"][-1]
    frames = iterations * num_envs * unroll_length
    return dict(fps=last["fps"], acting_ms=1e3 * last["acting_seconds"] / frames,
                learning_ms=1e3 * last["learning_seconds"] / frames)


def network_only_frames_per_second(env_name, agent, iterations, num_envs, unroll_length,
                                   actor_jit_compile=True):
    """The same network's work with no pipeline: frames/s of acting + learning on fixed data.

    Acting: ``unroll_length`` calls of the acting policy's ``tf.function`` (the XLA-compiled
    copy with ``actor_jit_compile``, as ``train_eval`` acts) on a fixed batch of
    ``num_envs`` observations (no environment, no observers). Learning: the XLA-compiled V-trace
    train step on a fixed ``[num_envs, unroll_length + 1]`` batch already in memory (no queue, no
    dataset). Both are what the end-to-end loop runs per update, minus everything around them.
    """
    import numpy as np
    import tensorflow as tf
    from tf_agents.specs import tensor_spec
    from tf_agents.trajectories import time_step as ts

    from keras_relational.agents.networks import agent_model_fn
    from keras_relational.agents.optimizers import make_optimizer
    from keras_relational.agents.tf_agents.acting import ActorCriticPolicy
    from keras_relational.agents.tf_agents.boxworld_environment import make_boxworld_environment
    from keras_relational.agents.tf_agents.keras3_network import Keras3Network
    from keras_relational.agents.tf_agents.vtrace_agent import VTraceAgent

    env = make_boxworld_environment(env_name, num_envs=num_envs, seed=0)
    time_step_spec = tensor_spec.from_spec(env.time_step_spec())
    action_spec = tensor_spec.from_spec(env.action_spec())
    num_actions = int(action_spec.maximum - action_spec.minimum + 1)
    model_fn = agent_model_fn(agent, env.observation_spec().shape, num_actions)
    network = Keras3Network(time_step_spec.observation, model_fn)
    optimizer = make_optimizer("rmsprop", 1e-4, keras_module=tf.keras)
    tf_agent = VTraceAgent(time_step_spec, action_spec, network, optimizer, jit_compile=True)
    tf_agent.initialize()
    rng = np.random.RandomState(0)
    shape = tuple(env.observation_spec().shape)

    def observations(outer):
        return tf.constant(rng.randint(0, 256, size=outer + shape).astype("uint8"))

    time_step = ts.restart(observations((num_envs,)), batch_size=num_envs)
    policy = tf_agent.collect_policy
    if actor_jit_compile:
        policy = ActorCriticPolicy(time_step_spec, action_spec, network, jit_compile=True)
    act = tf.function(policy.action)
    spec = tensor_spec.add_outer_dims_nest(tf_agent.collect_data_spec,
                                           (num_envs, unroll_length + 1))
    experience = tf.nest.map_structure(lambda s: tf.zeros(s.shape, s.dtype), spec)
    experience = experience._replace(
        observation=observations((num_envs, unroll_length + 1)),
        action=tf.constant(rng.randint(0, num_actions, (num_envs, unroll_length + 1)), tf.int32),
        step_type=tf.fill((num_envs, unroll_length + 1), ts.StepType.MID),
        next_step_type=tf.fill((num_envs, unroll_length + 1), ts.StepType.MID),
        discount=tf.ones((num_envs, unroll_length + 1)))
    act(time_step).action.numpy()  # trace and compile outside the timing
    tf_agent.train(experience).loss.numpy()
    acting = learning = 0.0
    for _ in range(iterations):
        start = time.perf_counter()
        for _ in range(unroll_length):
            act(time_step).action.numpy()
        middle = time.perf_counter()
        tf_agent.train(experience).loss.numpy()
        acting += middle - start
        learning += time.perf_counter() - middle
    frames = iterations * num_envs * unroll_length
    return dict(fps=frames / (acting + learning), acting_ms=1e3 * acting / frames,
                learning_ms=1e3 * learning / frames)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--num_envs", type=int, default=32)
    parser.add_argument("--unroll_length", type=int, default=40)
    parser.add_argument("--actor_jit_compile", default=True,
                        action=argparse.BooleanOptionalAction,
                        help="Act through the XLA-compiled policy copy (train_eval's default).")
    parser.add_argument("--output", help="also write the tables to this markdown file (and the "
                        "raw figures to a .json beside it)")
    args = parser.parse_args()
    import keras_relational.agents.tf_agents  # noqa: F401  (tf.keras -> tf-keras before TF-Agents)

    throughput = matmul_gflops()
    bandwidth = memory_gbytes_per_second()
    rows = []
    for label, env_name, agent, builder, shape in (
            ("relational, BoxWorld 14x14", "original", "relational", "relational_agent",
             [14, 14, 3]),
            ("simplicial, bridge BoxWorld", "bridge", "simplicial", "simplicial_agent",
             [7, 10, 3])):
        flops = count_flops(builder, shape)
        per_frame = flops["forward"] + flops["train"]
        bytes_per_frame = flops["forward_bytes"] + flops["train_bytes"]
        bound = throughput * 1e9 / per_frame
        memory_rate = bandwidth * 1e9 / bytes_per_frame
        measured = measured_frames_per_second(env_name, agent, args.iterations, args.num_envs,
                                              args.unroll_length, args.actor_jit_compile)
        network = network_only_frames_per_second(env_name, agent, args.iterations,
                                                 args.num_envs, args.unroll_length,
                                                 args.actor_jit_compile)
        rows.append(dict(agent=label, parameters=flops["parameters"],
                         forward_flops=flops["forward"], train_flops=flops["train"],
                         flops_per_frame=per_frame, flop_bound_fps=bound,
                         forward_bytes=flops["forward_bytes"], train_bytes=flops["train_bytes"],
                         bytes_per_frame=bytes_per_frame, memory_estimate_fps=memory_rate,
                         measured=measured, network_only=network))
        print(f"{label}: done", flush=True)
    captured = results_io.StdoutCapture()
    print(f"\nfloat32 matmul throughput (TensorFlow, 2048^2): {throughput:.1f} GFLOP/s; memory "
          f"bandwidth (TensorFlow, 256 MB operands): {bandwidth:.1f} GB/s; V-trace, "
          f"{args.num_envs} envs x {args.unroll_length} steps per update, {args.iterations} "
          f"timed updates, actor_jit_compile={args.actor_jit_compile}\n")
    print("| agent | parameters | MFLOP actor fwd / frame | MFLOP learner fwd+bwd / frame | "
          "MFLOP / trained frame | FLOP-bound frames/s | network only frames/s | "
          "measured frames/s | measured / bound | network only / bound | "
          "measured / network only |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        measured, network, bound = row["measured"]["fps"], row["network_only"]["fps"], \
            row["flop_bound_fps"]
        print(f"| {row['agent']} | {row['parameters']:,} | {row['forward_flops'] / 1e6:.1f} | "
              f"{row['train_flops'] / 1e6:.1f} | {row['flops_per_frame'] / 1e6:.1f} | "
              f"{bound:.0f} | {network:.0f} | {measured:.0f} | {measured / bound:.0%} | "
              f"{network / bound:.0%} | {measured / network:.0%} |")
    print("\nMemory traffic (XLA's bytes read and written per trained frame; the estimate streams "
          "every byte from memory at the measured bandwidth):\n")
    print("| agent | MB actor fwd / frame | MB learner fwd+bwd / frame | MB / trained frame | "
          "FLOP per byte | memory-traffic estimate frames/s | measured / estimate | "
          "network only / estimate |")
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        estimate = row["memory_estimate_fps"]
        print(f"| {row['agent']} | {row['forward_bytes'] / 1e6:.2f} | "
              f"{row['train_bytes'] / 1e6:.2f} | {row['bytes_per_frame'] / 1e6:.2f} | "
              f"{row['flops_per_frame'] / row['bytes_per_frame']:.1f} | {estimate:.0f} | "
              f"{row['measured']['fps'] / estimate:.0%} | "
              f"{row['network_only']['fps'] / estimate:.0%} |")
    print("\nWhere the time goes, ms per trained frame (end to end: wall time in the actor's and "
          "the learner's run(); network only: the policy calls and the train step alone):\n")
    print("| agent | end to end: acting | end to end: learning | network only: acting | "
          "network only: learning |")
    print("|---|---|---|---|---|")
    for row in rows:
        measured, network = row["measured"], row["network_only"]
        print(f"| {row['agent']} | {measured['acting_ms']:.3f} | {measured['learning_ms']:.3f} | "
              f"{network['acting_ms']:.3f} | {network['learning_ms']:.3f} |")
    captured.write_markdown(args.output)
    if args.output:
        results_io.write_json(os.path.splitext(args.output)[0] + ".json", {
            "matmul_gflops": throughput, "memory_gbytes_per_second": bandwidth,
            "args": vars(args), "rows": rows})


if __name__ == "__main__":
    main()
