r"""Trains a TPR-RNN (Schlag & Schmidhuber 2018) on bAbI and prints the per-task error table.

Generated single task (CPU scale):

    python -m keras_relational.experiments.train_babi --root_dir=/tmp/tpr_babi1 --tasks=1 \
        --max_minutes=20

Real bAbI v1.2 files downloaded by you (e.g. tasks_1-20_v1-2/en-valid-10k):

    python -m keras_relational.experiments.train_babi --root_dir=/tmp/tpr_real --tasks=1,2,3 \
        --data_dir=/path/to/en-valid-10k

Table 3 ablation (write and backlink only) and the systematic-generalisation split (Fig. 5):

    python -m keras_relational.experiments.train_babi --root_dir=/tmp/tpr_wb --tasks=3 \
        --operations=W+B
    python -m keras_relational.experiments.train_babi --root_dir=/tmp/tpr_sys --systematic \
        --entity_dim=90 --relation_dim=20

Outputs under ``root_dir``: TensorBoard logs (``train/``), the best checkpoint
(``checkpoints/``), the SavedModel (``saved_model/``), ``results.md`` and ``results.json``.
"""

# First, before TensorFlow loads: hides known-harmless dependency messages when run as a
# binary (not when imported); --verbose_dependencies shows them.
from keras_relational.experiments import console, flag_checks

console.quiet_dependencies(__name__)

from absl import app, flags

# Pure modules only: the flags are defined and checked before Keras or TensorFlow loads.
from keras_relational import run_settings
from keras_relational.environments import babi
from keras_relational.experiments import distribution_flags
from keras_relational.models.choices import OPERATIONS

FLAGS = flags.FLAGS
flags.DEFINE_string("root_dir", None, "Output directory (re-running resumes).")
flag_checks.define_int_list("tasks", [1], "bAbI tasks (1-20); several are trained jointly.",
                        minimum=1, maximum=20)
flags.DEFINE_string("data_dir", None, "Folder with real bAbI files; default: generate data.")
flags.DEFINE_integer("num_train", 9000, "Generated training questions per task.", lower_bound=1)
flags.DEFINE_integer("num_valid", 1000, "Generated validation questions per task.", lower_bound=1)
flags.DEFINE_integer("num_test", 1000, "Generated test questions per task.", lower_bound=1)
flags.DEFINE_integer("entity_dim", 15, "E (single-task size, paper Sec. 7).")
flags.DEFINE_integer("relation_dim", 10, "R (not stated for single tasks in the paper).")
flags.DEFINE_integer("hidden_dim", 40, "MLP hidden width H (authors' code).")
flags.DEFINE_bool("use_move", True, "Use the move operation.")
flags.DEFINE_bool("use_backlink", True, "Use the backlink operation.")
flags.DEFINE_enum("operations", None, list(OPERATIONS),
                  "Table 3 ablation: the memory operations (W write, M move, B backlink); sets "
                  "--use_move and --use_backlink, which must then be left out.")
flags.DEFINE_bool("systematic", False,
                  "Systematic generalisation (Sec. 7, Fig. 5): train tasks 1, 6, 7, 8, 9, 11, "
                  "12, 13 with new names seen only in some tasks; report accuracy per name.")
flags.DEFINE_integer("systematic_examples_per_pair", 500,
                     "Generated examples per (new name, task) pair (Sec. 7).", lower_bound=1)
flags.DEFINE_bool("mask_pad_words", True, "Eq. 5 over real words only (False = released code).")
flags.DEFINE_enum("implementation", "factored", ["factored", "dense"], "TPR memory form.")
flags.DEFINE_integer("batch_size", 128, "Batch size.")
flags.DEFINE_integer("epochs", 200, "Maximum number of epochs.")
flags.DEFINE_float("learning_rate", 1e-3, "Nadam learning rate.")
flags.DEFINE_integer("warmup_steps", 50, "Steps at 0.1 x learning rate.")
flags.DEFINE_float("global_clipnorm", 5.0, "Gradient clipping by global norm.")
flags.DEFINE_enum("lr_decay", "once", ["once", "none"], "One-time lr halving at val_loss < 0.1.")
flags.DEFINE_integer("patience", 30, "Early stopping patience in epochs (validation accuracy).")
flags.DEFINE_float("target_val_accuracy", None, "Stop once validation accuracy reaches this.")
flags.DEFINE_float("max_minutes", None, "Wall-clock training budget in minutes.")
flags.DEFINE_integer("seed", 0, "Seed for data generation and weights.")
flags.DEFINE_bool(run_settings.ALLOW_FLAG, False, run_settings.ALLOW_HELP)
flag_checks.define_dtype_policy_flag()
flag_checks.require_ranges({
    "num_train": (1, None), "num_valid": (1, None), "num_test": (1, None),
    "entity_dim": (1, None), "relation_dim": (1, None), "hidden_dim": (1, None),
    "batch_size": (1, None), "epochs": (1, None), "learning_rate": (0, None),
    "warmup_steps": (0, None), "global_clipnorm": (0, None), "patience": (0, None),
    "target_val_accuracy": (0, 1), "max_minutes": (0, None), "seed": (0, 2**32 - 1)},
    exclusive_low=("learning_rate", "global_clipnorm", "max_minutes"))
distribution_flags.define_distribution_strategy_flag()
flags.mark_flag_as_required("root_dir")


def main(argv):
    del argv
    if FLAGS.operations is not None and (FLAGS["use_move"].present
                                         or FLAGS["use_backlink"].present):
        raise app.UsageError(f"--operations={FLAGS.operations} sets the memory operations; "
                             f"leave out --use_move and --use_backlink.")
    tasks = [int(t) for t in FLAGS.tasks]
    if FLAGS.systematic and not FLAGS["tasks"].present:
        tasks = list(babi.SYSTEMATIC_TASKS)
    # Keras and TensorFlow load here, after the flags are parsed and checked.
    from keras_relational.experiments import babi_lib

    babi_lib.train_eval(
        FLAGS.root_dir,
        tasks=tasks,
        data_dir=FLAGS.data_dir,
        num_train=FLAGS.num_train,
        num_valid=FLAGS.num_valid,
        num_test=FLAGS.num_test,
        entity_dim=FLAGS.entity_dim,
        relation_dim=FLAGS.relation_dim,
        hidden_dim=FLAGS.hidden_dim,
        use_move=FLAGS.use_move,
        use_backlink=FLAGS.use_backlink,
        operations=FLAGS.operations,
        systematic=FLAGS.systematic,
        systematic_examples_per_pair=FLAGS.systematic_examples_per_pair,
        mask_pad_words=FLAGS.mask_pad_words,
        implementation=FLAGS.implementation,
        batch_size=FLAGS.batch_size,
        epochs=FLAGS.epochs,
        learning_rate=FLAGS.learning_rate,
        warmup_steps=FLAGS.warmup_steps,
        global_clipnorm=FLAGS.global_clipnorm,
        lr_decay=FLAGS.lr_decay,
        patience=FLAGS.patience,
        target_val_accuracy=FLAGS.target_val_accuracy,
        max_minutes=FLAGS.max_minutes,
        seed=FLAGS.seed,
        distribution_strategy=FLAGS.distribution_strategy,
        dtype_policy=FLAGS.dtype_policy,
        allow_changed_hyperparameters=FLAGS.allow_changed_hyperparameters,
    )


def run():
    """The ``train_babi`` console script (the same help and flags as ``python -m``)."""
    console.adopt_main_help(__name__)
    app.run(main)


if __name__ == "__main__":
    run()
