r"""Trains Table I's rule-learning models (Mitchell & Bowers) over several seeds.

    python -m keras_relational.experiments.train_rule_learning --root_dir=/tmp/rules \
        --models=conv,mlp,rnn --seeds=10

Each run writes ``ROOT/MODEL/seed_S/`` (TensorBoard, ``model.keras``, SavedModel,
``results.json``); ``ROOT/summary.json`` holds the per-model medians of test accuracy on the four
unseen-syllable items.
"""

# First, before TensorFlow loads: hides known-harmless dependency messages when run as a
# binary (not when imported); --verbose_dependencies shows them.
from keras_relational.experiments import console, flag_checks

console.quiet_dependencies(__name__)

from absl import app, flags

# Pure modules only: the flags are defined and checked before Keras or TensorFlow loads.
from keras_relational.experiments import distribution_flags

FLAGS = flags.FLAGS
flags.DEFINE_string("root_dir", None, "Output directory.", required=True)
flags.DEFINE_list("models", ["conv", "mlp", "rnn"], "Models among conv, mlp, rnn.")
flags.DEFINE_integer("seeds", 10, "Number of seeds (0 .. seeds-1) per model.")
flags.DEFINE_integer("epochs", 1000, "Epochs (paper: 1000).")
flags.DEFINE_integer("batch_size", 16, "Batch size (paper: 16; authors' code: 32).")
flags.DEFINE_float("learning_rate", 0.1, "Adam learning rate (paper: 0.1).")
flags.DEFINE_bool("use_bias", False, "Bias in the symbol convolution (authors' code: none).")
flags.DEFINE_bool("restart_until_fit", False,
                  "Re-initialise while training accuracy < 100% (not the paper's; mirrors its "
                  "App. B restart rule).")
flags.DEFINE_bool("export", True, "Write model.keras and a SavedModel per run.")
flag_checks.require_subset("models", ("conv", "mlp", "rnn"))
flag_checks.require_ranges({"seeds": (1, None), "epochs": (1, None), "batch_size": (1, None),
                        "learning_rate": (0, None)}, exclusive_low=("learning_rate",))
distribution_flags.define_distribution_strategy_flag()
flag_checks.define_dtype_policy_flag()


def main(argv):
    del argv
    # Keras and TensorFlow load here, after the flags are parsed and checked.
    from keras_relational.experiments import rule_learning_lib

    summary = rule_learning_lib.train_seeds(
        FLAGS.root_dir, FLAGS.models, FLAGS.seeds, epochs=FLAGS.epochs,
        batch_size=FLAGS.batch_size, learning_rate=FLAGS.learning_rate, use_bias=FLAGS.use_bias,
        restart_until_fit=FLAGS.restart_until_fit, export=FLAGS.export,
        distribution_strategy=FLAGS.distribution_strategy, dtype_policy=FLAGS.dtype_policy)
    for model, entry in summary.items():
        print(f"{model}: median test accuracy {entry['median_test_accuracy']:.2f} "
              f"(train {entry['median_train_accuracy']:.2f}) over {len(entry['runs'])} seeds")


def run():
    """The ``train_rule_learning`` console script (the same help and flags as ``python -m``)."""
    console.adopt_main_help(__name__)
    app.run(main)


if __name__ == "__main__":
    run()
