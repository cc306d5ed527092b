"""A small causal character-level language model whose attention is 2-simplicial or dot-product.

``char_lm`` builds a pre-layer-norm Transformer decoder: token and learned position embeddings,
``num_layers`` blocks of ``x + attention(LN(x))`` then ``x + MLP(LN(x))``, a final layer norm
and next-character logits. The attention of every block is either
:class:`~keras_relational.layers.sequence_simplicial_attention.SequenceSimplicialAttention`
(``"simplicial"``: causal sliding windows, trilinear logits, Roy et al. 2025) or
``keras.layers.MultiHeadAttention`` with a causal mask (``"dot_product"``), so the two can be
compared at (close to) equal parameter counts: with ``num_key_value_heads = num_heads / 2`` and
no biases, the two attention layers have exactly the same number of weights
(``F (H dk + 2 Hkv dk + 2 Hkv dv) + H dv F`` vs ``4 F H dk``).
"""

import keras
from keras import ops

from keras_relational import validation
from keras_relational.layers.sequence_simplicial_attention import SequenceSimplicialAttention

ATTENTIONS = ("simplicial", "dot_product")


def char_lm(vocabulary_size, sequence_length, attention="simplicial", width=64, num_layers=2,
            num_heads=4, key_dim=16, num_key_value_heads=2, window=(32, 16), mlp_ratio=4,
            query_chunk_size=None, name=None):
    """A causal character-level language model: ``[B, L]`` ids -> ``[B, L, V]`` logits.

    Args:
        vocabulary_size: V, the number of characters.
        sequence_length: L, the (fixed) length of the input sequences.
        attention: ``"simplicial"`` or ``"dot_product"`` (see the module docstring).
        width: the model width F.
        num_layers: the number of blocks.
        num_heads, key_dim: heads and head width of either attention.
        num_key_value_heads, window, query_chunk_size: the 2-simplicial attention's (unused by
            ``"dot_product"``); ``num_key_value_heads = num_heads / 2`` gives both attentions
            the same parameter count.
        mlp_ratio: the MLP's hidden width is ``mlp_ratio * width``.
        name: the model's name; defaults to ``"{attention}_char_lm"``.
    """
    owner = "char_lm"
    validation.check_choice(owner, "attention", attention, ATTENTIONS)
    for argument, value in (("vocabulary_size", vocabulary_size),
                            ("sequence_length", sequence_length), ("width", width),
                            ("num_layers", num_layers), ("mlp_ratio", mlp_ratio)):
        validation.check_positive_int(owner, argument, value)
    tokens = keras.Input((sequence_length,), dtype="int32", name="characters")
    positions = ops.cumsum(ops.ones_like(tokens), axis=1) - 1
    x = (keras.layers.Embedding(vocabulary_size, width, name="character_embedding")(tokens)
         + keras.layers.Embedding(sequence_length, width, name="position_embedding")(positions))
    for i in range(num_layers):
        h = keras.layers.LayerNormalization(name=f"block_{i}_attention_norm")(x)
        if attention == "simplicial":
            h = SequenceSimplicialAttention(
                num_heads=num_heads, key_dim=key_dim, num_key_value_heads=num_key_value_heads,
                window=window, causal=True, query_chunk_size=query_chunk_size,
                name=f"block_{i}_attention")(h)
        else:
            h = keras.layers.MultiHeadAttention(num_heads=num_heads, key_dim=key_dim,
                                                use_bias=False, name=f"block_{i}_attention")(
                h, h, use_causal_mask=True)
        x = x + h
        h = keras.layers.LayerNormalization(name=f"block_{i}_mlp_norm")(x)
        h = keras.layers.Dense(mlp_ratio * width, activation="gelu", name=f"block_{i}_mlp_in")(h)
        x = x + keras.layers.Dense(width, name=f"block_{i}_mlp_out")(h)
    x = keras.layers.LayerNormalization(name="final_norm")(x)
    logits = keras.layers.Dense(vocabulary_size, name="logits")(x)
    return keras.Model(tokens, logits, name=name or f"{attention}_char_lm")
