"""Marcus et al. (1999) rule-learning stimuli as symbol grids (Mitchell & Bowers, Sec. 3.1).

NumPy only. The 36 items are constants: 32 training triples built from the syllables
``A in {ga, li, ni, ta}`` and ``B in {ti, na, gi, la}`` and 4 test triples that use only the unseen
syllables ``wo, fe, ko, de``. Items are encoded as ``[V, T]`` grids with ``X[v, t] = 1`` iff
syllable ``v`` is at position ``t`` (``V = 12`` symbols, ``T = 3`` steps), the layout of
``keras_relational.SymbolConvolution``.
"""

import numpy as np

# Vocabulary in the authors' index order (their released code); it includes the test syllables, so
# test items can be encoded and their rows are all-zero in every training item.
SYLLABLES = ("ga", "ti", "na", "gi", "la", "li", "ni", "ta", "wo", "fe", "ko", "de")
TRAIN_A = ("ga", "li", "ni", "ta")
TRAIN_B = ("ti", "na", "gi", "la")
TEST_PAIRS = (("wo", "fe"), ("de", "ko"))
UNSEEN_SYLLABLES = ("wo", "fe", "ko", "de")
PATTERNS = {"ABA": (0, 1, 0), "ABB": (0, 1, 1), "AAB": (0, 0, 1)}
LABELS = {"ABA": 0, "ABB": 1}  # authors' code: ABA -> 0, ABB -> 1


def realise(pattern, a, b):
    """The syllable triple of ``pattern`` (e.g. ``"ABA"``) with A = ``a`` and B = ``b``."""
    if pattern not in PATTERNS:
        raise ValueError(f"pattern must be one of {tuple(PATTERNS)}, received pattern={pattern!r}.")
    return tuple((a, b)[i] for i in PATTERNS[pattern])


def encode_symbol_grid(sequences, vocab=SYLLABLES, num_steps=None):
    """Encodes symbol sequences as ``[B, V, T]`` float32 grids (``X[b, v, t] = 1`` iff ``s_t = v``).

    Args:
        sequences: iterable of sequences of symbols from ``vocab``.
        vocab: the ordered vocabulary (V symbols).
        num_steps: T; defaults to the longest sequence (shorter ones leave zero columns).
    """
    sequences = [tuple(s) for s in sequences]
    index = {s: i for i, s in enumerate(vocab)}
    num_steps = num_steps or max(len(s) for s in sequences)
    grid = np.zeros((len(sequences), len(vocab), num_steps), np.float32)
    for b, sequence in enumerate(sequences):
        if len(sequence) > num_steps:
            raise ValueError(f"sequence {sequence} is longer than num_steps={num_steps}.")
        for t, symbol in enumerate(sequence):
            if symbol not in index:
                raise ValueError(f"symbol {symbol!r} of {sequence} is not in vocab {vocab}.")
            grid[b, index[symbol], t] = 1.0
    return grid


def marcus_rule_learning(train_a=TRAIN_A, train_b=TRAIN_B, test_pairs=TEST_PAIRS,
                         patterns=("ABA", "ABB"), vocab=SYLLABLES):
    """The Marcus et al. classification task: ``(x_train, y_train, x_test, y_test, items)``.

    Every (A, B) pair of ``train_a x train_b`` is realised once per pattern (32 training items by
    default, ABA first), every test pair once per pattern (4 items). Labels are the index of the
    pattern in ``patterns`` (ABA -> 0, ABB -> 1 by default, as in the authors' code). ``items`` is a
    dict with the syllable triples of ``"train"`` and ``"test"``, in the same order as the arrays.
    """
    train_items, train_labels, test_items, test_labels = [], [], [], []
    for label, pattern in enumerate(patterns):
        for a in train_a:
            for b in train_b:
                train_items.append(realise(pattern, a, b))
                train_labels.append(label)
        for a, b in test_pairs:
            test_items.append(realise(pattern, a, b))
            test_labels.append(label)
    x_train = encode_symbol_grid(train_items, vocab, 3)
    x_test = encode_symbol_grid(test_items, vocab, 3)
    return (x_train, np.asarray(train_labels, np.int32), x_test,
            np.asarray(test_labels, np.int32), {"train": train_items, "test": test_items})
