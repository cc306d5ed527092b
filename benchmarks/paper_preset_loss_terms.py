"""The loss terms of the paper preset's own run: a GPU archive resumed on this machine for a few
updates, every one logged.

The GPU session's archive of a preset run (``gpu_session.py``'s ``<preset>.tar.gz``: the run
directory and ``gpu_session_run.json`` with its flags) is extracted to a temporary directory and
continued with ``train_boxworld --preset=<preset> --trainer=compiled <the archive's flags>`` for
``--updates`` updates, with a progress line (and so a ``curves.jsonl`` row of learner scalars) every
update: the summed loss and its policy-gradient, value and entropy terms, the gradient norm before
and after the global-norm clip, the value error and the rewards each update saw. No setting of the
run changes (only how long it runs and how often it logs, evaluates and checkpoints), so these are
the terms of the paper's settings at the weights the GPU run reached. The archive is not modified.

It also reads the optimizer state of the run's last checkpoint: for RMSProp, how far its epsilon
(inside the square root, as TF1's) shrinks each weight's step, ``sqrt(v / (v + epsilon))`` over
every accumulator entry ``v`` (1: epsilon does not act; 0.1: steps a tenth of RMSProp's own).

Writes ``<output>.md`` (a row per update, then the terms' medians and ranges, split by whether the
update's unroll held a gem reward, then the optimizer state) and ``<output>.json``.

    KERAS_BACKEND=jax .venv/bin/python benchmarks/paper_preset_loss_terms.py \\
        --archive=../shared/gpu/2026-11-28-h200/zambaldi_fig3_relational.tar.gz --updates=40
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

import gpu_session  # benchmarks/gpu_session.py, beside this script: the run archives
import results_io  # benchmarks/results_io.py, beside this script

from keras_relational.agents.curves import read_curve

NO_GRADIENT = 1e-30  # an RMSProp accumulator below this has seen no gradient for long
NUM_ACTIONS = 4  # Box-World's moves (Zambaldi et al. 2019, Sec. 3.1)
GEM_REWARD = 10.0  # Zambaldi et al. 2019, App. A: the gem's reward (before reward_scale)
# The learner scalars of a curves.jsonl row, in the table's order.
TERMS = ("loss", "policy_gradient_loss", "value_loss", "entropy", "gradient_norm",
         "clipped_gradient_norm", "value_error", "value_mean", "reward_sum", "reward_max")


def extract_run(archive, into):
    """The run directory and its ``gpu_session_run.json`` record, extracted from ``archive``
    (``gpu_session``'s archive format and checks)."""
    try:
        run_dir = gpu_session.extract_archive(archive, into)
        with open(os.path.join(run_dir, gpu_session.RUN_META)) as f:
            return run_dir, json.load(f)
    except (ValueError, OSError) as error:
        raise ValueError(f"--archive: expected one run directory with {gpu_session.RUN_META} "
                         f"in {archive} ({error}).") from None


def resume_command(run_dir, record, updates, start_step):
    """The ``train_boxworld`` command that continues the run for ``updates`` updates."""
    return [sys.executable, "-m", "keras_relational.experiments.train_boxworld",
            f"--preset={record['preset']}", "--trainer=compiled", *record.get("flags", []),
            f"--root_dir={run_dir}", f"--num_iterations={start_step + updates}",
            "--log_interval=1", f"--checkpoint_interval={start_step + updates}",
            "--eval_episodes=0", "--test_presets="]


def summarize(rows, reward_scale=1.0):
    """Medians and ranges of every term, over all updates and split by a gem in the unroll."""
    gem = GEM_REWARD * reward_scale
    groups = {"all": rows,
              "with a gem": [r for r in rows if r["losses"]["reward_max"] >= gem],
              "without": [r for r in rows if r["losses"]["reward_max"] < gem]}
    summary = {}
    for name, group in groups.items():
        summary[name] = dict(updates=len(group), terms={
            term: dict(median=statistics.median(r["losses"][term] for r in group),
                       low=min(r["losses"][term] for r in group),
                       high=max(r["losses"][term] for r in group))
            for term in TERMS} if group else {})
    return summary


def optimizer_state(run_dir, preset, flags):
    """Quantiles of ``sqrt(v / (v + epsilon))`` over the RMSProp accumulators ``v`` of the run's
    newest checkpoint (None for another optimizer), restored as ``train_eval`` resumes it."""
    import numpy as np

    from keras_relational.agents.compiled import checkpointing, levels
    from keras_relational.agents.compiled.train_eval import build_loop
    from keras_relational.experiments import train_boxworld

    train_boxworld.FLAGS(["train_boxworld", f"--preset={preset}", "--trainer=compiled", *flags,
                          f"--root_dir={run_dir}"])
    config = train_boxworld.config_from_flags()
    if config.optimizer_name() != "rmsprop":
        return None
    environment, _, loop = build_loop(config)
    banks = levels.LevelBanks.for_config(environment, config)
    try:
        state, _ = checkpointing.restore(run_dir, loop.initial_state(banks.bank))
    finally:
        banks.close()
    epsilon = float(loop.optimizer.epsilon)
    per_variable = {variable.path: np.asarray(value, dtype="float64").ravel()
                    for variable, value in zip(loop.optimizer.variables, state["optimizer"],
                                               strict=True)
                    if "velocit" in variable.path}
    accumulators = np.concatenate(list(per_variable.values()))
    shrink = np.sqrt(accumulators / (accumulators + epsilon))
    quantiles = (0.1, 0.5, 0.9)
    # An accumulator decays by rho = 0.99 an update: below 1e-30 it has seen no gradient for
    # thousands of updates (a weight into or out of a ReLU unit that no input activates).
    return dict(epsilon=epsilon, entries=int(accumulators.size),
                variables={path: dict(entries=int(v.size), median=float(np.median(v)),
                                      no_gradient=float(np.mean(v < NO_GRADIENT)))
                           for path, v in per_variable.items()},
                accumulator=dict(zip(map(str, quantiles),
                                     np.quantile(accumulators, quantiles).tolist(), strict=True)),
                step_fraction=dict(zip(map(str, quantiles),
                                       np.quantile(shrink, quantiles).tolist(), strict=True)))


def markdown(report):
    lines = [f"The `{report['preset']}` run of `{report['archive']}` (trained to step "
             f"{report['start_step']:,} on {report['device']}), continued on this machine for "
             f"{len(report['rows'])} updates with its own settings (`{' '.join(report['flags'])}`"
             f"), one progress line per update. Sums over each update's transitions; gradient "
             f"norms before and after the global-norm clip at 40. Keras backend "
             f"{report['backend']}, {report['seconds']:.0f} s.", "",
             "| step | " + " | ".join(TERMS) + " |", "|---:|" + "---:|" * len(TERMS)]
    for row in report["rows"]:
        lines.append(f"| {row['step']} | " + " | ".join(
            f"{row['losses'][term]:.4g}" for term in TERMS) + " |")
    lines += ["", "| updates | count | " + " | ".join(f"{t} (median, range)" for t in TERMS[:7])
              + " |", "|---|---:|" + "---|" * 7]
    for name, group in report["summary"].items():
        if not group["terms"]:
            lines.append(f"| {name} | 0 |" + " |" * 7)
            continue
        cells = [f"{v['median']:.4g} ({v['low']:.4g} to {v['high']:.4g})"
                 for v in (group["terms"][t] for t in TERMS[:7])]
        lines.append(f"| {name} | {group['updates']} | " + " | ".join(cells) + " |")
    clipped = sum(r["losses"]["gradient_norm"] > r["losses"]["clipped_gradient_norm"] * 1.0001
                  for r in report["rows"])
    per_transition = statistics.median(r["losses"]["entropy"] / r["losses"]["transitions"]
                                       for r in report["rows"])
    lines += ["", f"Updates whose gradient the clip scaled down: {clipped} of "
              f"{len(report['rows'])}. Policy entropy per transition, median: "
              f"{per_transition:.4f} (ln {NUM_ACTIONS} = {math.log(NUM_ACTIONS):.4f}: uniform over "
              f"the {NUM_ACTIONS} moves)."]
    optimizer = report.get("optimizer")
    if optimizer:
        quantile = lambda values: ", ".join(  # noqa: E731
            f"{float(q) * 100:.0f} %: {v:.3g}" for q, v in values.items())
        lines += ["", f"RMSProp state at step {report['rows'][-1]['step']:,} "
                  f"({optimizer['entries']:,} accumulator entries, epsilon "
                  f"{optimizer['epsilon']:g} inside the square root): accumulator v quantiles "
                  f"{quantile(optimizer['accumulator'])}; the step as a fraction of RMSProp's "
                  f"without epsilon, sqrt(v / (v + epsilon)), quantiles "
                  f"{quantile(optimizer['step_fraction'])}.", "",
                  "| variable | entries | accumulator median | entries without gradient "
                  "(accumulator < 1e-30) |", "|---|---:|---:|---:|"]
        lines += [f"| {path} | {v['entries']:,} | {v['median']:.3g} | "
                  f"{v['no_gradient'] * 100:.0f} % |"
                  for path, v in optimizer["variables"].items()]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--archive", required=True, help="A gpu_session run archive (.tar.gz).")
    parser.add_argument("--updates", type=int, default=40, help="Updates to continue for.")
    parser.add_argument("--timeout", type=float, default=3600,
                        help="Seconds the continued run may take.")
    parser.add_argument("--output", default=os.path.join(results_io.RESULTS,
                                                         "paper_preset_loss_terms"))
    args = parser.parse_args(argv)
    if args.updates < 1:
        parser.error(f"--updates: expected at least 1, received {args.updates}")
    if not os.path.isfile(args.archive):
        parser.error(f"--archive: expected a run archive file, received {args.archive!r}")
    with tempfile.TemporaryDirectory(prefix="paper_preset_loss_terms_") as scratch:
        run_dir, record = extract_run(args.archive, scratch)
        before = read_curve(run_dir)
        start_step = before[-1]["step"] if before else 0
        command = resume_command(run_dir, record, args.updates, start_step)
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout)
        seconds = time.perf_counter() - started
        if done.returncode:
            raise SystemExit(f"the continued run failed (exit {done.returncode}):\n"
                             f"{done.stderr[-3000:]}")
        rows = [row for row in read_curve(run_dir)
                if row["step"] > start_step and "losses" in row]
        optimizer = optimizer_state(run_dir, record["preset"], record.get("flags", []))
    if not rows:
        raise SystemExit("the continued run logged no learner scalars")
    from keras_relational.agents import presets

    reward_scale = presets.train_config(record["preset"], trainer="compiled").reward_scale
    pieces = record.get("pieces") or [{}]
    report = dict(archive=os.path.relpath(os.path.abspath(args.archive), results_io.REPO),
                  preset=record["preset"], flags=record.get("flags", []),
                  device=pieces[-1].get("device", "an unnamed device"), start_step=start_step,
                  backend=os.environ.get("KERAS_BACKEND", "tensorflow"), seconds=seconds,
                  rows=rows, summary=summarize(rows, reward_scale), optimizer=optimizer)
    results_io.write_markdown(args.output + ".md", markdown(report))
    results_io.write_json(args.output + ".json", report)
    print(markdown(report))


if __name__ == "__main__":
    main()
