import itertools

import keras
import numpy as np
import pytest
from layer_contract import run_layer_contract

import keras_relational
from keras_relational.environments import rule_learning
from keras_relational.models import symmetry


def reference(x, kernel, bias=None, pooling="max"):
    """NumPy forward pass (Mitchell & Bowers, Sec. II)."""
    z = np.einsum("bvt,tk->bvk", x, kernel)
    if bias is not None:
        z = z + bias
    return {"max": z.max(1), "mean": z.mean(1), "sum": z.sum(1), None: z}[pooling]


def random_grid(rng, batch=4, symbols=12, steps=3):
    """Random sequences of distinct-or-repeated symbols as one-hot grids."""
    x = np.zeros((batch, symbols, steps), np.float32)
    for b in range(batch):
        x[b, rng.randint(symbols, size=steps), np.arange(steps)] = 1.0
    return x


@pytest.mark.parametrize("pooling", ["max", "mean", "sum", None])
@pytest.mark.parametrize("use_bias", [False, True])
def test_matches_numpy_reference(pooling, use_bias):
    rng = np.random.RandomState(0)
    x = rng.normal(size=(3, 7, 4)).astype("float32")
    layer = keras_relational.SymbolConvolution(5, use_bias=use_bias, pooling=pooling,
                                               bias_initializer="random_normal")
    out = np.asarray(layer(x))
    bias = np.asarray(layer.bias) if use_bias else None
    np.testing.assert_allclose(out, reference(x, np.asarray(layer.kernel), bias, pooling),
                               atol=1e-5)


def test_shapes_and_parameter_count():
    model = symmetry.symbol_conv_classifier()
    assert model.count_params() == 6  # 3 x 2 kernel, no bias (authors' code)
    assert tuple(model(np.zeros((5, 12, 3), "float32")).shape) == (5, 2)
    # No symbol-dependent parameter: any vocabulary size works with the same weights.
    assert tuple(model(np.zeros((5, 40, 3), "float32")).shape) == (5, 2)


@pytest.mark.parametrize("use_bias", [False, True])
def test_substitution_equivariance_and_invariance(use_bias):
    rng = np.random.RandomState(1)
    x = random_grid(rng, batch=6)
    conv = keras_relational.SymbolConvolution(4, use_bias=use_bias, pooling=None,
                                              bias_initializer="random_normal")
    pooled = keras_relational.SymbolConvolution(4, use_bias=use_bias,
                                                bias_initializer="random_normal")
    pooled(x)
    conv(x)
    pooled.set_weights(conv.get_weights())
    for _ in range(5):
        perm = rng.permutation(12)
        # conv(P X) == P conv(X): permuting symbols permutes the convolution's output ...
        np.testing.assert_allclose(np.asarray(conv(x[:, perm])), np.asarray(conv(x))[:, perm],
                                   atol=1e-6)
        # ... and the pooled prediction is unchanged.
        np.testing.assert_allclose(np.asarray(pooled(x[:, perm])), np.asarray(pooled(x)),
                                   atol=1e-6)


@pytest.mark.parametrize("seed", range(5))
def test_unseen_symbol_generalisation_is_structural(seed):
    keras.utils.set_random_seed(seed)
    model = symmetry.symbol_conv_classifier(use_bias=bool(seed % 2))
    layer = model.get_layer("symbol_convolution")
    if layer.bias is not None:
        layer.bias.assign(np.random.RandomState(seed).normal(size=2).astype("float32"))
    enc = rule_learning.encode_symbol_grid
    pairs = [(("ga", "ti", "ga"), ("wo", "fe", "wo")), (("ga", "ti", "ti"), ("de", "ko", "ko"))]
    for a, b in pairs:
        np.testing.assert_array_equal(np.asarray(model(enc([a]))), np.asarray(model(enc([b]))))
    # Every ABA item (training and unseen) gets the very same output; likewise every ABB item.
    x_train, y_train, x_test, y_test, _ = rule_learning.marcus_rule_learning()
    x, y = np.concatenate([x_train, x_test]), np.concatenate([y_train, y_test])
    out = np.asarray(model(x))
    for label in (0, 1):
        np.testing.assert_array_equal(out[y == label], np.broadcast_to(out[y == label][0],
                                                                       out[y == label].shape))


