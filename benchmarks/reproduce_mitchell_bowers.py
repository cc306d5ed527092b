r"""Reproduces Mitchell & Bowers' Tables I and II on a CPU and prints them as markdown.

    python -m benchmarks.reproduce_mitchell_bowers \
        --output=benchmarks/results/mitchell_bowers_run.md

Table I uses the paper's protocol as is (Adam 0.1, 1000 epochs, batch 16, no bias in the
convolution). Table II's paper protocol (100 epochs x 10 seeds x 2 models x 2 training sets) is
many CPU hours, so by default this script runs a *fast protocol* on the paper's data (20,000
strings drawn per length, batch 128): learning rate 1e-2 instead of 1e-3; the restart rule
checked after epoch 1 instead of 4, with a 0.99 instead of 0.9 threshold on the dev token
accuracy; 1,000 long test strings per length instead of 3,333; 3 seeds instead of 10. The conv
stack LSTM then trains a fixed 6 epochs and keeps the last (as the paper keeps its 100th), with
``shift_entropy_cost=0.01``: 0.01 x the mean entropy of its push / stay / pop filters is added
to the loss, a push towards discrete stack actions that is not in the paper (without it, the
N_A > 2 accuracy peaked early and then fell while the dev loss kept falling; see the report
``benchmarks/results/mitchell_bowers.md``). The standard LSTM has no stack to penalise and uses
early stopping on the dev set: training stops once the dev *string* accuracy reaches 99% or stops
improving, at most 4 epochs, and the best dev epoch is kept. Only dev splits drive these choices
(in the N_A > 2 condition the dev set is filtered like the training set).
``--protocol=quick`` is the fast protocol with early stopping for the conv stack LSTM too and
no entropy penalty (faster; lower long and N_A > 2 accuracy: see the results file).
``--protocol=long_dev`` scores every epoch of both models by the minimum of the dev and the
long-dev string accuracy (the authors' generator makes a long dev split, which their scripts
print) and stops once it reaches 99.5 %, keeping the best-scoring epoch; the penalised conv
stack LSTM is scored from epoch 6 on (``--conv_stack_min_epochs``), at most 8 epochs.
``--protocol=straight_through`` trains the conv stack LSTM's first epoch (the restart check)
with the paper's soft push / stay / pop filters and every later one with hard (one-hot) filters
and the softmax's gradient (``ConvStackMemory(straight_through=True)``, not in the paper), and
stops at the first epoch whose dev string accuracy is 100 % (at most 6), keeping it; a run that
does not get there is restarted (``restart_below_stop_score``, within the 10 restarts), keeping
the best attempt if none does. ``--straight_through_from_epoch`` and
``--straight_through_learning_rate`` change its switch epoch and hard-epoch learning rate.
``--protocol=paper`` restores every paper setting. The Keras backend is the environment's
(``KERAS_BACKEND``); under ``KERAS_BACKEND=jax`` the runs take about half the time but draw
other initial weights and batch orders (see the results file for both). Compiled models are
reused across seeds (``model_cache``), and no TensorBoard logs or exports are written unless
``--artifacts``. The tables end with the wall and CPU time and the load average.
"""

import concurrent.futures
import multiprocessing
import os
import resource
import time

import keras
from absl import app, flags

from benchmarks import results_io
from keras_relational import json_files
from keras_relational.experiments import (
    flag_checks,
    palindromes_eval_lib,
    palindromes_lib,
    rule_learning_lib,
    symmetry_lib,
)
from keras_relational.progress_bar import progress_lines

FLAGS = flags.FLAGS
flags.DEFINE_string("root_dir", "/tmp/reproduce_mitchell_bowers", "Where runs are written.")
flags.DEFINE_string("output", None, "Markdown file to write the tables to (printed anyway).")
flags.DEFINE_enum("protocol", "fast", ["fast", "quick", "long_dev", "straight_through",
                                         "paper"],
                  "Table II protocol (see the docstring).")
