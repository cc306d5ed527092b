import json
import os
import textwrap

import numpy as np
import pytest
import warm_python

from keras_relational import without_tensorflow
from keras_relational.environments import relations_game
from keras_relational.experiments import relations_game_lib as lib
from keras_relational.experiments.relations_game_config import RelationsGameConfig
from keras_relational.models import relations_game as models

# Grappler off: its passes over each new function cost these tiny runs more than they save.
pytestmark = pytest.mark.usefixtures("no_graph_optimizer")

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


def test_numpy_batches_are_tf_data_batches_on_any_backend():
    # Unshuffled, the NumPy pipeline gives tf.data's batches exactly (the last one partial).
    data = relations_game.generate("row_patterns_5", "stripes", 30, seed=1)
    numpy_batches = lib.make_dataset(data, 8, input_pipeline="numpy")
    assert isinstance(numpy_batches, lib.NumpyBatches) and len(numpy_batches) == 4
    tf_batches = list(lib.make_dataset(data, 8, input_pipeline="tf.data"))
    for index, (features, labels) in enumerate(tf_batches):
        numpy_features, numpy_labels = numpy_batches[index]
        assert numpy_features["image"].dtype == np.float32
        for key in ("image", "task"):
            np.testing.assert_array_equal(numpy_features[key], np.asarray(features[key]))
        np.testing.assert_array_equal(numpy_labels, np.asarray(labels))
    assert len(numpy_batches[3][1]) == 6
    with pytest.raises(IndexError, match="batch 4"):
        numpy_batches[4]


def test_numpy_batches_shuffle_each_pass_and_repeat_by_index():
    data = relations_game.generate("same", "pentominoes", 7, seed=2)
    stream = lib.NumpyBatches(data, 3, shuffle_seed=5, repeat=True)
    assert stream.num_batches is None
    with pytest.raises(TypeError, match="endless"):
        len(stream)
    rows = np.concatenate([stream.rows(i) for i in range(7)])  # 21 positions: three passes
    passes = rows.reshape(3, 7)
    for one_pass in passes:
        assert sorted(one_pass) == list(range(7))  # every example once a pass
    assert len({tuple(p) for p in passes}) == 3  # a new order each pass
    np.testing.assert_array_equal(rows[6:9], [passes[0][6], passes[1][0], passes[1][1]])
    # A batch depends on its index only: read backwards, in a new object, the same rows.
    again = lib.NumpyBatches(data, 3, shuffle_seed=5, repeat=True)
    for index in reversed(range(7)):
        np.testing.assert_array_equal(again.rows(index), stream.rows(index))
        np.testing.assert_array_equal(again[index][1], data["labels"][stream.rows(index)])
    other = lib.NumpyBatches(data, 3, shuffle_seed=6, repeat=True)
    assert not np.array_equal(np.concatenate([other.rows(i) for i in range(7)]), rows)
    with pytest.raises(ValueError, match=r"`batch_size`.*received batch_size=0"):
        lib.NumpyBatches(data, 0)


def test_fit_reads_the_numpy_stream_on_across_epochs():
    # With steps_per_epoch, model.fit keeps one iterator over the endless stream: the epochs
    # train on consecutive batches, not the first ones again.
    read = []

    class Recorded(lib.NumpyBatches):
        def __getitem__(self, index):
            read.append(int(index))
            return super().__getitem__(index)

    model = models.build_model("mlp1")
    lib.compile_model(model, "sgd", 0.01, 2)
    model.fit(Recorded(tiny_data(n=12), 5, shuffle_seed=3, repeat=True), epochs=3,
              steps_per_epoch=4, shuffle=False, verbose=0)
    assert set(range(12)) <= set(read)  # 3 epochs x 4 batches, each batch read
    assert read[-12:] == sorted(read[-12:])  # in order (after Keras' first peeks at batch 0)


def test_input_pipeline_errors_name_the_argument(tmp_path):
    with pytest.raises(ValueError, match=r"`input_pipeline`.*'tf.data' or 'numpy'.*'grain'"):
        lib.train_eval(str(tmp_path), input_pipeline="grain")
    assert not os.listdir(tmp_path)


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
    # Re-running with the same root_dir does not train again and returns the same results; the
    # settings given as a config object are those given as keyword arguments.
    again = lib.train_eval(root, RelationsGameConfig(central="predinet", task="same", **TINY))
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
    # The config checks its settings together when it is built, before any file is written.
    with pytest.raises(ValueError, match=r"`curriculum_task`.*'colour_and_or_shape'"):
        RelationsGameConfig(task="between", curriculum_task="colour_and_or_shape")
    with pytest.raises(ValueError, match=r"`dtype_policy`.*'float16'"):
        lib.train_eval(str(tmp_path / "never"), RelationsGameConfig(), dtype_policy="float16")
    assert not os.path.exists(tmp_path / "never")