def test_vocabulary_order_does_not_matter():
    keras.utils.set_random_seed(3)
    model = symmetry.symbol_conv_classifier()
    x_train, _, _, _, items = rule_learning.marcus_rule_learning()
    shuffled = tuple(np.random.RandomState(0).permutation(rule_learning.SYLLABLES))
    x_shuffled = rule_learning.encode_symbol_grid(items["train"], vocab=shuffled)
    np.testing.assert_array_equal(np.asarray(model(x_train)), np.asarray(model(x_shuffled)))


def test_hand_set_kernel_solves_all_36_items_and_draws_fig1():
    model = symmetry.symbol_conv_classifier()
    layer = model.get_layer("symbol_convolution")
    layer.kernel.assign(np.array([[1, 0], [0, 1], [1, 1]], "float32"))  # ABA = 101, ABB = 011
    x_train, y_train, x_test, y_test, _ = rule_learning.marcus_rule_learning()
    for x, y in [(x_train, y_train), (x_test, y_test)]:
        assert (np.argmax(np.asarray(model(x)), -1) == y).all()
    wofewo = rule_learning.encode_symbol_grid([("wo", "fe", "wo")])
    np.testing.assert_allclose(np.asarray(model(wofewo)), [[2.0, 1.0]])
    responses = np.asarray(layer.symbol_responses(wofewo))[0]  # [V, K]
    assert np.argmax(responses[:, 0]) == rule_learning.SYLLABLES.index("wo")


def _shuffled_epochs(x, y, epochs, seed):
    """``epochs`` passes over ``(x, y)``, each in a new random order, one after the other: what
    ``fit(x, y, epochs=epochs)`` trains on, as one pass (``fit`` starts a new dataset iterator
    each epoch, most of the time of a tiny set's epoch under TensorFlow)."""
    rng = np.random.default_rng(seed)
    order = np.concatenate([rng.permutation(len(x)) for _ in range(epochs)])
    return x[order], y[order]


@pytest.mark.slow
def test_trained_conv_test_accuracy_equals_train_accuracy():
    x_train, y_train, x_test, y_test, _ = rule_learning.marcus_rule_learning()
    assert len(x_train) % 16 == 0  # so each epoch is whole batches, as fit's epochs are
    for seed in range(2):
        keras.utils.set_random_seed(seed)
        model = symmetry.symbol_conv_classifier(use_bias=True)
        model.compile(keras.optimizers.Adam(0.1), keras.losses.SparseCategoricalCrossentropy(
            from_logits=True), jit_compile=True)
        model.fit(*_shuffled_epochs(x_train, y_train, 150, seed), batch_size=16, epochs=1,
                  shuffle=False, verbose=0)
        train_acc = (np.argmax(model.predict(x_train, verbose=0), -1) == y_train).mean()
        test_acc = (np.argmax(model.predict(x_test, verbose=0), -1) == y_test).mean()
        assert train_acc == test_acc


def test_baseline_unseen_syllable_weights_never_train():
    x_train, y_train, _, _, _ = rule_learning.marcus_rule_learning()
    unseen = [rule_learning.SYLLABLES.index(s) for s in rule_learning.UNSEEN_SYLLABLES]
    keras.utils.set_random_seed(0)
    model = symmetry.rule_mlp_classifier()
    kernel = model.get_layer("hidden").kernel  # [V*T, 24], rows v*T + t
    rows = [v * 3 + t for v, t in itertools.product(unseen, range(3))]
    initial = np.asarray(kernel).copy()
    model.compile(keras.optimizers.Adam(0.1), keras.losses.SparseCategoricalCrossentropy(
        from_logits=True), jit_compile=True)
    model.fit(*_shuffled_epochs(x_train, y_train, 20, 0), batch_size=16, epochs=1,
              shuffle=False, verbose=0)
    trained = np.asarray(kernel)
    np.testing.assert_array_equal(trained[rows], initial[rows])  # zero gradient: never moved
    assert not np.array_equal(trained, initial)  # while the seen syllables' weights did


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match="pooling.*'median'"):
        keras_relational.SymbolConvolution(2, pooling="median")
    with pytest.raises(ValueError, match="filters"):
        keras_relational.SymbolConvolution(0)
    with pytest.raises(ValueError, match=r"rank 3.*received shape \(2, 3\)"):
        keras_relational.SymbolConvolution(2)(np.zeros((2, 3), "float32"))


@pytest.mark.subprocess
@pytest.mark.parametrize("pooling", ["max", None])
def test_layer_contract(tmp_path, pooling):
    x = random_grid(np.random.RandomState(4), batch=3)
    run_layer_contract(lambda: keras_relational.SymbolConvolution(2, use_bias=True,
                                                                  pooling=pooling),
                       x, tmp_path)
