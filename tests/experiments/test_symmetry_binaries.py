"""Smoke tests of the Mitchell & Bowers binaries: tiny sizes, a few epochs, real outputs."""

import json
import os
import sys

import keras
import numpy as np
import pytest
import warm_python
from layer_contract import run_fresh_process

from keras_relational.experiments import (
    palindromes_eval_lib,
    palindromes_lib,
    rule_learning_lib,
    symmetry_lib,
)

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_rule_learning_train_eval_conv_transfers_exactly(tmp_path):
    result = rule_learning_lib.rule_learning_train_eval(str(tmp_path), model="conv", seed=0,
                                                        epochs=60, use_bias=True,
                                                        restart_until_fit=True, max_restarts=3)
    assert result["train_accuracy"] == 1.0
    assert result["test_accuracy"] == result["train_accuracy"]  # structural transfer
    assert np.shape(result["kernel"]) == (3, 2)
    assert os.path.isdir(tmp_path / "saved_model") and os.path.isfile(tmp_path / "model.keras")
    assert os.listdir(tmp_path / "tensorboard" / "attempt_0")
    assert json.load(open(tmp_path / "results.json"))["model"] == "conv"


def test_palindromes_train_eval_learns_and_writes(tmp_path):
    from keras_relational.environments import palindromes

    small = palindromes.palindrome_dataset(half_lengths=(3, 4, 5), n_per_length=1000, seed=0)
    long = palindromes.long_palindrome_dataset(half_lengths=(7, 8), n_per_length=30)
    nested = palindromes.nesting_split(small, max_a=2)
    data = {"train": nested["train"], "dev": nested["dev"], "in_domain_test": small["test"],
            "long_test": long["test"], "nesting_test": nested["test"]}
    result = palindromes_lib.palindromes_train_eval(
        str(tmp_path), model="conv_stack", condition="nesting", seed=0, epochs=8,
        batch_size=32, learning_rate=1e-2, restart_epoch=2, restart_threshold=0.999,
        max_restarts=1, data=data)
    assert result["restarts"] in (0, 1)
    assert len(result["dev_accuracy_at_restart_epoch"]) == result["restarts"] + 1
    for key in ("in_domain", "long", "nesting"):
        assert 0.0 <= result[key]["string_accuracy"] <= result[key]["token_accuracy"] <= 1.0
    assert set(result["long"]["by_length"]) == {15, 17}
    assert result["in_domain"]["token_accuracy"] > 0.6  # chance is about 0.25
    assert os.path.isdir(tmp_path / "saved_model") and os.path.isfile(tmp_path / "model.keras")
    assert json.load(open(tmp_path / "results.json"))["condition"] == "nesting"


def _tiny_nesting_data():
    from keras_relational.environments import palindromes

    small = palindromes.palindrome_dataset(half_lengths=(3, 4, 5), n_per_length=600, seed=0)
    long = palindromes.long_palindrome_dataset(half_lengths=(7,), n_per_length=20)
    nested = palindromes.nesting_split(small, max_a=2)
    return {"train": nested["train"], "dev": nested["dev"], "in_domain_test": small["test"],
            "long_test": long["test"], "long_dev": long["dev"], "nesting_test": nested["test"]}


def test_palindrome_data_nesting_splits_hold_no_deep_a_outside_the_test():
    from keras_relational.environments import palindromes

    data = palindromes_eval_lib.palindrome_data("nesting", n_per_length=300, long_n_per_length=200)
    for name in ("train", "dev", "long_dev"):  # everything training or selection may see
        assert len(data[name]["inputs"]) and palindromes.count_a(data[name]).max() <= 4, name
    assert palindromes.count_a(data["nesting_test"]).min() > 4
    assert set(data["long_dev"]["lengths"]) == {29, 33, 37}
    standard = palindromes_eval_lib.palindrome_data("standard", n_per_length=300,
                                                    long_n_per_length=200)
    assert len(standard["long_dev"]["inputs"]) == 600 and "nesting_test" not in standard


def test_early_stopping_restores_the_best_dev_epoch(tmp_path):
    data = _tiny_nesting_data()
    root_dir = tmp_path / "new_dir"  # created by the export alone when TensorBoard is off
    result = palindromes_lib.palindromes_train_eval(
        str(root_dir), model="conv_stack", condition="nesting", seed=0, epochs=3,
        batch_size=32, learning_rate=1e-2, restart_threshold=None, early_stopping=True,
        patience=None, stop_score=1.01, select_on_long_dev=True, tensorboard=False, data=data)
    scores = result["selection_scores"]
    # stop_score > 1 and no patience limit: it never stops early
    assert result["stopped_epoch"] == 3 and len(scores) == 3
    assert result["selected_epoch"] == 1 + int(np.argmax(scores))  # earliest best epoch
    net = keras.saving.load_model(root_dir / "model.keras")
    restored = min(palindromes_eval_lib.evaluate_split(net, data[name])["string_accuracy"]
                   for name in ("dev", "long_dev"))
    assert restored == pytest.approx(max(scores))


