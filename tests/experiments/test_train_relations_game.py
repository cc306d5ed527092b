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
