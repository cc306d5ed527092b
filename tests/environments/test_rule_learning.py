import numpy as np
import pytest

from keras_relational.environments import rule_learning as rl


def test_vocabulary_and_split_sizes():
    x_train, y_train, x_test, y_test, items = rl.marcus_rule_learning()
    assert rl.SYLLABLES[8:] == ("wo", "fe", "ko", "de") and len(rl.SYLLABLES) == 12
    assert x_train.shape == (32, 12, 3) and x_test.shape == (4, 12, 3)
    assert x_train.dtype == np.float32
    assert (np.bincount(y_train) == [16, 16]).all() and (np.bincount(y_test) == [2, 2]).all()
    assert items["test"] == [("wo", "fe", "wo"), ("de", "ko", "de"),
                             ("wo", "fe", "fe"), ("de", "ko", "ko")]
    assert len(set(items["train"])) == 32


def test_every_item_follows_its_pattern():
    _, y_train, _, y_test, items = rl.marcus_rule_learning()
    for triples, labels in [(items["train"], y_train), (items["test"], y_test)]:
        for (a, b, c), label in zip(triples, labels, strict=True):
            assert a != b
            assert (c == a) if label == rl.LABELS["ABA"] else (c == b)


def test_training_uses_only_training_syllables_and_test_only_unseen():
    x_train, _, x_test, _, items = rl.marcus_rule_learning()
    unseen = [rl.SYLLABLES.index(s) for s in rl.UNSEEN_SYLLABLES]
    assert x_train[:, unseen].sum() == 0  # the crux: unseen rows are all-zero in training
    assert set(s for t in items["train"] for s in t) == set(rl.TRAIN_A + rl.TRAIN_B)
    assert x_test.sum(axis=(1, 2)).tolist() == [3.0] * 4
    seen = [i for i in range(12) if i not in unseen]
    assert x_test[:, seen].sum() == 0
    assert set(rl.TRAIN_A) & set(rl.TRAIN_B) == set()


def test_encoding_is_one_hot_per_step_with_fig1_rows():
    grid = rl.encode_symbol_grid([("wo", "fe", "wo")])[0]
    np.testing.assert_array_equal(grid.sum(axis=0), [1, 1, 1])
    np.testing.assert_array_equal(grid[rl.SYLLABLES.index("wo")], [1, 0, 1])
    np.testing.assert_array_equal(grid[rl.SYLLABLES.index("fe")], [0, 1, 0])


def test_row_multisets_do_not_depend_on_syllables():
    x_train, y_train, x_test, y_test, _ = rl.marcus_rule_learning()
    expected = {0: sorted([(1, 0, 1), (0, 1, 0)] + [(0, 0, 0)] * 10),
                1: sorted([(1, 0, 0), (0, 1, 1)] + [(0, 0, 0)] * 10)}
    for x, y in [(x_train, y_train), (x_test, y_test)]:
        for grid, label in zip(x, y, strict=True):
            assert sorted(map(tuple, grid.astype(int).tolist())) == expected[label]


def test_aab_option_and_errors():
    _, y, _, _, items = rl.marcus_rule_learning(patterns=("AAB", "ABB"))
    assert items["train"][0] == ("ga", "ga", "ti") and y[0] == 0
    with pytest.raises(ValueError, match="pattern"):
        rl.realise("BAA", "ga", "ti")
    with pytest.raises(ValueError, match="'zz'"):
        rl.encode_symbol_grid([("zz", "ga", "ga")])
