"""Frames to solve Box-World: frames until the training solve rate reaches 50 / 90 / 98 %.

Each setting is one compiled-trainer run (``keras_relational.agents.compiled.train_eval``) under
``--root/<setting>``; a setting is the base (the demo's settings, ``benchmarks/demo_flags.txt``:
one-hot cells, Adam 1e-3, rewards x 0.1, 32 environments x 20 steps, key size 32, 4 x 64 head)
on one rung of a level ladder from the demo's levels towards Zambaldi et al.'s (room 12, goal
length 1-4, 0-4 distractors), with at most one axis changed: ``num_envs``, ``unroll_length``
(the learner batch is num_envs x unroll_length transitions), optimizer and learning rate,
``reward_scale``, ``entropy_cost``, observation type, or the baseline agent instead of the
relational one. ``--settings`` names them as ``<level>`` (the base) or ``<level>/<variation>``;
``--list`` prints every name. ``preset:<name>`` is a preset of ``keras_relational.agents.presets``
as it is, trained as ``train_boxworld --trainer=compiled --preset=<name>`` trains it: through its
curriculum where it has one (``presets.CURRICULA``), its frames counted from the first stage's
first frame (its thresholds on its last stage's levels), its last stage stopped at 98 %
(``stop_solve_rate``).

Runs are resumable: each call trains every unfinished setting for one piece of at most
``--piece_seconds`` (a setting is finished once its solve rate reached 98 % or its run reached
``--max_frames``), and re-running the same command continues each run from its checkpoint. The
results are read from the runs' ``curves.jsonl`` files: a threshold is reached at the first
progress line (``--log_interval`` updates) whose training episodes (fresh levels, the sampling
policy) were solved at that rate or more, over at least ``--min_episodes`` of them (the first
line of a run or piece covers one update: one solved episode there is a rate of 100 %).
Writes ``<output>.md``, ``<output>.json`` and, when matplotlib is installed, ``<output>.png``
(solve rate against frames).

    .venv/bin/python benchmarks/frames_to_solve.py --list
    .venv/bin/python benchmarks/frames_to_solve.py --root=/tmp/fts \\
        --settings=demo,demo/reward_scale=1,demo/rmsprop_2e-4 --piece_seconds=180
"""

import argparse
import dataclasses
import json
import os
import time

import results_io  # benchmarks/results_io.py, beside this script

from keras_relational.agents.curves import MIN_EPISODES, counted_rows, first_frames, frames_to

HERE = os.path.dirname(os.path.abspath(__file__))
THRESHOLDS = (0.5, 0.9, 0.98)

# The demo's settings (benchmarks/demo_flags.txt) under the compiled trainer.
BASE = dict(agent="relational", optimizer="adam", learning_rate=1e-3, reward_scale=0.1,
            num_envs=32, unroll_length=20, entropy_cost=0.005, observation_type="one_hot")
BASE_MODEL = dict(key_dim=32, head_units=(64,) * 4)
BASELINE_MODEL = dict(head_units=(64,) * 4)

# From the demo's levels towards Zambaldi et al. 2019, Sec. 3.1 (room 12, L 1-4, D 0-4).
LEVELS = {
    "demo": dict(room_size=6, goal_length=(1,), num_distractors=(0,)),
    "room8": dict(room_size=8, goal_length=(1,), num_distractors=(0,)),
    "room12": dict(room_size=12, goal_length=(1,), num_distractors=(0,)),  # the CPU goal
    "room12_L2_D1": dict(room_size=12, goal_length=(1, 2), num_distractors=(0, 1)),
    "room12_L3_D2": dict(room_size=12, goal_length=(1, 2, 3), num_distractors=(0, 1, 2)),
    "paper": dict(room_size=12, goal_length=(1, 2, 3, 4), num_distractors=(0, 1, 2, 3, 4)),
}

