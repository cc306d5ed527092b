"""Training on DeepMind-layout .npz files (--data_file / --eval_file) and serving the exported
SavedModel with the predict_relations binary."""

import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from keras_relational.environments import relations_game
from keras_relational.experiments import relations_game_lib as lib

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = dict(num_batches=4, eval_interval=2, batch_size=5, num_monitor_examples=10,
            steps_per_execution=2, central_kwargs={"num_heads": 2, "key_dim": 3,
                                                   "num_relations": 4})


def released_file(path, task, object_set, n, seed):
    """A file written exactly in the released layout (int64 everywhere, [N, 1] columns)."""
    data = relations_game.generate(task, object_set, n, seed=seed)
    np.savez(path, images=data["images"].astype(np.int64),
             labels=data["labels"].astype(np.int64)[:, None],
             tasks=data["tasks"].astype(np.int64)[:, None])
    return str(path), data


def test_bad_data_file_fails_before_training(tmp_path):
    path = str(tmp_path / "same_pentos.npz")
    np.savez(path, images=np.zeros((3, 36, 36, 3), np.int64), labels=np.full((3, 1), 3),
             tasks=np.zeros((3, 1), np.int64))
    with pytest.raises(ValueError, match=r"same_pentos.npz: `labels`: expected values in "
                                         r"\[0, 1\], received values in \[3, 3\]"):
        lib.train_eval(str(tmp_path / "run"), task="same", data_file=path)
    assert not os.path.exists(str(tmp_path / "run" / "results.json"))
    with pytest.raises(ValueError, match=r"`eval_files`: expected files with distinct names"):
        lib.load_eval_files([path, path])


@pytest.mark.slow
@pytest.mark.subprocess
def test_train_on_npz_files_then_serve_the_saved_model(tmp_path):
    train_path, _ = released_file(tmp_path / "same_pentos.npz", "same", "pentominoes", 40, 0)
    hexos_path, hexos = released_file(tmp_path / "same_hexos.npz", "same", "hexominoes", 12, 1)
    stripes_path, _ = released_file(tmp_path / "same_stripes.npz", "same", "stripes", 10, 2)
    root = str(tmp_path / "run")
    results = lib.train_eval(root, task="same", data_file=train_path,
                             eval_files=[hexos_path, stripes_path], **TINY)
    assert results["num_eval_examples"] == {"same_hexos": 12, "same_stripes": 10}
    assert 0.0 <= results["same_hexos"] <= 1.0 and results["num_batches"] == 4

    model = keras.saving.load_model(os.path.join(root, "model.keras"))
    expected = np.argmax(np.asarray(model({"image": hexos["images"].astype("float32"),
                                           "task": np.eye(5, dtype="float32")[hexos["tasks"]]})),
                         -1)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("KERAS_BACKEND", None)
    output = str(tmp_path / "predictions.npz")
    result = subprocess.run(
        [sys.executable, "-m", "keras_relational.experiments.predict_relations",
         f"--saved_model={os.path.join(root, 'saved_model')}", f"--data_file={hexos_path}",
         "--batch_size=5", "--limit=3", f"--output={output}"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.strip().splitlines()
    assert lines[0] == "index task predicted probability label"
    rows = [line.split() for line in lines[1:4]]
    assert [int(row[2]) for row in rows] == list(expected[:3])
    assert [int(row[4]) for row in rows] == list(hexos["labels"][:3])
    accuracy = np.mean(expected == hexos["labels"])
    assert lines[4] == f"accuracy {accuracy:.4f} on 12 images of {hexos_path}"
    with np.load(output) as saved:
        np.testing.assert_array_equal(saved["predictions"], expected)
        np.testing.assert_allclose(saved["probabilities"].sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(accuracy, results["same_hexos"])