flags.DEFINE_integer("table1_seeds", 5, "Seeds per Table I model.")
flags.DEFINE_integer("table2_seeds", None, "Seeds per Table II cell (paper: 10, others: 3).")
flags.DEFINE_list("tables", ["1", "2"], "Which tables to run.")
flags.DEFINE_bool("artifacts", False, "Write TensorBoard logs and export seed 0's models "
                  "(off by default: they cost time and the tables do not need them).")
flags.DEFINE_integer("first_seed", 0, "Table II seeds are first_seed, first_seed + 1, ...")
flags.DEFINE_list("table2_models", ["lstm", "conv_stack"], "Table II models (lstm, conv_stack).")
flag_checks.require_subset("table2_models", ("lstm", "conv_stack"))
flag_checks.require_ranges({"table1_seeds": (1, None), "table2_seeds": (1, None),
                        "first_seed": (0, None)})
flags.DEFINE_integer("jobs", 2, "Worker processes for Table II's independent runs (each "
                     "is mostly one thread, so 2 fill this machine's 2 cores).")
flags.DEFINE_float("shift_entropy_cost", None, "Overrides the conv stack LSTM's filter "
                   "entropy penalty of the protocol (fast: 0.01, paper: 0).")
flags.DEFINE_integer("conv_stack_epochs", None, "Overrides the conv stack LSTM's (maximum) "
                     "number of epochs of the protocol (fast: 6, long_dev: 8, paper: 100).")
flags.DEFINE_integer("conv_stack_min_epochs", None, "Overrides the first epoch at which early "
                     "stopping scores the conv stack LSTM (long_dev: 6).")
flags.DEFINE_integer("straight_through_from_epoch", None, "Overrides the number of soft "
                     "epochs before the conv stack LSTM's stack actions turn hard "
                     "(straight_through protocol only).")
flags.DEFINE_float("straight_through_learning_rate", None, "Adam's learning rate in the "
                   "conv stack LSTM's hard epochs (straight_through protocol; default: the "
                   "protocol's learning rate).")
flags.DEFINE_enum("write_mode", "embedding_on_push", ["gated", "embedding_on_push"],
                  "Stack write path for Table II (default: the authors' code's variant; App. B, "
                  "eqs. (3) and (6), describe the gated write).")

FAST_CONV_STACK_EPOCHS = 6
FAST_SHIFT_ENTROPY_COST = 0.01
LONG_DEV_STOP_SCORE = 0.995  # 100 % at the paper's precision of whole percents
PROTOCOLS = {
    "fast": dict(epochs=4, learning_rate=1e-2, n_per_length=20000, long_n_per_length=1000,
                 restart_epoch=1, restart_threshold=0.99, early_stopping=True, stop_score=0.99,
                 patience=1, seeds=3),
    "paper": dict(epochs=100, learning_rate=1e-3, n_per_length=20000, long_n_per_length=3333,
                  restart_epoch=4, seeds=10),
}
PROTOCOLS["quick"] = dict(PROTOCOLS["fast"])  # fast, with early stopping for both models
# long_dev: both models score epochs by min(dev, long dev) string accuracy and stop at 99.5 %.
PROTOCOLS["straight_through"] = dict(PROTOCOLS["fast"])
PROTOCOLS["long_dev"] = dict(PROTOCOLS["fast"], stop_score=LONG_DEV_STOP_SCORE,
                             select_on_long_dev=True)