# One axis changed from BASE each.
VARIATIONS = {
    "num_envs=16": dict(num_envs=16),
    "num_envs=64": dict(num_envs=64),
    "num_envs=128": dict(num_envs=128),
    "unroll_length=40": dict(unroll_length=40),
    # 64 environments act, the learner takes 4 gradient steps of 16 trajectories each
    # (learner_minibatches): 4 times the steps of num_envs=64 per frame, at the same acting batch.
    "num_envs=64_minibatches=4": dict(num_envs=64, learner_minibatches=4),
    # ... and each unroll learned from twice (learner_epochs): 8 gradient steps per unroll.
    "num_envs=64_minibatches=4_epochs=2": dict(num_envs=64, learner_minibatches=4,
                                               learner_epochs=2),
    # A curriculum: 64 environments, the network starting from the trained agent of the
    # room8/num_envs=64 run under the same --root (its keras_model.keras; initial_weights).
    "num_envs=64_from_room8": dict(num_envs=64, initial_weights_from="room8/num_envs=64"),
    # ... from the trained agent of the demo setting's run (room 6, 32 environments).
    "num_envs=64_from_demo": dict(num_envs=64, initial_weights_from="demo"),
    "rmsprop_2e-4": dict(optimizer="rmsprop", learning_rate=2e-4),  # the papers' optimizer
    "rmsprop_1e-3": dict(optimizer="rmsprop", learning_rate=1e-3),
    "adam_3e-4": dict(learning_rate=3e-4),
    "adam_3e-3": dict(learning_rate=3e-3),
    "reward_scale=1": dict(reward_scale=1.0),  # the papers' unscaled rewards
    "reward_scale=0.3": dict(reward_scale=0.3),
    "entropy_cost=0.01": dict(entropy_cost=0.01),
    "entropy_cost=0.001": dict(entropy_cost=0.001),
    "rgb": dict(observation_type="rgb"),  # the papers' observations
    "baseline": dict(agent="baseline"),
    # The papers' whole recipe on these levels (Zambaldi et al. 2019, App. B).
    "papers": dict(optimizer="rmsprop", learning_rate=2e-4, reward_scale=1.0,
                   observation_type="rgb", unroll_length=40),
}


# A setting named preset:<name> is a preset of keras_relational.agents.presets as it is, trained
# as `train_boxworld --trainer=compiled --preset=<name>` trains it: through its curriculum
# (presets.CURRICULA) where it has one, whose earlier stages' frames count.
PRESET_PREFIX = "preset:"


def all_settings():
    """Every setting name: ``<level>``, ``<level>/<variation>`` and ``preset:<name>``."""
    from keras_relational.agents import presets

    return [*(name for level in LEVELS
              for name in (level, *(f"{level}/{v}" for v in VARIATIONS))),
            *(PRESET_PREFIX + name for name in presets.PRESETS)]


def _preset(name):
    """The preset name of a ``preset:<name>`` setting (None for another setting)."""
    if not name.startswith(PRESET_PREFIX):
        return None
    from keras_relational.agents import presets

    preset = name[len(PRESET_PREFIX):]
    if preset not in presets.PRESETS:
        raise ValueError(f"--settings expects preset:<name> with a name of "
                         f"keras_relational.agents.presets.PRESETS, received {name!r}.")
    return preset


def setting(name):
    """``(hyperparameters, env_kwargs, model_kwargs)`` of a setting name (a preset's: its
    ``config`` with its ``curriculum`` stages, its ``level`` and ``model``)."""
    preset = _preset(name)
    if preset is not None:
        from keras_relational.agents import presets

        entry = presets.PRESETS[preset]
        hyper = dict(entry["config"], curriculum=list(presets.CURRICULA.get(preset, ())))
        return hyper, dict(entry["level"]), dict(entry["model"])
    level, _, variation = name.partition("/")
    if level not in LEVELS or (variation and variation not in VARIATIONS):
        raise ValueError(f"--settings expects names from --list (<level> or "
                         f"<level>/<variation>), received {name!r}.")
    hyper = dict(BASE, **VARIATIONS.get(variation, {}))
    env_kwargs = dict(LEVELS[level], observation_type=hyper.pop("observation_type"))
    model = dict(BASELINE_MODEL if hyper["agent"] == "baseline" else BASE_MODEL)
    return hyper, env_kwargs, model


