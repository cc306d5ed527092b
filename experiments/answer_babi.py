r"""Answers the questions of a bAbI-format story file with a TPR-RNN exported by ``train_babi``.

    answer_babi --saved_model=/tmp/tpr_babi1/saved_model --stories=my_stories.txt

The story file has the bAbI v1.2 format (``1 Mary moved to the bathroom.``); a question line
may carry its answer (``3 Where is Mary? <TAB>bathroom<TAB>1``), which is then compared with the
prediction, or not (``3 Where is Mary?``). The model and its vocabulary
(``saved_model/vocabulary.json``, written by ``train_babi``) are loaded in this process; no
training code runs. Prints one line per question (number, question, predicted answer, the file's
answer or ``-``) and, when the file has answers, the accuracy.
"""

# First, before TensorFlow loads: hides known-harmless dependency messages when run as a
# binary (not when imported); --verbose_dependencies shows them.
from keras_relational.experiments import console

console.quiet_dependencies(__name__)

from absl import app, flags

from keras_relational.experiments import babi_serving, console

FLAGS = flags.FLAGS
flags.DEFINE_string("saved_model", None, "The SavedModel folder that train_babi exported.")
flags.DEFINE_string("stories", None, "A bAbI-format file with the stories and questions.")
flags.DEFINE_string("vocabulary", None,
                    "The vocabulary JSON; default: vocabulary.json inside --saved_model.")
flags.DEFINE_integer("batch_size", 256, "Questions per model call.", lower_bound=1)
flags.mark_flags_as_required(["saved_model", "stories"])


def main(argv):
    del argv
    answers = babi_serving.answer_questions(FLAGS.saved_model, FLAGS.stories,
                                        vocabulary_file=FLAGS.vocabulary,
                                        batch_size=FLAGS.batch_size)
    for number, (question, predicted, expected) in enumerate(answers, start=1):
        print(f"{number}\t{question}\t{predicted}\t{'-' if expected is None else expected}")
    labelled = [(predicted, expected) for _, predicted, expected in answers
                if expected is not None]
    if labelled:
        correct = sum(predicted == expected for predicted, expected in labelled)
        print(f"accuracy {correct / len(labelled):.4f} ({correct}/{len(labelled)} questions)")


def run():
    """The ``answer_babi`` console script (the same help and flags as ``python -m``)."""
    console.adopt_main_help(__name__)
    app.run(main)


if __name__ == "__main__":
    run()
