"""The sentence encoder of TPR-RNN (Schlag & Schmidhuber 2018, eq. 5)."""

import keras
from keras import ops

from keras_relational import validation


@keras.saving.register_keras_serializable(package="keras_relational")
class TPRSentenceEncoder(keras.layers.Layer):
    """Position-weighted bag of words (eq. 5): ``s = sum_i Emb[w_i] ⊙ p_i``.

    One learned position vector ``p_i`` per absolute token position, shared by story sentences
    and questions. As in the authors' code the stored position table starts at ones and is
    divided by ``W`` in the forward pass, so ``s`` starts as a scaled mean of word embeddings;
    the embeddings start uniform in ``[-0.1, 0.1]`` (authors' code).

    PAD handling: ``mask_pad_words=True`` (default) sums over the real words only, which is
    eq. (5) of the paper; ``False`` lets PAD (id 0) contribute its own learned embedding, as the
    released code does (Sec. 4, "Input Module", sums over the k words of a sentence and says
    nothing of padding).

    Shapes: ``[..., W]`` int ids -> ``[..., D]``; ``W`` must be known when built.

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

    >>> encoder = keras_relational.TPRSentenceEncoder(vocab_size=20)
    >>> tuple(encoder(np.ones((2, 3, 6), "int32")).shape)
    (2, 3, 20)

    Reference: Schlag & Schmidhuber, "Learning to Reason with Third-Order Tensor Products",
    NeurIPS 2018, Sec. 4 (Input Module), eq. (5).
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

    def _check_inputs(self, input_shape):
        if self.built:  # the position weights fix the number of words W
            input_shape = tuple(input_shape)
            validation.check_built_shape(
                self, "inputs", input_shape,
                (None,) * (len(input_shape) - 1) + (int(self.positions.shape[0]),),
                "[..., words W]")

    def call(self, inputs):
        self._check_inputs(inputs.shape)
        ids = ops.cast(inputs, "int32")
        vectors = ops.take(self.embeddings, ids, axis=0)
        if self.mask_pad_words:
            vectors = vectors * ops.cast(ops.not_equal(ids, 0), vectors.dtype)[..., None]
        words = self.positions.shape[0]
        return ops.sum(vectors * (self.positions / float(words)), axis=-2)

    def compute_output_shape(self, input_shape):
        self._check_inputs(input_shape)
        return tuple(input_shape[:-1]) + (self.symbol_dim or self.vocab_size,)

    def get_config(self):
        config = super().get_config()
        config.update({"vocab_size": self.vocab_size, "symbol_dim": self.symbol_dim,
                       "mask_pad_words": self.mask_pad_words})
        return config
