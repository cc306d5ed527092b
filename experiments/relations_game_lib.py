"""Relations Game training library: input pipelines, single-task training and the 4-stage
transfer protocol of Shanahan et al. (2020) (Table 1; Fig. 3).

``train_eval(root_dir, config)`` (a :class:`RelationsGameConfig`, or its fields as keyword
arguments) trains on pentominoes and evaluates on the held-out hexomino and
stripes sets. Without ``curriculum_task`` it is one single-task run (Table 1). With
``curriculum_task`` it runs the transfer protocol (Fig. 3), one sub-directory per
stage:

1. ``stage_1_scratch``: a fresh model trained on the target task.
2. ``stage_2_curriculum``: a new fresh model trained on the curriculum task.
3. ``stage_3_reuse``: the stage-2 model with the input CNN and the central module frozen and
   the output MLP re-initialised, training only the output MLP on the target task.
4. ``stage_4_input_net``: the stage-3 model with the CNN still frozen (stage-2 weights), the
   central module and output MLP re-initialised and trained on the target task.

It runs under any Keras backend, with or without TensorFlow installed (``KERAS_BACKEND=jax`` on a
GPU machine that has no TensorFlow). The input pipeline (``input_pipeline``) is ``tf.data``
under the TensorFlow backend and ``NumpyBatches`` (a ``keras.utils.PyDataset``: the same batches
on every backend) under the others. TensorBoard scalars go through
``keras_relational.without_tensorflow.ScalarWriter`` (the training scalars through Keras'
TensorBoard callback where TensorFlow is installed), and the SavedModel is written only where
TensorFlow is installed.

Layout of a training directory (``root_dir`` for a single task, ``root_dir/<stage>`` otherwise):
``train/`` (TensorBoard: the epoch loss and accuracy), ``eval/`` (held-out accuracy every
``eval_interval`` batches, TensorBoard), ``backup/`` (``keras.callbacks.BackupAndRestore``: an
interrupted run resumes at its last completed interval), ``checkpoint.weights.h5`` (latest
weights), ``final.weights.h5`` + ``results.json`` (a finished stage is skipped on re-run),
``curve.json`` (the held-out monitor accuracy every ``eval_interval`` batches), ``model.keras``
(the whole trained model, for ``keras_relational.analysis``) and ``saved_model/``
(``model.export``, where TensorFlow is installed).
"""

import dataclasses
import json
import math
import os
import time

import keras
import numpy as np

from keras_relational import faults, json_files, validation, whole_files, without_tensorflow
from keras_relational.environments import relations_game
from keras_relational.experiments import accuracy_targets, distribution_lib
from keras_relational.experiments.relations_game_config import (
    INPUT_PIPELINES,
    STAGES,
    RelationsGameConfig,
)
from keras_relational.experiments.safe_backup import SafeBackupAndRestore
from keras_relational.models import precision
from keras_relational.models import relations_game as models
from keras_relational.run_settings import json_settings, resumable

HELD_OUT_SETS = ("hexominoes", "stripes")


def held_out_sets(task):
    """The held-out object sets of ``task`` (no stripes for ``colour_and_or_shape``)."""
    return ("hexominoes",) if task == "colour_and_or_shape" else HELD_OUT_SETS


def default_input_pipeline():
    """``"tf.data"`` under the TensorFlow backend, ``"numpy"`` (``NumpyBatches``) under others."""
    return "tf.data" if keras.backend.backend() == "tensorflow" else "numpy"


def check_input_pipeline(input_pipeline):
    """``input_pipeline`` or, for None, ``default_input_pipeline()``; raises a ValueError naming
    the argument for an unknown one, or ``"tf.data"`` where TensorFlow is not installed."""
    if input_pipeline is None:
        return default_input_pipeline()
    validation.check_one_of("input_pipeline", input_pipeline, INPUT_PIPELINES)
    if input_pipeline == "tf.data" and not without_tensorflow.tensorflow_installed():
        raise ValueError("`input_pipeline`: 'tf.data' needs TensorFlow, which is not installed "
                         "here; expected 'numpy' (or None, the backend's default), received "
                         "'tf.data'.")
    return input_pipeline


