"""Training and evaluation for Mitchell & Bowers' two experiments (Tables I and II).

``rule_learning_train_eval`` trains one rule-learning model (Table I) and
``palindromes_train_eval`` one sequence model on the palindrome language (Table II). Both write
TensorBoard summaries under ``root_dir/tensorboard``, a ``.keras`` file and a SavedModel
(``root_dir/saved_model``, via ``model.export``) and a ``results.json``, and return the results
as a dict. ``summarize`` turns several runs into medians (the paper's statistic).
"""

import json
import os
import time

import keras
import numpy as np

from keras_relational.environments import palindromes, rule_learning
from keras_relational.experiments import distribution_lib
from keras_relational.models import symmetry

RULE_MODELS = ("conv", "mlp", "rnn")
SEQUENCE_MODELS = ("conv_stack", "lstm")
CONDITIONS = ("standard", "nesting")


def _write_json(path, payload):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(payload, f, indent=2, sort_keys=True)


def _export(model, root_dir, export):
    if not export:
        return
    os.makedirs(root_dir, exist_ok=True)  # nothing else creates it when TensorBoard is off
    model.save(os.path.join(root_dir, "model.keras"))
    model.export(os.path.join(root_dir, "saved_model"), verbose=False)


def _sparse_ce(reduction="sum_over_batch_size"):
    return keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=reduction)


# ------------------------------------------------------------------------------------------------
# Table I: rule learning
# ------------------------------------------------------------------------------------------------

def build_rule_model(model, use_bias=False):
    """One of Table I's models (``"conv"``, ``"mlp"``, ``"rnn"``) on 12 x 3 grids."""
    if model == "conv":
        return symmetry.symbol_conv_classifier(use_bias=use_bias)
    if model == "mlp":
        return symmetry.rule_mlp_classifier()
    if model == "rnn":
        return symmetry.rule_rnn_classifier()
    raise ValueError(f"model must be one of {RULE_MODELS}, received model={model!r}.")


def rule_learning_train_eval(root_dir, model="conv", seed=0, epochs=1000, batch_size=16,
                             learning_rate=0.1, use_bias=False, restart_until_fit=False,
                             max_restarts=10, tensorboard=True, export=True, verbose=0,
                             steps_per_execution=50, distribution_strategy="default"):
    """Trains one Table I model on the 32 Marcus items and tests it on the 4 unseen-syllable items.

    Defaults are the paper's: Adam(lr 0.1), 1000 epochs, batch 16 (Mitchell & Bowers, Sec. 3.1).
    ``restart_until_fit`` re-initialises (seed + 1000 * attempt) while the training accuracy is
    below 100%, mirroring the palindrome restart rule (a spec recommendation, not the paper's).
    ``distribution_strategy`` (``distribution_lib.STRATEGIES``): the model and ``compile`` are
    created under its ``scope()``; ``batch_size`` is the global batch size.

    Returns:
        dict with ``train_accuracy``, ``test_accuracy``, ``restarts``, ``test_predictions``,
        ``seconds`` and, for the conv model, the learnt ``kernel``.
    """
    strategy = distribution_lib.get_strategy(distribution_strategy)  # before any TF work
    x_train, y_train, x_test, y_test, _ = rule_learning.marcus_rule_learning()
    start = time.time()
    attempt = 0
    while True:
        keras.utils.set_random_seed(seed + 1000 * attempt)
        with strategy.scope():
            net = build_rule_model(model, use_bias=use_bias)
            net.compile(optimizer=keras.optimizers.Adam(learning_rate), loss=_sparse_ce(),
                        metrics=["accuracy"],
                        **distribution_lib.compile_options(strategy, True, steps_per_execution))
        callbacks = []
        if tensorboard:
            callbacks.append(keras.callbacks.TensorBoard(
                os.path.join(root_dir, "tensorboard", f"attempt_{attempt}"), write_graph=False,
                update_freq=steps_per_execution))
        # All `epochs` reshuffled passes are laid end to end and fed as one Keras epoch: the same
        # sequence of batches as `epochs` shuffled epochs (the training set size, 32, is a
        # multiple of the batch size), without a Python round trip per 2-step epoch.
        rng = np.random.RandomState(seed + 1000 * attempt)
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
        "seconds": time.time() - start,
    }
    if model == "conv":
        results["kernel"] = np.asarray(net.get_layer("symbol_convolution").kernel).tolist()
    _export(net, root_dir, export)
    _write_json(os.path.join(root_dir, "results.json"), results)
    return results


