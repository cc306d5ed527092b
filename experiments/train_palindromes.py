r"""Trains Table II's sequence models (Mitchell & Bowers) on the palindrome language.

    python -m keras_relational.experiments.train_palindromes --root_dir=/tmp/pal \
        --models=conv_stack,lstm --conditions=standard,nesting --seeds=10

Defaults are the paper's protocol (100 epochs, Adam 1e-3, batch 128, restart rule 0.9 at epoch 4
for the convolutional model, 10 seeds). Each run writes ``ROOT/CONDITION/MODEL/seed_S/``
(TensorBoard, ``model.keras``, SavedModel, ``results.json``); ``ROOT/summary.json`` holds the
medians of the string-level accuracies and the Mann-Whitney U p-values between the models.
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
flags.DEFINE_list("models", ["conv_stack", "lstm"], "Models among conv_stack, lstm.")
flags.DEFINE_list("conditions", ["standard", "nesting"],
                  "standard (in-domain and long columns) and/or nesting (the N_A > 2 column).")
flags.DEFINE_integer("seeds", 10, "Number of seeds per model and condition (paper: 10).")
flags.DEFINE_integer("epochs", 100, "Epochs (paper: 100).")
flags.DEFINE_integer("batch_size", 128, "Batch size (paper: 128).")
flags.DEFINE_float("learning_rate", 1e-3, "Adam learning rate (paper: 1e-3).")
flags.DEFINE_enum("write_mode", "embedding_on_push", ["gated", "embedding_on_push"],
                  "Stack write path: the paper's gated write or the authors' code variant.")
flags.DEFINE_float("shift_entropy_cost", 0.0, "Conv stack LSTM only: weight of the mean entropy of "
                   "the stacks' push/stay/pop filters in the loss (paper: 0).")
flags.DEFINE_integer("straight_through_from_epoch", None, "Conv stack LSTM only: epochs after "
                     "this one use hard push/stay/pop actions with straight-through gradients "
                     "(not the paper's; default: soft throughout).")
flags.DEFINE_float("straight_through_learning_rate", None, "Conv stack LSTM only: Adam's "
                   "learning rate in the hard epochs (default: --learning_rate).")
flags.DEFINE_float("restart_threshold", 0.9, "Restart if dev token accuracy <= this; <0 disables.")
flags.DEFINE_integer("restart_epoch", 4, "Epoch at which the restart rule is checked.")
flags.DEFINE_integer("max_restarts", 10, "Cap on restarts per run.")
flags.DEFINE_bool("restart_baseline", False, "Apply the restart rule to the LSTM as well.")
flags.DEFINE_bool("early_stopping", False, "Keep the best dev epoch and stop once the dev string "
                  "accuracy reaches --stop_score (not the paper's: it keeps the last epoch).")
flags.DEFINE_float("stop_score", 1.0, "Dev string accuracy at which early stopping stops.")
flags.DEFINE_bool("restart_below_stop_score", False, "Early stopping: also restart a run whose "
                  "best dev score stays below --stop_score (sharing --max_restarts; the best "
                  "attempt is kept if none reaches it).")
flags.DEFINE_integer("patience", 1, "Early stopping: epochs without dev improvement (0: no "
                     "limit, train until stop_score or the last epoch).")
flags.DEFINE_integer("min_epochs", 1, "Early stopping scores epochs from this one on (and from "
                     "the restart check).")
flags.DEFINE_bool("select_on_long_dev", False, "Early stopping scores each epoch by the minimum "
                  "of the dev and the long-dev string accuracy (both dev splits).")
flags.DEFINE_integer("n_per_length", 20000, "Strings drawn per in-domain length (paper: 20000).")
flags.DEFINE_integer("long_n_per_length", 3333, "Long test strings per length (paper: 3333).")
flags.DEFINE_integer("data_seed", 0, "Seed of the data generator.")
flags.DEFINE_bool("export", True, "Write model.keras and a SavedModel per run.")
flag_checks.require_subset("models", ("conv_stack", "lstm"))
flag_checks.require_subset("conditions", ("standard", "nesting"))
flag_checks.require_ranges({
    "seeds": (1, None), "epochs": (1, None), "batch_size": (1, None), "learning_rate": (0, None),
    "shift_entropy_cost": (0, None), "straight_through_from_epoch": (0, None),
    "straight_through_learning_rate": (0, None), "restart_threshold": (None, 1),
    "restart_epoch": (1, None), "max_restarts": (0, None), "stop_score": (0, 1),
    "patience": (0, None), "min_epochs": (1, None), "n_per_length": (1, None),
    "long_n_per_length": (1, None), "data_seed": (0, 2**32 - 1)},
    exclusive_low=("learning_rate", "straight_through_learning_rate"))
distribution_flags.define_distribution_strategy_flag()
flag_checks.define_dtype_policy_flag()


def main(argv):
    del argv
    # Keras and TensorFlow load here, after the flags are parsed and checked.
    from keras_relational.experiments import palindromes_lib

    threshold = FLAGS.restart_threshold if FLAGS.restart_threshold >= 0 else None
    summary = palindromes_lib.train_seeds(
        FLAGS.root_dir, FLAGS.models, FLAGS.conditions, FLAGS.seeds,
        n_per_length=FLAGS.n_per_length, long_n_per_length=FLAGS.long_n_per_length,
        data_seed=FLAGS.data_seed, epochs=FLAGS.epochs, batch_size=FLAGS.batch_size,
        learning_rate=FLAGS.learning_rate, write_mode=FLAGS.write_mode,
        shift_entropy_cost=FLAGS.shift_entropy_cost, restart_threshold=threshold,
        restart_epoch=FLAGS.restart_epoch,
        max_restarts=FLAGS.max_restarts, restart_baseline=FLAGS.restart_baseline,
        early_stopping=FLAGS.early_stopping, stop_score=FLAGS.stop_score,
        patience=FLAGS.patience or None, select_on_long_dev=FLAGS.select_on_long_dev,
        min_epochs=FLAGS.min_epochs,
        straight_through_from_epoch=FLAGS.straight_through_from_epoch,
        straight_through_learning_rate=FLAGS.straight_through_learning_rate,
        restart_below_stop_score=FLAGS.restart_below_stop_score,
        export=FLAGS.export, distribution_strategy=FLAGS.distribution_strategy,
        dtype_policy=FLAGS.dtype_policy)
    for condition in FLAGS.conditions:
        for model in FLAGS.models:
            for key in palindromes_lib.COLUMNS[condition]:
                name = "/".join(key)
                print(f"{condition} {model} {name}: median "
                      f"{summary[condition][model][name]['median']:.3f}")


def run():
    """The ``train_palindromes`` console script (the same help and flags as ``python -m``)."""
    console.adopt_main_help(__name__)
    app.run(main)


if __name__ == "__main__":
    run()
