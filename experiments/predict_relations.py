r"""Serves a trained Relations Game model: predictions for the images of an ``.npz`` file.

Loads the SavedModel that ``train_relations_game`` exports (``<root_dir>/saved_model``, or
``<root_dir>/<stage>/saved_model`` for the transfer protocol) with ``tf.saved_model.load``
alone (no Keras or training code), reads a file in DeepMind's released layout (keys ``images``
int64 ``[N, 36, 36, 3]``, ``labels`` ``[N, 1]``, ``tasks`` ``[N, 1]``; see
``keras_relational.environments.relations_game.load_npz``) and prints one line per image: its
index, task id, predicted label, the probability of that label and the stored label; then the
accuracy against the stored labels.

    python -m keras_relational.experiments.predict_relations \
        --saved_model=/tmp/rg_between/saved_model --data_file=between_hexos.npz

``--output=predictions.npz`` also writes the predicted labels and class probabilities.
"""

# First, before TensorFlow loads: hides known-harmless dependency messages when run as a
# binary (not when imported); --verbose_dependencies shows them.
from keras_relational.experiments import console

console.quiet_dependencies(__name__)

import os

import numpy as np
from absl import app, flags

from keras_relational.environments import relations_game
from keras_relational.experiments import console

FLAGS = flags.FLAGS
flags.DEFINE_string("saved_model", None, "SavedModel directory written by train_relations_game.")
flags.DEFINE_string("data_file", None, "Images to classify: an .npz file in DeepMind's layout.")
flags.DEFINE_integer("batch_size", 250, "Images per call of the served model.")
flags.DEFINE_integer("limit", None, "Print at most this many per-image lines (all by default).")
flags.DEFINE_string("output", None, "Optional .npz file for the predictions and probabilities.")
flags.mark_flags_as_required(["saved_model", "data_file"])

NUM_TASK_SLOTS = relations_game.npz.NUM_TASK_SLOTS


def load_served_model(saved_model_dir):
    """The ``serve`` endpoint of a ``model.export`` SavedModel (keep the returned object alive)."""
    import tensorflow as tf

    if not os.path.isfile(os.path.join(saved_model_dir, "saved_model.pb")):
        raise ValueError(f"`saved_model`: expected a SavedModel directory (with saved_model.pb) "
                         f"as written by train_relations_game, received {saved_model_dir!r}.")
    return tf.saved_model.load(saved_model_dir)


def predict(served, data, batch_size=250):
    """Class probabilities ``[N, num_classes]`` of the served model for ``data``
    (``{"images", "tasks", ...}`` as from ``relations_game.load_npz``)."""
    import tensorflow as tf

    probabilities = []
    for start in range(0, len(data["images"]), batch_size):
        images = tf.constant(data["images"][start:start + batch_size], tf.float32)  # raw 0..255
        tasks = tf.one_hot(data["tasks"][start:start + batch_size], NUM_TASK_SLOTS)
        logits = served.serve({"image": images, "task": tasks})
        probabilities.append(tf.nn.softmax(logits, axis=-1).numpy())
    return np.concatenate(probabilities)


def main(argv):
    del argv
    served = load_served_model(FLAGS.saved_model)
    data = relations_game.load_npz(FLAGS.data_file)
    probabilities = predict(served, data, FLAGS.batch_size)
    predicted = probabilities.argmax(-1)
    count = len(predicted) if FLAGS.limit is None else min(FLAGS.limit, len(predicted))
    print("index task predicted probability label")
    for i in range(count):
        print(f"{i} {data['tasks'][i]} {predicted[i]} {probabilities[i, predicted[i]]:.4f} "
              f"{data['labels'][i]}")
    accuracy = float(np.mean(predicted == data["labels"]))
    print(f"accuracy {accuracy:.4f} on {len(predicted)} images of {FLAGS.data_file}")
    if FLAGS.output:
        np.savez(FLAGS.output, predictions=predicted, probabilities=probabilities)


def run():
    """The ``predict_relations`` console script (the same help and flags as ``python -m``)."""
    console.adopt_main_help(__name__)
    app.run(main)


if __name__ == "__main__":
    run()
