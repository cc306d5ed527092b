r"""Tables 1-3 and the systematic split (Fig. 5) of Schlag & Schmidhuber (2018), resumably.

Table 2 (``--mode=table2``, single task): one model per task (E=15, R=10, H=40, batch 128,
Nadam 1e-3 with 50 warm-up steps, global clip 5, early stopping on validation accuracy, the test
error measured at the best validation checkpoint), next to the paper's best and mean:

    nice -n 10 python benchmarks/reproduce_tpr_babi.py --mode=table2 \
        --root_dir=/tmp/tpr_babi_repro --tasks=1-20 --max_minutes=20 \
        --output=benchmarks/results/tpr_babi.md

Table 3 (``--mode=table3``): the memory-operation ablations (W, W+M, W+B; W+M+B is Table 2's run
and is reused from the same ``root_dir``):

    nice -n 10 python benchmarks/reproduce_tpr_babi.py --mode=table3 \
        --root_dir=/tmp/tpr_babi_repro --tasks=1,2,3,6 --operations=W,W+M,W+B,W+M+B \
        --max_minutes=20 --output=benchmarks/results/tpr_babi_ablation.md

Systematic generalisation (``--mode=systematic``, Sec. 7, Fig. 5; tasks 1, 6, 7, 8, 9, 11, 12,
13 jointly with five new names, the all-tasks sizes):

    nice -n 10 python benchmarks/reproduce_tpr_babi.py --mode=systematic \
        --root_dir=/tmp/tpr_babi_repro --max_minutes=60 \
        --output=benchmarks/results/tpr_babi_systematic.md

Table 1 (``--mode=table1``): one model on all 20 tasks with the all-tasks preset
(``babi_lib.ALL_TASKS_PRESET``: E=90, R=20, H=40, batch 32, S=130); at full scale on a GPU:

    KERAS_BACKEND=jax python benchmarks/reproduce_tpr_babi.py --mode=table1 \
        --root_dir=/tmp/tpr_babi_repro --max_minutes=2880 \
        --output=benchmarks/results/tpr_babi_all_tasks.md

Resumable: every run (a task of Table 2, a (operations, task) cell of Table 3, the systematic
run, the joint run) has its own folder under ``root_dir``; a finished run's results are kept
there in ``result.json`` (written atomically) and never re-run, an interrupted run resumes from
its backup (``babi_lib.train_eval``: the weights, the epoch, the time already spent against
``--max_minutes`` and its best checkpoint), and the results files are re-written from all
finished runs after each run. ``--session_minutes`` stops starting new runs after that many
minutes (the run in progress finishes); the same command started again goes on with the runs
not yet finished. ``--resume_from=benchmarks/results/tpr_babi.json`` continues a table on a
machine that no longer has ``root_dir``: the finished runs recorded in that results file are
written back into ``root_dir`` first (where ``root_dir`` has none of its own), so they are kept
and not re-run. ``--max_minutes`` is wall-clock time (on a shared machine it depends on the
load; each run records the load average).

Each single-task run records the SHA-256 of its generated data (``data_sha256``); a run (finished
or interrupted) whose data the current generator no longer writes is moved aside to
``<folder>.stale-<UTC time>`` and run again, so that a table never mixes results of an earlier
generator's stories with the current one's.

Seeds: ``--seeds=0,1,2`` trains a run per seed (Table 2 and 3: per task and operation set);
seed 0 runs in the folders above, seed N in ``<folder>-seed<N>``. A seed draws a run's generated
stories as well as its initial weights. Table 2 lists every seed finished under ``root_dir`` and,
for a task with several, their best and mean ± sample standard deviation, the statistics of the
paper's best and mean of 5 runs:

    nice -n 10 python benchmarks/reproduce_tpr_babi.py --mode=table2 \
        --root_dir=/tmp/tpr_babi_repro --tasks=10,17 --seeds=0,1,2 --max_minutes=20 \
        --output=benchmarks/results/tpr_babi.md

Caveats: generated data (our procedural generator's stories, not the Facebook bAbI files;
``--data_dir`` reads real files).
"""

import hashlib
import json
import os
import platform
import re
import statistics
import tempfile
import time

import results_io  # benchmarks/results_io.py, beside this script
from absl import app, flags

from keras_relational import json_files
from keras_relational.experiments import accuracy_targets

