"""Mitchell & Bowers' palindrome experiment (Table II): the convolutional stack LSTM and the LSTM.

``palindromes_train_eval`` trains one sequence model with next-symbol prediction over the second
half of each string (with the paper's restart rule and optional early stopping) and scores it on
the test splits (``palindromes_eval_lib``); ``train_seeds`` runs several models, conditions and
seeds and writes their medians and Mann-Whitney p-values (``python -m
keras_relational.experiments.train_palindromes``).

Re-running resumes: a run whose ``results.json`` was written with the same settings is not
trained again, and an unfinished run of the paper's protocol (no early stopping, no
straight-through epochs) resumes after its last finished epoch from ``root_dir/backup``
(``safe_backup``: one directory per attempt of the restart rule, and the restart-check
accuracies of the attempts so far); the other runs start again.
"""

import os
import shutil
import time
import zlib

import keras
from absl import logging

from keras_relational import run_lock, validation
from keras_relational.experiments import distribution_lib, safe_backup, symmetry_lib
from keras_relational.experiments import palindromes_eval_lib as eval_lib
from keras_relational.models import precision, symmetry

SEQUENCE_MODELS = ("conv_stack", "lstm")
# The Table II columns each condition reports: (result key, metric).
COLUMNS = {"standard": [("in_domain", "string_accuracy"), ("long", "string_accuracy")],
           "nesting": [("nesting", "string_accuracy")]}


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


@run_lock.locks_root_dir
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
                           distribution_strategy="default",
                           dtype_policy=validation.DEFAULT_DTYPE_POLICY):
    """Trains one Table II model with next-symbol prediction over the second half, then evaluates.

    Defaults follow the paper (Sec. III / App. B): Adam(1e-3), batch 128, 100 epochs, masked
    mean cross-entropy, and the restart rule: re-initialise if the dev token accuracy is
    <= ``restart_threshold`` after ``restart_epoch`` epochs (``None`` disables it). The paper
    states the rule for the convolutional model only, so the baseline LSTM skips it unless
    ``restart_baseline``. ``write_mode`` defaults to the authors' code variant, the only one that
    passes the restart rule reliably in our runs (App. B's eqs. (3) and (6) describe the gated
    write, the authors' code writes the embedding on push); the layer's own default is the
    paper's gated write. ``shift_entropy_cost`` (conv stack only; the paper's is 0) adds that
    multiple of the mean entropy of the stacks' push / stay / pop filters to the loss
    (``symmetry.conv_stack_lstm``). ``condition="nesting"`` retrains on strings with at most 4
    ``a`` (the "N_A > 2" column). ``data`` may pass ready splits (see
    ``palindromes_eval_lib.palindrome_data``).
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
    Without one, the restarts of this call still share a cache of their own.
    ``distribution_strategy`` (``distribution_lib.STRATEGIES``): the model and ``compile`` are
    created under its ``scope()``; ``batch_size`` is the global batch size.
    ``dtype_policy``: ``"float32"``, ``"mixed_bfloat16"`` or ``"mixed_float16"`` (the model is
    built under it; ``compile`` adds loss scaling for float16), recorded in ``results.json``.

    Returns:
        dict with ``in_domain`` / ``long`` (/ ``nesting``) evaluations (``string_accuracy``,
        ``token_accuracy``, ``by_length`` for long), ``restarts``, ``dev_accuracy_at_restart_epoch``
        per attempt, ``seconds`` (of the last process that trained) and the ``settings`` it was
        trained with.
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
    validation.check_dtype_policy("palindromes_train_eval", dtype_policy)
    strategy = distribution_lib.get_strategy(distribution_strategy)  # before any TF work
    if model_cache is None:  # restarts re-use the compiled model rather than compile again
        model_cache = {}
    start = time.time()
    if data is None:
        data = eval_lib.palindrome_data(condition, n_per_length, long_n_per_length, data_seed)
    settings = dict(
        model=model, condition=condition, seed=seed, epochs=epochs, batch_size=batch_size,
        learning_rate=learning_rate, write_mode=write_mode, shift_entropy_cost=shift_entropy_cost,
        restart_threshold=restart_threshold, restart_epoch=restart_epoch,
        max_restarts=max_restarts, restart_baseline=restart_baseline,
        early_stopping=early_stopping, patience=patience, stop_score=stop_score,
        select_on_long_dev=select_on_long_dev, min_epochs=min_epochs,
        restart_below_stop_score=restart_below_stop_score,
        straight_through_from_epoch=straight_through_from_epoch,
        straight_through_learning_rate=straight_through_learning_rate, export=export,
        dtype_policy=dtype_policy, data_crc32=_data_crc32(data))
    results_path = os.path.join(root_dir, "results.json")
    backup_dir = os.path.join(root_dir, "backup")
    finished = safe_backup.read_finished(results_path, settings)
    if finished is not None:
        shutil.rmtree(backup_dir, ignore_errors=True)  # left if killed just after results.json
        logging.info("%s finished earlier with these settings: not trained again.", root_dir)
        return finished
    length = int(max(data["train"]["lengths"].max(), data["dev"]["lengths"].max()))
    train = eval_lib.pad_rows(eval_lib.trim(data["train"], length), batch_size)
    dev = eval_lib.pad_rows(eval_lib.trim(data["dev"], length), batch_size)
    loss = symmetry_lib.sparse_crossentropy("mean_with_sample_weight")
    use_rule = restart_threshold is not None and (model == "conv_stack" or restart_baseline)
    if use_rule and straight_through_from_epoch is not None and (
            straight_through_from_epoch < restart_epoch):
        raise ValueError(f"straight_through_from_epoch ({straight_through_from_epoch}) must be at "
                         f"least the restart-check epoch (restart_epoch={restart_epoch}).")
    # Epoch backups for the paper's protocol; the other runs keep their best epochs or phase
    # switches in memory only, and start again.
    state = (safe_backup.RunState(backup_dir, settings)
             if not early_stopping and straight_through_from_epoch is None else None)
    recorded = state.get("dev_accuracy_at_restart_epoch", []) if state else []

    def passed(accuracy, attempt):
        return not use_rule or accuracy > restart_threshold or attempt >= max_restarts

    attempt = len(recorded) - (1 if recorded and passed(recorded[-1], len(recorded) - 1) else 0)
    attempts = list(recorded[:attempt])

    def compiled_model(straight_through=False):
        """A freshly initialised, compiled model (the cached one, re-initialised, if any)."""
        with strategy.scope(), precision.dtype_policy_scope(dtype_policy):
            net = build_sequence_model(model, write_mode=write_mode,
                                       shift_entropy_cost=shift_entropy_cost,
                                       straight_through=straight_through)
            cache_key = (model, write_mode, shift_entropy_cost, straight_through, learning_rate,
                         batch_size, steps_per_execution, len(train["inputs"]), id(strategy),
                         dtype_policy)
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
            keras.utils.set_random_seed(validation.offset_seed("seed", seed, 1000 * attempt))
            net = compiled_model()
            backup = state and safe_backup.SafeBackupAndRestore(
                os.path.join(backup_dir, f"attempt_{attempt}"), delete_checkpoint=False)
            done = (backup.restore(net) or 0) if backup else 0
            callbacks = [backup] if backup else []
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
            if done < first:
                history = net.fit(train["inputs"], train["targets"], sample_weight=train["mask"],
                                  epochs=first, initial_epoch=done, **fit_kwargs)
                dev_accuracy = float(history.history["val_accuracy"][-1])
            elif attempt < len(recorded):  # resumed after the check
                dev_accuracy = recorded[attempt]
            else:  # killed between the check's backup and its record
                dev_accuracy = float(net.evaluate(dev["inputs"], dev["targets"],
                                                  sample_weight=dev["mask"], verbose=0,
                                                  return_dict=True)["accuracy"])
            attempts.append(dev_accuracy)
            if state:
                state.set("dev_accuracy_at_restart_epoch", attempts)
            if passed(dev_accuracy, attempt):
                return net, first, fit_kwargs
            if backup:
                shutil.rmtree(backup.backup_dir)  # this attempt is over
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
        "in_domain": eval_lib.evaluate_split(net, data["in_domain_test"]),
        "long": eval_lib.evaluate_split(net, data["long_test"], by_length=True),
        "train_size": int(len(data["train"]["inputs"])), "dtype_policy": dtype_policy,
        **selection, "settings": settings,
    }
    if "nesting_test" in data:
        results["nesting"] = eval_lib.evaluate_split(net, data["nesting_test"])
    results["seconds"] = time.time() - start
    symmetry_lib.export_model(net, root_dir, export)
    symmetry_lib.write_json(results_path, results)  # marks the run finished
    if state:
        state.clear()
    return results


def _data_crc32(data):
    """A checksum of the splits' arrays: a finished run is re-used only on the same data."""
    crc = 0
    for split in sorted(data):
        for key in sorted(data[split]):
            value = data[split][key]
            if hasattr(value, "tobytes"):
                crc = zlib.crc32(value.tobytes(), zlib.crc32(f"{split}/{key}".encode(), crc))
    return crc


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
        return min(eval_lib.evaluate_split(net, split)["string_accuracy"] for split in splits)

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