# ------------------------------------------------------------------------------------------------
# Table II: palindromes
# ------------------------------------------------------------------------------------------------

def trim(split, length=None):
    """Drops the all-padding tail of an encoded split (to its longest string, or ``length``)."""
    length = length or int(split["lengths"].max())
    return {k: (v[:, :length] if v.ndim == 2 else v) for k, v in split.items()}


def pad_rows(split, multiple):
    """Appends zero-mask copies of the first rows so the size is a multiple of ``multiple``.

    The extra rows carry no loss (their mask is 0 and the loss is a masked mean) and are dropped
    again by the evaluation; every batch then has the same shape, so XLA compiles one program
    instead of one more per odd-sized last batch.
    """
    extra = (-len(split["inputs"])) % multiple
    if not extra:
        return split
    padded = {k: np.concatenate([v, v[np.arange(extra) % len(v)]]) for k, v in split.items()}
    padded["mask"][-extra:] = 0.0
    return padded


def masked_predictions(model, split, batch_size=500):
    """Argmax next-symbol predictions under teacher forcing, ``[n, T]``.

    Inputs are padded to ``palindromes.MAX_LEN`` steps and to a multiple of ``batch_size`` rows,
    so every split runs through one compiled predict program (the model is causal, so right
    padding does not change any prediction).
    """
    n, length = split["inputs"].shape
    inputs = np.zeros((n, palindromes.MAX_LEN), np.int32)
    inputs[:, :length] = split["inputs"]
    inputs = np.concatenate([inputs, np.zeros(((-n) % batch_size, palindromes.MAX_LEN),
                                              np.int32)])
    logits = model.predict(inputs, batch_size=batch_size, verbose=0)
    return np.argmax(logits[:n, :length], axis=-1)


def masked_token_accuracy(predictions, split):
    """Fraction of masked positions predicted correctly (the authors' logged metric)."""
    correct = (predictions == split["targets"]) * split["mask"]
    return float(correct.sum() / split["mask"].sum())


def sequence_exact_match(predictions, split):
    """Fraction of strings with *every* masked prediction correct (Table II), per string."""
    ok = (predictions == split["targets"]) | (split["mask"] == 0)
    return ok.all(axis=1)


def evaluate_split(model, split, by_length=False):
    """``{"string_accuracy", "token_accuracy", "count"}`` (+ ``"by_length"``) for one split."""
    split = trim(split)
    predictions = masked_predictions(model, split)
    exact = sequence_exact_match(predictions, split)
    result = {"string_accuracy": float(exact.mean()),
              "token_accuracy": masked_token_accuracy(predictions, split),
              "count": int(len(exact))}
    if by_length:
        result["by_length"] = {int(length): float(exact[split["lengths"] == length].mean())
                               for length in np.unique(split["lengths"])}
    return result


def palindrome_data(condition="standard", n_per_length=20000, long_n_per_length=3333,
                    data_seed=0):
    """The splits of one Table II condition: train, dev, test (the column's test) and long.

    Keys: ``train``, ``dev``, ``in_domain_test``, ``long_test``, ``long_dev`` and, for
    ``"nesting"``, ``nesting_test``. In the nesting condition train, dev and long dev keep only the
    strings with N_A <= 2, so no split used for training or selection holds an N_A > 2 string.
    """
    if condition not in CONDITIONS:
        raise ValueError(f"condition must be one of {CONDITIONS}, received {condition!r}.")
    data = palindromes.palindrome_dataset(n_per_length=n_per_length, seed=data_seed)
    long = palindromes.long_palindrome_dataset(n_per_length=long_n_per_length,
                                               seed=data_seed + 1)
    splits = {"in_domain_test": data["test"], "long_test": long["test"]}
    if condition == "nesting":
        nested = palindromes.nesting_split(data)
        splits.update(train=nested["train"], dev=nested["dev"], nesting_test=nested["test"],
                      long_dev=palindromes.select(long["dev"], palindromes.count_a(long["dev"])
                                                  <= palindromes.MAX_A_FOR_NESTING_SPLIT))
    else:
        splits.update(train=data["train"], dev=data["dev"], long_dev=long["dev"])
    return splits


