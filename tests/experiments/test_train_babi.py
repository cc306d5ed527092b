import json
import os

import numpy as np
import pytest

from keras_relational.environments import babi
from keras_relational.experiments import babi_lib


@pytest.mark.slow
def test_train_eval_smoke(tmp_path):
    root = str(tmp_path / "run")
    kwargs = dict(tasks=(1, 6), num_train=64, num_valid=32, num_test=32, entity_dim=4,
                  relation_dim=3, hidden_dim=8, batch_size=32, epochs=2, jit_compile=False,
                  verbose=0)
    results = babi_lib.train_eval(root, **kwargs)
    assert set(results["test_error"]) == {1, 6}
    assert all(0.0 <= e <= 100.0 for e in results["test_error"].values())
    assert results["steps"] == 2 * 4
    for path in ("train", "checkpoints/best.weights.h5", "saved_model", "results.md",
                 "results.json", "vocabulary.json", "data/qa1_train.txt", "data/qa6_test.txt"):
        assert os.path.exists(os.path.join(root, path)), path
    with open(os.path.join(root, "results.md")) as f:
        assert f.read().startswith("| Task | Test error (%) |")

    # The exported SavedModel gives the same logits as the trained model.
    import tensorflow as tf

    with open(os.path.join(root, "vocabulary.json")) as f:
        info = json.load(f)
    examples = babi.load_task(os.path.join(root, "data"), 6, "test")[:5]
    vocab = babi.Vocabulary(info["words"][1:])
    arrays = babi.vectorize(examples, vocab, info["max_sentences"], info["max_words"])
    inputs = {"story": arrays["story"], "query": arrays["query"]}
    expected = np.asarray(results["model"].predict(inputs, verbose=0))
    reloaded = tf.saved_model.load(os.path.join(root, "saved_model"))
    served = reloaded.serve(inputs)
    np.testing.assert_allclose(np.asarray(served), expected, atol=1e-5)

    # Re-running in the same root_dir reuses the data and starts from the best checkpoint.
    again = babi_lib.train_eval(root, **dict(kwargs, epochs=1, export=False))
    assert again["vocabulary"].words == results["vocabulary"].words
    assert again["epochs"] == 1


def test_error_table():
    table = babi_lib.error_table({2: 1.234, 1: 0.0}, paper={"paper mean": {1: "0.02 ± 0.05"}})
    assert table.splitlines() == [
        "| Task | Test error (%) | paper mean |",
        "|---|---|---|",
        "| 1 | 0.00 | 0.02 ± 0.05 |",
        "| 2 | 1.23 | - |",
    ]


def test_learning_rate_schedule():
    import keras

    schedule = babi_lib._LearningRateSchedule(1e-3, warmup_steps=2, warmup_factor=0.1,
                                              lr_decay="once", decay_threshold=0.1)
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    model.compile(keras.optimizers.Nadam(1e-3), "mse")
    schedule.set_model(model)
    schedule.on_train_batch_begin(0)
    assert np.isclose(float(model.optimizer.learning_rate.numpy()), 1e-4)
    model.optimizer.iterations.assign(2)
    schedule.on_train_batch_begin(0)
    assert np.isclose(float(model.optimizer.learning_rate.numpy()), 1e-3)
    schedule.on_epoch_end(0, {"val_loss": 0.5})
    schedule.on_train_batch_begin(0)
    assert np.isclose(float(model.optimizer.learning_rate.numpy()), 1e-3)
    schedule.on_epoch_end(1, {"val_loss": 0.05})
    schedule.on_train_batch_begin(0)
    assert np.isclose(float(model.optimizer.learning_rate.numpy()), 5e-4)


@pytest.mark.slow
def test_train_eval_under_mixed_bfloat16_records_the_policy(tmp_path):
    root = str(tmp_path / "mixed")
    results = babi_lib.train_eval(root, tasks=(1,), num_train=32, num_valid=16, num_test=16,
                                  entity_dim=4, relation_dim=3, hidden_dim=8, batch_size=32,
                                  epochs=1, jit_compile=False, export=False, verbose=0,
                                  dtype_policy="mixed_bfloat16")
    assert results["model"].dtype_policy.name == "mixed_bfloat16"
    with open(os.path.join(root, "results.json")) as f:
        assert json.load(f)["dtype_policy"] == "mixed_bfloat16"
    assert 0.0 <= results["test_error"][1] <= 100.0
    with pytest.raises(ValueError, match=r"`dtype_policy`.*'bfloat16'"):
        babi_lib.train_eval(str(tmp_path / "bad"), dtype_policy="bfloat16")
