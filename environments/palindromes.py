"""The centre-marked palindrome language of Mitchell & Bowers (Fig. 2, Table II). NumPy only.

Grammar: ``S -> A | B | C | D | o``, ``A -> a S a`` (likewise b, c, d), so every string is
``w o reverse(w)`` with ``w in {a, b, c, d}^k`` and length ``L = 2k + 1``. Token ids follow the
authors' code: ``pad 0, a 1, b 2, c 3, d 4, e 5 (end of string), o 6``.

Every example is encoded for next-symbol prediction, right-padded with 0 to ``max_len``::

    inputs[t]  = s_t for t < L
    targets[t] = s_{t+1} for t < L - 1, targets[L - 1] = e
    mask[t]    = 1 for k <= t <= L - 1   (from the centre `o` to the last symbol: k + 1 positions)

Splits (Mitchell & Bowers, Sec. III, Table II): in-domain ``k = 7..12`` (train / dev / test),
long ``k = 14, 16, 18`` (dev / test), and the "N_A > 2" condition, which keeps only the strings
with at most 4 ``a`` in training (and dev) and tests on the in-domain test strings with more than
4 ``a``.
"""

import numpy as np

from keras_relational.validation import check_int_at_least, check_int_tuple, check_seed

PAD, A, B, C, D, END, CENTRE = 0, 1, 2, 3, 4, 5, 6
VOCAB = ("<pad>", "a", "b", "c", "d", "e", "o")
VOCAB_SIZE = len(VOCAB)
MAX_LEN = 40
IN_DOMAIN_HALF_LENGTHS = (7, 8, 9, 10, 11, 12)  # L = 15 ... 25
LONG_HALF_LENGTHS = (14, 16, 18)  # L = 29, 33, 37
MAX_A_FOR_NESTING_SPLIT = 4  # "N_A > 2": more than 4 `a` tokens in the string


def decode(tokens):
    """Token ids (padding dropped) -> string, e.g. ``[1, 4, 6, 4, 1] -> 'adoda'``."""
    return "".join(VOCAB[t] for t in np.asarray(tokens) if t != PAD)


def first_halves(k, count, rng):
    """``count`` distinct first halves ``w`` of length ``k`` drawn uniformly, ``[count, k]``."""
    total = 4 ** k
    if count > total:
        raise ValueError(f"cannot draw {count} distinct first halves of length {k} (only {total}).")
    codes = rng.choice(total, size=count, replace=False)
    digits = (codes[:, None] // (4 ** np.arange(k - 1, -1, -1))[None, :]) % 4
    return (digits + A).astype(np.int32)


def encode(halves, max_len=MAX_LEN):
    """First halves ``[n, k]`` -> dict of ``inputs``, ``targets`` (int32) and ``mask`` (float32)."""
    halves = np.asarray(halves, np.int32)
    n, k = halves.shape
    length = 2 * k + 1
    if length > max_len:
        raise ValueError(f"strings of length {length} do not fit max_len={max_len}.")
    strings = np.concatenate([halves, np.full((n, 1), CENTRE, np.int32), halves[:, ::-1]], 1)
    inputs = np.zeros((n, max_len), np.int32)
    targets = np.zeros((n, max_len), np.int32)
    mask = np.zeros((n, max_len), np.float32)
    inputs[:, :length] = strings
    targets[:, :length - 1] = strings[:, 1:]
    targets[:, length - 1] = END
    mask[:, k:length] = 1.0
    return {"inputs": inputs, "targets": targets, "mask": mask,
            "lengths": np.full((n,), length, np.int32)}


def concat(parts):
    """Concatenates encoded splits with the same ``max_len``."""
    return {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}


def select(split, keep):
    """The examples of an encoded split where the boolean ``keep`` is True."""
    return {key: value[keep] for key, value in split.items()}


def count_a(split):
    """Number of ``a`` tokens in each string (= 2 * N_A)."""
    return (split["inputs"] == A).sum(axis=1)


def palindrome_dataset(half_lengths=IN_DOMAIN_HALF_LENGTHS, n_per_length=20000, max_len=MAX_LEN,
                       seed=0):
    """In-domain train / dev / test splits, as the authors' released generator.

    For each first-half length ``k`` draws ``min(4^k, n_per_length)`` distinct strings; each goes to
    test and to dev with probability ``(n_per_length / 12) / min(4^k, n_per_length)`` (1/12 when
    the pool is large, ~0.1017 for k = 7 with the defaults), else to train. Splits are disjoint.

    Returns:
        ``{"train": ..., "dev": ..., "test": ...}``, each an ``encode`` dict.
    """
    half_lengths = check_int_tuple("half_lengths", half_lengths, 1)
    check_int_at_least("n_per_length", n_per_length, 1)
    rng = np.random.default_rng(check_seed("seed", seed, allow_none=False))
    parts = {"train": [], "dev": [], "test": []}
    for k in half_lengths:
        count = min(4 ** k, n_per_length)
        halves = first_halves(k, count, rng)
        p = (n_per_length / 12.0) / count
        u = rng.random(count)
        which = np.where(u < p, 0, np.where(u < 2 * p, 1, 2))
        for index, name in enumerate(("test", "dev", "train")):
            parts[name].append(encode(halves[which == index], max_len))
    return {name: concat(p) for name, p in parts.items()}


def long_palindrome_dataset(half_lengths=LONG_HALF_LENGTHS, n_per_length=3333, max_len=MAX_LEN,
                            seed=1):
    """Out-of-domain lengths: ``{"dev": ..., "test": ...}`` with ``n_per_length`` each per k."""
    half_lengths = check_int_tuple("half_lengths", half_lengths, 1)
    check_int_at_least("n_per_length", n_per_length, 1)
    rng = np.random.default_rng(check_seed("seed", seed, allow_none=False))
    parts = {"dev": [], "test": []}
    for k in half_lengths:
        halves = first_halves(k, 2 * n_per_length, rng)
        parts["test"].append(encode(halves[:n_per_length], max_len))
        parts["dev"].append(encode(halves[n_per_length:], max_len))
    return {name: concat(p) for name, p in parts.items()}


def nesting_split(dataset, max_a=MAX_A_FOR_NESTING_SPLIT):
    """The "N_A > 2" condition from an in-domain ``palindrome_dataset``.

    Training and dev keep only strings with at most ``max_a`` ``a`` tokens (N_A <= 2); the test set
    is the in-domain test strings with more than ``max_a`` ``a`` tokens (N_A > 2).
    """
    return {"train": select(dataset["train"], count_a(dataset["train"]) <= max_a),
            "dev": select(dataset["dev"], count_a(dataset["dev"]) <= max_a),
            "test": select(dataset["test"], count_a(dataset["test"]) > max_a)}
