"""``dtype_policy`` of the supervised binaries' libraries (issue 23, Sec. 1): a couple of steps
under a 16-bit policy, finite, the policy recorded in the results file; float16 loss-scaled."""

import io
import json
import os
import zipfile

import h5py
import keras
import numpy as np
import pytest

from keras_relational.experiments import (
    char_lm_lib,
    palindromes_lib,
    rule_learning_lib,
    same_colour_lib,
)


def _results(root):
    with open(os.path.join(root, "results.json")) as f:
        return json.load(f)


def _finite_weights(model):
    return all(np.all(np.isfinite(np.asarray(w, "float32"))) for w in model.get_weights())


def test_rule_learning_mixed_float16_is_loss_scaled(tmp_path):
    root = str(tmp_path)
    result = rule_learning_lib.rule_learning_train_eval(
        root, model="mlp", epochs=1, tensorboard=False, dtype_policy="mixed_float16")
    assert result["dtype_policy"] == _results(root)["dtype_policy"] == "mixed_float16"
    path = os.path.join(root, "model.keras")
    with zipfile.ZipFile(path) as archive:  # compile() wrapped the optimizer in loss scaling
        weights = h5py.File(io.BytesIO(archive.read("model.weights.h5")), "r")
        assert "optimizer/inner_optimizer" in weights  # LossScaleOptimizer(inner_optimizer)
    model = keras.saving.load_model(path, compile=False)
    assert model.get_layer("hidden").dtype_policy.name == "mixed_float16"
    assert _finite_weights(model)
    assert keras.config.dtype_policy().name == "float32"  # the global policy is restored
    with pytest.raises(ValueError, match=r"`dtype_policy`.*'float16'"):
        rule_learning_lib.rule_learning_train_eval(root, dtype_policy="float16")


def test_palindromes_mixed_bfloat16(tmp_path):
    from keras_relational.environments import palindromes

    small = palindromes.palindrome_dataset(half_lengths=(3,), n_per_length=64, seed=0)
    long = palindromes.long_palindrome_dataset(half_lengths=(4,), n_per_length=4)
    data = {"train": small["train"], "dev": small["dev"], "in_domain_test": small["test"],
            "long_test": long["test"]}
    result = palindromes_lib.palindromes_train_eval(
        str(tmp_path), model="lstm", epochs=1, batch_size=32, restart_threshold=None,
        data=data, tensorboard=False, export=False, dtype_policy="mixed_bfloat16")
    assert _results(str(tmp_path))["dtype_policy"] == "mixed_bfloat16"
    assert np.isfinite(result["in_domain"]["token_accuracy"])
    with pytest.raises(ValueError, match=r"`dtype_policy`.*'bfloat16'"):
        palindromes_lib.palindromes_train_eval(str(tmp_path), data=data, dtype_policy="bfloat16")


@pytest.mark.slow  # SavedModel export
def test_same_colour_mixed_bfloat16(tmp_path):
    root = str(tmp_path / "run")
    result = same_colour_lib.train_eval(root, num_train=64, num_eval=32, epochs=1,
                                         batch_size=32, dtype_policy="mixed_bfloat16")
    assert result["dtype_policy"] == _results(root)["dtype_policy"] == "mixed_bfloat16"
    model = keras.saving.load_model(result["model"], compile=False)
    assert model.layers[1].dtype_policy.name == "mixed_bfloat16" and _finite_weights(model)


def test_char_lm_mixed_bfloat16(tmp_path):
    root = str(tmp_path)
    results = char_lm_lib.train_eval(root, attentions=("dot_product",), tasks=(1,),
                                     train_questions=4, valid_questions=2, sequence_length=16,
                                     width=8, num_layers=1, num_heads=2, key_dim=4, epochs=1,
                                     batch_size=8, jit_compile=False,
                                     dtype_policy="mixed_bfloat16")
    assert _results(root)["dtype_policy"] == "mixed_bfloat16"
    assert np.isfinite(results["dot_product"]["train_bpc"])
    assert np.isfinite(results["dot_product"]["valid_bpc"])


@pytest.mark.parametrize("binary", ["train_boxworld", "train_relations_game", "train_babi",
                                    "train_palindromes", "train_rule_learning", "train_char_lm",
                                    "same_colour_demo"])
def test_every_training_binary_takes_the_flag(import_binary, binary):
    from absl import flags

    from keras_relational import validation

    import_binary(binary)
    flag = flags.FLAGS["dtype_policy"]
    assert flag.default == "float32"
    assert tuple(flag.parser.enum_values) == validation.DTYPE_POLICIES
