r"""Trains a small relational model on a generated "same colour?" task and exports it.

Each example is an 8x8 RGB image with three coloured dots on a grey floor; the label says whether
two of the dots share a colour. Deciding it needs a comparison between entities, which the
relational module provides: conv stem -> SpatialEntities -> RelationalModule -> EntityMaxPool ->
MLP. Everything is generated on the fly (nothing is downloaded).

    python -m keras_relational.experiments.same_colour_demo --root_dir=/tmp/same_colour_demo

Writes ``root_dir/model.keras`` (the trained model; a repeated run reloads it), ``root_dir/backup``
(per-epoch state while training, so a killed run resumes), ``root_dir/train`` (TensorBoard) and
``root_dir/saved_model`` (``model.export``).
"""

# First, before TensorFlow loads: hides known-harmless dependency messages when run as a
# binary (not when imported); --verbose_dependencies shows them.
from keras_relational.experiments import console, flag_checks

console.quiet_dependencies(__name__)

from absl import app, flags, logging

# Pure modules only: the flags are defined and checked before Keras or TensorFlow loads.
from keras_relational.experiments import distribution_flags

FLAGS = flags.FLAGS
flags.DEFINE_string("root_dir", "/tmp/keras_relational_same_colour", "Output directory.")
flags.DEFINE_integer("epochs", 8, "Training epochs.")
flags.DEFINE_integer("num_train", 4000, "Generated training examples.")
flags.DEFINE_integer("seed", 0, "Random seed.")
flag_checks.require_ranges({"epochs": (1, None), "num_train": (1, None), "seed": (0, 2**32 - 1)})
distribution_flags.define_distribution_strategy_flag()
flag_checks.define_dtype_policy_flag()


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)
    # Keras and TensorFlow load here, after the flags are parsed and checked.
    from keras_relational.experiments.same_colour_lib import train_eval

    train_eval(FLAGS.root_dir, num_train=FLAGS.num_train, epochs=FLAGS.epochs, seed=FLAGS.seed,
               distribution_strategy=FLAGS.distribution_strategy, dtype_policy=FLAGS.dtype_policy)


def run():
    """The ``same_colour_demo`` console script (the same help and flags as ``python -m``)."""
    console.adopt_main_help(__name__)
    app.run(main)


if __name__ == "__main__":
    run()
