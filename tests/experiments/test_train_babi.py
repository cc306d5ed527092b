import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from keras_relational.environments import babi
from keras_relational.experiments import babi_lib, babi_serving

# Grappler off: its passes over each new function cost these tiny runs more than they save.
pytestmark = pytest.mark.usefixtures("no_graph_optimizer")

_SMOKE = dict(tasks=(1, 6), num_train=64, num_valid=32, num_test=32, entity_dim=4,
              relation_dim=3, hidden_dim=8, batch_size=32, epochs=2, jit_compile=False, verbose=0)


@pytest.fixture(name="smoke_run", scope="module")
def fixture_smoke_run(tmp_path_factory):
    """A tiny training run, shared by the smoke test and the serving test: (root_dir, results)."""
    root = str(tmp_path_factory.mktemp("babi") / "run")
    return root, babi_lib.train_eval(root, **_SMOKE)


@pytest.mark.slow
def test_train_eval_smoke(smoke_run):
    root, results = smoke_run
    kwargs = _SMOKE
    assert set(results["test_error"]) == {1, 6}
    assert all(0.0 <= e <= 100.0 for e in results["test_error"].values())
    assert results["steps"] == 2 * 4
    for path in ("train", "checkpoints/best.weights.h5", "saved_model", "results.md",
                 "results.json", "vocabulary.json", "data/qa1_train.txt", "data/qa6_test.txt",
                 "saved_model/vocabulary.json"):
        assert os.path.exists(os.path.join(root, path)), path
    for leftover in ("partial.saved_model", "old.saved_model"):  # whole_files' temporaries
        assert not os.path.exists(os.path.join(root, leftover)), leftover
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



def test_a_resumed_run_keeps_the_halved_learning_rate(tmp_path):
    import keras

    from keras_relational.experiments import safe_backup

    def schedule_and_model():
        state = safe_backup.RunState(str(tmp_path / "backup"), {"run": 1})
        schedule = babi_lib._LearningRateSchedule(1e-3, warmup_steps=0, warmup_factor=0.1,
                                                  lr_decay="once", decay_threshold=0.1,
                                                  state=state)
        model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
        model.compile(keras.optimizers.Nadam(1e-3), "mse")
        schedule.set_model(model)
        return schedule, model
    schedule, _ = schedule_and_model()
    schedule.on_epoch_end(0, {"val_loss": 0.05})  # halved, then the process is killed
    resumed, model = schedule_and_model()  # a new process, the same backup directory
    resumed.on_train_batch_begin(0)
    assert np.isclose(float(model.optimizer.learning_rate.numpy()), 5e-4)
    resumed.on_epoch_end(1, {"val_loss": 0.01})  # halves once only
    resumed.on_train_batch_begin(0)
    assert np.isclose(float(model.optimizer.learning_rate.numpy()), 5e-4)


def test_load_data_errors_name_the_flag_or_the_file(tmp_path):
    for argument in ("num_train", "num_valid", "num_test"):
        with pytest.raises(ValueError, match=f"`{argument}`.*{argument}=0"):
            babi_lib.load_data((1,), **{argument: 0})
    # A file that an interrupted run of an older version left empty is not taken for data.
    root = str(tmp_path / "run")
    babi.write_task_files(os.path.join(root, "data"), 1, num_train=20, num_valid=5, num_test=5)
    empty = os.path.join(root, "data", "qa1_test.txt")
    open(empty, "w").close()
    with pytest.raises(ValueError, match=f"{empty}: no question found"):
        babi_lib.load_data((1,), root_dir=root, num_train=20, num_valid=5, num_test=5)
    # Files of an earlier run with other sizes are not silently reused.
    os.remove(empty)
    splits, _, _ = babi_lib.load_data((1,), root_dir=root, num_train=20, num_valid=5,
                                      num_test=5)
    assert [len(splits[s][1]) for s in ("train", "valid", "test")] == [20, 5, 5]
    with pytest.raises(ValueError, match="qa1_train.txt holds 20 questions, but num_train=30"):
        babi_lib.load_data((1,), root_dir=root, num_train=30, num_valid=5, num_test=5)


