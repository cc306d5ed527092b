"""The splits of Mitchell & Bowers' palindrome experiment (Table II) and how a model is scored.

``palindrome_data`` builds one condition's splits; ``evaluate_split`` scores a next-symbol model on
one of them under teacher forcing: the string accuracy (every masked prediction of a string
correct, Table II's measure) and the token accuracy (the authors' logged metric).
"""

import numpy as np

from keras_relational import validation
from keras_relational.environments import palindromes

CONDITIONS = ("standard", "nesting")


def trim(split, length=None):
    """Drops the all-padding tail of an encoded split (to its longest string, or ``length``)."""
    length = length or int(split["lengths"].max())
    return {k: (v[:, :length] if v.ndim == 2 else v) for k, v in split.items()}


def pad_rows(split, multiple):
    """Appends zero-mask copies of the first rows so the size is a multiple of ``multiple``.

    The extra rows carry no loss (their mask is 0 and the loss is a masked mean) and are dropped
    again by the evaluation; every batch then has the same shape, so XLA compiles one program
    instead of one more per odd-sized last batch.
    """
    extra = (-len(split["inputs"])) % multiple
    if not extra:
        return split
    padded = {k: np.concatenate([v, v[np.arange(extra) % len(v)]]) for k, v in split.items()}
    padded["mask"][-extra:] = 0.0
    return padded


def masked_predictions(model, split, batch_size=500):
    """Argmax next-symbol predictions under teacher forcing, ``[n, T]``.

    Inputs are padded to ``palindromes.MAX_LEN`` steps and to a multiple of ``batch_size`` rows,
    so every split runs through one compiled predict program (the model is causal, so right
    padding does not change any prediction).
    """
    n, length = split["inputs"].shape
    inputs = np.zeros((n, palindromes.MAX_LEN), np.int32)
    inputs[:, :length] = split["inputs"]
    inputs = np.concatenate([inputs, np.zeros(((-n) % batch_size, palindromes.MAX_LEN),
                                              np.int32)])
    logits = model.predict(inputs, batch_size=batch_size, verbose=0)
    return np.argmax(logits[:n, :length], axis=-1)


def masked_token_accuracy(predictions, split):
    """Fraction of masked positions predicted correctly (the authors' logged metric)."""
    correct = (predictions == split["targets"]) * split["mask"]
    return float(correct.sum() / split["mask"].sum())


def sequence_exact_match(predictions, split):
    """Fraction of strings with *every* masked prediction correct (Table II), per string."""
    ok = (predictions == split["targets"]) | (split["mask"] == 0)
    return ok.all(axis=1)


def evaluate_split(model, split, by_length=False):
    """``{"string_accuracy", "token_accuracy", "count"}`` (+ ``"by_length"``) for one split."""
    split = trim(split)
    predictions = masked_predictions(model, split)
    exact = sequence_exact_match(predictions, split)
    result = {"string_accuracy": float(exact.mean()),
              "token_accuracy": masked_token_accuracy(predictions, split),
              "count": int(len(exact))}
    if by_length:
        result["by_length"] = {int(length): float(exact[split["lengths"] == length].mean())
                               for length in np.unique(split["lengths"])}
    return result


def palindrome_data(condition="standard", n_per_length=20000, long_n_per_length=3333,
                    data_seed=0):
    """The splits of one Table II condition: train, dev, test (the column's test) and long.

    Keys: ``train``, ``dev``, ``in_domain_test``, ``long_test``, ``long_dev`` and, for
    ``"nesting"``, ``nesting_test``. In the nesting condition train, dev and long dev keep only the
    strings with N_A <= 2, so no split used for training or selection holds an N_A > 2 string.
    """
    if condition not in CONDITIONS:
        raise ValueError(f"condition must be one of {CONDITIONS}, received {condition!r}.")
    data = palindromes.palindrome_dataset(n_per_length=n_per_length, seed=data_seed)
    long = palindromes.long_palindrome_dataset(
        n_per_length=long_n_per_length, seed=validation.offset_seed("data_seed", data_seed, 1))
    splits = {"in_domain_test": data["test"], "long_test": long["test"]}
    if condition == "nesting":
        nested = palindromes.nesting_split(data)
        splits.update(train=nested["train"], dev=nested["dev"], nesting_test=nested["test"],
                      long_dev=palindromes.select(long["dev"], palindromes.count_a(long["dev"])
                                                  <= palindromes.MAX_A_FOR_NESTING_SPLIT))
    else:
        splits.update(train=data["train"], dev=data["dev"], long_dev=long["dev"])
    return splits