# Schlag & Schmidhuber 2018, Table 2 (single-task, test error %, 5 runs).
PAPER_BEST = {1: "0.0", 2: "0.0", 3: "1.2", 4: "0.0", 5: "0.5", 6: "0.0", 7: "0.5", 8: "0.1",
              9: "0.0", 10: "0.3", 11: "0.0", 12: "0.0", 13: "0.3", 14: "0.0", 15: "0.0",
              16: "0.0", 17: "0.4", 18: "0.1", 19: "0.0", 20: "0.0"}
PAPER_MEAN = {1: "0.02 ± 0.05", 2: "0.06 ± 0.09", 3: "1.78 ± 0.58", 4: "0.02 ± 0.04",
              5: "0.61 ± 0.17", 6: "0.22 ± 0.19", 7: "2.78 ± 1.81", 8: "0.47 ± 0.45",
              9: "0.14 ± 0.13", 10: "1.24 ± 1.30", 11: "0.14 ± 0.11", 12: "0.04 ± 0.05",
              13: "0.42 ± 0.11", 14: "0.24 ± 0.29", 15: "0.0 ± 0.0", 16: "0.02 ± 0.045",
              17: "0.9 ± 0.69", 18: "0.64 ± 0.33", 19: "12.64 ± 17.39", 20: "0.0 ± 0.00"}
# Table 3: the tasks with > 5 % error per ablation (single task).
PAPER_FAILED = {"W": (3, 6, 9, 10, 12, 13, 17, 19), "W+M": (9, 10, 13, 17), "W+B": (3,),
                "W+M+B": ()}
# Table 1: mean error over the 20 tasks and failed tasks, 10 runs.
PAPER_ALL_TASKS = "1.34 ± 0.52 % mean error, 0.86 ± 1.11 failed tasks"
MODES = ("table2", "table3", "systematic", "table1")
RESULT = "result.json"

FLAGS = flags.FLAGS


def parse_tasks(text):
    """``"1-20"`` or ``"1,2,6"`` -> a tuple of task numbers in 1..20."""
    tasks = []
    for part in text.split(","):
        low, _, high = part.strip().partition("-")
        try:
            tasks += list(range(int(low), int(high or low) + 1))
        except ValueError:
            raise ValueError(f"--tasks expects a range like 1-20 or a list like 1,2,6, "
                             f"received {text!r}.") from None
    if not tasks or any(not 1 <= t <= 20 for t in tasks):
        raise ValueError(f"--tasks expects tasks in 1..20, received {text!r}.")
    return tuple(dict.fromkeys(tasks))


def run_folder(base, seed):
    """A run's folder: ``base`` for seed 0 (the runs of earlier versions), ``base-seed<N>`` for
    seed N."""
    return base if seed == 0 else f"{base}-seed{seed}"


_CELL_FOLDER = re.compile(r"^(?P<operations>[^/]+)/task(?P<task>\d+)(?:-seed(?P<seed>\d+))?$")


def parse_cell_folder(folder):
    """``"W+M/task3-seed2"`` -> ``("W+M", 3, 2)``; None for a folder that is not a Table 2 or 3
    run (a joint run, a set-aside ``.stale-`` folder)."""
    match = _CELL_FOLDER.match(folder)
    if match is None:
        return None
    return match["operations"], int(match["task"]), int(match["seed"] or 0)


def runs(mode, tasks, operations, seeds=(0,)):
    """The runs of ``mode``: ``(folder, train_eval keyword arguments)``, in order (each task's
    seeds together)."""
    if mode == "table2":
        return [(run_folder(f"W+M+B/task{t}", s), {"tasks": (t,), "operations": "W+M+B",
                                                   "seed": s})
                for t in tasks for s in seeds]
    if mode == "table3":
        return [(run_folder(f"{op}/task{t}", s), {"tasks": (t,), "operations": op, "seed": s})
                for t in tasks for op in operations for s in seeds]
    from keras_relational.experiments import babi_lib
    if mode == "systematic":
        from keras_relational.environments import babi
        # The all-tasks sizes (Schlag & Schmidhuber 2018 do not state them for this
        # experiment), without padding the short stories of these tasks to 130 sentences.
        sizes = {k: v for k, v in babi_lib.ALL_TASKS_PRESET.items() if k != "max_sentences"}
        return [(run_folder("systematic", s), {"tasks": babi.SYSTEMATIC_TASKS,
                                               "systematic": True, "seed": s, **sizes})
                for s in seeds]
    return [(run_folder("all_tasks", s), {"tasks": tuple(range(1, 21)), "seed": s,
                                          **babi_lib.ALL_TASKS_PRESET}) for s in seeds]


