r"""End-to-end trained frames/s: the compiled loop (JAX, TensorFlow) against the TF-Agents loop.

    .venv/bin/python benchmarks/compiled_vs_tf_agents.py --updates=120 --rounds=2

Every trainer trains the demo's agent at the demo's settings (``benchmarks/demo_flags.txt``:
relational agent, one-hot 6x6 Box-World, its environments x steps per update, Adam 1e-3) in
its own process, through ``train_boxworld``'s own flag parsing (``--trainer=tf_agents`` or
``--trainer=compiled``, ``KERAS_BACKEND`` jax or tensorflow), for ``--updates`` updates without
evaluation. Frames/s is measured between the first and the last progress line (the first
interval, which compiles, is left out). The trainers run one after the other, interleaved over
``--rounds`` rounds, so that a shared machine's load falls on all of them alike; the load
averages are recorded around each run. Where the time goes: TF-Agents' progress lines split its
wall time into acting (the actor: environments, policy, observers) and learning (the learner's
train steps); for the compiled loop, which does both in one compiled call, the worker times the
acting half alone (``CompiledLoop.collect``: environment steps and sampling) against whole
updates after training.

Writes ``results/compiled_vs_tf_agents_cpu.json`` and ``.md`` (first line: the command).
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import results_io  # benchmarks/results_io.py, beside this script

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(HERE)

TRAINERS = {  # name -> (--trainer, KERAS_BACKEND)
    "tf_agents": ("tf_agents", "tensorflow"),
    "compiled_jax": ("compiled", "jax"),
    "compiled_tensorflow": ("compiled", "tensorflow"),
}
SPLIT_CALLS = 20  # timed calls of the compiled update and of its acting half


def _demo_flags():
    with open(os.path.join(HERE, "demo_flags.txt")) as f:
        return f.read().split()


def _demo_value(name):
    """The value of ``--name`` in the demo's flags."""
    (value,) = [f.split("=", 1)[1] for f in _demo_flags() if f.startswith(f"--{name}=")]
    return value


def _steady_fps(history):
    first, last = history[0], history[-1]
    return (last["frames"] - first["frames"]) / (last["seconds"] - first["seconds"])


def _compiled_split(config):
    """Seconds per call of the compiled update and of its acting half, after warm-up."""
    import keras

    from keras_relational.agents.compiled import levels, loop
    from keras_relational.agents.compiled import train_eval as compiled_train_eval
    from keras_relational.agents.networks import agent_model_fn
    from keras_relational.agents.optimizers import make_optimizer

    config = compiled_train_eval.make_config(config)
    environment = compiled_train_eval.tensor_environment(config.environment)
    spec = environment.observation_spec()
    model = agent_model_fn(config.agent, spec.shape, 4, observation_dtype=spec.dtype,
                           **config.model_kwargs)()
    compiled = loop.CompiledLoop(environment, model,
                                 make_optimizer(config.optimizer_name(), config.learning_rate),
                                 config)
    banks = levels.LevelBanks.for_config(environment, config)
    state = compiled.initial_state(banks.bank)
    seconds = {}
    for name, function in (("update", compiled.update), ("acting", compiled.collect)):
        state, metrics = function(state, banks.bank)  # compiles
        keras.ops.convert_to_numpy(metrics.levels_started)
        start = time.perf_counter()
        for _ in range(SPLIT_CALLS):
            bank = banks.for_update()
            state, metrics = function(state, bank)
            banks.record(keras.ops.convert_to_numpy(metrics.levels_started))
        seconds[name] = (time.perf_counter() - start) / SPLIT_CALLS
    banks.close()
    return seconds


