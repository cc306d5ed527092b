r"""Draws Box-World learning curves next to the papers' numbers.

    python benchmarks/plot_rl_curves.py RUN_DIR [LABEL=RUN_DIR ...] --paper=zambaldi_fig3 \
        --x=frames --output=benchmarks/results/rl_curves.png

Each run is a ``train_boxworld`` root directory (or its ``curves.jsonl``, written by
``keras_relational.agents.curves`` across every resumed piece); ``LABEL=PATH`` names its curve.
The y-axis is the fraction of training levels solved (``--metric=average_return`` for the return),
the x-axis environment frames or wall time (``--x=wall_seconds``, summed over the pieces). The
papers' headline numbers (``keras_relational.agents.presets.REFERENCE_LINES``) are horizontal
lines with their labels. Needs matplotlib (``pip install matplotlib``; in the ``dev`` extra).
"""

import argparse
import os
import sys

from keras_relational.agents import curves, presets

_X_LABELS = {"frames": "environment frames", "wall_seconds": "wall time (s, all pieces)"}
_Y_LABELS = {"solve_rate": "fraction of levels solved", "average_return": "episode return"}


def parse_run(argument):
    """``LABEL=PATH`` or ``PATH`` (labelled by the directory's name) -> (label, path)."""
    label, separator, path = argument.partition("=")
    if not separator:
        path = argument
        label = os.path.basename(os.path.normpath(path if os.path.isdir(path)
                                                  else os.path.dirname(path)))
    if not os.path.exists(path):
        raise SystemExit(f"run {argument!r}: {path!r} does not exist (expected a train_boxworld "
                         f"root_dir or its {curves.FILENAME}).")
    return label, path


def plot(runs, output, paper=None, x="frames", metric="solve_rate"):
    """Draws ``runs`` (``(label, path)`` pairs) to ``output`` (a PNG); returns the figure."""
    try:
        import matplotlib
    except ImportError as error:
        raise SystemExit("plot_rl_curves.py needs matplotlib: pip install matplotlib") from error
    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(7, 4.5))
    for label, path in runs:
        rows = [row for row in curves.read_curve(path) if row[metric] is not None]
        axes.plot([row[x] for row in rows], [row[metric] for row in rows], label=label)
    if paper is not None and metric == "solve_rate":
        for value, text in presets.REFERENCE_LINES[paper]:
            axes.axhline(value, linestyle="--", linewidth=0.8, color="grey")
            axes.annotate(text, (0.01, value), xycoords=("axes fraction", "data"),
                          textcoords="offset points", xytext=(0, 2), fontsize=7, color="grey")
    axes.set_xlabel(_X_LABELS[x])
    axes.set_ylabel(_Y_LABELS[metric])
    if metric == "solve_rate":
        axes.set_ylim(0.0, 1.02)
    axes.legend(loc="lower right", fontsize=8)
    figure.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    temporary = f"{output}.tmp.png"
    figure.savefig(temporary, dpi=120)
    os.replace(temporary, output)  # readers never see a half-written file
    return figure


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="train_boxworld root_dirs or curves.jsonl "
                        "files, optionally LABEL=PATH")
    parser.add_argument("--paper", choices=sorted(presets.REFERENCE_LINES), default=None,
                        help="draw this figure's headline numbers as reference lines")
    parser.add_argument("--x", choices=sorted(_X_LABELS), default="frames")
    parser.add_argument("--metric", choices=sorted(_Y_LABELS), default="solve_rate")
    parser.add_argument("--output", default="rl_curves.png", help="the PNG to write")
    args = parser.parse_args(argv)
    plot([parse_run(run) for run in args.runs], args.output, args.paper, args.x, args.metric)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main(sys.argv[1:])