def test_early_stopping_scores_from_min_epochs(tmp_path):
    result = palindromes_lib.palindromes_train_eval(
        str(tmp_path), model="conv_stack", condition="nesting", seed=0, epochs=4, min_epochs=3,
        batch_size=64, learning_rate=1e-2, restart_threshold=None, early_stopping=True,
        stop_score=0.0, select_on_long_dev=True, tensorboard=False, export=False,
        data=_tiny_nesting_data())
    # epochs 1-2 trained unscored; any score reaches stop_score 0, so it stops at epoch 3
    assert result["first_scored_epoch"] == 3 and len(result["selection_scores"]) == 1
    assert result["selected_epoch"] == result["stopped_epoch"] == 3


def test_restart_below_stop_score_keeps_the_best_attempt(tmp_path, monkeypatch):
    data = _tiny_nesting_data()
    compiled, compile_ = [], keras.Model.compile

    def counting_compile(self, *args, **kwargs):
        compiled.append(self)
        return compile_(self, *args, **kwargs)

    monkeypatch.setattr(keras.Model, "compile", counting_compile)
    result = palindromes_lib.palindromes_train_eval(
        str(tmp_path), model="conv_stack", condition="nesting", seed=0, epochs=2,
        batch_size=64, learning_rate=1e-2, restart_threshold=None, early_stopping=True,
        patience=None, stop_score=1.01, restart_below_stop_score=True, max_restarts=2,
        tensorboard=False, data=data)
    monkeypatch.undo()  # load_model below compiles with Keras' own compile
    assert len(compiled) == 1  # the restarts re-initialise the compiled model, no new compile
    per_attempt = result["best_score_per_attempt"]
    # stop_score > 1 is never reached: every restart is used, the best attempt is kept
    assert result["restarts"] == 2 and len(per_attempt) == 3
    assert max(result["selection_scores"]) == max(per_attempt)
    net = keras.saving.load_model(tmp_path / "model.keras")
    dev = palindromes_eval_lib.evaluate_split(net, data["dev"])
    assert dev["string_accuracy"] == pytest.approx(max(per_attempt))
    with pytest.raises(ValueError, match="needs early_stopping=True"):
        palindromes_lib.palindromes_train_eval(str(tmp_path), data=data,
                                               restart_below_stop_score=True)


