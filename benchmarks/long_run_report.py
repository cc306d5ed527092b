r"""The state of long Box-World runs trained in pieces, next to the papers' numbers.

    python benchmarks/long_run_report.py \
        benchmarks/results/runs/zambaldi_fig3_relational.tar.gz --paper=zambaldi_fig3 \
        --output=benchmarks/results/long_run_zambaldi_fig3 \
        --plot=docs/images/long_run_zambaldi_fig3.png

Each run is a ``gpu_session.py`` run archive (``<run>.tar.gz``: its newest checkpoint,
``curves.jsonl``, ``result.json`` and ``gpu_session_run.json``, the record of its pieces) or a
``train_boxworld`` root directory. Writes ``<output>.md`` and ``<output>.json``: per run its
preset, pieces (device, updates, seconds), frames so far, trained frames/s, the training solve
rate (first, best and last rows of the curve), the last evaluation and zero-shot solve rates, and
the paper's headline numbers (``keras_relational.agents.presets.REFERENCE_LINES``) beside them;
and ``--plot`` (default ``<output>.png``), the curves against frames with the paper's lines
(where matplotlib is installed). Nothing is estimated: a run reports only what its files hold.
"""

import argparse
import json
import math
import os
import statistics
import sys
import tempfile

import plot_rl_curves
import results_io

from keras_relational.agents import curves, presets

RUN_META = "gpu_session_run.json"
# How many of the curve's last rows the "last" solve rate averages: each row is the episodes that
# ended since the previous progress line, a noisy estimate alone.
LAST_ROWS = 10


def _read_json(path):
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def summarise_run(run_dir):
    """What one run's folder says: a dict of figures read from its files (None where absent)."""
    meta = _read_json(os.path.join(run_dir, RUN_META)) or {}
    result = _read_json(os.path.join(run_dir, "result.json")) or {}
    if not os.path.exists(os.path.join(run_dir, curves.FILENAME)):
        raise ValueError(f"{run_dir!r}: no learning curve ({curves.FILENAME})")
    curve = curves.read_curve(run_dir)
    rows = [row for row in curve if row.get("solve_rate") is not None]
    if not rows:
        raise ValueError(f"{run_dir!r}: no learning curve ({curves.FILENAME}) with solve rates")
    rates = [row["solve_rate"] for row in rows]
    speeds = [row["frames_per_second"] for row in rows[1:]  # the first row includes compiling
              if row.get("frames_per_second")]
    best = max(rows, key=lambda row: row["solve_rate"])
    pieces = meta.get("pieces", [])
    # the policy's entropy per transition, where the curve logs the loss terms (the compiled
    # trainer: summed over the update's transitions)
    entropies = [row["losses"]["entropy"] / row["losses"]["transitions"]
                 for row in curve
                 if (row.get("losses") or {}).get("transitions")
                 and row["losses"].get("entropy") is not None]
    return {
        "run": os.path.basename(os.path.normpath(run_dir)),
        "preset": meta.get("preset"),
        "flags": meta.get("flags"),
        "pieces": [{key: piece.get(key) for key in ("started", "device", "start_step",
                                                    "end_step", "seconds", "exit_code")}
                   for piece in pieces],
        "updates": rows[-1]["step"],
        "frames": rows[-1]["frames"],
        "training_seconds": rows[-1].get("wall_seconds"),
        "median_frames_per_second": statistics.median(speeds) if speeds else None,
        "solve_rate_first": rates[0],
        "solve_rate_best": best["solve_rate"],
        "solve_rate_best_frames": best["frames"],
        "solve_rate_last": statistics.fmean(rates[-LAST_ROWS:]),
        "entropy_first": entropies[0] if entropies else None,
        "entropy_last": statistics.fmean(entropies[-LAST_ROWS:]) if entropies else None,
        "eval_solve_rate": result.get("eval_solve_rate"),
        "test_solve_rates": result.get("test_solve_rates") or {},
        "dtype_policy": result.get("dtype_policy"),
        "backend": result.get("backend"),
    }


