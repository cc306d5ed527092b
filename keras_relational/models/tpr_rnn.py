"""TPR-RNN (Schlag & Schmidhuber 2018): sentence encoder + TPR memory + output projection."""

import keras
from keras import ops

from keras_relational import validation
from keras_relational.layers.tpr_memory import TPRMemory


@keras.saving.register_keras_serializable(package="keras_relational")
class TPRSentenceEncoder(keras.layers.Layer):
    """Position-weighted bag of words (eq. 5): ``s = sum_i Emb[w_i] ⊙ p_i``.

    One learned position vector ``p_i`` per absolute token position, shared by story sentences
    and questions. As in the authors' code the stored position table starts at ones and is
    divided by ``W`` in the forward pass, so ``s`` starts as a scaled mean of word embeddings.

    PAD handling (spec Sec. 2.3 ambiguity): ``mask_pad_words=True`` (default) sums over the real
    words only, which is eq. 5 of the paper; ``False`` lets PAD (id 0) contribute its own learned
    embedding, as the released code does.

    Args:
        vocab_size: ``V``, including PAD (id 0).
        symbol_dim: ``D``; ``None`` (default) uses ``D = V`` as the authors' code.
        mask_pad_words: see above.
        **kwargs: standard ``keras.layers.Layer`` arguments.

    Call arguments:
        inputs: int word ids ``[..., W]`` (e.g. ``[B, S, W]`` stories or ``[B, W]`` questions).

    Returns:
        Sentence vectors ``[..., D]``.

    Example:

    >>> encoder = keras_relational.models.tpr_rnn.TPRSentenceEncoder(vocab_size=20)
    >>> tuple(encoder(np.ones((2, 3, 6), "int32")).shape)
    (2, 3, 20)

    Reference: Schlag & Schmidhuber, "Learning to Reason with Third-Order Tensor Products",
    NeurIPS 2018, eq. (5).
    """

    def __init__(self, vocab_size, symbol_dim=None, mask_pad_words=True, **kwargs):
        super().__init__(**kwargs)
        validation.check_positive_int("TPRSentenceEncoder", "vocab_size", vocab_size)
        validation.check_positive_int("TPRSentenceEncoder", "symbol_dim", symbol_dim,
                                   allow_none=True)
        validation.check_choice("TPRSentenceEncoder", "mask_pad_words", mask_pad_words,
                             (True, False))
        self.vocab_size = vocab_size
        self.symbol_dim = symbol_dim
        self.mask_pad_words = mask_pad_words

    def build(self, input_shape):
        words = validation.check_known_dim(self, "inputs", input_shape, -1, "number of words W")
        dim = self.symbol_dim or self.vocab_size
        self.embeddings = self.add_weight(
            name="embeddings", shape=(self.vocab_size, dim),
            initializer=keras.initializers.RandomUniform(-0.1, 0.1),  # authors' code
        )
        self.positions = self.add_weight(name="positions", shape=(words, dim), initializer="ones")
        super().build(input_shape)

    def call(self, inputs):
        ids = ops.cast(inputs, "int32")
        vectors = ops.take(self.embeddings, ids, axis=0)
        if self.mask_pad_words:
            vectors = vectors * ops.cast(ops.not_equal(ids, 0), vectors.dtype)[..., None]
        words = self.positions.shape[0]
        return ops.sum(vectors * (self.positions / float(words)), axis=-2)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.symbol_dim or self.vocab_size,)

    def get_config(self):
        config = super().get_config()
        config.update({"vocab_size": self.vocab_size, "symbol_dim": self.symbol_dim,
                       "mask_pad_words": self.mask_pad_words})
        return config


def tpr_rnn(
    vocab_size,
    max_sentences,
    max_words,
    symbol_dim=None,  # D = V in the authors' code
    entity_dim=15,  # Schlag & Schmidhuber 2018, Sec. 7 (single-task)
    relation_dim=10,  # spec Sec. 3.1 proposal (appendix unavailable)
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