@run_lock.locks_root_dir
def train_seeds(root_dir, models, conditions, seeds, n_per_length=20000, long_n_per_length=3333,
                data_seed=0, **kwargs):
    """Trains every (condition, model, seed); returns the summary written to summary.json.

    Run ``S`` writes ``root_dir/CONDITION/MODEL/seed_S/``; ``kwargs`` go to
    ``palindromes_train_eval`` (the conv-stack-only ones are dropped for the LSTM). The runs
    share one ``model_cache`` (unless ``kwargs`` pass one): each model compiles once, not once
    per seed.
    """
    validation.check_int_at_least("seeds", seeds, 1)  # 0 would summarise no run
    kwargs.setdefault("model_cache", {})
    summary = {}
    for condition in conditions:
        data = eval_lib.palindrome_data(condition, n_per_length, long_n_per_length, data_seed)
        summary[condition] = {}
        for model in models:
            runs = []
            # The filter entropy penalty and hard stack actions need a stack: not for the LSTM.
            model_kwargs = {k: v for k, v in kwargs.items() if model == "conv_stack"
                            or k not in ("shift_entropy_cost", "straight_through_from_epoch",
                                         "straight_through_learning_rate")}
            for seed in range(seeds):
                result = palindromes_train_eval(
                    os.path.join(root_dir, condition, model, f"seed_{seed}"), model=model,
                    condition=condition, seed=seed, data=data, **model_kwargs)
                logging.info("%s %s seed %d: %s", condition, model, seed,
                             {k: result[k[0]][k[1]] for k in COLUMNS[condition]})
                runs.append(result)
            summary[condition][model] = {"runs": runs,
                                         **symmetry_lib.summarize(runs, COLUMNS[condition])}
        if len(models) == 2:
            for key in COLUMNS[condition]:
                name = "/".join(key)
                a, b = (summary[condition][m][name]["values"] for m in models)
                summary[condition][f"mann_whitney_p/{name}"] = symmetry_lib.mann_whitney_p(a, b)
    symmetry_lib.write_json(os.path.join(root_dir, "summary.json"), summary, sort_keys=False)
    return summary
