"""Smoke tests of the Mitchell & Bowers binaries: tiny sizes, a few epochs, real outputs."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from keras_relational.experiments import symmetry_lib

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_rule_learning_train_eval_conv_transfers_exactly(tmp_path):
    result = symmetry_lib.rule_learning_train_eval(str(tmp_path), model="conv", seed=0,
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
    result = symmetry_lib.palindromes_train_eval(
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


def test_metrics():
    split = {"targets": np.array([[1, 2, 3], [1, 2, 3]]),
             "mask": np.array([[0, 1, 1], [0, 1, 1]], np.float32)}
    predictions = np.array([[4, 2, 3], [1, 2, 4]])
    np.testing.assert_array_equal(symmetry_lib.sequence_exact_match(predictions, split),
                                  [True, False])
    assert symmetry_lib.masked_token_accuracy(predictions, split) == 0.75
    summary = symmetry_lib.summarize([{"a": {"b": 1.0}}, {"a": {"b": 0.0}}, {"a": {"b": 0.5}}],
                                     [("a", "b")])
    assert summary["a/b"]["median"] == 0.5


@pytest.mark.subprocess
@pytest.mark.parametrize("binary,flags", [
    ("train_rule_learning", ["--models=conv,mlp", "--seeds=2", "--epochs=20"]),
    ("train_palindromes", ["--models=conv_stack", "--conditions=standard", "--seeds=1",
                           "--epochs=1", "--n_per_length=100", "--long_n_per_length=10",
                           "--restart_epoch=1", "--batch_size=64", "--noexport"]),
])
def test_binary_runs(tmp_path, binary, flags):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("TF_USE_LEGACY_KERAS", None)
    result = subprocess.run([sys.executable, "-m", f"experiments.{binary}",
                             f"--root_dir={tmp_path}", *flags], cwd=_REPO_ROOT, env=env,
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "median" in result.stdout
    summary = json.load(open(tmp_path / "summary.json"))
    assert summary