def test_binary_rejects_an_empty_split_when_parsing_flags(import_binary):
    from absl import flags

    train_babi = import_binary("train_babi")

    for name in ("num_train", "num_valid", "num_test"):
        with pytest.raises(flags.IllegalFlagValueError, match=f"--{name}=0"):
            train_babi.FLAGS[name].parse("0")


@pytest.mark.slow
@pytest.mark.subprocess
def test_answer_babi_serves_the_export_in_a_fresh_process(smoke_run, tmp_path):
    root, results = smoke_run
    export_dir = os.path.join(root, "saved_model")
    with open(os.path.join(export_dir, "vocabulary.json")) as f:
        info = json.load(f)
    assert info["words"] == list(results["vocabulary"].words)
    # Answered questions and one without an answer.
    text = (babi.generate_task_text(1, 6, seed=123)
            + "1 Mary went to the kitchen.\n2 Where is Mary?\n")
    stories = tmp_path / "stories.txt"
    stories.write_text(text)
    examples = babi.parse_babi(text, task=1, max_sentences=info["max_sentences"],
                               allow_unanswered=True)
    expected = babi_lib.predict_answers(
        results["model"], results["vocabulary"],
        [dataclasses.replace(ex, answer=None) for ex in examples],
        (info["max_sentences"], info["max_words"]))

    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run(
        [sys.executable, "-m", "keras_relational.experiments.answer_babi",
         f"--saved_model={export_dir}", f"--stories={stories}", "--batch_size=4"],
        env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.strip().splitlines()
    rows = [line.split("\t") for line in lines[:-1]]
    assert [row[0] for row in rows] == [str(i) for i in range(1, 8)]
    assert [row[1] for row in rows] == [" ".join(ex.query) for ex in examples]
    assert [row[2] for row in rows] == expected  # the same answers as the trained model
    assert [row[3] for row in rows] == [ex.answer or "-" for ex in examples]
    correct = sum(p == ex.answer for p, ex in zip(expected[:6], examples[:6], strict=True))
    assert lines[-1] == f"accuracy {correct / 6:.4f} ({correct}/6 questions)"

    # A word the model never saw is named before the model is loaded.
    unknown = tmp_path / "unknown.txt"
    unknown.write_text("1 Mary went to the cellar.\n2 Where is Mary? \tcellar\t1\n")
    with pytest.raises(ValueError, match="lacks: \\['cellar'\\]"):
        babi_serving.answer_questions(export_dir, str(unknown))
    with pytest.raises(ValueError, match="no vocabulary file"):
        babi_serving.answer_questions(str(tmp_path), str(stories))


def test_ablation_and_systematic_arguments_are_checked_first(tmp_path, import_binary):
    with pytest.raises(ValueError, match="`operations`.*'W\\+X'"):
        babi_lib.train_eval(str(tmp_path), operations="W+X")
    with pytest.raises(ValueError, match="`tasks`.*\\(1, 2\\)"):
        babi_lib.train_eval(str(tmp_path), tasks=(1, 2), systematic=True)
    # None trains on through plateaus (the paper's protocol); a negative patience is refused.
    with pytest.raises(ValueError, match="`patience` to be a non-negative integer or None, "
                                         "received patience=-1"):
        babi_lib.train_eval(str(tmp_path), patience=-1)
    assert babi_lib.OPERATIONS == {"W": (False, False), "W+M": (True, False),
                                   "W+B": (False, True), "W+M+B": (True, True)}
    from absl import flags

    train_babi = import_binary("train_babi")
    assert train_babi.FLAGS["operations"].parser.enum_values == ["W", "W+M", "W+B", "W+M+B"]
    with pytest.raises(flags.IllegalFlagValueError, match="--operations=W\\+X"):
        train_babi.FLAGS["operations"].parse("W+X")


@pytest.mark.slow
def test_write_only_model_on_the_systematic_split(tmp_path):
    root = str(tmp_path / "systematic")
    results = babi_lib.train_eval(
        root, tasks=babi.SYSTEMATIC_TASKS, systematic=True, systematic_examples_per_pair=5,
        operations="W", num_train=8, num_valid=4, num_test=4, entity_dim=4, relation_dim=3,
        hidden_dim=8, batch_size=32, epochs=1, jit_compile=False, verbose=0, export=False)
    memory = results["model"].get_layer("tpr_memory")
    assert (memory.use_move, memory.use_backlink) == (False, False)
    assert (results["use_move"], results["use_backlink"]) == (False, False)
    # 8 tasks x 8 questions plus 21 trained (name, task) pairs x 5 new-name examples.
    assert results["steps"] == -(-(8 * 8 + 21 * 5) // 32)
    accuracy = results["systematic"]
    assert list(accuracy) == list(babi.NEW_NAMES)
    assert accuracy["Alex"]["unseen"] is None and accuracy["Logan"]["unseen"] is not None
    assert all(0.0 <= a <= 100.0 for row in accuracy.values() for a in row.values()
               if a is not None)
    assert "logan" in results["vocabulary"].ids
    with open(os.path.join(root, "results.md")) as f:
        assert "| New name | Tasks in training |" in f.read()
    with open(os.path.join(root, "results.json")) as f:
        assert set(json.load(f)["systematic"]) == set(babi.NEW_NAMES)

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


def test_the_target_validation_accuracy_stops_training_when_met_exactly():
    class _Model:
        stop_training = False

    def stops(val_accuracy, target):
        callback, model = babi_lib._StopAtAccuracy(target), _Model()
        callback.set_model(model)
        callback.on_epoch_end(0, {"val_accuracy": val_accuracy})
        return model.stop_training

    # Keras' float32 accuracy of 9 in 10 is 0.8999999762, below the float 0.9; it is the target.
    assert stops(float(np.float32(9) / np.float32(10)), 0.9)  # Keras logs Python floats
    assert not stops(float(np.float32(8) / np.float32(10)), 0.9)
    assert not stops(1.0, None)


def test_a_finished_run_is_not_trained_again_and_a_warm_start_keeps_its_best(tmp_path, capsys):
    import warnings

    root = str(tmp_path / "run")
    tiny = dict(tasks=(1,), num_train=32, num_valid=16, num_test=16, entity_dim=4,
                relation_dim=3, hidden_dim=8, batch_size=16, epochs=2, jit_compile=False,
                export=False, verbose=2)
    first = babi_lib.train_eval(root, **tiny)
    best = os.path.join(root, "checkpoints", "best.weights.h5")
    with open(best, "rb") as f:
        best_bytes = f.read()
    with open(os.path.join(root, "results.json")) as f:
        assert json.load(f)["settings"]["epochs"] == 2
    capsys.readouterr()

    def run_again(**changes):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            results = babi_lib.train_eval(root, **dict(tiny, **changes))
        skipped = [str(w.message) for w in caught if "Skipping variable loading" in str(w.message)]
        assert not skipped, skipped  # the optimizer's variables load with the weights
        return results, capsys.readouterr().out

    # The same settings: nothing trained, the best checkpoint evaluated to the same results.
    again, out = run_again()
    assert "not trained again" in out and "Epoch " not in out, out
    assert again["test_error"] == first["test_error"]
    assert {k: again[k] for k in babi_lib._TRAINING_SUMMARY} == {
        k: first[k] for k in babi_lib._TRAINING_SUMMARY}
    with open(best, "rb") as f:
        assert f.read() == best_bytes
    assert not os.path.exists(os.path.join(root, "backup"))

    # More epochs: trained on from the best weights; the best checkpoint is replaced only by a
    # better validation accuracy (a worse first epoch used to overwrite it).
    longer, out = run_again(epochs=3)
    assert "warm-starting from" in out and "Epoch 3/3" in out, out
    assert longer["best_val_accuracy"] >= first["best_val_accuracy"]
    if longer["best_val_accuracy"] == first["best_val_accuracy"]:
        with open(best, "rb") as f:
            assert f.read() == best_bytes
    _, out = run_again(epochs=3)  # and that run, finished, is re-used in turn
    assert "not trained again" in out and "Epoch " not in out, out
