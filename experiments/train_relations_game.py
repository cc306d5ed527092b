r"""Trains PrediNet or a baseline on the Relations Game (Shanahan et al. 2020).

Single task (Table 1): train on pentominoes, test on hexominoes and stripes:

    python -m keras_relational.experiments.train_relations_game --root_dir=/tmp/rg_between \
        --central=predinet --task=between --num_batches=100000

Transfer protocol (Fig. 4, combination A: target 3 column patterns, curriculum between):

    python -m keras_relational.experiments.train_relations_game --root_dir=/tmp/rg_transfer \
        --task=column_patterns_3 --curriculum_task=between

DeepMind's released ``.npz`` files (keys ``images``, ``labels``, ``tasks``) instead of generated
data: ``--data_file=between_pentos.npz --eval_file=between_hexos.npz,between_stripes.npz``.

Outputs under ``root_dir`` (one sub-directory per stage for the protocol): TensorBoard logs
(``train/``, ``eval/``), checkpoints (``backup/``, ``checkpoint.weights.h5``,
``final.weights.h5``), ``results.json`` and the SavedModel (``saved_model/``, where TensorFlow is
installed). Re-running with the same ``root_dir`` resumes. Any Keras backend trains, with or
without TensorFlow (``KERAS_BACKEND=jax`` on a GPU machine without it).
"""

# First, before TensorFlow loads: hides known-harmless dependency messages when run as a
# binary (not when imported); --verbose_dependencies shows them.
from keras_relational.experiments import console, flag_checks

console.quiet_dependencies(__name__)

from absl import app, flags

# Pure modules only: the flags are defined and checked before Keras or TensorFlow loads.
from keras_relational import run_settings
from keras_relational.environments import relations_game
from keras_relational.experiments import distribution_flags
from keras_relational.experiments.relations_game_config import INPUT_PIPELINES
from keras_relational.models.choices import CENTRAL_MODULES

FLAGS = flags.FLAGS
flags.DEFINE_string("root_dir", None, "Output directory (re-running resumes).")
flags.DEFINE_enum("central", "predinet", list(CENTRAL_MODULES), "Central module.")
flags.DEFINE_enum("task", "between", list(relations_game.TASKS), "Target task.")
flags.DEFINE_enum("curriculum_task", None, list(relations_game.TASKS),
                  "Pre-training task; set it to run the 4-stage transfer protocol.")
flags.DEFINE_integer("num_batches", 100_000, "Batches per run / per stage (paper: 100,000).")
flags.DEFINE_integer("batch_size", 10, "Batch size (paper: 10).")
flags.DEFINE_enum("optimizer", "sgd", ["sgd", "adam"], "SGD (paper) or Adam (Supplement).")
flags.DEFINE_float("learning_rate", 0.01, "Learning rate (paper: SGD 0.01; Adam 1e-4).")
flags.DEFINE_bool(run_settings.ALLOW_FLAG, False, run_settings.ALLOW_HELP)
flags.DEFINE_integer("num_train_examples", 50_000, "Generated pentomino images per task.")
flags.DEFINE_integer("num_eval_examples", 5_000, "Held-out images per object set.")
flags.DEFINE_integer("eval_interval", 500, "Batches between held-out evaluations.")
flags.DEFINE_float("early_stopping_accuracy", None, "Stop a stage at this held-out accuracy.")
flags.DEFINE_float("pause_above_accuracy", None, "The authors' notebook's rule (it used 0.99; "
                  "SGD only): every --pause_interval batches, the accuracy on a fresh batch of "
                  "250 validation hexominoes; while above this, the next interval applies no "
                  "update.")
flags.DEFINE_integer("pause_interval", 500, "Batches between the checks of "
                     "--pause_above_accuracy (the notebook: 500).")
flags.DEFINE_integer("num_heads", None, "PrediNet/MHA heads (default 32).")
flags.DEFINE_integer("seed", 0, "Seed for data and weights.")
flags.DEFINE_string("data_file", None, "Train on this .npz file in DeepMind's released layout "
                    "(keys images, labels, tasks) instead of generated pentominoes.")