def test_straight_through_continues_from_the_soft_epochs_state(tmp_path):
    data = _tiny_nesting_data()
    result = palindromes_lib.palindromes_train_eval(
        str(tmp_path), model="conv_stack", condition="nesting", seed=0, epochs=3,
        batch_size=64, learning_rate=1e-2, restart_threshold=None, straight_through_from_epoch=2,
        straight_through_learning_rate=1e-3, shift_entropy_cost=0.01, tensorboard=False,
        data=data)
    assert result["straight_through_from_epoch"] == 2
    assert result["straight_through_learning_rate"] == 1e-3
    net = keras.saving.load_model(tmp_path / "model.keras")
    assert net.get_layer("conv_stack_memory").straight_through
    assert float(net.optimizer.learning_rate) == pytest.approx(1e-3)
    steps = -(-len(data["train"]["inputs"]) // 64)
    assert int(net.optimizer.iterations) == 3 * steps  # Adam's state carried over the switch
    assert palindromes_eval_lib.evaluate_split(net, data["nesting_test"]) == result["nesting"]
    with pytest.raises(ValueError, match="model='conv_stack'.*model='lstm'"):
        palindromes_lib.palindromes_train_eval(str(tmp_path), model="lstm", data=data,
                                               straight_through_from_epoch=1)
    with pytest.raises(ValueError, match=r"at least the restart-check epoch \(restart_epoch=4"):
        palindromes_lib.palindromes_train_eval(str(tmp_path), data=data, restart_epoch=4,
                                               straight_through_from_epoch=2)
    for rate, epoch in [(0.0, 1), (-1e-3, 1), ("1e-3", 1), (1e-3, None)]:
        with pytest.raises(ValueError, match=f"received straight_through_learning_rate={rate!r}, "
                                             f"straight_through_from_epoch={epoch!r}"):
            palindromes_lib.palindromes_train_eval(str(tmp_path), data=data,
                                                   straight_through_from_epoch=epoch,
                                                   straight_through_learning_rate=rate)


_JAX_STRAIGHT_THROUGH_REUSE = """
import sys
from keras_relational.experiments import palindromes_eval_lib, palindromes_lib
data = palindromes_eval_lib.palindrome_data("standard", n_per_length=60, long_n_per_length=5)
cache = {}
for seed in (0, 1):  # the second run re-uses both cached models after the first one's switch
    result = palindromes_lib.palindromes_train_eval(
        sys.argv[1], seed=seed, epochs=2, batch_size=64, learning_rate=1e-2,
        restart_threshold=None, straight_through_from_epoch=1, model_cache=cache, data=data,
        tensorboard=False, export=False)
    assert result["straight_through_from_epoch"] == 1
assert len(cache) == 2
print("ok")
"""


@pytest.mark.subprocess
def test_straight_through_switch_reuses_cached_models_under_jax(tmp_path):
    # Under JAX a train step donates its state buffers: the switch must copy the optimizer
    # state, not share it, or the cached soft model fails on its next run.
    result = run_fresh_process(["-c", _JAX_STRAIGHT_THROUGH_REUSE, str(tmp_path)], "jax")
    assert result.stdout.strip().endswith("ok")


@pytest.mark.parametrize("min_epochs", [0, 2.0, True])
def test_invalid_min_epochs_is_named(tmp_path, min_epochs):
    with pytest.raises(ValueError, match=f"min_epochs must .*received min_epochs={min_epochs!r}"):
        palindromes_lib.palindromes_train_eval(str(tmp_path), early_stopping=True,
                                               min_epochs=min_epochs, data=_tiny_nesting_data())


@pytest.mark.parametrize("patience", [0, -1, 1.5, True])
def test_invalid_patience_is_named(tmp_path, patience):
    with pytest.raises(ValueError, match=f"patience must be .*received patience={patience!r}"):
        palindromes_lib.palindromes_train_eval(str(tmp_path), early_stopping=True,
                                               patience=patience, data=_tiny_nesting_data())


def test_model_cache_reruns_match_fresh_runs(tmp_path):
    data = _tiny_nesting_data()
    kwargs = dict(model="conv_stack", condition="nesting", epochs=2, batch_size=64,
                  learning_rate=1e-2, restart_threshold=None, tensorboard=False, export=False,
                  data=data)
    fresh = palindromes_lib.palindromes_train_eval(str(tmp_path / "fresh"), seed=1, **kwargs)
    cache = {}
    palindromes_lib.palindromes_train_eval(str(tmp_path / "a"), seed=0, model_cache=cache, **kwargs)
    reused = palindromes_lib.palindromes_train_eval(str(tmp_path / "b"), seed=1, model_cache=cache,
                                                    **kwargs)
    assert len(cache) == 1
    for key in ("in_domain", "nesting"):  # same weights, same optimizer state from step 0
        assert reused[key]["token_accuracy"] == pytest.approx(fresh[key]["token_accuracy"],
                                                              abs=1e-3)


def test_metrics():
    split = {"targets": np.array([[1, 2, 3], [1, 2, 3]]),
             "mask": np.array([[0, 1, 1], [0, 1, 1]], np.float32)}
    predictions = np.array([[4, 2, 3], [1, 2, 4]])
    np.testing.assert_array_equal(palindromes_eval_lib.sequence_exact_match(predictions, split),
                                  [True, False])
    assert palindromes_eval_lib.masked_token_accuracy(predictions, split) == 0.75
    summary = symmetry_lib.summarize([{"a": {"b": 1.0}}, {"a": {"b": 0.0}}, {"a": {"b": 0.5}}],
                                     [("a", "b")])
    assert summary["a/b"]["median"] == 0.5


@pytest.mark.subprocess
@pytest.mark.parametrize("binary,flags", [
    ("train_rule_learning", ["--models=conv,mlp", "--seeds=2", "--epochs=20"]),
    ("train_palindromes", ["--models=conv_stack", "--conditions=standard", "--seeds=1",
                           "--epochs=1", "--n_per_length=100", "--long_n_per_length=10",
                           "--restart_epoch=1", "--batch_size=64", "--noexport",
                           "--shift_entropy_cost=0.01", "--straight_through_from_epoch=1",
                           "--straight_through_learning_rate=0.002", "--early_stopping",
                           "--restart_below_stop_score", "--stop_score=0", "--patience=0"]),
])
def test_binary_runs(tmp_path, binary, flags):
    env = warm_python.binary_env()
    result = warm_python.run([sys.executable, "-m", f"keras_relational.experiments.{binary}",
                              f"--root_dir={tmp_path}", *flags], cwd=_REPO_ROOT, env=env,
                             capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "median" in result.stdout
    summary = json.load(open(tmp_path / "summary.json"))
    assert summary
    if binary == "train_palindromes":  # the flag reaches the conv stack LSTM's training
        run = summary["standard"]["conv_stack"]["runs"][0]
        assert run["shift_entropy_cost"] == 0.01 and run["straight_through_from_epoch"] == 1
        assert run["straight_through_learning_rate"] == 0.002
        assert len(run["best_score_per_attempt"]) == 1  # any score reaches stop_score 0