def model_inputs(images, tasks):
    """The model's ``{"image", "task"}`` inputs (NumPy) for uint8 ``images`` and task ids: float32
    pixels (the model itself divides by 256) and the 5-slot one-hot task."""
    return {"image": np.asarray(images, np.float32),
            "task": np.eye(models.NUM_TASKS, dtype=np.float32)[np.asarray(tasks)]}


def _to_model_inputs(images, tasks, labels):
    import tensorflow as tf

    features = {"image": tf.cast(images, tf.float32),
                "task": tf.one_hot(tasks, models.NUM_TASKS, dtype=tf.float32)}
    return features, labels


class NumpyBatches(keras.utils.PyDataset):
    """``({"image", "task"}, label)`` batches of generated ``data`` as NumPy arrays, for
    ``model.fit`` / ``evaluate`` / ``predict`` under any Keras backend (no TensorFlow).

    Batch ``i`` holds the examples at positions ``[i * batch_size, (i + 1) * batch_size)`` of
    the stream: the examples in order, or with ``shuffle_seed`` each pass over them in a seeded
    order of its own (pass ``p``: ``np.random.RandomState(shuffle_seed * 7919 + p)``).
    ``repeat``: the passes follow each other without end, a batch may straddle two of them and
    every batch is full (``num_batches`` is None); otherwise one pass, the last batch partial.
    A batch depends on its index only, so the same ``data`` and seed give the same batches on
    every backend and machine.
    """

    def __init__(self, data, batch_size, shuffle_seed=None, repeat=False):
        super().__init__()
        self.data = data
        self.batch_size = int(batch_size)
        self.shuffle_seed = shuffle_seed
        self.repeat = repeat
        self.size = len(data["labels"])
        if self.batch_size < 1 or self.size < 1:
            raise ValueError(f"`batch_size` and the examples of `data`: expected at least 1 "
                             f"each, received batch_size={batch_size!r} and {self.size} "
                             f"examples.")
        self._order = (None, None)  # (pass, its order): the pass being read

    @property
    def num_batches(self):
        return None if self.repeat else math.ceil(self.size / self.batch_size)

    def __len__(self):
        if self.repeat:
            raise TypeError("NumpyBatches(repeat=True) is endless: it has no len().")
        return self.num_batches

    def _pass_order(self, index):
        cached, order = self._order  # read once: safe with a PyDataset's worker threads
        if cached != index:
            seed = validation.offset_seed("shuffle_seed", self.shuffle_seed, index, scale=7919)
            order = np.random.RandomState(seed).permutation(self.size)
            self._order = (index, order)
        return order

    def rows(self, index):
        """The example rows of batch ``index``."""
        end = (index + 1) * self.batch_size
        positions = np.arange(index * self.batch_size,
                              end if self.repeat else min(end, self.size))
        if positions.size == 0:
            raise IndexError(f"NumpyBatches: batch {index} is past the last "
                             f"({self.num_batches - 1}).")
        if self.shuffle_seed is None:
            return positions % self.size
        rows = np.empty(len(positions), np.int64)
        passes = positions // self.size
        for number in np.unique(passes):
            inside = passes == number
            rows[inside] = self._pass_order(int(number))[positions[inside] % self.size]
        return rows

    def __getitem__(self, index):
        rows = self.rows(int(index))
        return (model_inputs(self.data["images"][rows], self.data["tasks"][rows]),
                np.asarray(self.data["labels"][rows]))


def make_dataset(data, batch_size, shuffle_seed=None, repeat=False, input_pipeline=None):
    """``({"image", "task"}, label)`` batches from generated ``data`` (the dict of
    ``relations_game.generate``) for ``model.fit`` / ``evaluate`` / ``predict``.

    ``input_pipeline``: ``"tf.data"`` (a ``tf.data.Dataset``; images stay uint8 until batched,
    shuffled by ``tf.data`` with ``shuffle_seed``), ``"numpy"`` (``NumpyBatches``, any backend,
    no TensorFlow) or None (``default_input_pipeline()``: tf.data under the TensorFlow backend).
    ``repeat``: an endless stream of full batches. The two pipelines shuffle in different orders.
    """
    if check_input_pipeline(input_pipeline) == "numpy":
        return NumpyBatches(data, batch_size, shuffle_seed=shuffle_seed, repeat=repeat)
    import tensorflow as tf

    dataset = tf.data.Dataset.from_tensor_slices((data["images"], data["tasks"], data["labels"]))
    if shuffle_seed is not None:
        dataset = dataset.shuffle(len(data["labels"]), seed=shuffle_seed,
                                  reshuffle_each_iteration=True)
    if repeat:
        dataset = dataset.repeat()
    dataset = dataset.batch(batch_size, drop_remainder=repeat)
    return dataset.map(_to_model_inputs, num_parallel_calls=tf.data.AUTOTUNE).prefetch(2)


