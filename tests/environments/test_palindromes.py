import numpy as np
import pytest

from keras_relational.environments import palindromes as pal


@pytest.fixture(scope="module")
def small():
    return pal.palindrome_dataset(half_lengths=(3, 5, 7), n_per_length=600, seed=0)


def strings(split):
    return [pal.decode(row) for row in split["inputs"]]


def check_palindrome_encoding(split):
    for inputs, targets, mask, length in zip(split["inputs"], split["targets"], split["mask"],
                                             split["lengths"], strict=True):
        s = pal.decode(inputs)
        k = (length - 1) // 2
        assert len(s) == length and s == s[::-1] and s.count("o") == 1 and s[k] == "o"
        assert set(s) <= set("abcdo")
        assert (inputs[length:] == pal.PAD).all()
        np.testing.assert_array_equal(targets[:length - 1], inputs[1:length])
        assert targets[length - 1] == pal.END and (targets[length:] == pal.PAD).all()
        assert mask.sum() == k + 1 and mask[k:length].all()  # from the `o` to the last symbol


def test_strings_are_centre_marked_palindromes(small):
    for split in small.values():
        check_palindrome_encoding(split)


def test_splits_are_disjoint_and_cover_the_draw(small):
    sets = {name: set(strings(split)) for name, split in small.items()}
    assert all(len(sets[n]) == len(small[n]["inputs"]) for n in sets)  # distinct strings
    assert not sets["train"] & sets["dev"] and not sets["train"] & sets["test"]
    assert not sets["dev"] & sets["test"]
    # k = 3: all 64 strings are drawn; larger k: min(4^k, 600).
    lengths = np.concatenate([s["lengths"] for s in small.values()])
    assert np.bincount(lengths)[[7, 11, 15]].tolist() == [64, 600, 600]


def test_default_sizes_match_the_paper():
    data = pal.palindrome_dataset()
    sizes = {name: len(split["inputs"]) for name, split in data.items()}
    assert abs(sizes["train"] - 96384) < 600 and abs(sizes["dev"] - 10000) < 300
    assert abs(sizes["test"] - 10000) < 300
    assert sorted(np.unique(data["train"]["lengths"]).tolist()) == [15, 17, 19, 21, 23, 25]
    assert data["train"]["inputs"].shape[1] == pal.MAX_LEN
    nested = pal.nesting_split(data)
    assert abs(len(nested["train"]["inputs"]) - 54050) < 600
    assert abs(len(nested["test"]["inputs"]) - 4322) < 250


def test_long_split():
    long = pal.long_palindrome_dataset(n_per_length=50)
    for split in long.values():
        check_palindrome_encoding(split)
        assert np.bincount(split["lengths"])[[29, 33, 37]].tolist() == [50, 50, 50]
    assert not set(strings(long["dev"])) & set(strings(long["test"]))


def test_nesting_filter_removes_exactly_the_strings_with_more_than_four_a(small):
    nested = pal.nesting_split(small)
    for name in ("train", "dev"):
        counts = [s.count("a") for s in strings(small[name])]
        kept = strings(nested[name])
        assert kept == [s for s, c in zip(strings(small[name]), counts, strict=True) if c <= 4]
    assert all(s.count("a") > 4 for s in strings(nested["test"]))
    assert len(nested["test"]["inputs"]) == sum(s.count("a") > 4 for s in strings(small["test"]))


def test_encode_and_decode():
    enc = pal.encode(np.array([[pal.A, pal.D]]), max_len=8)
    assert pal.decode(enc["inputs"][0]) == "adoda"  # Fig. 3's example
    np.testing.assert_array_equal(enc["targets"][0], [4, 6, 4, 1, 5, 0, 0, 0])
    np.testing.assert_array_equal(enc["mask"][0], [0, 0, 1, 1, 1, 0, 0, 0])
    with pytest.raises(ValueError, match="max_len"):
        pal.encode(np.ones((1, 20), np.int32), max_len=40)
