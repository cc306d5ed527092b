import json
import os

import numpy as np
import pytest

from keras_relational.environments import relations_game
from keras_relational.experiments import relations_game_lib as lib
from keras_relational.models import relations_game as models

TINY = dict(num_batches=4, eval_interval=2, batch_size=5, num_train_examples=40,
            num_eval_examples=20, num_monitor_examples=10, steps_per_execution=2,
            central_kwargs={"num_heads": 2, "key_dim": 3, "num_relations": 4})


def tiny_data(task="same", n=20, seed=0):
    return relations_game.generate(task, "pentominoes", n, seed=seed)


def test_dataset_batches_and_one_hot_tasks():
    data = relations_game.generate("row_patterns_5", "stripes", 30, seed=1)
    features, labels = next(iter(lib.make_dataset(data, 8)))
    assert features["image"].shape == (8, 36, 36, 3) and features["image"].dtype.name == "float32"
    np.testing.assert_array_equal(np.asarray(features["image"]), data["images"][:8])
    np.testing.assert_array_equal(np.argmax(features["task"], -1), data["tasks"][:8])
    assert features["task"].shape == (8, 5)
    np.testing.assert_array_equal(np.asarray(labels), data["labels"][:8])


def test_stage_freezing_and_reinitialisation():
    # The protocol of Shanahan et al. 2020, Fig. 3: after a stage-3 step the CNN and central
    # weights are bit-identical and the output MLP changed; in stage 4 the CNN is unchanged and
    # the central module trains.
    model = models.build_model("predinet", central_kwargs=TINY["central_kwargs"])
    data = lib.make_dataset(tiny_data(), 10, repeat=True)

    def snapshot(name):
        return [np.array(w) for w in model.get_layer(name).get_weights()]

    def changed(before, name):
        return [not np.array_equal(b, a) for b, a in zip(before, snapshot(name), strict=True)]

    lib.compile_model(model, "sgd", 0.5, 1)
    model.fit(data, steps_per_epoch=1, epochs=1, shuffle=False, verbose=0)
    lib.freeze_for_stage(model, 3, seed=0)
    for name in models.OUTPUT_LAYERS:
        for weight in model.get_layer(name).weights:
            if "bias" in weight.name:
                np.testing.assert_array_equal(np.asarray(weight), np.float32(0.1))
    cnn, central = snapshot(models.INPUT_CNN), snapshot(models.CENTRAL)
    hidden, logits = snapshot(models.OUTPUT_HIDDEN), snapshot(models.OUTPUT_LOGITS)
    lib.compile_model(model, "sgd", 0.5, 1)
    assert len(model.trainable_weights) == 4
    model.fit(data, steps_per_epoch=2, epochs=1, shuffle=False, verbose=0)
    assert not any(changed(cnn, models.INPUT_CNN))
    assert not any(changed(central, models.CENTRAL))
    assert all(changed(hidden, models.OUTPUT_HIDDEN)) and any(changed(logits,
                                                                      models.OUTPUT_LOGITS))
    central_before_reinit = snapshot(models.CENTRAL)
    lib.freeze_for_stage(model, 4, seed=1)
    assert all(changed(central_before_reinit, models.CENTRAL))  # re-initialised
    cnn, central = snapshot(models.INPUT_CNN), snapshot(models.CENTRAL)
    lib.compile_model(model, "sgd", 0.5, 1)
    model.fit(data, steps_per_epoch=2, epochs=1, shuffle=False, verbose=0)
    assert not any(changed(cnn, models.INPUT_CNN))
    assert all(changed(central, models.CENTRAL))


@pytest.mark.slow
def test_train_eval_single_task_writes_everything_and_resumes(tmp_path, capsys):
    root = str(tmp_path / "single")
    results = lib.train_eval(root, central="predinet", task="same", **TINY)
    assert set(results) >= {"hexominoes", "stripes", "num_batches"}
    assert results["num_batches"] == 4
    assert 0.0 <= results["hexominoes"] <= 1.0
    # (BackupAndRestore's backup/ is removed by Keras once a run completes.)
    for path in ("train", "eval", "checkpoint.weights.h5", "final.weights.h5",
                 "results.json", os.path.join("saved_model", "saved_model.pb")):
        assert os.path.exists(os.path.join(root, path)), path
    assert os.listdir(os.path.join(root, "eval"))
    assert "batch 2:" in capsys.readouterr().out
    # Re-running with the same root_dir does not train again and returns the same results.
    again = lib.train_eval(root, central="predinet", task="same", **TINY)
    assert again == json.load(open(os.path.join(root, "results.json")))
    assert "already finished" in capsys.readouterr().out