def make_optimizer(optimizer, learning_rate):
    """Plain SGD (the paper; no momentum) or Adam with TF1's epsilon 1e-8 (Supplement)."""
    if optimizer == "sgd":
        return keras.optimizers.SGD(learning_rate)
    if optimizer == "adam":
        return keras.optimizers.Adam(learning_rate, epsilon=1e-8)
    raise ValueError(f"`optimizer`: expected 'sgd' or 'adam', received {optimizer!r}.")


def freeze_for_stage(model, stage, seed=None):
    """Applies the freezing / re-initialisation of ``stage`` (3 or 4) to ``model`` in place."""
    cnn, central = model.get_layer(models.INPUT_CNN), model.get_layer(models.CENTRAL)
    outputs = [model.get_layer(name) for name in models.OUTPUT_LAYERS]
    if stage == 3:
        cnn.trainable = False
        central.trainable = False
        models.reinitialize(outputs, seed=seed)
    elif stage == 4:
        cnn.trainable = False
        central.trainable = True
        models.reinitialize([central] + outputs, seed=seed)
    else:
        raise ValueError(f"`stage`: expected 3 or 4, received {stage!r}.")


class _HeldOutEvaluation(keras.callbacks.Callback):
    """Every epoch (= ``eval_interval`` batches): accuracy on fixed held-out monitor batches,
    written to ``eval/`` for TensorBoard, to ``curve_path`` and printed; optional early stop and
    time limit."""

    def __init__(self, datasets, log_dir, batches_per_epoch, stage_name,
                 early_stopping_accuracy=None, curve_path=None, time_limit_s=None):
        super().__init__()
        self.datasets = datasets
        self.log_dir = log_dir
        self.writer = None  # opened at the first evaluation: a finished stage writes no file
        self.batches_per_epoch = batches_per_epoch
        self.stage_name = stage_name
        self.early_stopping_accuracy = early_stopping_accuracy
        self.curve_path = curve_path
        self.time_limit_s = time_limit_s
        self.stopped_by_time_limit = False
        self.start = time.time()
        self.curve = []
        if curve_path and os.path.exists(curve_path):  # a resumed stage keeps its earlier points
            with open(curve_path) as f:
                self.curve = json.load(f)

    def on_epoch_end(self, epoch, logs=None):
        step = (epoch + 1) * self.batches_per_epoch
        accuracies = {name: self.model.evaluate(ds, verbose=0, return_dict=True)["accuracy"]
                      for name, ds in self.datasets.items()}
        if self.writer is None:
            self.writer = without_tensorflow.ScalarWriter(self.log_dir)
        self.writer.scalars(step, {f"accuracy/{name}": accuracy
                                   for name, accuracy in accuracies.items()})
        shown = " ".join(f"{k}={v:.3f}" for k, v in accuracies.items())
        train = (logs or {}).get("accuracy", float("nan"))
        print(f"[{self.stage_name}] batch {step}: train={train:.3f} {shown} "
              f"({time.time() - self.start:.0f} s)", flush=True)
        if self.curve_path:
            self.curve = [p for p in self.curve if p["batch"] < step]
            self.curve.append({"batch": step, "seconds": time.time() - self.start,
                               **{k: float(v) for k, v in accuracies.items()}})
            json_files.write_json(self.curve_path, self.curve, indent=2)
        if self.time_limit_s is not None and time.time() - self.start >= self.time_limit_s:
            print(f"[{self.stage_name}] time limit of {self.time_limit_s:.0f} s reached at "
                  f"batch {step}", flush=True)
            self.stopped_by_time_limit = True
            self.model.stop_training = True
        first = next(iter(accuracies.values()), None)
        if self.early_stopping_accuracy is not None and first is not None \
                and accuracy_targets.reaches(first, self.early_stopping_accuracy):
            print(f"[{self.stage_name}] early stop: {first:.3f} >= "
                  f"{self.early_stopping_accuracy}", flush=True)
            self.model.stop_training = True

    def on_train_end(self, logs=None):
        if self.writer is not None:
            self.writer.close()
            self.writer = None


