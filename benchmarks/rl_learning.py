"""Learning benchmark: fraction of BoxWorld levels solved vs wall-clock, relational vs baseline.

Trains each agent with ``keras_relational.agents.tf_agents.train_eval`` (V-trace actor-learner, the
CPU) for a wall-clock budget on a small BoxWorld and records, at every progress line, the fraction
of the training episodes that ended with the gem (every episode is a freshly generated level, so
this measures generalisation, not memorisation), then evaluates the final policy on new levels.
Writes ``results/rl_learning.json`` and a Markdown table ``results/rl_learning.md``.

The defaults are the setting that learns on 2 CPU cores: one-hot observations, Adam 1e-3,
rewards scaled by 0.1, 64 environments x 20 steps per update, 4 x 64 output MLP, key size 32,
and the XLA-compiled actor (``actor_jit_compile``).
The papers' own settings (RGB frames, RMSProp with epsilon 0.1, unscaled rewards) stay near the
random policy at this budget; ``--observation_type rgb --optimizer rmsprop --reward_scale 1
--num_envs 16`` reproduces that. ``--algorithm ppo`` needs ``--reward_scale 1
--no-actor_jit_compile`` (both are V-trace options).

    .venv/bin/python benchmarks/rl_learning.py --minutes 30                 # the issue's setting
    .venv/bin/python benchmarks/rl_learning.py --minutes 10 --goal_length 1 --num_distractors 0

By default the agents run one after the other, each with the whole machine; ``--concurrent``
runs them side by side (each then gets about half of the cores: say so when reporting).
"""

import argparse
import multiprocessing
import os
import tempfile
import time

import results_io  # benchmarks/results_io.py, beside this script

HERE = os.path.dirname(os.path.abspath(__file__))
MARKS_MINUTES = (1, 2, 5, 10, 15, 20, 30, 45, 60)


def _run(agent, args, root, queue=None):
    from keras_relational.agents.tf_agents.train_eval import train_eval

    model_kwargs = dict(head_units=(args.head_width,) * 4)
    if agent in ("relational", "simplicial"):
        model_kwargs.update(key_dim=args.key_dim)
    result = train_eval(
        os.path.join(root, agent), agent=agent, algorithm=args.algorithm,
        env_kwargs=dict(goal_length=tuple(args.goal_length),
                        num_distractors=tuple(args.num_distractors), room_size=args.room_size,
                        observation_type=args.observation_type),
        model_kwargs=model_kwargs, num_iterations=10**9, num_envs=args.num_envs,
        unroll_length=args.unroll_length, learning_rate=args.learning_rate,
        entropy_cost=args.entropy_cost, optimizer=args.optimizer,
        reward_scale=args.reward_scale, vtrace_lambda=args.vtrace_lambda,
        actor_jit_compile=args.actor_jit_compile,
        log_interval=args.log_interval,
        eval_episodes=args.eval_episodes, checkpoint_interval=10**9, policy_save_interval=10**9,
        max_seconds=60 * args.minutes, seed=args.seed,
        print_fn=lambda line: print(f"[{agent}] {line}", flush=True))
    summary = {key: result[key] for key in ("train_step", "frames", "frames_per_second",
                                             "eval_solve_rate", "history")}
    if queue is not None:
        queue.put((agent, summary))
    return summary


def _table(results, args):
    lines = [f"Solve rate of the training episodes (fresh levels) vs wall-clock; BoxWorld room "
             f"{args.room_size}, goal length {args.goal_length}, distractors "
             f"{args.num_distractors}, {args.observation_type} observations, {args.algorithm}, "
             f"{args.optimizer} lr {args.learning_rate}, reward scale {args.reward_scale}, "
             f"lambda {args.vtrace_lambda}, "
             f"entropy cost {args.entropy_cost}, "
             f"{args.num_envs} envs x {args.unroll_length} steps per update.", "",
             "| agent | " + " | ".join(f"{m} min" for m in MARKS_MINUTES
                                        if m <= args.minutes) + " | frames | eval (final) |",
             "|---|" + "---|" * (len([m for m in MARKS_MINUTES if m <= args.minutes]) + 2)]
    for agent, summary in results.items():
        cells = []
        for mark in (m for m in MARKS_MINUTES if m <= args.minutes):
            # The last progress window that ended by the mark.
            rows = [h for h in summary["history"] if h["seconds"] <= 60 * mark + 1]
            cells.append(f"{100 * rows[-1]['solve_rate']:.0f}%" if rows else "-")
        lines.append(f"| {agent} | " + " | ".join(cells) + f" | {summary['frames']:,} | "
                     f"{100 * summary['eval_solve_rate']:.1f}% |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--agents", default="relational,baseline")
    parser.add_argument("--algorithm", default="vtrace", choices=("vtrace", "ppo"))
    parser.add_argument("--goal_length", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--num_distractors", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--room_size", type=int, default=6)
    parser.add_argument("--num_envs", type=int, default=64)
    parser.add_argument("--unroll_length", type=int, default=20)
    parser.add_argument("--learning_rate", type=float, default=1e-3)
    parser.add_argument("--entropy_cost", type=float, default=0.005)
    parser.add_argument("--optimizer", default="adam", choices=("rmsprop", "adam"))
    parser.add_argument("--reward_scale", type=float, default=0.1)
    parser.add_argument("--vtrace_lambda", type=float, default=1.0)
    parser.add_argument("--observation_type", default="one_hot", choices=("rgb", "one_hot"))
    parser.add_argument("--actor_jit_compile", default=True,
                        action=argparse.BooleanOptionalAction)
    parser.add_argument("--key_dim", type=int, default=32)
    parser.add_argument("--head_width", type=int, default=64)
    parser.add_argument("--log_interval", type=int, default=25)
    parser.add_argument("--eval_episodes", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--concurrent", action="store_true")
    parser.add_argument("--output", default=os.path.join(HERE, "results", "rl_learning"))
    args = parser.parse_args()
    agents = args.agents.split(",")
    started = time.time()
    with tempfile.TemporaryDirectory() as root:
        if args.concurrent:
            context = multiprocessing.get_context("spawn")
            queue = context.Queue()
            processes = [context.Process(target=_run, args=(agent, args, root, queue))
                         for agent in agents]
            for process in processes:
                process.start()
            collected = dict(queue.get() for _ in processes)
            for process in processes:
                process.join()
            results = {agent: collected[agent] for agent in agents}
        else:
            results = {agent: _run(agent, args, root) for agent in agents}
    table = _table(results, args)
    load = os.getloadavg()
    table += (f"\n\nMeasured {time.strftime('%Y-%m-%d')} on {os.cpu_count()} cores"
              f"{', agents run concurrently' if args.concurrent else ''}; load average at the "
              f"end {load[0]:.1f}; total {(time.time() - started) / 60:.0f} min.")
    print(table)
    results_io.write_json(args.output + ".json", dict(args=vars(args), results=results))
    results_io.write_markdown(args.output + ".md", table)


if __name__ == "__main__":
    main()
