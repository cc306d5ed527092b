"""Frames/s of Box-World V-trace training: in-process actors vs 1 and 2 Ray actors.

The demo-sized relational agent (``--key_dim=32 --head_width=64``) on the demo's BoxWorld (6x6
room, solution length 1, no distractors), ``--num_envs`` x ``--unroll_length`` frames per update:

1. **training**: ``train_eval`` end to end (actors + V-trace learner, XLA), frames/s over the
   second half of ``2 * --iterations`` updates (start-up, tracing and compilation excluded), for
   the in-process actor and for ``num_ray_actors=1`` and ``2`` (a local Ray, started per run);
2. **collection only**: the same actors without a learner (``BoxWorldActor.collect`` in this
   process, and ``RayActorFleet.run`` with 1 and 2 Ray actors), which shows what the actors alone
   deliver, with the XLA-compiled forward pass (``train_eval``'s default for V-trace) and with
   the plain ``tf.function``: ``--collection_pairs`` alternating pairs, the best of each shown.

Every Ray actor reserves one CPU and runs TensorFlow on one thread; the learner runs in this
process. On a 2-core machine the learner and two actors share two cores, so the ratio says little
about a cluster, where each actor gets its own cores. Prints a Markdown table and the ratios.

    .venv/bin/python benchmarks/ray_throughput.py [--iterations 40]
"""

import argparse
import os
import re
import tempfile
import time

import results_io  # benchmarks/results_io.py, beside this script

ENV_KWARGS = dict(goal_length=1, num_distractors=0, room_size=6)  # the `make demo` level
MODEL_KWARGS = dict(key_dim=32, head_units=(64,) * 4)  # --key_dim=32 --head_width=64


def training_frames_per_second(num_ray_actors, iterations, num_envs, unroll_length,
                               actor_jit_compile=True):
    """(frames/s over the second half, mean policy lag over it) of one ``train_eval`` run."""
    from keras_relational.agents.tf_agents.train_eval import train_eval

    lines = []
    with tempfile.TemporaryDirectory() as root:
        result = train_eval(root, env_kwargs=ENV_KWARGS, model_kwargs=MODEL_KWARGS,
                            num_iterations=2 * iterations, num_envs=num_envs,
                            unroll_length=unroll_length, learning_rate=1e-3, eval_episodes=0,
                            log_interval=iterations, checkpoint_interval=10**9,
                            policy_save_interval=10**9, num_ray_actors=num_ray_actors,
                            actor_jit_compile=actor_jit_compile, print_fn=lines.append)
    lags = [float(m.group(1)) for line in lines if (m := re.search(r"policy lag +([\d.]+)", line))]
    return result["history"][-1]["fps"], (lags[-1] if lags else 0.0)