@pytest.mark.slow
def test_train_eval_transfer_protocol(tmp_path):
    root = str(tmp_path / "transfer")
    tiny = dict(TINY, export=False, num_batches=2)
    results = lib.train_eval(root, central="mlp1", task="column_patterns_3",
                             curriculum_task="between", **dict(tiny, central_kwargs=None))
    assert list(results) == list(lib.STAGES)
    for stage in lib.STAGES:
        assert set(results[stage]) >= {"hexominoes", "stripes"}
        assert os.path.exists(os.path.join(root, stage, "final.weights.h5"))
    assert os.path.exists(os.path.join(root, "results.json"))


def test_errors_name_the_argument(tmp_path):
    with pytest.raises(ValueError, match=r"`task`.*'nearby'"):
        lib.train_eval(str(tmp_path), task="nearby")
    with pytest.raises(ValueError, match=r"`curriculum_task`.*'colour_and_or_shape'"):
        lib.train_eval(str(tmp_path), task="between", curriculum_task="colour_and_or_shape")
    with pytest.raises(ValueError, match=r"`optimizer`.*'rmsprop'"):
        lib.make_optimizer("rmsprop", 0.1)
    with pytest.raises(ValueError, match=r"`xoccurs_negatives`.*'both_readings'.*'three'"):
        lib.train_eval(str(tmp_path), task="xoccurs", xoccurs_negatives="three")
    with pytest.raises(ValueError, match=r"`colour_shape_layout`.*'column_pair'.*'rows'"):
        lib.train_eval(str(tmp_path), task="colour_and_or_shape", colour_shape_layout="rows")
    with pytest.raises(ValueError, match=r"`stage`.*2"):
        lib.freeze_for_stage(models.build_model("mlp1"), 2)