# Per-model changes to a protocol. Fast: the conv stack LSTM trains a fixed number of epochs
# (kept last, as the paper does) with a small penalty on the entropy of its push / stay / pop
# filters (not the paper's; see the docstring); the LSTM has no stack to penalise. long_dev:
# the penalised conv stack LSTM is scored from epoch 6 on, at most 8 epochs, no patience limit.
MODEL_PROTOCOLS = {
    "fast": {"conv_stack": dict(early_stopping=False, epochs=FAST_CONV_STACK_EPOCHS,
                                shift_entropy_cost=FAST_SHIFT_ENTROPY_COST)},
    "long_dev": {"conv_stack": dict(epochs=8, min_epochs=6, patience=None,
                                    shift_entropy_cost=FAST_SHIFT_ENTROPY_COST)},
    "straight_through": {"conv_stack": dict(
        epochs=FAST_CONV_STACK_EPOCHS, straight_through_from_epoch=1, stop_score=1.0,
        patience=None, restart_below_stop_score=True,
        shift_entropy_cost=FAST_SHIFT_ENTROPY_COST)},
    "quick": {},
    "paper": {},
}
PAPER_TABLE1 = {"rnn": 0.5, "mlp": 0.5, "conv": 1.0}
PAPER_TABLE2 = {"lstm": (1.0, 0.36, 0.76), "conv_stack": (1.0, 1.0, 1.0)}
NAMES = {"rnn": "Recurrent net (Elman, 24)", "mlp": "Multi-layer perceptron (24)",
         "conv": "Convolution (6 weights)", "conv_restart": "Convolution, restart until fit [R]",
         "lstm": "Standard LSTM (100 units)", "conv_stack": "Convolutional stack LSTM (10 x 20)"}


def pct(x):
    return f"{100 * x:.1f}%"


def per_seed(values):
    return ", ".join(f"{100 * v:.0f}" for v in values)


def epochs_used(run):
    """``selected/stopped`` epoch with early stopping, else the fixed number of epochs."""
    if "selected_epoch" in run:
        return f"{run['selected_epoch']}/{run['stopped_epoch']}"
    return str(run["epochs"])


def cpu_seconds():
    """User + system CPU time of this process and its finished children."""
    usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return sum(u.ru_utime + u.ru_stime for u in usage)


def table1(root_dir, seeds):
    rows = ["| model | paper test acc. | ours: median test acc. | ours: test acc. per seed (%) "
            "| train acc. per seed (%) |", "|---|---|---|---|---|"]
    raw = {}
    for key, model, kwargs in [("rnn", "rnn", {}), ("mlp", "mlp", {}), ("conv", "conv", {}),
                               ("conv_restart", "conv", {"restart_until_fit": True})]:
        runs = [rule_learning_lib.rule_learning_train_eval(
            os.path.join(root_dir, "table1", key, f"seed_{s}"), model=model, seed=s,
            tensorboard=FLAGS.artifacts, export=FLAGS.artifacts and s == 0, **kwargs)
            for s in progress_lines(range(seeds), seeds,
                                    describe=lambda s, key=key: f"{key} seed {s}")]
        raw[key] = runs
        test = [r["test_accuracy"] for r in runs]
        train = [r["train_accuracy"] for r in runs]
        paper = pct(PAPER_TABLE1[model]) if key != "conv_restart" else "—"
        rows.append(f"| {NAMES[key]} | {paper} | **{pct(symmetry_lib.median(test))}** | "
                    f"{per_seed(test)} | {per_seed(train)} |")
    return rows, raw


def model_settings(protocol, model):
    """``palindromes_train_eval`` settings of one model under a protocol (no data sizes)."""
    settings = dict(PROTOCOLS[protocol])
    for key in ("seeds", "n_per_length", "long_n_per_length"):
        settings.pop(key)
    settings.update(MODEL_PROTOCOLS[protocol].get(model, {}))
    if model == "conv_stack" and FLAGS.conv_stack_epochs is not None:
        settings["epochs"] = FLAGS.conv_stack_epochs
    if model == "conv_stack" and FLAGS.conv_stack_min_epochs is not None:
        if not settings.get("early_stopping"):
            raise app.UsageError(f"--conv_stack_min_epochs needs a protocol that scores the "
                                 f"conv stack LSTM's epochs (quick, long_dev), received "
                                 f"--protocol={protocol}.")
        settings["min_epochs"] = FLAGS.conv_stack_min_epochs
    for name in ("straight_through_from_epoch", "straight_through_learning_rate"):
        if model == "conv_stack" and FLAGS[name].value is not None:
            if "straight_through_from_epoch" not in settings:
                raise app.UsageError(f"--{name} needs --protocol=straight_through, received "
                                     f"--protocol={protocol}.")
            settings[name] = FLAGS[name].value
    if model == "conv_stack" and FLAGS.shift_entropy_cost is not None:
        settings["shift_entropy_cost"] = FLAGS.shift_entropy_cost
    if model != "conv_stack":
        settings.pop("shift_entropy_cost", None)
    return settings