def _directory(root, name):
    return os.path.join(root, name.replace("/", "__").replace(":", "_"))


def _read_rows(directory):
    from keras_relational.agents import curves

    path = os.path.join(directory, curves.FILENAME)
    return curves.read_curve(path) if os.path.exists(path) else []


def _stages(name):
    from keras_relational.agents import presets

    return len(presets.curriculum_configs(_preset(name)))


def _rows(root, name):
    """A setting's curve rows; a preset's: its last stage's, their frames and wall seconds after
    every earlier stage's (each stage's last row: where it stopped)."""
    if _preset(name) is None:
        return _read_rows(_directory(root, name))
    from keras_relational.agents.compiled.curriculum import stage_dir

    frames = seconds = 0
    count = _stages(name)
    for index in range(1, count + 1):
        rows = _read_rows(stage_dir(_directory(root, name), index))
        if index < count:
            if not rows:
                return []
            frames, seconds = frames + rows[-1]["frames"], seconds + rows[-1]["wall_seconds"]
    return [dict(row, frames=row["frames"] + frames, wall_seconds=row["wall_seconds"] + seconds,
                 stage_frames=row["frames"]) for row in rows]


def _curriculum_finished(root, name):
    """Whether a preset setting's curriculum finished its last stage (``curriculum.json``)."""
    from keras_relational.agents.compiled.curriculum import RESULT_FILE

    try:
        with open(os.path.join(_directory(root, name), RESULT_FILE)) as f:
            return bool(json.load(f).get("finished"))
    except (OSError, ValueError):
        return False


def finished(rows, args, root=None, name=None):
    """A setting's run is done once it reached the last threshold or ``args.max_frames`` (its
    ``rows``), or, for a preset setting ``name`` under ``root``, its curriculum finished."""
    return (bool(rows) and (frames_to(rows, THRESHOLDS[-1], args.min_episodes,
                                      args.log_interval) is not None
                            or rows[-1]["frames"] >= args.max_frames)
            or (name is not None and _curriculum_finished(root, name)))


def initial_weights(root, hyper):
    """``hyper`` with ``initial_weights_from`` (a setting name) replaced by ``initial_weights``:
    the trained agent of that setting's run under ``root``."""
    hyper = dict(hyper)
    source = hyper.pop("initial_weights_from", None)
    if source is not None:
        hyper["initial_weights"] = os.path.join(_directory(root, source), "keras_model.keras")
    return hyper