def build_sequence_model(model, write_mode="embedding_on_push", units=None, stack_depth=20,
                         shift_entropy_cost=0.0, straight_through=False):
    """``"conv_stack"`` (10 stacks x 20) or ``"lstm"`` (100 units), embedding 10, vocabulary 7.

    ``shift_entropy_cost`` applies to ``"conv_stack"`` only (see ``symmetry.conv_stack_lstm``).
    """
    if model == "conv_stack":
        return symmetry.conv_stack_lstm(units=units or 10, embedding_size=units or 10,
                                        stack_depth=stack_depth, write_mode=write_mode,
                                        shift_entropy_cost=shift_entropy_cost,
                                        straight_through=straight_through)
    if shift_entropy_cost or straight_through:
        raise ValueError(f"shift_entropy_cost and straight_through apply to model='conv_stack' "
                         f"only, received model={model!r} with shift_entropy_cost="
                         f"{shift_entropy_cost!r}, straight_through={straight_through!r}.")
    if model == "lstm":
        return symmetry.standard_lstm(units=units or 100)
    raise ValueError(f"model must be one of {SEQUENCE_MODELS}, received model={model!r}.")


def palindromes_train_eval(root_dir, model="conv_stack", condition="standard", seed=0,
                           epochs=100, batch_size=128, learning_rate=1e-3,
                           write_mode="embedding_on_push", shift_entropy_cost=0.0,
                           restart_threshold=0.9, restart_epoch=4, max_restarts=10,
                           restart_baseline=False, n_per_length=20000, long_n_per_length=3333,
                           data_seed=0, data=None, early_stopping=False, patience=1,
                           stop_score=1.0, select_on_long_dev=False, min_epochs=1,
                           restart_below_stop_score=False, straight_through_from_epoch=None,
                           straight_through_learning_rate=None, steps_per_execution=10,
                           model_cache=None, tensorboard=True, export=True, verbose=0,
                           distribution_strategy="default"):
    """Trains one Table II model with next-symbol prediction over the second half, then evaluates.

    Defaults follow the paper (Sec. 3.2 / App. B): Adam(1e-3), batch 128, 100 epochs, masked
    mean cross-entropy, and the restart rule: re-initialise if the dev token accuracy is
    <= ``restart_threshold`` after ``restart_epoch`` epochs (``None`` disables it). The paper
    states the rule for the convolutional model only, so the baseline LSTM skips it unless
    ``restart_baseline``. ``write_mode`` defaults to the authors' code variant, the only one that
    passes the restart rule reliably (spec Sec. 2.2 / 7); the layer's own default is the
    paper's gated write. ``shift_entropy_cost`` (conv stack only; the paper's is 0) adds that
    multiple of the mean entropy of the stacks' push / stay / pop filters to the loss
    (``symmetry.conv_stack_lstm``). ``condition="nesting"`` retrains on strings with at most 4
    ``a`` (the "N_A > 2" column). ``data`` may pass ready splits (see ``palindrome_data``).
    ``early_stopping`` (not the paper's: it keeps the last epoch) scores every epoch from the
    restart check or ``min_epochs``, whichever is later, by the dev string accuracy (with
    ``select_on_long_dev``, the minimum of it and the long-dev one), stops once the score
    reaches ``stop_score`` or has not improved for ``patience`` epochs (``None``: no patience
    limit), or after ``epochs``, and restores the best-scoring (earliest on ties) weights. Only
    dev splits are used, never a test split; the returned dict then also holds
    ``selection_scores`` (one per scored epoch), ``first_scored_epoch``, ``selected_epoch`` and
    ``stopped_epoch``. ``restart_below_stop_score`` (needs ``early_stopping``; not the paper's)
    also restarts an attempt whose best score stays below ``stop_score`` (sharing
    ``max_restarts`` with the restart rule); if none reaches it, the best-scoring attempt is
    kept. ``best_score_per_attempt`` then lists the attempts that got that far.
    ``straight_through_from_epoch=k`` (conv stack only; not the paper's) trains the first k
    epochs with the paper's soft stack actions, then continues from the same weights and
    optimizer state with hard ones (``ConvStackMemory(straight_through=True)``), which the
    evaluation then uses too; k must be at least the restart-check epoch.
    ``straight_through_learning_rate`` (default: ``learning_rate``) is Adam's rate in those
    hard epochs.
    ``model_cache`` (a dict shared between calls) keeps compiled models: a later run or restart
    with the same settings copies its fresh initial weights into the cached model and zeroes the
    optimizer state instead of compiling again (the XLA compile costs more than an epoch here).
    ``distribution_strategy`` (``distribution_lib.STRATEGIES``): the model and ``compile`` are
    created under its ``scope()``; ``batch_size`` is the global batch size.

    Returns:
        dict with ``in_domain`` / ``long`` (/ ``nesting``) evaluations (``string_accuracy``,
        ``token_accuracy``, ``by_length`` for long), ``restarts``, ``dev_accuracy_at_restart_epoch``
        per attempt and ``seconds``.
    """
    if isinstance(min_epochs, bool) or not isinstance(min_epochs, int) or min_epochs < 1:
        raise ValueError(f"min_epochs must be a positive int, received min_epochs={min_epochs!r}.")
    if patience is not None and (isinstance(patience, bool) or not isinstance(patience, int)
                                 or patience < 1):
        raise ValueError(f"patience must be a positive int or None (no patience limit), "
                         f"received patience={patience!r}.")
    if straight_through_from_epoch is not None and (
            model != "conv_stack" or isinstance(straight_through_from_epoch, bool)
            or not isinstance(straight_through_from_epoch, int) or straight_through_from_epoch < 1):
        raise ValueError(f"straight_through_from_epoch must be None or a positive int, with "
                         f"model='conv_stack'; received straight_through_from_epoch="
                         f"{straight_through_from_epoch!r}, model={model!r}.")
    if straight_through_learning_rate is not None and (
            straight_through_from_epoch is None or isinstance(straight_through_learning_rate, bool)
            or not isinstance(straight_through_learning_rate, (int, float))
            or not straight_through_learning_rate > 0):
        raise ValueError(f"straight_through_learning_rate must be None or a positive number, and "
                         f"needs straight_through_from_epoch; received "
                         f"straight_through_learning_rate={straight_through_learning_rate!r}, "
                         f"straight_through_from_epoch={straight_through_from_epoch!r}.")
    if restart_below_stop_score and not early_stopping:
        raise ValueError("restart_below_stop_score=True needs early_stopping=True (the score is "
                         "the early-stopping one); received early_stopping=False.")
    strategy = distribution_lib.get_strategy(distribution_strategy)  # before any TF work
    start = time.time()
    if data is None:
        data = palindrome_data(condition, n_per_length, long_n_per_length, data_seed)
    length = int(max(data["train"]["lengths"].max(), data["dev"]["lengths"].max()))
    train = pad_rows(trim(data["train"], length), batch_size)
    dev = pad_rows(trim(data["dev"], length), batch_size)
    loss = _sparse_ce("mean_with_sample_weight")
    use_rule = restart_threshold is not None and (model == "conv_stack" or restart_baseline)
    if use_rule and straight_through_from_epoch is not None and (
            straight_through_from_epoch < restart_epoch):
        raise ValueError(f"straight_through_from_epoch ({straight_through_from_epoch}) must be at "
                         f"least the restart-check epoch (restart_epoch={restart_epoch}).")
    attempt, attempts = 0, []

    def compiled_model(straight_through=False):
        """A freshly initialised, compiled model (the cached one, re-initialised, if any)."""
        with strategy.scope():
            net = build_sequence_model(model, write_mode=write_mode,
                                       shift_entropy_cost=shift_entropy_cost,
                                       straight_through=straight_through)
            cache_key = (model, write_mode, shift_entropy_cost, straight_through, learning_rate,
                         batch_size, steps_per_execution, len(train["inputs"]), id(strategy))
            if model_cache is not None and cache_key in model_cache:
                return _reinitialize(model_cache[cache_key], net)
            net.compile(optimizer=keras.optimizers.Adam(learning_rate), loss=loss,
                        weighted_metrics=["accuracy"],
                        **distribution_lib.compile_options(strategy, True, steps_per_execution))
            if model_cache is not None:
                model_cache[cache_key] = net
            return net

    def trained_past_restart_check():
        """Fresh attempts until one passes the restart rule (or restarts run out)."""
        nonlocal attempt
        while True:
            keras.utils.set_random_seed(seed + 1000 * attempt)
            net = compiled_model()
            callbacks = []
            if tensorboard:
                callbacks.append(keras.callbacks.TensorBoard(
                    os.path.join(root_dir, "tensorboard", f"attempt_{attempt}"),
                    write_graph=False))
            first = min(restart_epoch if use_rule else 1 if early_stopping else epochs, epochs)
            if straight_through_from_epoch is not None:  # the soft epochs end there at the latest
                first = min(first, straight_through_from_epoch)
            fit_kwargs = dict(batch_size=batch_size, shuffle=True, callbacks=callbacks,
                              verbose=verbose,
                              validation_data=(dev["inputs"], dev["targets"], dev["mask"]))
            history = net.fit(train["inputs"], train["targets"], sample_weight=train["mask"],
                              epochs=first, **fit_kwargs)
            dev_accuracy = float(history.history["val_accuracy"][-1])
            attempts.append(dev_accuracy)
            if not use_rule or dev_accuracy > restart_threshold or attempt >= max_restarts:
                return net, first, fit_kwargs
            attempt += 1

    best_missed = None  # (score, weights, selection) of the best attempt below stop_score
    attempt_scores = []
    while True:
        net, first, fit_kwargs = trained_past_restart_check()
        if straight_through_from_epoch is not None:
            if straight_through_from_epoch > first:
                net.fit(train["inputs"], train["targets"], sample_weight=train["mask"],
                        epochs=min(straight_through_from_epoch, epochs), initial_epoch=first,
                        **fit_kwargs)
                first = min(straight_through_from_epoch, epochs)
            with strategy.scope():
                net = _with_state_of(compiled_model(straight_through=True), net)
            if straight_through_learning_rate is not None:  # else the copied soft rate
                net.optimizer.learning_rate.assign(straight_through_learning_rate)
        selection = {}
        if early_stopping:
            fit_kwargs.pop("validation_data")
            if min_epochs > first:  # trained on without scoring: the earlier epochs are not kept
                net.fit(train["inputs"], train["targets"], sample_weight=train["mask"],
                        epochs=min(min_epochs, epochs), initial_epoch=first, **fit_kwargs)
                first = min(min_epochs, epochs)
            selection = _fit_with_early_stopping(net, train, data, first, epochs, patience,
                                                 stop_score, select_on_long_dev, fit_kwargs)
        elif first < epochs:
            net.fit(train["inputs"], train["targets"], sample_weight=train["mask"],
                    epochs=epochs, initial_epoch=first, **fit_kwargs)
        if not restart_below_stop_score:
            break
        score = max(selection["selection_scores"])
        attempt_scores.append(score)
        if score >= stop_score or attempt >= max_restarts:
            if best_missed is not None and best_missed[0] > score:  # never lose a better attempt
                net.set_weights(best_missed[1])
                selection = best_missed[2]
            break
        if best_missed is None or score > best_missed[0]:
            best_missed = (score, net.get_weights(), selection)
        attempt += 1
    if restart_below_stop_score:
        selection["best_score_per_attempt"] = attempt_scores
    results = {
        "task": "palindromes", "model": model, "condition": condition, "seed": seed,
        "write_mode": write_mode if model == "conv_stack" else None, "epochs": epochs,
        "shift_entropy_cost": shift_entropy_cost,
        "straight_through_from_epoch": straight_through_from_epoch,
        "straight_through_learning_rate": straight_through_learning_rate,
        "restarts": attempt, "dev_accuracy_at_restart_epoch": attempts,
        "in_domain": evaluate_split(net, data["in_domain_test"]),
        "long": evaluate_split(net, data["long_test"], by_length=True),
        "train_size": int(len(data["train"]["inputs"])), **selection,
    }
    if "nesting_test" in data:
        results["nesting"] = evaluate_split(net, data["nesting_test"])
    results["seconds"] = time.time() - start
    _export(net, root_dir, export)
    _write_json(os.path.join(root_dir, "results.json"), results)
    return results