flags.DEFINE_list("eval_file", None, "Evaluate on these .npz files (comma-separated, DeepMind's "
                  "layout) instead of generated hexominoes and stripes.")

flags.DEFINE_enum("xoccurs_negatives", "exclusive",
                  list(relations_game.TASK_OPTIONS["xoccurs_negatives"][1]),
                  "xoccurs negatives: exclusive (none or two copies of the top object) or "
                  "both_readings (none or three), see RelationsGame.")
flags.DEFINE_enum("colour_shape_layout", "random",
                  list(relations_game.TASK_OPTIONS["colour_shape_layout"][1]),
                  "colour_and_or_shape: two random cells (the paper) or column_pair (rows 0 and "
                  "2 of one column, as in DeepMind's released samples).")

flags.DEFINE_enum("occurs_distractors", "variants",
                  list(relations_game.TASK_OPTIONS["occurs_distractors"][1]),
                  "occurs: the other bottom objects are variants of the top one (default) or, "
                  "one_variant, random objects but for one variant in a negative.")

flags.DEFINE_enum("input_pipeline", None, list(INPUT_PIPELINES),
                  "tf.data (needs TensorFlow) or numpy (any Keras backend, no TensorFlow); "
                  "default: tf.data under the TensorFlow backend, numpy under the others.")

flag_checks.define_dtype_policy_flag()
flag_checks.require_ranges({
    "num_batches": (1, None), "batch_size": (1, None), "learning_rate": (0, None),
    "num_train_examples": (1, None), "num_eval_examples": (1, None), "eval_interval": (1, None),
    "early_stopping_accuracy": (0, 1), "pause_above_accuracy": (0, 1),
    "pause_interval": (1, None), "num_heads": (1, None), "seed": (0, 2**32 - 1)},
    exclusive_low=("learning_rate", "pause_above_accuracy"))
distribution_flags.define_distribution_strategy_flag()
flags.mark_flag_as_required("root_dir")


def main(argv):
    del argv
    # Keras and TensorFlow load here, after the flags are parsed and checked.
    from keras_relational.experiments import relations_game_lib

    central_kwargs = {}
    if FLAGS.num_heads is not None:
        central_kwargs["num_heads"] = FLAGS.num_heads
    results = relations_game_lib.train_eval(
        FLAGS.root_dir,
        allow_changed_hyperparameters=FLAGS.allow_changed_hyperparameters,
        central=FLAGS.central,
        task=FLAGS.task,
        curriculum_task=FLAGS.curriculum_task,
        num_batches=FLAGS.num_batches,
        batch_size=FLAGS.batch_size,
        optimizer=FLAGS.optimizer,
        learning_rate=FLAGS.learning_rate,
        num_train_examples=FLAGS.num_train_examples,
        num_eval_examples=FLAGS.num_eval_examples,
        eval_interval=FLAGS.eval_interval,
        early_stopping_accuracy=FLAGS.early_stopping_accuracy,
        pause_above_accuracy=FLAGS.pause_above_accuracy,
        pause_interval=FLAGS.pause_interval,
        central_kwargs=central_kwargs or None,
        seed=FLAGS.seed,
        distribution_strategy=FLAGS.distribution_strategy,
        data_file=FLAGS.data_file,
        eval_files=FLAGS.eval_file,
        xoccurs_negatives=FLAGS.xoccurs_negatives,
        colour_shape_layout=FLAGS.colour_shape_layout,
        occurs_distractors=FLAGS.occurs_distractors,
        dtype_policy=FLAGS.dtype_policy,
        input_pipeline=FLAGS.input_pipeline,
    )
    print(results)


def run():
    """The ``train_relations_game`` console script (the same help and flags as ``python -m``)."""
    console.adopt_main_help(__name__)
    app.run(main)


if __name__ == "__main__":
    run()