class _EpochScalars(keras.callbacks.Callback):
    """``keras.callbacks.TensorBoard``'s epoch scalars (``epoch_loss``, ``epoch_accuracy``, ...
    at step = epoch) written without TensorFlow, to ``log_dir``."""

    def __init__(self, log_dir):
        super().__init__()
        self.log_dir = log_dir
        self.writer = None

    def on_epoch_end(self, epoch, logs=None):
        if self.writer is None:
            self.writer = without_tensorflow.ScalarWriter(self.log_dir)
        self.writer.scalars(epoch, {f"epoch_{name}": float(value)
                                    for name, value in (logs or {}).items()})

    def on_train_end(self, logs=None):
        if self.writer is not None:
            self.writer.close()
            self.writer = None


class _PauseWhileAccurate(keras.callbacks.Callback):
    """The convergence rule of the authors' released notebook (``train_model`` in
    ``PrediNet.ipynb``, Shanahan et al. 2020): every ``interval`` batches, the accuracy on a fresh
    batch of ``batch_size`` validation images; while it is above ``threshold`` the next
    ``interval`` batches apply no update, and updates resume after the first check at or below
    it. Here a paused interval runs SGD at learning rate 0 (exactly no update; SGD only, since
    Adam's moments would still move).

    Every check is appended to ``log_path`` (``[{"batch", "accuracy", "paused"}, ...]``); a
    resumed stage keeps the checks up to the batch it resumes from and draws the same batches.
    """

    def __init__(self, validation_data, threshold, interval, batch_size, learning_rate, seed,
                 log_path):
        super().__init__()
        self.validation_data = validation_data
        self.threshold = np.float32(threshold)
        self.interval = interval
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.seed = seed
        self.log_path = log_path
        self.checks = []
        # The validation stream: which images the index-th check draws (NumpyBatches' order).
        self._batches = NumpyBatches(validation_data, batch_size, shuffle_seed=seed, repeat=True)

    def _draw(self, index):
        """The ``index``-th validation batch: passes over the pool, each in a seeded order."""
        rows = self._batches.rows(index)
        return {key: value[rows] for key, value in self.validation_data.items()}

    def _set_paused(self, paused):
        self.model.optimizer.learning_rate = 0.0 if paused else self.learning_rate

    def on_train_begin(self, logs=None):
        done = int(self.model.optimizer.iterations)
        if os.path.exists(self.log_path):  # a resumed stage: the checks before its restart
            with open(self.log_path) as f:
                self.checks = [c for c in json.load(f) if c["batch"] <= done]
        self._set_paused(bool(self.checks) and self.checks[-1]["paused"])

    def on_train_batch_end(self, batch, logs=None):
        done = int(self.model.optimizer.iterations)
        next_check = (len(self.checks) + 1) * self.interval
        if done < next_check:
            return
        data = self._draw(len(self.checks))
        logits = self.model.predict_on_batch(model_inputs(data["images"], data["tasks"]))
        accuracy = np.float32(np.mean(np.argmax(logits, -1) == data["labels"]))
        paused = bool(accuracy > self.threshold)
        self.checks.append({"batch": next_check, "accuracy": float(accuracy), "paused": paused})
        json_files.write_json(self.log_path, self.checks)
        self._set_paused(paused)

    def on_train_end(self, logs=None):
        self._set_paused(False)

    def paused_batches(self, num_batches):
        """Batches of the first ``num_batches`` that applied no update."""
        return int(sum(max(0, min(self.interval, num_batches - c["batch"]))
                       for c in self.checks if c["paused"]))


def compile_model(model, optimizer, learning_rate, steps_per_execution=1):
    """Softmax cross-entropy on integer labels, accuracy, ``jit_compile=True`` (XLA).

    Call it inside the ``scope()`` of the strategy the model was built under (the optimizer is
    created here); with several replicas XLA is off and ``steps_per_execution`` is 1
    (``distribution_lib.compile_options``).
    """
    model.compile(optimizer=make_optimizer(optimizer, learning_rate),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
                  **distribution_lib.compile_options(jit_compile=True,
                                                     steps_per_execution=steps_per_execution))


