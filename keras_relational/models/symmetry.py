"""Mitchell & Bowers' networks: the symbol-convolution classifier, the convolutional stack LSTM and
their baselines (MLP, Elman RNN, standard LSTM), as functional Keras models that output logits.

Rule-learning models take ``[B, V, T]`` symbol grids (see
``keras_relational.environments.rule_learning``); sequence models take ``[B, T]`` token ids (see
``keras_relational.environments.palindromes``) and return ``[B, T, Y]`` next-symbol logits.
Initialisation follows the authors' code (Glorot-uniform weights and biases) where Keras' defaults
differ.
"""

import keras

from keras_relational.layers.conv_stack_memory import ConvStackMemory
from keras_relational.layers.conv_stack_memory_cell import GlorotUniformBias
from keras_relational.layers.shift_entropy_penalty import ShiftEntropyPenalty
from keras_relational.layers.symbol_convolution import SymbolConvolution


def symbol_conv_classifier(num_steps=3, num_classes=2, use_bias=False, pooling="max",
                           num_symbols=None, name="symbol_conv_classifier"):
    """Table I's convolution: ``[B, V, T]`` grid -> width-1 conv over symbols -> max over V.

    6 parameters with the defaults (3 x 2 kernel, no bias, as the authors' code). ``num_symbols``
    may stay None: the model accepts any vocabulary size.
    """
    inputs = keras.Input(shape=(num_symbols, num_steps), name="symbol_grid")
    logits = SymbolConvolution(num_classes, use_bias=use_bias, pooling=pooling,
                               name="symbol_convolution")(inputs)
    return keras.Model(inputs, logits, name=name)


def rule_mlp_classifier(num_symbols=12, num_steps=3, hidden_units=24, num_classes=2,
                        name="rule_mlp_classifier"):
    """Table I's MLP: flatten ``V*T`` -> Dense(24, sigmoid, no bias) -> Dense(K, no bias) (authors'
    code)."""
    inputs = keras.Input(shape=(num_symbols, num_steps), name="symbol_grid")
    x = keras.layers.Flatten()(inputs)
    x = keras.layers.Dense(hidden_units, activation="sigmoid", use_bias=False, name="hidden")(x)
    logits = keras.layers.Dense(num_classes, use_bias=False, name="logits")(x)
    return keras.Model(inputs, logits, name=name)


def rule_rnn_classifier(num_symbols=12, num_steps=3, hidden_units=24, num_classes=2,
                        name="rule_rnn_classifier"):
    """Table I's Elman RNN: the one-hot column ``X[:, :, t]`` is the input at step t; tanh, 24
    units, logits from the last hidden state. Glorot-uniform kernels and biases (authors' code)."""
    inputs = keras.Input(shape=(num_symbols, num_steps), name="symbol_grid")
    x = keras.layers.Permute((2, 1))(inputs)  # [B, T, V]
    h = keras.layers.SimpleRNN(hidden_units, activation="tanh",
                               recurrent_initializer="glorot_uniform",
                               bias_initializer=GlorotUniformBias(), name="elman")(x)
    logits = keras.layers.Dense(num_classes, bias_initializer=GlorotUniformBias(),
                                name="logits")(h)
    return keras.Model(inputs, logits, name=name)


def conv_stack_lstm(vocab_size=7, embedding_size=10, units=10, stack_depth=20,
                    write_mode="gated", shift_entropy_cost=0.0, straight_through=False,
                    name="conv_stack_lstm"):
    """Table II's convolutional LSTM: Embedding(M=10) -> ConvStackMemory(N=10, D=20) -> Dense(Y).

    ``[B, T]`` token ids -> ``[B, T, Y]`` logits. 1,407 parameters with the paper's sizes in
    ``"gated"`` mode; ``"embedding_on_push"`` (authors' code) needs ``embedding_size == units``.
    ``shift_entropy_cost`` > 0 (not the paper's, which is 0) adds that multiple of the mean
    entropy of the stacks' push / stay / pop filters over the non-padding steps to the training
    loss (``keras_relational.ShiftEntropyPenalty``), a push towards discrete stack actions; the
    outputs and the parameters are the same either way. ``straight_through`` (not the paper's)
    makes the stacks take hard push / stay / pop actions in the forward pass
    (``ConvStackMemory``); the penalty then sees the hard filters.
    """
    inputs = keras.Input(shape=(None,), dtype="int32", name="tokens")
    x = keras.layers.Embedding(vocab_size, embedding_size, embeddings_initializer="glorot_uniform",
                               name="embedding")(inputs)
    penalise = bool(shift_entropy_cost)  # a negative or NaN cost reaches the layer's check
    h = ConvStackMemory(units, stack_depth=stack_depth, write_mode=write_mode,
                        return_sequences=True, return_filters=penalise,
                        straight_through=straight_through, name="conv_stack_memory")(x)
    if penalise:
        h = ShiftEntropyPenalty(shift_entropy_cost, name="shift_entropy_penalty")(
            h[..., :units], h[..., units:], inputs)
    logits = keras.layers.Dense(vocab_size, bias_initializer=GlorotUniformBias(),
                                name="logits")(h)
    return keras.Model(inputs, logits, name=name)


def standard_lstm(vocab_size=7, embedding_size=10, units=100, name="standard_lstm"):
    """Table II's baseline: Embedding(10) -> LSTM(100) -> Dense(Y); 45,177 parameters.

    Glorot-uniform kernels, recurrent kernels and biases and no unit forget bias, as the
    authors' code (Keras' defaults would be orthogonal / zeros / forget bias 1).
    """
    inputs = keras.Input(shape=(None,), dtype="int32", name="tokens")
    x = keras.layers.Embedding(vocab_size, embedding_size, embeddings_initializer="glorot_uniform",
                               name="embedding")(inputs)
    h = keras.layers.LSTM(units, return_sequences=True, recurrent_initializer="glorot_uniform",
                          unit_forget_bias=False, bias_initializer=GlorotUniformBias(),
                          name="lstm")(x)
    logits = keras.layers.Dense(vocab_size, bias_initializer=GlorotUniformBias(),
                                name="logits")(h)
    return keras.Model(inputs, logits, name=name)