def collection_frames_per_second(num_ray_actors, unrolls, num_envs, unroll_length,
                                 actor_jit_compile=True):
    """Frames/s the actors deliver with no learner (0 actors: a BoxWorldActor in this process)."""
    import tensorflow as tf

    from keras_relational.agents.networks import agent_model_fn
    from keras_relational.agents.tf_agents import ray_actors
    from keras_relational.agents.tf_agents.boxworld_environment import make_boxworld_environment

    shape = make_boxworld_environment("original", num_envs=1, **ENV_KWARGS).observation_spec()
    model_fn = agent_model_fn("relational", shape.shape, 4, **MODEL_KWARGS)
    frames = num_envs * unroll_length
    if num_ray_actors == 0:
        actor = ray_actors.BoxWorldActor("original", num_envs, unroll_length, model_fn, seed=1,
                                         env_kwargs=ENV_KWARGS, num_threads=None,
                                         jit_compile=actor_jit_compile)
        actor.collect()  # tracing
        start = time.perf_counter()
        for _ in range(unrolls):
            actor.collect()
        return unrolls * frames / (time.perf_counter() - start)

    class Sink:
        def put(self, unroll):
            pass

    model = model_fn()
    fleet = ray_actors.RayActorFleet(
        num_ray_actors, Sink(), model, tf.Variable(0, dtype=tf.int64), model_fn,
        env_kwargs=ENV_KWARGS, num_envs=num_envs, unroll_length=unroll_length,
        print_fn=lambda line: None, actor_jit_compile=actor_jit_compile)
    try:
        for _ in range(2 * num_ray_actors):  # every actor traced its forward pass
            fleet.run()
        start = time.perf_counter()
        for _ in range(unrolls):
            fleet.run()
        return unrolls * frames / (time.perf_counter() - start)
    finally:
        fleet.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=40,
                        help="timed learner updates per training run (after as many untimed)")
    parser.add_argument("--unrolls", type=int, default=60, help="timed unrolls, collection only")
    parser.add_argument("--num_envs", type=int, default=16)
    parser.add_argument("--unroll_length", type=int, default=20)
    parser.add_argument("--collection_pairs", type=int, default=2,
                        help="alternating XLA / plain collection runs per row (best shown)")
    parser.add_argument("--actor_jit_compile", default=True,
                        action=argparse.BooleanOptionalAction,
                        help="training runs: actors act through the XLA-compiled forward pass "
                             "(train_eval's V-trace default); collection only measures both")
    parser.add_argument("--output", default=None,
                        help="also write the tables to this markdown file")
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras_relational.agents.tf_agents  # noqa: F401  (tf.keras -> tf-keras before TF-Agents)

    rows = []
    for index, (label, actors) in enumerate((("in-process actor", 0), ("1 Ray actor", 1),
                                             ("2 Ray actors", 2))):
        load = os.getloadavg()[0]
        fps, lag = training_frames_per_second(actors, args.iterations, args.num_envs,
                                              args.unroll_length, args.actor_jit_compile)
        collect = {True: 0.0, False: 0.0}
        for pair in range(args.collection_pairs):
            for jit_compile in ((True, False) if (index + pair) % 2 == 0 else (False, True)):
                collect[jit_compile] = max(collect[jit_compile], collection_frames_per_second(
                    actors, args.unrolls, args.num_envs, args.unroll_length, jit_compile))
        rows.append((label, fps, lag, collect[True], collect[False], load))
        print(f"{label}: training {fps:.0f} frames/s, collection only {collect[True]:.0f} "
              f"frames/s XLA, {collect[False]:.0f} plain (load average before: {load:.1f})",
              flush=True)

    acting = "XLA-compiled" if args.actor_jit_compile else "plain"
    captured = results_io.StdoutCapture()
    print(f"\nDemo-sized relational agent, 6x6 BoxWorld, {args.num_envs} envs x "
          f"{args.unroll_length} steps per unroll; training: V-trace, {args.iterations} timed "
          f"updates, {acting} acting; collection only: {args.unrolls} timed unrolls, no "
          f"learner, best of {args.collection_pairs} alternating pairs; {os.cpu_count()} CPU "
          f"cores\n")
    print("| actors | training frames/s | mean policy lag (updates) | collection-only frames/s,"
          " XLA | collection-only frames/s, plain | XLA ÷ plain | 1-min load average before |")
    print("|---|---|---|---|---|---|---|")
    for label, fps, lag, collect_xla, collect_plain, load in rows:
        print(f"| {label} | {fps:,.0f} | {lag:.1f} | {collect_xla:,.0f} | {collect_plain:,.0f} | "
              f"{collect_xla / collect_plain:.2f}x | {load:.1f} |")
    by_label = {row[0]: row for row in rows}
    two, one = by_label["2 Ray actors"], by_label["1 Ray actor"]
    print(f"\n2 / 1 Ray actors: training {two[1] / one[1]:.2f}x, collection only (XLA) "
          f"{two[3] / one[3]:.2f}x")
    captured.write_markdown(args.output)


if __name__ == "__main__":
    main()
