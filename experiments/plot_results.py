r"""Draws the learning curves of a training run to a PNG.

    plot_results /tmp/keras_relational_demo      # writes .../learning_curves.png
    plot_results ROOT_DIR --output=/tmp/curves.png

Reads the TensorBoard event files under ``ROOT_DIR`` (every sub-directory holding some is one
run: ``train``, ``collect``, ``eval``, ...), so it works on a finished run, on one still training
and on any binary's output. A Box-World run (``train_boxworld``) gets the solve rate and the
average return of the collected episodes against frames and against wall time, with the
evaluations as points; any other run gets one panel per scalar against its step. Falls back to
``ROOT_DIR/result.json``'s ``history`` when a Box-World run has no collect summaries.

Needs matplotlib: ``pip install "keras-relational[plots]"``; reading the event files needs
``tensorboard`` (in the ``rl`` extra).
"""

from keras_relational.experiments import console

console.quiet_dependencies(__name__)

from absl import app, flags

from keras_relational.experiments import plots_lib

FLAGS = flags.FLAGS
flags.DEFINE_string("output", None, "PNG to write (default: ROOT_DIR/learning_curves.png).")
flags.DEFINE_integer("max_panels", 12, "At most this many scalar panels for a generic run.")


def main(argv):
    if len(argv) != 2:
        raise app.UsageError(f"Usage: plot_results ROOT_DIR [--output=PNG]; received "
                             f"{len(argv) - 1} positional arguments {argv[1:]}.")
    path = plots_lib.plot_learning_curves(argv[1], FLAGS.output, FLAGS.max_panels)
    print(f"learning curves: {path}")


def run():
    """The ``plot_results`` console script (the same help and flags as ``python -m``)."""
    console.adopt_main_help(__name__)
    app.run(main)


if __name__ == "__main__":
    run()
