"""TPR-RNN (Schlag & Schmidhuber 2018): sentence encoder + TPR memory + output projection."""

import keras
from keras import ops

from keras_relational import validation
from keras_relational.layers.tpr_memory import TPRMemory
from keras_relational.layers.tpr_sentence_encoder import TPRSentenceEncoder


def tpr_rnn(
    vocab_size,
    max_sentences,
    max_words,
    symbol_dim=None,  # D = V in the authors' code
    entity_dim=15,  # Schlag & Schmidhuber 2018, Sec. 7 (single-task)
    relation_dim=10,  # not in the paper's main text; our choice
    hidden_dim=40,  # authors' code release
    use_move=True,
    use_backlink=True,
    mask_pad_words=True,
    implementation="factored",
    name="tpr_rnn",
):
    """Builds the whole TPR-RNN as a functional ``keras.Model``.

    Inputs are a dict ``{"story": int [B, S, W], "query": int [B, W]}`` (word ids, 0 = PAD,
    sentences left-aligned); a sentence row that is all PAD is masked out of the memory update.
    The output is the answer logits ``[B, V]`` over the whole vocabulary:
    ``logits = (i1 + i2 + i3) Z`` with ``Z: [E, V]`` and no bias (eq. 20).

    Args:
        vocab_size: ``V`` (PAD included).
        max_sentences: ``S``, story sentences after truncation/padding.
        max_words: ``W``, tokens per sentence/question.
        symbol_dim, entity_dim, relation_dim, hidden_dim: ``D`` (None = V), ``E``, ``R``, ``H``.
        use_move, use_backlink: memory operations (Table 3 ablations).
        mask_pad_words: eq. 5 over real words only (True) or the code's unmasked PAD (False).
        implementation: ``"factored"`` or ``"dense"`` memory, see ``keras_relational.TPRMemory``.
        name: model name.

    Returns:
        An uncompiled ``keras.Model``.
    """
    validation.check_positive_int("tpr_rnn", "max_sentences", max_sentences)
    validation.check_positive_int("tpr_rnn", "max_words", max_words)
    story = keras.Input((max_sentences, max_words), dtype="int32", name="story")
    query = keras.Input((max_words,), dtype="int32", name="query")
    encoder = TPRSentenceEncoder(vocab_size, symbol_dim, mask_pad_words, name="sentence_encoder")
    sentences = encoder(story)
    question = encoder(query)
    sentence_mask = ops.any(ops.not_equal(story, 0), axis=-1)
    memory = TPRMemory(
        entity_dim, relation_dim, hidden_dim, use_move=use_move, use_backlink=use_backlink,
        implementation=implementation, name="tpr_memory",
    )
    reads = memory([sentences, question], mask=sentence_mask)
    logits = keras.layers.Dense(
        vocab_size, use_bias=False, kernel_initializer="glorot_uniform", name="output_projection"
    )(reads)
    return keras.Model({"story": story, "query": query}, logits, name=name)
