"""Serving a TPR-RNN trained by ``train_babi``: the export with its vocabulary, and answering.

``export_saved_model`` writes ``model.export`` together with ``vocabulary.json`` (atomically);
``answer_questions`` loads both in any process, without the training code, and answers the
questions of a bAbI-format story file (the ``answer_babi`` binary).
"""

import dataclasses
import json
import os

import numpy as np

from keras_relational import validation, whole_files
from keras_relational.environments import babi

VOCABULARY_FILE = "vocabulary.json"


def export_saved_model(model, vocabulary_info, export_dir):
    """Writes ``model.export`` and its vocabulary (``export_dir/vocabulary.json``) atomically.

    Both are written next to ``export_dir`` first, which they then replace whole
    (:func:`keras_relational.whole_files.write_whole`), so a run killed while exporting leaves
    the previous export (or none), never a model without its vocabulary. ``vocabulary_info``
    holds ``words`` (by id), ``max_sentences`` (S) and ``max_words`` (W), which
    :func:`answer_questions` needs to read new stories.
    """
    def write(partial):
        model.export(partial, verbose=False)
        babi.write_text_atomically(os.path.join(partial, VOCABULARY_FILE),
                                   json.dumps(vocabulary_info))

    whole_files.write_whole(export_dir.rstrip(os.sep), write)


def answer_questions(export_dir, story_file, vocabulary_file=None, batch_size=256):
    """Answers every question of a bAbI-format file with a model that ``train_babi`` exported.

    Loads the SavedModel with ``tf.saved_model.load`` (no Keras model code is needed) and its
    vocabulary, reads ``story_file`` (questions may lack an answer: ``3 Where is Mary?``), keeps
    the last ``max_sentences`` statements of each story, as in training, and returns
    ``[(question, predicted answer, answer in the file or None)]`` in file order.

    Raises:
        ValueError: if the vocabulary file is missing or malformed, the story file is malformed
            (naming the file and line), or uses a word the model does not know or a sentence
            longer than the model's ``max_words``.
    """
    import tensorflow as tf  # the export is a TensorFlow SavedModel

    validation.check_positive_int("answer_questions", "batch_size", batch_size)
    vocabulary_file = vocabulary_file or os.path.join(export_dir, VOCABULARY_FILE)
    if not os.path.isfile(vocabulary_file):
        raise ValueError(f"answer_questions found no vocabulary file at {vocabulary_file!r} (a "
                         f"train_babi export holds one; pass vocabulary_file otherwise).")
    with open(vocabulary_file, encoding="utf-8") as f:
        info = json.load(f)
    vocabulary = babi.Vocabulary(info.get("words", []))
    if list(vocabulary.words) != info.get("words") or "max_sentences" not in info:
        raise ValueError(f"{vocabulary_file}: expected the JSON that train_babi writes "
                         f"('words': '<pad>' then sorted unique words, 'max_sentences', "
                         f"'max_words'), received keys {sorted(info)}.")
    max_sentences, max_words = info["max_sentences"], info["max_words"]
    examples = babi.read_file(story_file, max_sentences=max_sentences, allow_unanswered=True)
    sentences = [s for ex in examples for s in ex.story + (ex.query,)]
    unknown = sorted({t for s in sentences for t in s} - set(vocabulary.ids))
    if unknown:
        raise ValueError(f"{story_file} uses words that the model's vocabulary "
                         f"({vocabulary_file}) lacks: {unknown[:20]}.")
    longest = max(sentences, key=len)
    if len(longest) > max_words:
        raise ValueError(f"{story_file}: the sentence {' '.join(longest)!r} has {len(longest)} "
                         f"tokens, more than the model's max_words={max_words}.")
    unlabelled = [dataclasses.replace(ex, answer=None) for ex in examples]
    arrays = babi.vectorize(unlabelled, vocabulary, max_sentences, max_words)
    model = tf.saved_model.load(export_dir)
    predicted = []
    for start in range(0, len(examples), batch_size):
        logits = model.serve({"story": arrays["story"][start:start + batch_size],
                              "query": arrays["query"][start:start + batch_size]})
        predicted += [vocabulary.words[i] for i in np.argmax(np.asarray(logits), axis=-1)]
    return [(" ".join(ex.query), answer, ex.answer)
            for ex, answer in zip(examples, predicted, strict=True)]