def worker(trainer, updates, log_interval):
    """One training run in this process; prints a JSON line."""
    from keras_relational.experiments import train_boxworld

    flags = train_boxworld.FLAGS
    # TF-Agents' policy checkpoints (a flag of that trainer only) after the run, as none.
    policy_checkpoints = ([f"--policy_save_interval={10 * updates}"]
                          if TRAINERS[trainer][0] == "tf_agents" else [])
    flags([sys.argv[0], *_demo_flags(), f"--trainer={TRAINERS[trainer][0]}",
           f"--num_iterations={updates}", f"--log_interval={log_interval}", "--eval_episodes=0",
           f"--checkpoint_interval={updates}", *policy_checkpoints])
    config = train_boxworld.config_from_flags()
    root = tempfile.mkdtemp(prefix=f"compiled_vs_tf_agents_{trainer}_")
    load_before = os.getloadavg()
    if config.trainer == "compiled":
        from keras_relational.agents.compiled import train_eval
    else:
        from keras_relational.agents.tf_agents import train_eval
    result = train_eval.train_eval(root, config, print_fn=lambda line: None)
    history = result["history"]
    steady = history[1:]
    acting = sum(h["acting_seconds"] for h in steady)
    learning = sum(h["learning_seconds"] for h in steady)
    report = dict(trainer=trainer, backend=TRAINERS[trainer][1], updates=updates,
                  fps=_steady_fps(history), load_before=load_before, load_after=os.getloadavg(),
                  final_training_solve_rate=history[-1]["solve_rate"])
    if config.trainer == "compiled":
        report["seconds_per_call"] = _compiled_split(config)
        report["acting_share"] = (report["seconds_per_call"]["acting"]
                                  / report["seconds_per_call"]["update"])
    else:
        report["acting_share"] = acting / (acting + learning)
    print(json.dumps(report))


def _run_worker(trainer, updates, log_interval):
    env = dict(os.environ, KERAS_BACKEND=TRAINERS[trainer][1], TF_CPP_MIN_LOG_LEVEL="2")
    done = subprocess.run([sys.executable, os.path.abspath(__file__), f"--worker={trainer}",
                           f"--updates={updates}", f"--log_interval={log_interval}"],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"{trainer} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _markdown(summary, runs, args):
    lines = [
        f"Demo settings (`benchmarks/demo_flags.txt`), {args.updates} updates of "
        f"{_demo_value('num_envs')} environments x {_demo_value('unroll_length')} steps per run, "
        f"{args.rounds} interleaved round(s); frames/s between the first and "
        f"the last progress line (every {args.log_interval} updates, compilation excluded). "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, shared with other "
        f"jobs: 1-minute load averages "
        + ", ".join(f"{r['trainer']} {r['load_before'][0]:.1f} to {r['load_after'][0]:.1f}"
                    for r in runs) + " (before and after each run).",
        "",
        "| trainer | backend | frames/s (median of rounds) | vs TF-Agents | acting share |",
        "|---|---|---|---|---|",
    ]
    base = summary["tf_agents"]["fps"]
    for name, entry in summary.items():
        lines.append(f"| {TRAINERS[name][0]} | {entry['backend']} | {entry['fps']:,.0f} | "
                     f"{entry['fps'] / base:.2f}x | {100 * entry['acting_share']:.0f}% |")
    lines += ["", "Acting share: TF-Agents, the actor's share of the wall time (environments, "
              "policy, observers); compiled, the acting half's time (environment steps and "
              "sampling, `CompiledLoop.collect`) over a whole update's, timed separately."]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=120)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--log_interval", type=int, default=20)
    parser.add_argument("--trainers", default=",".join(TRAINERS))
    parser.add_argument("--worker", choices=tuple(TRAINERS))
    parser.add_argument("--output", default=os.path.join(HERE, "results",
                                                         "compiled_vs_tf_agents_cpu"))
    parser.add_argument("--markdown_only", action="store_true",
                        help="Rewrite <output>.md from the runs in <output>.json (no training).")
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.updates, args.log_interval)
        return
    if args.markdown_only:
        with open(args.output + ".json") as f:
            data = json.load(f)
        args.updates, args.rounds = data["updates"], data["rounds"]
        args.log_interval = data.get("log_interval", args.log_interval)
        results_io.write_markdown(args.output + ".md",
                                  _markdown(data["summary"], data["runs"], args))
        return
    runs = []
    for round_index in range(args.rounds):
        for trainer in args.trainers.split(","):
            run = _run_worker(trainer, args.updates, args.log_interval)
            run["round"] = round_index
            runs.append(run)
            print(json.dumps(run), flush=True)
    summary = {}
    for trainer in args.trainers.split(","):
        mine = [r for r in runs if r["trainer"] == trainer]
        summary[trainer] = dict(backend=TRAINERS[trainer][1],
                                fps=statistics.median(r["fps"] for r in mine),
                                acting_share=statistics.median(r["acting_share"] for r in mine))
    data = dict(updates=args.updates, rounds=args.rounds, log_interval=args.log_interval,
                machine=platform.platform(),
                cpu_count=os.cpu_count(), summary=summary, runs=runs)
    results_io.write_json(args.output + ".json", data)
    results_io.write_markdown(args.output + ".md", _markdown(summary, runs, args))
    print(_markdown(summary, runs, args))


if __name__ == "__main__":
    main()