@pytest.mark.slow
@pytest.mark.subprocess
def test_binary_runs(tmp_path):
    import sys

    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    root = str(tmp_path / "binary")
    env = warm_python.binary_env()
    env.pop("KERAS_BACKEND", None)
    # --data_file / --eval_file: files in DeepMind's released layout (relations_game.save_npz).
    data_file, eval_file = str(tmp_path / "between_pentos.npz"), str(tmp_path / "between_x.npz")
    relations_game.save_npz(data_file, relations_game.generate("between", "pentominoes", 20))
    relations_game.save_npz(eval_file, relations_game.generate("between", "stripes", 10))
    result = warm_python.run(
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


_JAX_WITHOUT_TENSORFLOW = textwrap.dedent("""
    import json, sys

    class NoTensorFlow:  # as on the GPU machine, which has JAX and no TensorFlow
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("tensorflow", "tf_keras"):
                raise ModuleNotFoundError(f"No module named {{name!r}}")

    sys.meta_path.insert(0, NoTensorFlow())
    sys.path.insert(0, {repo!r})  # benchmarks/ is a folder of scripts
    import keras
    from keras_relational.experiments import relations_game_lib as lib
    from benchmarks import reproduce_predinet as reproduce

    tiny = dict(num_batches=4, eval_interval=2, batch_size=5, num_train_examples=40,
                num_eval_examples=20, num_monitor_examples=10, steps_per_execution=2,
                central_kwargs={{"num_heads": 2, "key_dim": 3, "num_relations": 4}})
    single = lib.train_eval({root!r} + "/single", task="same", pause_above_accuracy=1e-6,
                            pause_interval=2, num_validation_examples=20, **tiny)
    again = lib.train_eval({root!r} + "/single", task="same", pause_above_accuracy=1e-6,
                           pause_interval=2, num_validation_examples=20, **tiny)
    text = reproduce.run("table1", {root!r} + "/table1", tasks=("between",),
                         centrals=("relation_net",), output={root!r} + "/table1_results",
                         **dict(tiny, central_kwargs=None))
    assert "tensorflow" not in sys.modules
    print(json.dumps(dict(backend=keras.backend.backend(), single=single, again=again,
                          table_row="| between | stripes | RN | 0 |" in text)))
""")


@pytest.mark.slow
@pytest.mark.subprocess
def test_trains_under_jax_without_tensorflow(tmp_path):
    # The GPU machine has JAX and no TensorFlow: the NumPy pipeline, TensorBoard scalars without
    # TensorFlow, no SavedModel (said in the results), the resumption and a Table 1 cell of the
    # reproduction script.
    import subprocess
    import sys

    from tensorboard_tags import scalar_tags

    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    root = str(tmp_path)
    done = subprocess.run([sys.executable, "-c", _JAX_WITHOUT_TENSORFLOW.format(repo=repo,
                                                                                root=root)],
                          cwd=repo, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, KERAS_BACKEND="jax"))
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    single = report["single"]
    assert report["backend"] == "jax" and report["table_row"]
    assert (single["backend"], single["input_pipeline"]) == ("jax", "numpy")
    assert single["export"] == without_tensorflow.SAVED_MODEL_SKIPPED and single["num_batches"] == 4
    assert single["paused_batches"] == 2  # every check passes a threshold of 1e-6
    assert report["again"] == single  # the finished run is loaded, not trained again
    assert "already finished" in done.stdout
    stage = os.path.join(root, "single")
    assert os.path.exists(os.path.join(stage, "model.keras"))
    assert not os.path.exists(os.path.join(stage, "saved_model"))
    evaluations = scalar_tags(os.path.join(stage, "eval"))
    assert [step for step, _ in evaluations["accuracy/hexominoes"]] == [2, 4]
    assert [step for step, _ in evaluations["accuracy/stripes"]] == [2, 4]
    assert set(scalar_tags(os.path.join(stage, "train"))) >= {"epoch_loss", "epoch_accuracy"}
    with open(os.path.join(root, "table1_results.json")) as f:
        (cell,) = json.load(f)["runs"]
    assert (cell["central"], cell["backend"], cell["input_pipeline"]) == (
        "relation_net", "jax", "numpy")