def _percent(value):
    return "-" if value is None else f"{100 * value:.1f} %"


def markdown(summaries, paper):
    lines = []
    if paper is not None:
        lines += [f"The paper's headline numbers ({paper}):", ""]
        lines += [f"- {text} ({_percent(value)})" for value, text in presets.REFERENCE_LINES[paper]]
        lines.append("")
    lines += ["| run | preset | pieces (device) | updates | frames | trained frames/s (median) "
              "| training solve rate: first / best (at frames) / last " f"{LAST_ROWS} rows "
              "| policy entropy (nats a step): first / last " f"{LAST_ROWS} rows "
              "| evaluation solve rate | zero-shot |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for s in summaries:
        devices = sorted({p["device"] for p in s["pieces"] if p.get("device")})
        zero_shot = ", ".join(f"{name} {_percent(rate)}"
                              for name, rate in sorted(s["test_solve_rates"].items())) or "-"
        speed = (f"{s['median_frames_per_second']:,.0f}" if s["median_frames_per_second"]
                 else "-")
        entropy = ("-" if s["entropy_first"] is None
                   else f"{s['entropy_first']:.4f} / {s['entropy_last']:.4f}")
        lines.append(
            f"| {s['run']} | {s['preset'] or '-'} | {len(s['pieces'])} "
            f"({', '.join(devices) or 'local'}) | {s['updates']:,} | {s['frames']:,} | {speed} | "
            f"{_percent(s['solve_rate_first'])} / {_percent(s['solve_rate_best'])} "
            f"({s['solve_rate_best_frames']:,}) / {_percent(s['solve_rate_last'])} | "
            f"{entropy} | {_percent(s['eval_solve_rate'])} | {zero_shot} |")
    lines += ["", "Training solve rate: the share of the episodes ended since the previous "
              "progress line that were solved (the policy samples its actions); policy entropy: "
              "the entropy term of the update's loss over its transitions, where the curve "
              "logs it (the uniform policy over Box-World's 4 actions: ln 4 = "
              f"{math.log(4):.4f}); evaluation: fresh levels at the end of the newest piece."]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+",
                        help="run archives (<run>.tar.gz from gpu_session.py) or root_dirs")
    parser.add_argument("--paper", choices=sorted(presets.REFERENCE_LINES), default=None,
                        help="the figure whose headline numbers stand beside the runs")
    parser.add_argument("--output", required=True,
                        help="<output>.md and <output>.json are written")
    parser.add_argument("--plot", default=None,
                        help="the curves' PNG (default <output>.png; the docs' pictures live in "
                        "docs/images/)")
    args = parser.parse_args(argv)
    import gpu_session  # the archive reader of the session that made the archives

    summaries = []
    with tempfile.TemporaryDirectory() as scratch:
        run_dirs = []
        for run in args.runs:
            if os.path.isdir(run):
                run_dirs.append(run)
            elif os.path.isfile(run):
                try:
                    run_dirs.append(gpu_session.extract_archive(run, scratch))
                except (OSError, ValueError) as error:
                    parser.error(f"runs: {run!r} is not a run archive ({error})")
            else:
                parser.error(f"runs: expected a run archive or a root_dir, {run!r} does not "
                             f"exist")
        for run_dir in run_dirs:
            try:
                summaries.append(summarise_run(run_dir))
            except ValueError as error:
                parser.error(f"runs: {error}")
        body = markdown(summaries, args.paper)
        results_io.write_markdown(f"{args.output}.md", body)
        results_io.write_json(f"{args.output}.json", {"paper": args.paper, "runs": summaries})
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            print("matplotlib is not installed: no plot")
        else:
            plot_rl_curves.plot([(s["run"], d) for s, d in zip(summaries, run_dirs, strict=True)],
                                args.plot or f"{args.output}.png", args.paper)
    print(body)
    print(f"wrote {args.output}.md and .json")


if __name__ == "__main__":
    main(sys.argv[1:])