def train_piece(root, name, args):
    """One piece (at most ``args.piece_seconds``) of the run of setting ``name``."""
    from keras_relational.agents.compiled import train_eval

    preset = _preset(name)
    if preset is not None:  # the preset's own settings, through its curriculum
        from keras_relational.agents import presets
        from keras_relational.agents.compiled.curriculum import train_curriculum

        # Its last stage stops at the last threshold, where the study's other runs finish; the
        # earlier ones train as the preset has them.
        *stages, last = presets.curriculum_configs(preset, seed=args.seed)
        train_curriculum(_directory(root, name),
                         (*stages, dataclasses.replace(last, stop_solve_rate=THRESHOLDS[-1])),
                         max_seconds=args.piece_seconds,
                         print_fn=lambda line: print(f"[{name}] {line}", flush=True))
        return

    hyper, env_kwargs, model = setting(name)
    hyper = initial_weights(root, hyper)
    frames_per_update = hyper["num_envs"] * hyper["unroll_length"]
    train_eval.train_eval(
        _directory(root, name), env_kwargs=env_kwargs, model_kwargs=model,
        num_iterations=-(-args.max_frames // frames_per_update), log_interval=args.log_interval,
        checkpoint_interval=args.log_interval, eval_episodes=0, max_seconds=args.piece_seconds,
        seed=args.seed, print_fn=lambda line: print(f"[{name}] {line}", flush=True), **hyper)


def summary(root, names, args):
    """One dict a setting: its settings, frames to each threshold, frames and seconds run."""
    results = []
    for name in names:
        rows = _rows(root, name)
        counted = list(counted_rows(rows, args.min_episodes, args.log_interval))
        hyper, env_kwargs, model = setting(name)
        results.append(dict(
            setting=name, hyperparameters=hyper, level=env_kwargs, model=model,
            frames_to={f"{round(100 * t)}%": first_frames(counted, t) for t in THRESHOLDS},
            frames=rows[-1]["frames"] if rows else 0,
            wall_seconds=rows[-1]["wall_seconds"] if rows else 0.0,
            last_solve_rate=rows[-1]["solve_rate"] if rows else None,
            best_solve_rate=max((r["solve_rate"] for r in counted), default=None),
            finished=finished(rows, args, root, name),
            losses=rows[-1].get("losses") if rows else None,
            curve=[(r["frames"], r["solve_rate"]) for r in counted]))  # plotted: counted rows
    return results


# The learner scalars of the last progress line (agents/compiled/progress.py): what the loss of
# one update is made of at each setting.
LOSS_COLUMNS = ("loss", "loss_min", "loss_max", "policy_gradient_loss", "value_loss",
                "value_error", "gradient_norm", "clipped_gradient_norm", "reward_max",
                "entropy_per_step")


def _scalar(losses, column):
    """A learner scalar of a curve row; ``entropy_per_step``: the policy's mean entropy a
    transition in nats (the summed ``entropy`` over ``transitions``; ln 4 = 1.386 is uniform
    over Box-World's four moves)."""
    if column == "entropy_per_step":
        entropy, transitions = losses.get("entropy"), losses.get("transitions")
        return entropy / transitions if entropy is not None and transitions else None
    return losses.get(column)


def loss_table(results):
    lines = ["Learner scalars over the updates of each run's last progress line (means, and the "
             "extremes of the updates' summed losses; docs/rl.md, 'The loss swings'):", "",
             "| setting | " + " | ".join(LOSS_COLUMNS) + " |",
             "|---|" + "---:|" * len(LOSS_COLUMNS)]
    for r in results:
        if r["losses"]:
            values = [_scalar(r["losses"], c) for c in LOSS_COLUMNS]
            lines.append(f"| {r['setting']} | " + " | ".join(
                "-" if v is None else f"{v:,.3f}" if c == "entropy_per_step" else f"{v:,.2f}"
                for c, v in zip(LOSS_COLUMNS, values, strict=True)) + " |")
    return "\n".join(lines)


def _frames(value):
    return "not yet" if value is None else f"{value:,}"


def table(results, args):
    lines = [
        f"Frames until the training solve rate (fresh levels, sampling policy; one progress line "
        f"= {args.log_interval} updates, counted over at least {args.min_episodes} episodes) "
        f"first reaches 50 / 90 / 98 %; runs capped at "
        f"{args.max_frames:,} frames, trained in pieces of at most {args.piece_seconds:.0f} s. "
        f"'not yet' = not reached within the frames run so far (the run may be unfinished). "
        f"Base: {BASE} with {BASE_MODEL}; seed {args.seed}.", "",
        "| setting | frames to 50 % | 90 % | 98 % | frames run | wall s | last / best solve rate "
        "| finished |", "|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in results:
        rates = " / ".join("-" if x is None else f"{100 * x:.1f} %"
                           for x in (r["last_solve_rate"], r["best_solve_rate"]))
        lines.append(f"| {r['setting']} | " + " | ".join(
            _frames(r["frames_to"][f"{round(100 * t)}%"]) for t in THRESHOLDS)
            + f" | {r['frames']:,} | {r['wall_seconds']:.0f} | {rates} | "
              f"{'yes' if r['finished'] else 'no'} |")
    return "\n".join(lines)


def _backends(root, names):
    from keras_relational.agents.compiled.curriculum import stage_dir

    found = set()
    for name in names:
        directory = _directory(root, name)
        if _preset(name) is not None:
            directory = stage_dir(directory, 1)
        path = os.path.join(directory, "result.json")
        if os.path.exists(path):
            with open(path) as f:
                found.add(json.load(f).get("backend", "unknown"))
    return ", ".join(sorted(found)) or "none yet"


def what_ran(args, names):
    """The machine, the runs' Keras backend and the commit at reading time (the runs' own
    settings are in the tables)."""
    import platform
    import subprocess

    repo = os.path.dirname(HERE)  # git's paths are relative to its working directory
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=repo,
                                capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "agents"], cwd=repo,
                               capture_output=True, text=True, check=True).stdout.strip()
        commit += " (agents/ with uncommitted changes)" if dirty else ""
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    return (f"Read on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} (commit {commit}) "
            f"from the runs under {args.root}, trained under Keras backend "
            f"{_backends(args.root, names)} on {platform.machine()} with {os.cpu_count()} CPUs. "
            f"The wall seconds include each piece's compilation.")