@pytest.mark.slow
@pytest.mark.subprocess
def test_binary_runs(tmp_path):
    import subprocess
    import sys

    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    root = str(tmp_path / "binary")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("KERAS_BACKEND", None)
    # --data_file / --eval_file: files in DeepMind's released layout (relations_game.save_npz).
    data_file, eval_file = str(tmp_path / "between_pentos.npz"), str(tmp_path / "between_x.npz")
    relations_game.save_npz(data_file, relations_game.generate("between", "pentominoes", 20))
    relations_game.save_npz(eval_file, relations_game.generate("between", "stripes", 10))
    result = subprocess.run(
        [sys.executable, "-m", "keras_relational.experiments.train_relations_game",
         f"--root_dir={root}", "--central=mha", "--task=between", "--num_batches=2",
         "--eval_interval=2", "--batch_size=5", "--num_train_examples=20",
         "--num_eval_examples=10", "--num_heads=2", f"--data_file={data_file}",
         f"--eval_file={eval_file}"],
        cwd=repo, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "final held-out accuracy" in result.stdout
    assert "'between_x'" in result.stdout
    assert os.path.exists(os.path.join(root, "saved_model", "saved_model.pb"))


@pytest.mark.slow
def test_train_eval_under_mixed_float16_records_the_policy(tmp_path):
    root = str(tmp_path / "mixed")
    results = lib.train_eval(root, central="predinet", task="same",
                             **dict(TINY, export=False, num_batches=2, eval_interval=2,
                                    dtype_policy="mixed_float16"))
    assert results["dtype_policy"] == "mixed_float16"
    assert json.load(open(os.path.join(root, "results.json")))["dtype_policy"] == "mixed_float16"
    assert 0.0 <= results["hexominoes"] <= 1.0
    import keras

    assert keras.config.dtype_policy().name == "float32"  # the global policy is restored
    with pytest.raises(ValueError, match=r"`dtype_policy`.*'float16'"):
        lib.train_eval(str(tmp_path / "bad"), dtype_policy="float16")


@pytest.mark.slow
def test_notebook_pause_rule_applies_no_update_while_above_the_threshold(tmp_path):
    # The authors' notebook skips updates while the last check's validation accuracy is above
    # its threshold: with a threshold every batch passes (an accuracy above 0 on 10 images of a
    # balanced task), only the batches before the first check train, so the final weights are
    # those of a run that stopped there.
    tiny = {k: v for k, v in TINY.items() if k != "num_batches"}
    tiny.update(export=False, eval_interval=6, steps_per_execution=2)
    paused = lib.train_eval(str(tmp_path / "paused"), task="same", num_batches=6,
                            pause_above_accuracy=1e-6, pause_interval=2,
                            num_validation_examples=30, **tiny)
    lib.train_eval(str(tmp_path / "short"), task="same", num_batches=2, **tiny)
    checks = json.load(open(tmp_path / "paused" / "pause_checks.json"))
    assert [c["batch"] for c in checks] == [2, 4, 6]
    assert all(c["paused"] for c in checks) and paused["paused_batches"] == 4
    assert paused["pause_above_accuracy"] == pytest.approx(1e-6)
    trained, stopped = models.build_model("predinet", central_kwargs=TINY["central_kwargs"]), \
        models.build_model("predinet", central_kwargs=TINY["central_kwargs"])
    trained.load_weights(str(tmp_path / "paused" / "final.weights.h5"))
    stopped.load_weights(str(tmp_path / "short" / "final.weights.h5"))
    for a, b in zip(trained.get_weights(), stopped.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)
    # A threshold no batch passes never pauses: the weights move after the first check.
    never = lib.train_eval(str(tmp_path / "never"), task="same", num_batches=6,
                           pause_above_accuracy=0.999999, pause_interval=2,
                           num_validation_examples=30, **tiny)
    assert never["paused_batches"] == 0
    moving = models.build_model("predinet", central_kwargs=TINY["central_kwargs"])
    moving.load_weights(str(tmp_path / "never" / "final.weights.h5"))
    assert any(not np.array_equal(a, b)
               for a, b in zip(moving.get_weights(), stopped.get_weights(), strict=True))


class _FakeOptimizer:
    def __init__(self, iterations):
        self.iterations = iterations
        self.learning_rate = 0.01


class _FakeModel:
    def __init__(self, iterations):
        self.optimizer = _FakeOptimizer(iterations)


def test_notebook_pause_rule_resumes_from_its_log(tmp_path):
    # A stage restored at batch 4 keeps the checks up to it (paused after batch 4) and drops
    # the later ones; the validation batches are drawn by index, the same on every run.
    log = tmp_path / "pause_checks.json"
    log.write_text(json.dumps([{"batch": 2, "accuracy": 0.5, "paused": False},
                               {"batch": 4, "accuracy": 1.0, "paused": True},
                               {"batch": 6, "accuracy": 0.5, "paused": False}]))
    data = relations_game.generate("same", "hexominoes", 25, seed=3)
    rule = lib._PauseWhileAccurate(data, 0.99, 2, 10, 0.01, 0, str(log))
    rule.set_model(_FakeModel(4))
    rule.on_train_begin()
    assert [c["batch"] for c in rule.checks] == [2, 4]
    assert rule.model.optimizer.learning_rate == 0.0
    assert rule.paused_batches(5) == 1
    first = [rule._draw(i)["labels"] for i in range(6)]  # 60 draws over a pool of 25
    again = lib._PauseWhileAccurate(data, 0.99, 2, 10, 0.01, 0, str(log))
    for i, labels in enumerate(first):
        np.testing.assert_array_equal(again._draw(i)["labels"], labels)
    # Each pass over the pool draws every image once.
    images = np.concatenate([rule._draw(i)["images"] for i in range(5)])[:25]
    assert sorted(map(bytes, images)) == sorted(map(bytes, data["images"]))
    rule.on_train_end()
    assert rule.model.optimizer.learning_rate == 0.01


def test_notebook_pause_rule_errors_name_the_argument(tmp_path):
    with pytest.raises(ValueError, match=r"`pause_above_accuracy`.*optimizer='sgd'.*'adam'"):
        lib.train_eval(str(tmp_path), pause_above_accuracy=0.99, optimizer="adam")
    with pytest.raises(ValueError, match=r"`pause_above_accuracy`.*\(0, 1\).*1.5"):
        lib.train_eval(str(tmp_path), pause_above_accuracy=1.5)
    with pytest.raises(ValueError, match=r"`pause_interval`.*50.*75"):
        lib.train_eval(str(tmp_path), pause_above_accuracy=0.99, pause_interval=75)
    with pytest.raises(ValueError, match=r"`num_validation_examples`.*250.*100"):
        lib.train_eval(str(tmp_path), pause_above_accuracy=0.99, num_validation_examples=100)
