r"""Draws what a Box-World agent attends to over a frame, to a PNG.

    plot_attention --root_dir=/tmp/keras_relational_demo          # a train_boxworld run
    plot_attention --model=agent.keras --env=bridge --steps=10   # any saved agent

Loads the agent's Keras 3 network (``ROOT_DIR/keras_model.keras``, written by
``train_boxworld``), plays a fresh level with it (``--steps`` greedy steps from ``--seed``'s level)
and draws its attention over the frame it reached:

* the relational agent (Zambaldi et al. 2019, Fig. 4 style): per head, arrows from
  ``--source_entity`` (default: the agent's own cell) to every entity, opacity = attention
  weight, in block ``--block``;
* the 2-simplicial agent (Clift et al. 2020, Figs. 7 and 11-13 style): the 2-simplex of
  ``--query_entity``, the virtual entities' attention over the frame, the 1-simplicial attention
  between entities and the 2-simplicial pair attention.

The level follows the network's input: 7 x 10 frames are bridge Box-World, others original
Box-World with a room of the frame's side minus 2; 3 channels are RGB, others one-hot.
Needs matplotlib: ``pip install "keras-relational[plots]"``.
"""

from keras_relational.experiments import console

console.quiet_dependencies(__name__)

import os

from absl import app, flags

from keras_relational.experiments import plots_lib

FLAGS = flags.FLAGS
flags.DEFINE_string("root_dir", None, "A train_boxworld output directory (its keras_model.keras).")
flags.DEFINE_string("model", None, "A saved agent (.keras); default ROOT_DIR/keras_model.keras.")
flags.DEFINE_string("output", None, "PNG to write (default: ROOT_DIR/attention.png, or next "
                    "to --model).")
flags.DEFINE_integer("seed", 0, "Seed of the level.")
flags.DEFINE_integer("steps", 0, "Greedy steps played before the drawn frame.")
flags.DEFINE_list("goal_length", ["1", "2"], "Original Box-World: solution lengths L.")
flags.DEFINE_list("num_distractors", ["0", "1"], "Original Box-World: distractor branches.")
flags.DEFINE_integer("block", -1, "Relational agent: the block whose attention is drawn.")
flags.DEFINE_integer("source_entity", None, "Relational agent: the attending entity "
                     "(row-major; default: the agent's cell).")
flags.DEFINE_integer("query_entity", None, "2-simplicial agent: the target of the drawn "
                     "2-simplex (default: the query with the strongest pair weight).")


def main(argv):
    del argv
    if not FLAGS.root_dir and not FLAGS.model:
        raise app.UsageError("Give --root_dir (a train_boxworld run) or --model (a .keras file).")
    model_path = FLAGS.model or os.path.join(FLAGS.root_dir, "keras_model.keras")
    if not os.path.exists(model_path):
        raise app.UsageError(f"No saved agent at {model_path!r} (--model / --root_dir).")
    output = FLAGS.output or os.path.join(FLAGS.root_dir or os.path.dirname(model_path),
                                          "attention.png")
    import keras

    import keras_relational.layers  # noqa: F401  (registers the layers for load_model)

    model = keras.saving.load_model(model_path)
    path = plots_lib.plot_agent_attention(
        model, output, seed=FLAGS.seed, steps=FLAGS.steps,
        goal_length=[int(v) for v in FLAGS.goal_length],
        num_distractors=[int(v) for v in FLAGS.num_distractors], block=FLAGS.block,
        source_entity=FLAGS.source_entity, query_entity=FLAGS.query_entity)
    print(f"attention: {path}")


def run():
    """The ``plot_attention`` console script (the same help and flags as ``python -m``)."""
    console.adopt_main_help(__name__)
    app.run(main)


if __name__ == "__main__":
    run()
