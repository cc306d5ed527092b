"""End-to-end training throughput of the Box-World agents vs the FLOP bound of this CPU.

For each agent (relational on BoxWorld, simplicial on bridge BoxWorld, at the papers' sizes):

1. FLOPs per trained frame = actor forward on one frame + learner forward and backward on one
   frame, counted by XLA's cost analysis (JAX backend, in a subprocess) of the same Keras model;
2. the machine's float32 matmul throughput (TensorFlow, 2048 x 2048 matmuls);
3. the FLOP-bound frame rate = throughput / FLOPs per frame;
4. the measured frames/s of ``agents.train_eval`` (V-trace, ``--num_envs`` x ``--unroll_length``
   frames per update) over the second half of the run (tracing and XLA compilation excluded),
   split into acting and learning time;
5. the network-only frames/s: the same policy calls and train step on fixed in-memory data, with
   no environments, observers, queue or dataset. measured / network only is what the pipeline
   costs; network only / bound is how far the kernels themselves are from the matmul rate.

    .venv/bin/python benchmarks/rl_throughput.py [--iterations 20] [--output results.json]
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
    last = result["history"][-1]
    frames = iterations * num_envs * unroll_length
    return dict(fps=last["fps"], acting_ms=1e3 * last["acting_seconds"] / frames,
                learning_ms=1e3 * last["learning_seconds"] / frames)


def network_only_frames_per_second(env_name, agent, iterations, num_envs, unroll_length):
    """The same network's work with no pipeline: frames/s of acting + learning on fixed data.

    Acting: ``unroll_length`` calls of the collect policy's ``tf.function`` on a fixed batch of
    ``num_envs`` observations (no environment, no observers). Learning: the XLA-compiled V-trace
    train step on a fixed ``[num_envs, unroll_length + 1]`` batch already in memory (no queue, no
    dataset). Both are what the end-to-end loop runs per update, minus everything around them.
    """
    import numpy as np
    import tensorflow as tf
    from tf_agents.specs import tensor_spec
    from tf_agents.trajectories import time_step as ts

    from keras_relational.agents.boxworld_environment import make_boxworld_environment
    from keras_relational.agents.keras3_network import Keras3Network
    from keras_relational.agents.train_eval import agent_model_fn, make_optimizer
    from keras_relational.agents.vtrace_agent import VTraceAgent

    env = make_boxworld_environment(env_name, num_envs=num_envs, seed=0)
    time_step_spec = tensor_spec.from_spec(env.time_step_spec())
    action_spec = tensor_spec.from_spec(env.action_spec())
    num_actions = int(action_spec.maximum - action_spec.minimum + 1)
    model_fn = agent_model_fn(agent, env.observation_spec().shape, num_actions)
    network = Keras3Network(time_step_spec.observation, model_fn)
    tf_agent = VTraceAgent(time_step_spec, action_spec, network, make_optimizer("rmsprop", 1e-4),
                           jit_compile=True)
    tf_agent.initialize()
    rng = np.random.RandomState(0)
    shape = tuple(env.observation_spec().shape)

    def observations(outer):
        return tf.constant(rng.randint(0, 256, size=outer + shape).astype("uint8"))

    time_step = ts.restart(observations((num_envs,)), batch_size=num_envs)
    act = tf.function(tf_agent.collect_policy.action)
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
    parser.add_argument("--output", help="JSON file for the raw figures.")
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
        measured = measured_frames_per_second(env_name, agent, args.iterations, args.num_envs,
                                              args.unroll_length)
        network = network_only_frames_per_second(env_name, agent, args.iterations,
                                                 args.num_envs, args.unroll_length)
        rows.append((label, flops["parameters"], flops["forward"], flops["train"], per_frame,
                     bound, measured, network))
        print(f"{label}: done", flush=True)
    print(f"\nfloat32 matmul throughput (TensorFlow, 2048^2): {throughput:.1f} GFLOP/s; "
          f"V-trace, {args.num_envs} envs x {args.unroll_length} steps per update, "
          f"{args.iterations} timed updates\n")
    print("| agent | parameters | MFLOP actor fwd / frame | MFLOP learner fwd+bwd / frame | "
          "MFLOP / trained frame | FLOP-bound frames/s | network only frames/s | "
          "measured frames/s | measured / bound | network only / bound | "
          "measured / network only |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for label, params, fwd, train, per_frame, bound, measured, network in rows:
        print(f"| {label} | {params:,} | {fwd / 1e6:.1f} | {train / 1e6:.1f} | "
              f"{per_frame / 1e6:.1f} | {bound:.0f} | {network['fps']:.0f} | "
              f"{measured['fps']:.0f} | {measured['fps'] / bound:.0%} | "
              f"{network['fps'] / bound:.0%} | {measured['fps'] / network['fps']:.0%} |")
    print("\nWhere the time goes, ms per trained frame (end to end: wall time in the actor's and "
          "the learner's run(); network only: the policy calls and the train step alone):\n")
    print("| agent | end to end: acting | end to end: learning | network only: acting | "
          "network only: learning |")
    print("|---|---|---|---|---|")
    for label, *_, measured, network in rows:
        print(f"| {label} | {measured['acting_ms']:.3f} | {measured['learning_ms']:.3f} | "
              f"{network['acting_ms']:.3f} | {network['learning_ms']:.3f} |")
    if args.output:
        with open(args.output, "w") as f:
            json.dump({"matmul_gflops": throughput, "args": vars(args), "rows": [
                dict(agent=r[0], parameters=r[1], forward_flops=r[2], train_flops=r[3],
                     flop_bound_fps=r[5], measured=r[6], network_only=r[7]) for r in rows]},
                f, indent=1)

if __name__ == "__main__":
    main()