def train_stage(model, stage_dir, train_data, eval_data, num_batches, batch_size, optimizer,
                learning_rate, eval_interval, seed, stage_name, early_stopping_accuracy=None,
                num_monitor_examples=250, steps_per_execution=50, export=True, verbose=0,
                time_limit_s=None, dtype_policy=validation.DEFAULT_DTYPE_POLICY, data_settings=None,
                pause_above_accuracy=None, validation_data=None, pause_interval=500,
                pause_batch_size=250, input_pipeline=None):
    """Trains ``model`` (already frozen / re-initialised as the stage requires) in ``stage_dir``.

    Returns ``{"<object set>": final held-out accuracy, ..., "num_batches": batches trained,
    "stopped_by_time_limit": bool}``. Training stops early at the first evaluation after
    ``time_limit_s`` seconds (if set). A stage whose ``results.json`` exists is not trained
    again: its final weights are loaded. ``data_settings`` (a dict, e.g. the generator's
    options) is recorded in the results. ``pause_above_accuracy``: the notebook's rule
    (``_PauseWhileAccurate``) on batches of ``pause_batch_size`` drawn from ``validation_data``
    every ``pause_interval`` batches; the results then hold ``"paused_batches"``.
    ``input_pipeline``: ``make_dataset``'s (None: the backend's default); the results record it
    and the Keras backend. ``export``: the SavedModel where TensorFlow is installed; elsewhere
    the results say it was skipped (``"export"``) and ``model.keras`` is the trained model.
    """
    input_pipeline = check_input_pipeline(input_pipeline)
    os.makedirs(stage_dir, exist_ok=True)
    results_path = os.path.join(stage_dir, "results.json")
    final_weights = os.path.join(stage_dir, "final.weights.h5")
    compile_model(model, optimizer, learning_rate, min(steps_per_execution, eval_interval))
    if os.path.exists(results_path) and os.path.exists(final_weights):
        model.load_weights(final_weights)
        with open(results_path) as f:
            results = json.load(f)
        print(f"[{stage_name}] already finished, loaded {final_weights}: {results}", flush=True)
        return results
    eval_sets = {name: make_dataset(data, 250, input_pipeline=input_pipeline)
                 for name, data in eval_data.items()}
    monitor_sets = {name: make_dataset({k: v[:num_monitor_examples] for k, v in data.items()},
                                       250, input_pipeline=input_pipeline)
                    for name, data in eval_data.items()}
    epochs = max(1, num_batches // eval_interval)
    monitor = _HeldOutEvaluation(monitor_sets, os.path.join(stage_dir, "eval"), eval_interval,
                                 stage_name, early_stopping_accuracy,
                                 os.path.join(stage_dir, "curve.json"), time_limit_s)
    pause = None
    if pause_above_accuracy is not None:
        pause = _PauseWhileAccurate(validation_data, pause_above_accuracy, pause_interval,
                                    pause_batch_size, learning_rate, seed,
                                    os.path.join(stage_dir, "pause_checks.json"))
    tensorflow = without_tensorflow.tensorflow_installed()
    callbacks = [
        # Kept after fit: a kill before results.json is written loses no epoch of the stage.
        SafeBackupAndRestore(os.path.join(stage_dir, "backup"), delete_checkpoint=False),
        keras.callbacks.ModelCheckpoint(os.path.join(stage_dir, "checkpoint.weights.h5"),
                                        save_weights_only=True),
        # -> stage_dir/train (Keras' TensorBoard callback writes through tf.summary)
        keras.callbacks.TensorBoard(stage_dir, update_freq="epoch") if tensorflow
        else _EpochScalars(os.path.join(stage_dir, "train")),
        monitor,
    ] + ([pause] if pause else [])
    train_batches = make_dataset(train_data, batch_size, shuffle_seed=seed, repeat=True,
                                 input_pipeline=input_pipeline)
    history = model.fit(train_batches, epochs=epochs,
                        steps_per_epoch=min(eval_interval, num_batches),
                        callbacks=callbacks, shuffle=False, verbose=verbose)
    results = {name: float(model.evaluate(ds, verbose=0, return_dict=True)["accuracy"])
               for name, ds in eval_sets.items()}
    # history.epoch holds the epoch indices run by this call (a resumed run starts late).
    epochs_done = history.epoch[-1] + 1 if history.epoch else epochs
    results["num_batches"] = int(epochs_done * min(eval_interval, num_batches))
    results["num_eval_examples"] = {name: int(len(d["labels"])) for name, d in eval_data.items()}
    results["stopped_by_time_limit"] = monitor.stopped_by_time_limit
    if pause:
        results["pause_above_accuracy"] = float(pause_above_accuracy)
        results["paused_batches"] = pause.paused_batches(results["num_batches"])

    results["dtype_policy"] = dtype_policy
    results["input_pipeline"] = input_pipeline
    results["backend"] = keras.backend.backend()
    if export and not tensorflow:
        results["export"] = without_tensorflow.SAVED_MODEL_SKIPPED
        print(f"[{stage_name}] {without_tensorflow.SAVED_MODEL_SKIPPED}; model.keras holds the "
              f"trained model", flush=True)
    results.update(data_settings or {})
    faults.point("export")  # the fault tests kill here: results.json is not written yet
    # Each output whole or absent (a kill here re-runs this export, never reads half of one).
    whole_files.write_whole(final_weights, model.save_weights)
    whole_files.write_whole(os.path.join(stage_dir, "model.keras"), model.save)
    if export and tensorflow:
        whole_files.write_whole(os.path.join(stage_dir, "saved_model"),
                                lambda path: model.export(path, verbose=False))
    json_files.write_json(results_path, results, indent=2)
    print(f"[{stage_name}] final held-out accuracy: {results}", flush=True)
    return results


def _generate(task, object_set, num_examples, seed, generator_options=None):
    return relations_game.generate(task, object_set, num_examples, seed=seed,
                                   **(generator_options or {}))


def load_eval_files(paths, num_classes=None):
    """``{file name without .npz: data}`` of DeepMind-layout ``.npz`` files (``load_npz``)."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    evals = {}
    for path in paths:
        name = os.path.splitext(os.path.basename(os.fspath(path)))[0]
        if name in evals:
            raise ValueError(f"`eval_files`: expected files with distinct names, received "
                             f"{name!r} twice ({list(paths)}).")
        evals[name] = relations_game.load_npz(path, num_classes=num_classes)
    return evals


def make_config(config=None, **overrides):
    """A :class:`RelationsGameConfig` from ``config`` (None: the defaults) with ``overrides``
    (any of its fields)."""
    config = config if config is not None else RelationsGameConfig()
    return dataclasses.replace(config, **overrides) if overrides else config


@resumable(
    settings=lambda arguments: json_settings(dataclasses.asdict(make_config(**arguments))),
    optimizer=("learning_rate",),
    free=("num_batches", "early_stopping_accuracy", "steps_per_execution", "export", "verbose",
          "distribution_strategy", "time_limit_s", "input_pipeline"))
def train_eval(root_dir, config=None, **overrides):
    """Trains on pentominoes, evaluates on hexominoes and stripes; transfer protocol optional.

    Args:
        root_dir: output directory (see the module docstring); re-running resumes.
        config: a :class:`RelationsGameConfig` (None: the paper's defaults), whose attributes
            document every setting.
        **overrides: fields of the config over ``config``'s, e.g. ``central="mlp1"``,
            ``task="same"``, ``num_batches=500``.

    Returns:
        Single task: ``{"hexominoes": accuracy, "stripes": accuracy, "num_batches": n, ...}``.
        Protocol: ``{stage name: that dict}`` for the 4 stages.
    """
    config = make_config(config, **overrides)
    input_pipeline = check_input_pipeline(config.input_pipeline)
    # First, before any TensorFlow work: a multi-worker strategy must be created at startup.
    strategy = distribution_lib.get_strategy(config.distribution_strategy)
    os.makedirs(root_dir, exist_ok=True)
    keras.utils.set_random_seed(config.seed)
    common = dict(batch_size=config.batch_size, optimizer=config.optimizer,
                  learning_rate=config.learning_rate,
                  eval_interval=config.effective_eval_interval,
                  early_stopping_accuracy=config.early_stopping_accuracy,
                  num_monitor_examples=config.num_monitor_examples,
                  steps_per_execution=config.steps_per_execution, export=config.export,
                  verbose=config.verbose, time_limit_s=config.time_limit_s,
                  dtype_policy=config.dtype_policy,
                  pause_above_accuracy=config.pause_above_accuracy,
                  pause_interval=config.pause_interval,
                  pause_batch_size=config.num_monitor_examples, input_pipeline=input_pipeline,
                  data_settings=config.data_settings)
    target_train, target_eval, target_valid = _stage_data(config, config.task, 0,
                                                          config.data_file, config.eval_files)
    with strategy.scope():
        if not config.curriculum_task:
            print(f"Single task {config.task!r}, {config.central}, {config.num_batches} batches "
                  f"of {config.batch_size}", flush=True)
            return train_stage(_new_model(config), root_dir, target_train, target_eval,
                               config.num_batches, seed=config.seed, stage_name=config.task,
                               validation_data=target_valid, **common)
        return _transfer_protocol(config, root_dir, (target_train, target_eval, target_valid),
                                  common)


def _stage_seed(config, stage):
    return validation.offset_seed("seed", config.seed, stage)


def _new_model(config):
    with precision.dtype_policy_scope(config.dtype_policy):
        return models.build_model(config.central, num_classes=config.num_classes,
                                  central_kwargs=config.central_kwargs)


def _stage_data(config, task, offset, train_file=None, eval_paths=None):
    """``(train, evals, validation)`` of ``task``: generated (seeds ``offset`` on) or loaded."""
    seed_of = lambda index: validation.offset_seed(  # noqa: E731
        "seed", config.seed, index, scale=1000)
    options = config.generator_options
    if train_file:
        train = relations_game.load_npz(train_file, num_classes=config.num_classes)
    else:
        train = _generate(task, "pentominoes", config.num_train_examples, seed_of(offset),
                          options)
    if eval_paths:
        evals = load_eval_files(eval_paths, config.num_classes)
    else:
        evals = {s: _generate(task, s, config.num_eval_examples, seed_of(offset + 1 + i),
                              options)
                 for i, s in enumerate(held_out_sets(task))}
    valid = None
    if config.pause_above_accuracy is not None:
        valid = _generate(task, held_out_sets(task)[0], config.num_validation_examples,
                          seed_of(offset + 50), options)
    return train, evals, valid


def _transfer_protocol(config, root_dir, target, common):
    """The 4 stages of Shanahan et al. 2020, Fig. 3 (the module docstring); their results."""
    target_train, target_eval, target_valid = target
    curriculum_train, curriculum_eval, curriculum_valid = _stage_data(
        config, config.curriculum_task, 100)
    results = {}
    print(f"Transfer protocol: target {config.task!r}, curriculum {config.curriculum_task!r}, "
          f"{config.central}, {config.num_batches} batches of {config.batch_size} per stage",
          flush=True)
    stage_dir = lambda stage: os.path.join(root_dir, STAGES[stage])  # noqa: E731
    results[STAGES[0]] = train_stage(_new_model(config), stage_dir(0), target_train,
                                     target_eval, config.num_batches, seed=config.seed,
                                     stage_name=STAGES[0], validation_data=target_valid,
                                     **common)
    pretrained = _new_model(config)
    results[STAGES[1]] = train_stage(pretrained, stage_dir(1), curriculum_train, curriculum_eval,
                                     config.num_batches, seed=_stage_seed(config, 1),
                                     stage_name=STAGES[1], validation_data=curriculum_valid,
                                     **common)
    for stage in (2, 3):
        freeze_for_stage(pretrained, stage + 1, seed=_stage_seed(config, stage))
        results[STAGES[stage]] = train_stage(pretrained, stage_dir(stage), target_train,
                                             target_eval, config.num_batches,
                                             seed=_stage_seed(config, stage),
                                             stage_name=STAGES[stage],
                                             validation_data=target_valid, **common)
    json_files.write_json(os.path.join(root_dir, "results.json"), results, indent=2)
    return results


def numpy_accuracy(model, data, batch_size=250):
    """Accuracy of ``model`` on generated ``data`` (a NumPy helper for notebooks and tests)."""
    logits = model.predict(NumpyBatches(data, batch_size), verbose=0)
    return float(np.mean(np.argmax(logits, -1) == data["labels"]))