_WORKER_CACHE = {}  # per process: the data of each condition and the compiled models


def _table2_run(job):
    """One Table II run (in a worker process): ``(condition, model, seed)`` and its settings."""
    condition, model, seed, root_dir, data_sizes, settings = job
    data_key = ("data", condition)
    if data_key not in _WORKER_CACHE:
        _WORKER_CACHE[data_key] = palindromes_eval_lib.palindrome_data(condition, **data_sizes)
    models = _WORKER_CACHE.setdefault("models", {})  # one XLA compile per model and training set
    result = palindromes_lib.palindromes_train_eval(
        os.path.join(root_dir, "table2", condition, model, f"seed_{seed}"), model=model,
        condition=condition, seed=seed, data=_WORKER_CACHE[data_key], model_cache=models,
        **settings)
    return (condition, model, seed), result


def table2(root_dir, protocol, seeds, write_mode, jobs=1, first_seed=0,
           models=("lstm", "conv_stack")):
    data_sizes = {k: PROTOCOLS[protocol][k] for k in ("n_per_length", "long_n_per_length")}
    runs = [(condition, model, s, root_dir, data_sizes, dict(
        model_settings(protocol, model), write_mode=write_mode, tensorboard=FLAGS.artifacts,
        export=FLAGS.artifacts and s == 0))
        # The longest runs (conv stack on the larger standard training set) first, so the
        # workers finish together.
        for model in sorted(models) for condition in ("standard", "nesting")  # conv_stack first
        for s in range(first_seed, first_seed + seeds)]
    if jobs > 1:  # runs are independent: each worker process takes the next one
        context = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=context) as pool:
            done = dict(progress_lines(pool.map(_table2_run, runs), len(runs),
                                       describe=lambda item: "/".join(map(str, item[0][:3]))))
    else:
        done = dict(progress_lines(map(_table2_run, runs), len(runs),
                                   describe=lambda item: "/".join(map(str, item[0][:3]))))
    results = {(condition, model): [done[(condition, model, first_seed + s)]
                                    for s in range(seeds)]
               for condition in ("standard", "nesting") for model in models}
    rows = ["| LSTM architecture | in-domain: paper | ours | long: paper | ours | "
            "N_A > 2: paper | ours | restarts | s / run |", "|---|---|---|---|---|---|---|---|---|"]
    detail = ["| model | seed | in-domain | long (pooled) | L29 | L33 | L37 | "
              "N_A > 2 (retrained) | dev tok. acc. at restart check | epochs kept/run |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for model in models:
        standard, nesting = results[("standard", model)], results[("nesting", model)]
        med = [symmetry_lib.median([r[k]["string_accuracy"] for r in runs])
               for runs, k in ((standard, "in_domain"), (standard, "long"),
                               (nesting, "nesting"))]
        paper = PAPER_TABLE2[model]
        restarts = sum(r["restarts"] for r in standard + nesting)
        seconds = symmetry_lib.median([r["seconds"] for r in standard + nesting])
        rows.append(f"| {NAMES[model]} | {pct(paper[0])} | **{pct(med[0])}** | {pct(paper[1])} "
                    f"| **{pct(med[1])}** | {pct(paper[2])} | **{pct(med[2])}** | {restarts} | "
                    f"{seconds:.0f} |")
        for s, (r, n) in enumerate(zip(standard, nesting, strict=True), start=first_seed):
            by_length = r["long"]["by_length"]
            dev = "/".join(f"{a:.3f}" for a in r["dev_accuracy_at_restart_epoch"] +
                           n["dev_accuracy_at_restart_epoch"])
            detail.append(f"| {NAMES[model]} | {s} | {pct(r['in_domain']['string_accuracy'])} | "
                          f"{pct(r['long']['string_accuracy'])} | {pct(by_length[29])} | "
                          f"{pct(by_length[33])} | {pct(by_length[37])} | "
                          f"{pct(n['nesting']['string_accuracy'])} | {dev} | "
                          f"{epochs_used(r)}, {epochs_used(n)} |")
    p_values = {}
    for column, condition, key in ((("long", "standard", "long"),
                                    ("N_A > 2", "nesting", "nesting")) if len(models) == 2 else ()):
        a, b = ([r[key]["string_accuracy"] for r in results[(condition, m)]]
                for m in ("lstm", "conv_stack"))
        p_values[column] = symmetry_lib.mann_whitney_p(a, b)
    return rows, detail, p_values, results


def main(argv):
    del argv
    start = time.time()
    print("load average at the start (1/5/15 min):", os.getloadavg(), "Keras backend:",
          keras.backend.backend())
    protocol = PROTOCOLS[FLAGS.protocol]
    for model in FLAGS.table2_models if "2" in FLAGS.tables else ():
        model_settings(FLAGS.protocol, model)  # flag errors now, not after Table I
    seeds2 = FLAGS.table2_seeds or protocol["seeds"]
    lines = ["# Mitchell & Bowers: reproduction", ""]
    raw = {}
    if "1" in FLAGS.tables:
        t = time.time()
        rows, raw["table1"] = table1(FLAGS.root_dir, FLAGS.table1_seeds)
        lines += [f"## Table I: rule learning, accuracy on the 4 unseen-syllable test items "
                  f"({FLAGS.table1_seeds} seeds, paper protocol: Adam 0.1, 1000 epochs, "
                  f"batch 16, no bias; {time.time() - t:.0f} s)", "", *rows, ""]
    if "2" in FLAGS.tables:
        t = time.time()
        rows, detail, p_values, results = table2(FLAGS.root_dir, FLAGS.protocol, seeds2,
                                                 FLAGS.write_mode, jobs=FLAGS.jobs,
                                                 first_seed=FLAGS.first_seed,
                                                 models=FLAGS.table2_models)
        raw["table2"] = {f"{c}/{m}": v for (c, m), v in results.items()}
        settings = ", ".join(f"{k}={v}" for k, v in protocol.items() if k != "seeds")
        for model in MODEL_PROTOCOLS[FLAGS.protocol]:
            changes = model_settings(FLAGS.protocol, model)
            settings += f"; {NAMES[model]}: " + ", ".join(
                f"{k}={v}" for k, v in changes.items() if protocol.get(k) != v)
        lines += [f"## Table II: palindromes, median proportion of strings predicted entirely "
                  f"correctly ({seeds2} seeds, {FLAGS.protocol} protocol: {settings}, "
                  f"write_mode={FLAGS.write_mode}; {time.time() - t:.0f} s)", "", *rows, "",
                  "Mann-Whitney U (two-sided) p-values, standard vs convolutional: " +
                  ", ".join(f"{k}: {'n/a' if v is None else f'{v:.3f}'}"
                            for k, v in p_values.items()), "", "Per seed:", "", *detail, ""]
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    lines.append(f"Total: {time.time() - start:.0f} s wall, {cpu_seconds():.0f} s CPU (user + "
                 f"sys) on {os.cpu_count()} cores, Keras backend {keras.backend.backend()}; load "
                 f"average at the end (1/5/15 min): {load}.")
    text = "\n".join(lines)
    print(text)
    os.makedirs(FLAGS.root_dir, exist_ok=True)
    json_files.write_json(os.path.join(FLAGS.root_dir, "raw_results.json"), raw, default=str)
    if FLAGS.output:
        results_io.write_markdown(FLAGS.output, text)


if __name__ == "__main__":
    app.run(main)
