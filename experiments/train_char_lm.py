r"""Trains a causal character-level LM with 2-simplicial and with dot-product attention.

    python -m keras_relational.experiments.train_char_lm --root_dir=/tmp/char_lm \
        --attentions=simplicial,dot_product --epochs=2

Both models (``keras_relational.models.char_lm.char_lm``) have the same parameter count, which
is printed; they train with ``model.fit`` on generated bAbI stories and report validation bits
per character (``ROOT/results.md``, ``ROOT/results.json``).
"""

# First, before TensorFlow loads: hides known-harmless dependency messages when run as a
# binary (not when imported); --verbose_dependencies shows them.
from keras_relational.experiments import console, flag_checks

console.quiet_dependencies(__name__)

from absl import app, flags

# Pure modules only: the flags are defined and checked before Keras or TensorFlow loads.
from keras_relational import run_settings

FLAGS = flags.FLAGS
flags.DEFINE_string("root_dir", None, "Output directory.", required=True)
flags.DEFINE_list("attentions", ["simplicial", "dot_product"],
                  "Attentions among simplicial, dot_product.")
flag_checks.define_int_list("tasks", (1, 2), "bAbI tasks whose generated stories form the corpus.",
                        minimum=1, maximum=20)
flags.DEFINE_integer("train_questions", 1000, "Questions per task in the training text.")
flags.DEFINE_integer("valid_questions", 200, "Questions per task in the validation text.")
flags.DEFINE_integer("sequence_length", 128, "Characters per sequence.")
flags.DEFINE_integer("width", 64, "Model width.")
flags.DEFINE_integer("num_layers", 2, "Blocks.")
flags.DEFINE_integer("num_heads", 4, "Attention heads.")
flags.DEFINE_integer("key_dim", 16, "Head width.")
flags.DEFINE_integer("num_key_value_heads", 2, "Key/value heads of the 2-simplicial attention "
                     "(num_heads / 2 gives both attentions the same parameter count).")
flag_checks.define_int_list("window", (32, 8),
                            "w1,w2: the 2-simplicial attention's causal windows.", minimum=1)
flags.DEFINE_integer("epochs", 3, "Epochs.")
flags.DEFINE_integer("batch_size", 32, "Batch size.")
flags.DEFINE_float("learning_rate", 3e-3, "Adam learning rate.")
flags.DEFINE_bool(run_settings.ALLOW_FLAG, False, run_settings.ALLOW_HELP)
flags.DEFINE_integer("seed", 0, "Seed of the corpus and the weights.")
flag_checks.define_dtype_policy_flag()
flag_checks.require_subset("attentions", ("simplicial", "dot_product"))
flag_checks.require_ranges({
    "train_questions": (1, None), "valid_questions": (1, None), "sequence_length": (2, None),
    "width": (1, None), "num_layers": (1, None), "num_heads": (1, None), "key_dim": (1, None),
    "num_key_value_heads": (1, None), "epochs": (1, None), "batch_size": (1, None),
    "learning_rate": (0, None), "seed": (0, 2**32 - 1)}, exclusive_low=("learning_rate",))


def main(argv):
    del argv
    # Keras and TensorFlow load here, after the flags are parsed and checked.
    from keras_relational.experiments import char_lm_lib

    results = char_lm_lib.train_eval(
        FLAGS.root_dir, allow_changed_hyperparameters=FLAGS.allow_changed_hyperparameters,
        attentions=FLAGS.attentions, tasks=tuple(FLAGS.tasks),
        train_questions=FLAGS.train_questions, valid_questions=FLAGS.valid_questions,
        sequence_length=FLAGS.sequence_length, width=FLAGS.width, num_layers=FLAGS.num_layers,
        num_heads=FLAGS.num_heads, key_dim=FLAGS.key_dim,
        num_key_value_heads=FLAGS.num_key_value_heads,
        window=tuple(FLAGS.window), epochs=FLAGS.epochs,
        batch_size=FLAGS.batch_size, learning_rate=FLAGS.learning_rate, seed=FLAGS.seed,
        dtype_policy=FLAGS.dtype_policy)
    for attention in FLAGS.attentions:
        r = results[attention]
        print(f"{attention}: {r['parameters']:,} parameters, validation "
              f"{r['valid_bpc']:.3f} bits/char")


def run():
    """The ``train_char_lm`` console script (the same help and flags as ``python -m``)."""
    console.adopt_main_help(__name__)
    app.run(main)


if __name__ == "__main__":
    run()