def plot(results, path):
    try:
        import matplotlib
    except ImportError:
        print("matplotlib is not installed: no plot")
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 5))
    for r in results:
        points = [(f, s) for f, s in r["curve"] if s is not None]
        if points:
            axes.plot(*zip(*points, strict=True), label=r["setting"])
    for t in THRESHOLDS:
        axes.axhline(t, color="grey", linewidth=0.5, linestyle=":")
    axes.set_xlabel("frames")
    axes.set_ylabel("training solve rate")
    axes.set_ylim(0, 1.02)
    axes.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--settings", default="demo,demo/reward_scale=1,demo/rmsprop_2e-4",
                        help="Comma-separated setting names (--list).")
    parser.add_argument("--list", action="store_true", help="Print every setting name.")
    parser.add_argument("--root", default="/tmp/frames_to_solve",
                        help="One run directory a setting under it; re-running resumes.")
    parser.add_argument("--piece_seconds", type=float, default=600.0)
    parser.add_argument("--budget_minutes", type=float, default=None,
                        help="Stop starting pieces after this long (None: one piece each).")
    parser.add_argument("--max_frames", type=int, default=20_000_000)
    parser.add_argument("--log_interval", type=int, default=25)
    parser.add_argument("--min_episodes", type=int, default=MIN_EPISODES,
                        help="A progress line's solve rate counts towards a threshold only "
                             "over at least this many episodes.")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no_train", action="store_true", help="Only read the runs.")
    parser.add_argument("--output", default=os.path.join(HERE, "results", "frames_to_solve"))
    args = parser.parse_args()
    if args.list:
        print("\n".join(all_settings()))
        return
    names = [n.strip() for n in args.settings.split(",") if n.strip()]
    for name in names:
        setting(name)  # a bad name fails before any training
    # The results' folder exists before the first piece, not after the last.
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    started = time.perf_counter()
    while not args.no_train:
        pending = [n for n in names if not finished(_rows(args.root, n), args, args.root, n)]
        for name in pending:
            train_piece(args.root, name, args)
        spent = (time.perf_counter() - started) / 60
        if not pending or args.budget_minutes is None or spent >= args.budget_minutes:
            break
    results = summary(args.root, names, args)
    text = f"{table(results, args)}\n\n{loss_table(results)}\n\n{what_ran(args, names)}"
    print(text)
    picture = plot(results, args.output + ".png")
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    results_io.write_json(args.output + ".json", dict(
        args=vars(args), thresholds=THRESHOLDS, load_average=load, plot=picture,
        results=results))
    results_io.write_markdown(args.output + ".md", f"{text}\n\nLoad average at the end "
                                                   f"(1/5/15 min): {load}; {os.cpu_count()} CPUs.")
    print(json.dumps({r["setting"]: r["frames_to"] for r in results}))


if __name__ == "__main__":
    main()
