"""Mitchell & Bowers' rule-learning experiment (Table I): the Marcus et al. ABA / ABB items.

``rule_learning_train_eval`` trains one model (symbol-axis convolution, MLP or recurrent net) on
the 32 training items and tests it on the 4 unseen-syllable items; ``train_seeds`` runs several
models over several seeds and writes their medians (``python -m
keras_relational.experiments.train_rule_learning``).

Re-running resumes: a run whose ``results.json`` was written with the same settings is not
trained again (``safe_backup.read_finished``). A run is the checkpoint interval: it trains its
2 x ``epochs`` steps as one Keras epoch, in seconds.
"""

import os
import time

import keras
import numpy as np
from absl import logging

from keras_relational import run_lock, validation
from keras_relational.environments import rule_learning
from keras_relational.experiments import distribution_lib, safe_backup, symmetry_lib
from keras_relational.models import precision, symmetry

RULE_MODELS = ("conv", "mlp", "rnn")


def build_rule_model(model, use_bias=False):
    """One of Table I's models (``"conv"``, ``"mlp"``, ``"rnn"``) on 12 x 3 grids."""
    if model == "conv":
        return symmetry.symbol_conv_classifier(use_bias=use_bias)
    if model == "mlp":
        return symmetry.rule_mlp_classifier()
    if model == "rnn":
        return symmetry.rule_rnn_classifier()
    raise ValueError(f"model must be one of {RULE_MODELS}, received model={model!r}.")


@run_lock.locks_root_dir
def rule_learning_train_eval(root_dir, model="conv", seed=0, epochs=1000, batch_size=16,
                             learning_rate=0.1, use_bias=False, restart_until_fit=False,
                             max_restarts=10, tensorboard=True, export=True, verbose=0,
                             steps_per_execution=50, distribution_strategy="default",
                             dtype_policy=validation.DEFAULT_DTYPE_POLICY):
    """Trains one Table I model on the 32 Marcus items and tests it on the 4 unseen-syllable items.

    Defaults are the paper's: Adam(lr 0.1), 1000 epochs, batch 16 (Mitchell & Bowers, Sec. II).
    ``restart_until_fit`` re-initialises (seed + 1000 * attempt) while the training accuracy is
    below 100%, mirroring the palindrome restart rule of App. B (not the paper's: Sec. II trains
    each model once).
    ``distribution_strategy`` (``distribution_lib.STRATEGIES``): the model and ``compile`` are
    created under its ``scope()``; ``batch_size`` is the global batch size.
    ``dtype_policy``: ``"float32"``, ``"mixed_bfloat16"`` or ``"mixed_float16"`` (the model is
    built under it; ``compile`` adds loss scaling for float16), recorded in ``results.json``.

    Returns:
        dict with ``train_accuracy``, ``test_accuracy``, ``restarts``, ``test_predictions``,
        ``seconds``, the ``settings`` and, for the conv model, the learnt ``kernel``.
    """
    validation.check_dtype_policy("rule_learning_train_eval", dtype_policy)
    strategy = distribution_lib.get_strategy(distribution_strategy)  # before any TF work
    settings = dict(model=model, seed=seed, epochs=epochs, batch_size=batch_size,
                    learning_rate=learning_rate, use_bias=use_bias,
                    restart_until_fit=restart_until_fit, max_restarts=max_restarts, export=export,
                    dtype_policy=dtype_policy)
    results_path = os.path.join(root_dir, "results.json")
    finished = safe_backup.read_finished(results_path, settings)
    if finished is not None:
        logging.info("%s finished earlier with these settings: not trained again.", root_dir)
        return finished
    x_train, y_train, x_test, y_test, _ = rule_learning.marcus_rule_learning()
    start = time.time()
    attempt = 0
    while True:
        attempt_seed = validation.offset_seed("seed", seed, 1000 * attempt)
        keras.utils.set_random_seed(attempt_seed)
        with strategy.scope(), precision.dtype_policy_scope(dtype_policy):
            net = build_rule_model(model, use_bias=use_bias)
            net.compile(optimizer=keras.optimizers.Adam(learning_rate),
                        loss=symmetry_lib.sparse_crossentropy(), metrics=["accuracy"],
                        **distribution_lib.compile_options(strategy, True, steps_per_execution))
        callbacks = []
        if tensorboard:
            callbacks.append(keras.callbacks.TensorBoard(
                os.path.join(root_dir, "tensorboard", f"attempt_{attempt}"), write_graph=False,
                update_freq=steps_per_execution))
        # All `epochs` reshuffled passes are laid end to end and fed as one Keras epoch: the same
        # sequence of batches as `epochs` shuffled epochs (the training set size, 32, is a
        # multiple of the batch size), without a Python round trip per 2-step epoch.
        rng = np.random.RandomState(attempt_seed)
        order = np.concatenate([rng.permutation(len(x_train)) for _ in range(epochs)])
        net.fit(x_train[order], y_train[order], batch_size=batch_size, epochs=1, shuffle=False,
                callbacks=callbacks, verbose=verbose)
        train_pred = np.argmax(net.predict(x_train, verbose=0), axis=-1)
        train_accuracy = float(np.mean(train_pred == y_train))
        if train_accuracy == 1.0 or not restart_until_fit or attempt >= max_restarts:
            break
        attempt += 1
    test_pred = np.argmax(net.predict(x_test, verbose=0), axis=-1)
    results = {
        "task": "rule_learning", "model": model, "seed": seed, "use_bias": use_bias,
        "train_accuracy": train_accuracy,
        "test_accuracy": float(np.mean(test_pred == y_test)),
        "test_predictions": test_pred.tolist(), "restarts": attempt,
        "dtype_policy": dtype_policy,
        "seconds": time.time() - start, "settings": settings,
    }
    if model == "conv":
        results["kernel"] = np.asarray(net.get_layer("symbol_convolution").kernel).tolist()
    symmetry_lib.export_model(net, root_dir, export)
    symmetry_lib.write_json(results_path, results)  # marks the run finished
    return results



@run_lock.locks_root_dir
def train_seeds(root_dir, models, seeds, **kwargs):
    """Trains every (model, seed) and returns ``{model: {"runs": [...], "median_test": ...}}``.

    Run ``S`` of ``MODEL`` writes ``root_dir/MODEL/seed_S/``; the summary goes to
    ``root_dir/summary.json``. ``kwargs`` go to ``rule_learning_train_eval``.
    """
    validation.check_int_at_least("seeds", seeds, 1)  # 0 would summarise no run
    summary = {}
    for model in models:
        runs = []
        for seed in range(seeds):
            result = rule_learning_train_eval(
                os.path.join(root_dir, model, f"seed_{seed}"), model=model, seed=seed, **kwargs)
            logging.info("%s seed %d: train %.2f test %.2f", model, seed,
                         result["train_accuracy"], result["test_accuracy"])
            runs.append(result)
        summary[model] = {
            "runs": runs,
            "median_test_accuracy": symmetry_lib.median([r["test_accuracy"] for r in runs]),
            "median_train_accuracy": symmetry_lib.median([r["train_accuracy"] for r in runs]),
        }
    symmetry_lib.write_json(os.path.join(root_dir, "summary.json"), summary, sort_keys=False)
    return summary