def train(folder, kwargs, options):
    """Trains one run (resuming it if interrupted) and writes its ``result.json``."""
    from keras_relational.experiments import babi_lib
    load_before = os.getloadavg()
    # ``options`` may override the preset's sizes (tests at tiny scale).
    results = babi_lib.train_eval(folder, **dict(dict(kwargs, verbose=2), **options))
    record = {k: v for k, v in results.items() if k not in ("model", "vocabulary")}
    record["test_error"] = {str(k): v for k, v in record["test_error"].items()}
    record.update(run_options=dict(kwargs, **options), load_average_before=load_before,
                  data_sha256=data_sha256(os.path.join(folder, "data")),
                  load_average_after=os.getloadavg(), nice=os.nice(0), cpus=os.cpu_count(),
                  machine=platform.processor() or platform.machine(),
                  finished_utc=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
    json_files.write_json(os.path.join(folder, RESULT), record, indent=2, default=str)
    return record


def data_sha256(data_dir):
    """SHA-256 of a run's generated data (the names and bytes of its ``qa*.txt`` files), or
    None where ``data_dir`` holds none."""
    names = sorted(n for n in os.listdir(data_dir) if n.startswith("qa") and n.endswith(".txt")) \
        if os.path.isdir(data_dir) else []
    if not names:
        return None
    digest = hashlib.sha256()
    for name in names:
        with open(os.path.join(data_dir, name), "rb") as f:
            digest.update(name.encode() + b"\0" + f.read() + b"\0")
    return digest.hexdigest()


def current_data_sha256(task, options):
    """The SHA-256 of the data that the current generator writes for a single-task run of
    ``task`` (as ``babi_lib.load_data`` does), or None for runs on real bAbI files."""
    from keras_relational.environments import babi
    if options.get("data_dir"):
        return None
    with tempfile.TemporaryDirectory() as scratch:
        babi.write_task_files(scratch, task, options.get("num_train", 9000),
                              options.get("num_valid", 1000), options.get("num_test", 1000),
                              options.get("seed", 0))
        return data_sha256(scratch)


def set_aside_stale(mode, root_dir, tasks, operations, options, seeds=(0,)):
    """Moves aside the single-task runs (finished or interrupted) whose data the current
    generator no longer writes, so that they are run again: a result on an earlier generator's
    stories is not a figure of the current code. Their folders are renamed
    ``<folder>.stale-<UTC time>``, never deleted. A finished run whose data cannot be checked (a
    result restored by ``--resume_from`` from before its data was recorded) is kept. Returns the
    folders moved."""
    if mode not in ("table2", "table3"):
        return []
    expected, moved = {}, []
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    for folder, kwargs in runs(mode, tasks, operations, seeds):
        path = os.path.join(root_dir, folder)
        recorded = data_sha256(os.path.join(path, "data"))
        if recorded is None and os.path.exists(os.path.join(path, RESULT)):
            with open(os.path.join(path, RESULT)) as f:
                recorded = json.load(f).get("data_sha256")
        if recorded is None:
            continue
        key = (kwargs["tasks"][0], kwargs["seed"])
        if key not in expected:
            expected[key] = current_data_sha256(key[0], dict(options, seed=key[1]))
        if expected[key] is not None and recorded != expected[key]:
            os.replace(path, f"{path}.stale-{stamp}")
            moved.append(folder)
            print(f"{folder}: its data came from an earlier generator; moved to "
                  f"{path}.stale-{stamp} and run again", flush=True)
    return moved


def finished(root_dir, folders):
    """``{folder: result}`` of the finished runs among ``folders``."""
    done = {}
    for folder in folders:
        path = os.path.join(root_dir, folder, RESULT)
        if os.path.exists(path):
            with open(path) as f:
                done[folder] = json.load(f)
            if done[folder].get("data_sha256") is None:  # recorded before the hash existed
                done[folder]["data_sha256"] = data_sha256(os.path.join(root_dir, folder, "data"))
    return done


def restore_finished(root_dir, results_file, mode):
    """Writes the finished runs of a results file (``<output>.json``) back into ``root_dir``.

    A run folder that already has its ``result.json`` keeps it. Returns the folders restored.

    Raises:
        ValueError: naming ``resume_from`` when the file is not a results file of ``mode``.
    """
    data = results_io.read_results_json(results_file, mode, dict)
    restored = []
    for folder, record in data["runs"].items():
        path = os.path.join(root_dir, folder, RESULT)
        if not os.path.exists(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            json_files.write_json(path, record, indent=2, default=str)
            restored.append(folder)
    return restored


def _patience(r):
    """A run's early-stopping patience in epochs ("none": trained to its budget). Runs recorded
    before the option existed used ``babi_lib.train_eval``'s default, 30 epochs."""
    patience = r["run_options"].get("patience", 30)
    return "none" if patience is None else str(patience)


def _stopped_by(r):
    """Why a run ended, from its record: the target validation accuracy, its time budget, its
    epoch cap or its patience (babi_lib.train_eval's stopping callbacks)."""
    options = r["run_options"]
    target, budget = options.get("target_val_accuracy"), options.get("max_minutes")
    if target is not None and accuracy_targets.reaches(r["best_val_accuracy"], target):
        return "target"
    if budget is not None and r["train_seconds"] > 60.0 * budget:
        return "time"
    if options.get("epochs") is not None and r["epochs"] >= options["epochs"]:
        return "epochs"
    return "patience" if _patience(r) != "none" else "-"


def _load(r):
    return f"{r['load_average_after'][2]:.1f}"


def _seeds_text(results):
    seeds = sorted({r["run_options"].get("seed", 0) for r in results.values()}) or [0]
    if len(seeds) == 1:
        return f"one seed ({seeds[0]})"
    return (f"seeds {', '.join(map(str, seeds))} (a seed draws a run's generated stories and its "
            f"initial weights)")


def _scale(results, options):
    first = next(iter(results.values()), {})
    budget = options.get("max_minutes")
    target = options.get("target_val_accuracy")
    return (f"{options.get('num_train', 9000)} generated training questions per task"
            f"{' (real bAbI files)' if options.get('data_dir') else ''}, "
            + _seeds_text(results) + ", "
            + ("no time limit" if budget is None else f"at most {budget:g} min of training per run")
            + f" (wall clock, on a shared machine: {first.get('cpus', os.cpu_count())} CPU cores "
            f"({first.get('machine', platform.machine())}), nice {first.get('nice', '-')}; the "
            f"load column is the machine's 15-minute load average when the run ended; the train "
            f"time includes the XLA compile where XLA is on)"
            + ("" if target is None else f", early stop at {target:g} validation accuracy")
            + ".")


def _errors_by_task(results):
    """``{task: {seed: test error}}`` of the Table 2 or 3 runs in ``results``."""
    errors = {}
    for folder, r in results.items():
        _, task, seed = parse_cell_folder(folder)
        errors.setdefault(task, {})[seed] = r["test_error"][str(task)]
    return errors


def table2(results, tasks):
    """Table 2: a row per run (task, seed) beside the paper's best and mean of 5 runs; a task
    with several seeds gets a row with their best and their mean ± sample standard deviation
    (the paper's statistics)."""
    rows = ["| Task | Seed | Test error (%) | Epochs | Steps | Train time (min) | Patience "
            "| Stopped by | XLA | Load | Paper best (%) | Paper mean ± std (%) |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    errors = _errors_by_task(results)
    for t in sorted(tasks):
        for seed in sorted(errors.get(t, ())):
            r = results[run_folder(f"W+M+B/task{t}", seed)]
            xla = "yes" if r["run_options"].get("jit_compile", True) else "no"
            rows.append(f"| {t} | {seed} | {errors[t][seed]:.2f} | {r['epochs']} | {r['steps']} "
                        f"| {r['train_seconds'] / 60:.1f} | {_patience(r)} | {_stopped_by(r)} | "
                        f"{xla} | {_load(r)} | {PAPER_BEST[t]} | {PAPER_MEAN[t]} |")
        if len(errors.get(t, ())) > 1:
            values = list(errors[t].values())
            rows.append(f"| {t} | best / mean of {len(values)} | {min(values):.2f} / "
                        f"{statistics.mean(values):.2f} ± {statistics.stdev(values):.2f} | | | | "
                        f"| | | | {PAPER_BEST[t]} | {PAPER_MEAN[t]} |")
    done = {t: e for t, e in errors.items() if t in tasks}
    missing = [t for t in sorted(tasks) if t not in done]
    rows += ["", f"Finished: {len(done)} of {len(tasks)} tasks"
             + (f" (not run yet: {', '.join(map(str, missing))})" if missing else "") + "."]
    if done:
        best = {t: min(e.values()) for t, e in done.items()}
        mean = {t: statistics.mean(e.values()) for t, e in done.items()}
        failed = [t for t, e in best.items() if e > 5.0]
        several = any(len(e) > 1 for e in done.values())
        rows.append(f"Mean test error over the finished tasks: "
                    f"{sum(mean.values()) / len(mean):.2f} %"
                    + (f" (a task's mean over its seeds; with each task's best seed "
                       f"{sum(best.values()) / len(best):.2f} %, the paper's best column 0.17, "
                       f"its mean column 1.12)" if several else "")
                    + ". Failed tasks (> 5 % test error, the paper's criterion"
                    + (", by each task's best seed" if several else "") + f"): {len(failed)}"
                    + (f" ({', '.join(map(str, sorted(failed)))})" if failed else "") + ".")
        if several:
            failing_mean = sorted(t for t, e in mean.items() if e > 5.0)
            rows.append(f"By the mean over each task's seeds: {len(failing_mean)}"
                        + (f" ({', '.join(map(str, failing_mean))})" if failing_mean else "")
                        + ".")
    return "\n".join(rows)


def table3(results, tasks, operations):
    """Table 3: a task's error per memory-operation set (several seeds: their errors, in seed
    order); a task fails an operation set when its best seed is above 5 %."""
    rows = ["| Task | " + " | ".join(f"{op} error (%)" for op in operations) + " |",
            "|---|" + "---|" * len(operations)]
    by_operations = {op: _errors_by_task({f: r for f, r in results.items()
                                          if parse_cell_folder(f)[0] == op})
                     for op in operations}
    for t in tasks:
        cells = [by_operations[op].get(t) for op in operations]
        rows.append(f"| {t} | " + " | ".join(
            "-" if e is None else " / ".join(f"{e[s]:.2f}" for s in sorted(e)) for e in cells)
            + " |")
    rows += ["", "| Operations | Failed tasks here (> 5 %) | Paper's failed tasks (all 20 "
                 "tasks) |", "|---|---|---|"]
    for op in operations:
        done = {t: e for t, e in by_operations[op].items() if t in tasks}
        failed = [t for t in tasks if t in done and min(done[t].values()) > 5.0]
        rows.append(f"| {op} | {', '.join(map(str, failed)) or 'none'} (of {len(done)} "
                    f"finished) | {', '.join(map(str, PAPER_FAILED[op])) or 'none'} |")
    return "\n".join(rows)


def joint_table(result, mode):
    from keras_relational.experiments import babi_lib
    if result is None:
        return "Not finished yet."
    errors = {int(t): e for t, e in result["test_error"].items()}
    text = (babi_lib.error_table(errors) + f"\n\nMean test error: "
            f"{sum(errors.values()) / len(errors):.2f} %; failed tasks (> 5 %): "
            f"{sum(e > 5.0 for e in errors.values())}; {result['epochs']} epochs, "
            f"{result['steps']} steps, {result['train_seconds'] / 60:.1f} min of training; "
            f"load {_load(result)}.")
    if mode == "systematic":
        text += "\n\n" + babi_lib.systematic_table(result["systematic"])
    else:
        text += f" Paper (Table 1, TPR-RNN): {PAPER_ALL_TASKS}."
    return text


def _cell_folders(root_dir, operations):
    """The Table 2 / 3 run folders under ``root_dir`` for ``operations``: every task and seed."""
    folders = []
    for op in operations:
        directory = os.path.join(root_dir, op)
        if os.path.isdir(directory):
            folders += [f"{op}/{name}" for name in sorted(os.listdir(directory))
                        if parse_cell_folder(f"{op}/{name}") is not None]
    return folders


def _tasks_shown(mode, tasks, operations, done):
    """The tasks a Table 2 or 3 lists: those asked for and every other with a finished run of
    its own among ``done`` (Table 3: not only Table 2's W+M+B run), so that a command for some
    tasks never drops the rows, or the results file's runs, of earlier commands."""
    own = [op for op in operations if op != "W+M+B"] if mode == "table3" else ["W+M+B"]
    cells = [parse_cell_folder(folder) for folder in done]
    return tuple(sorted(set(tasks) | {task for op, task, _ in cells if op in own}))


def report(mode, root_dir, tasks, operations, options, seeds=(0,)):
    """The Markdown body and the JSON data of the results files, from the finished runs (a
    Table 2 or 3 shows every seed finished under ``root_dir``, not only ``seeds``)."""
    if mode in ("table2", "table3"):
        shown = operations if mode == "table3" else ("W+M+B",)
        every_run = finished(root_dir, _cell_folders(root_dir, shown))
        tasks = _tasks_shown(mode, tasks, operations, every_run)
        results = {f: r for f, r in every_run.items() if parse_cell_folder(f)[1] in tasks}
    else:
        folders = [folder for folder, _ in runs(mode, tasks, operations, seeds)]
        results = finished(root_dir, folders)
    if mode == "table2":
        body = table2(results, tasks)
    elif mode == "table3":
        body = table3(results, tasks, operations)
    else:
        body = joint_table(results.get(folders[0]), mode)
    return _scale(results, options) + "\n\n" + body, {"mode": mode, "runs": results}


def check_seeds(mode, seeds):
    """``seeds`` as a tuple, checked for ``mode``.

    Raises:
        ValueError: naming ``--seeds`` when it is empty, repeats a seed or holds a negative one,
            or holds several for a joint mode (Table 1, the systematic split).
    """
    seeds = tuple(seeds)
    if not seeds or len(set(seeds)) != len(seeds) or any(s < 0 for s in seeds):
        raise ValueError(f"--seeds expects distinct seeds >= 0, received {list(seeds)}.")
    if mode in ("table1", "systematic") and len(seeds) != 1:
        raise ValueError(f"--seeds: --mode={mode} takes one seed, received {list(seeds)}.")
    return seeds


def run(mode, root_dir, tasks=tuple(range(1, 21)), operations=("W", "W+M", "W+B", "W+M+B"),
        seeds=(0,), output=None, session_minutes=None, table_only=False, command=None,
        **options):
    """Trains the unfinished runs of ``mode`` and returns the Markdown table of all finished.

    ``seeds``: a run per seed (Table 2 and 3: per task and seed; the joint modes take one).
    ``options`` are ``babi_lib.train_eval`` arguments for every run (``num_train``,
    ``max_minutes``, ...; they win over a preset's); ``command`` names the writer in the
    results files (default: this process's command line).

    Raises:
        ValueError: ``check_seeds``'s, and for ``seed`` in ``options`` (use ``seeds``).
    """
    if "seed" in options:
        raise ValueError(f"run() takes its seeds as seeds=(...), received seed="
                         f"{options['seed']!r}.")
    seeds = check_seeds(mode, seeds)
    start = time.time()
    if not table_only:  # only rewrites the results files: moves nothing
        set_aside_stale(mode, root_dir, tasks, operations, options, seeds)
    for folder, kwargs in runs(mode, tasks, operations, seeds):
        path = os.path.join(root_dir, folder)
        if table_only or os.path.exists(os.path.join(path, RESULT)):
            continue
        if session_minutes is not None and time.time() - start > 60.0 * session_minutes:
            print(f"--session_minutes={session_minutes:g} passed: not starting {folder}")
            break
        print(f"== {mode} run {folder}", flush=True)
        record = train(path, kwargs, options)
        print(f"{folder}: test error {record['test_error']} after {record['steps']} steps, "
              f"{record['train_seconds'] / 60:.1f} min", flush=True)
        write(mode, root_dir, tasks, operations, options, output, command, seeds)
    return write(mode, root_dir, tasks, operations, options, output, command, seeds)


def write(mode, root_dir, tasks, operations, options, output, command, seeds=(0,)):
    body, data = report(mode, root_dir, tasks, operations, options, seeds)
    os.makedirs(root_dir, exist_ok=True)
    json_files.write_text(os.path.join(root_dir, f"{mode}.md"), body + "\n")
    if output:
        results_io.write_markdown(output, body, command)
        results_io.write_json(os.path.splitext(output)[0] + ".json", data, command)
    return body


def define_flags():
    """The script's flags, defined only when it runs as a script (the tests import its
    functions into processes where training binaries define --root_dir too)."""
    flags.DEFINE_enum("mode", "table2", MODES, "Which experiment (see the module docstring).")
    flags.DEFINE_string("root_dir", "/tmp/tpr_babi_repro", "Output directory (a folder per run).")
    flags.DEFINE_string("tasks", "1-20", "Tasks: a range (1-20) or a list (1,2,6); table2/table3.")
    flags.DEFINE_list("operations", ["W", "W+M", "W+B", "W+M+B"], "Table 3's memory operations.")
    flags.DEFINE_string("data_dir", None, "Real bAbI files instead of generated ones.")
    flags.DEFINE_float("max_minutes", 20.0, "Training budget per run (wall clock).", lower_bound=0)
    flags.DEFINE_float("session_minutes", None, "Start no new run after this many minutes.")
    flags.DEFINE_float("target_val_accuracy", 0.998,
                       "Stop a run early at this validation accuracy.")
    flags.DEFINE_integer("patience", None, "Stop a run after this many epochs without a better "
                         "validation accuracy (default: none; the paper trains on and reads the "
                         "test error at the best validation checkpoint).", lower_bound=0)
    flags.DEFINE_integer("num_train", 9000, "Generated training questions per task.", lower_bound=1)
    flags.DEFINE_integer("num_valid", 1000, "Generated validation questions per task.",
                         lower_bound=1)
    flags.DEFINE_integer("num_test", 1000, "Generated test questions per task.", lower_bound=1)
    flags.DEFINE_integer("epochs", 2000, "Maximum epochs per run (the default leaves the end of "
                         "a run to --max_minutes and --target_val_accuracy).", lower_bound=1)
    flags.DEFINE_list("seeds", ["0"], "Seeds: a run per seed (Table 2 and 3: per task; the "
                      "paper's best and mean are over 5 runs). Seed 0 keeps the folder names of "
                      "one-seed runs; seed N runs in <folder>-seed<N>.")
    flags.DEFINE_bool("jit_compile", True, "XLA-compile the train step (off: no compile wait).")
    flags.DEFINE_bool("table_only", False, "Only re-write the results files from finished runs.")
    flags.DEFINE_string("resume_from", None, "A results file of this script (<output>.json): its "
                        "finished runs are written into --root_dir first and not re-run.")
    flags.DEFINE_string("output", None, "Results file (.md; a .json beside it), e.g. "
                        "benchmarks/results/tpr_babi.md.")


def main(argv):
    del argv
    from keras_relational.experiments import babi_lib
    unknown = [op for op in FLAGS.operations if op not in babi_lib.OPERATIONS]
    if unknown:
        raise app.UsageError(f"--operations expects some of {list(babi_lib.OPERATIONS)}, "
                             f"received {unknown}.")
    try:
        tasks = parse_tasks(FLAGS.tasks)
    except ValueError as error:
        raise app.UsageError(str(error)) from None
    if FLAGS.resume_from:
        try:
            restored = restore_finished(FLAGS.root_dir, FLAGS.resume_from, FLAGS.mode)
        except ValueError as error:
            raise app.UsageError(str(error)) from None
        print(f"--resume_from: {len(restored)} finished run(s) restored into {FLAGS.root_dir}")
    options = {"data_dir": FLAGS.data_dir, "num_train": FLAGS.num_train,
               "num_valid": FLAGS.num_valid, "num_test": FLAGS.num_test,
               "max_minutes": FLAGS.max_minutes, "epochs": FLAGS.epochs,
               "target_val_accuracy": FLAGS.target_val_accuracy, "patience": FLAGS.patience,
               "jit_compile": FLAGS.jit_compile}
    try:
        seeds = [int(seed) for seed in FLAGS.seeds]
    except ValueError:
        raise app.UsageError(f"--seeds expects integers, received {FLAGS.seeds}.") from None
    try:
        seeds = check_seeds(FLAGS.mode, seeds)
    except ValueError as error:
        raise app.UsageError(str(error)) from None
    print(run(FLAGS.mode, FLAGS.root_dir, tasks, tuple(FLAGS.operations), seeds, FLAGS.output,
              FLAGS.session_minutes, FLAGS.table_only, **options))


if __name__ == "__main__":
    define_flags()
    app.run(main)