def _reinitialize(net, fresh):
    """``net`` (compiled) with ``fresh``'s weights and a zeroed optimizer state (step 0)."""
    net.set_weights(fresh.get_weights())
    learning_rate = getattr(net.optimizer, "_learning_rate", None)
    for variable in net.optimizer.variables:
        if variable is not learning_rate:  # a constant rate is itself an optimizer variable
            variable.assign(keras.ops.zeros(variable.shape, variable.dtype))
    return net


def _with_state_of(net, source):
    """``net`` (compiled, same architecture) with ``source``'s weights and optimizer state."""
    net.set_weights(source.get_weights())
    if not net.optimizer.built:
        net.optimizer.build(net.trainable_variables)
    for target, value in zip(net.optimizer.variables, source.optimizer.variables, strict=True):
        # A copy: under JAX a shared buffer would be donated by the next train step of either.
        target.assign(keras.ops.convert_to_numpy(value))
    return net


def _fit_with_early_stopping(net, train, data, first, epochs, patience, stop_score,
                             select_on_long_dev, fit_kwargs):
    """Epoch-wise training after ``first`` epochs, keeping the best dev-scoring weights."""
    splits = [data["dev"]] + ([data["long_dev"]] if select_on_long_dev else [])

    def score():
        return min(evaluate_split(net, split)["string_accuracy"] for split in splits)

    epoch = first
    best_score, best_epoch, best_weights = score(), epoch, net.get_weights()
    scores = [best_score]
    while (epoch < epochs and best_score < stop_score
           and (patience is None or epoch - best_epoch < patience)):
        net.fit(train["inputs"], train["targets"], sample_weight=train["mask"],
                epochs=epoch + 1, initial_epoch=epoch, **fit_kwargs)
        epoch += 1
        scores.append(score())
        if scores[-1] > best_score:
            best_score, best_epoch, best_weights = scores[-1], epoch, net.get_weights()
    net.set_weights(best_weights)
    return {"selection_scores": scores, "first_scored_epoch": first, "stopped_epoch": epoch,
            "selected_epoch": best_epoch}


# ------------------------------------------------------------------------------------------------
# Aggregation
# ------------------------------------------------------------------------------------------------

def median(values):
    return float(np.median(np.asarray(values, np.float64))) if len(values) else float("nan")


def mann_whitney_p(a, b):
    """Two-sided Mann-Whitney U p-value (SciPy if installed, else None)."""
    try:
        from scipy.stats import mannwhitneyu
    except ImportError:  # SciPy is optional
        return None
    if len(a) < 2 or len(b) < 2 or (len(set(a)) == 1 and set(a) == set(b)):
        return None
    return float(mannwhitneyu(a, b, alternative="two-sided").pvalue)


def summarize(runs, keys):
    """Medians over runs of the (nested) result ``keys``, e.g. ``[("long", "string_accuracy")]``."""
    summary = {}
    for key in keys:
        values = []
        for run in runs:
            value = run
            for part in key:
                value = value[part]
            values.append(value)
        summary["/".join(key)] = {"median": median(values), "values": values}
    return summary
