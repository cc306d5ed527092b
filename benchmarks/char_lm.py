"""Bits per character of a small causal character-level LM: 2-simplicial vs dot-product attention.

Trains ``keras_relational.models.char_lm.char_lm`` with ``SequenceSimplicialAttention`` (causal
windows, trilinear logits, Roy et al. 2025) and with ``keras.layers.MultiHeadAttention`` at the
same parameter count on generated bAbI stories (``experiments/char_lm_lib.py``), under JAX on
the CPU, and writes the validation bits per character. A short run (a few minutes on 2 cores),
not a converged comparison.

Usage::

    python benchmarks/char_lm.py --output=benchmarks/results/char_lm
"""

import argparse
import os
import sys
import tempfile


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--train_questions", type=int, default=300)
    parser.add_argument("--valid_questions", type=int, default=50)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--sequence_length", type=int, default=128)
    parser.add_argument("--window", default="32,8", help="w1,w2 of the 2-simplicial attention")
    parser.add_argument("--output", default=None,
                        help="writes OUTPUT.md and OUTPUT.json (a path without extension)")
    return parser.parse_args(argv)


ARGS = parse_args(sys.argv[1:])
os.environ.setdefault("KERAS_BACKEND", "jax")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import results_io  # noqa: E402  (benchmarks/results_io.py, beside this script)

from keras_relational.experiments import char_lm_lib  # noqa: E402


def main():
    window = tuple(int(w) for w in ARGS.window.split(","))
    settings = dict(train_questions=ARGS.train_questions, valid_questions=ARGS.valid_questions,
                    epochs=ARGS.epochs, sequence_length=ARGS.sequence_length, window=window)
    captured = results_io.StdoutCapture()
    with tempfile.TemporaryDirectory() as root:
        results = char_lm_lib.train_eval(root, **settings)
    data = results["data"]
    print(f"Keras {keras.__version__} on {keras.backend.backend()} (CPU). Generated bAbI "
          f"stories of tasks {data['tasks']}: {data['train_characters']:,} training and "
          f"{data['valid_characters']:,} validation characters, vocabulary "
          f"{data['vocabulary_size']}; sequences of {ARGS.sequence_length} characters, "
          f"{ARGS.epochs} epochs of Adam (3e-3, batch 32). Width 64, 2 blocks, 4 heads of "
          f"width 16; the 2-simplicial attention has 2 key/value heads and causal windows "
          f"{window}.\n")
    print(char_lm_lib.results_table(results))
    if ARGS.output:
        captured.write_markdown(ARGS.output + ".md")
        results_io.write_json(ARGS.output + ".json", {"settings": settings, "results": results,
                                                      "load_average": os.getloadavg()})
    else:
        captured.stop()


if __name__ == "__main__":
    main()
