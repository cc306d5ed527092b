r"""Reproduces Table 1 and the transfer curricula (Figs. 4-5) of Shanahan et al. (2020).

Table 1 (``--mode=table1``): each cell is one (task, architecture, seed) run of
``relations_game_lib.train_eval``: train on generated pentominoes (250,000 images a task, the
size of the paper's released files; SGD 0.01, batches of 10, 100,000 batches as in the paper),
then measure accuracy on fresh hexomino and stripes sets (no stripes for
``colour_and_or_shape``, as in the paper). ``--num_train_examples=50000`` trains on the size of
the authors' notebook's "mini" files instead; the MLP baselines overfit those (on ``occurs``
their training accuracy ends far above their held-out accuracy). The whole table, every
architecture and task, both held-out sets, at most 15 minutes of training a cell:

    python -m benchmarks.reproduce_predinet --mode=table1 --root_dir=/tmp/predinet_table1 \
        --max_minutes_per_cell=15 --output=benchmarks/results/predinet_table1

Curricula (``--mode=curricula``): each cell is one (combination, architecture, seed) run of the
4-stage transfer protocol (stage 1 from scratch on the target, stage 2 on the curriculum, stage
3 frozen reuse, stage 4 CNN only; Fig. 3), 100,000 batches a stage; the combinations are those of
Figs. 4, 5 and S13 (``COMBINATIONS``):

    python -m benchmarks.reproduce_predinet --mode=curricula --root_dir=/tmp/predinet_curricula \
        --max_minutes_per_cell=15 --output=benchmarks/results/predinet_curricula --plot

(``--max_minutes_per_cell`` caps each stage there; ``--plot`` also draws each combination's
curves, ``<output>_<combination>.png``, as in Fig. 4.) Every cell is resumable: a finished run's
directory holds its ``results.json`` and is not trained again, an interrupted one resumes from
its last checkpoint, and both results files (``<output>.md``, the table the docs include, and
``<output>.json``, with every run's numbers and held-out learning curves) are rewritten
atomically after each cell, so a stopped reproduction loses at most the cell in progress. A run
stopped by the time cap counts as finished; its batches are in the table. ``--table_only``
rewrites the files from what has finished. Run directories are named by task, architecture,
batches, training images and seed, so runs of different lengths or data sizes can share a
``root_dir`` (the table shows each). The table always lists
the whole grid (every task and architecture of Table 1, or every combination), a cell not yet
run as "not run", whatever part of it ``--tasks``, ``--centrals`` and ``--combinations`` train.

Across sessions and machines: ``--session_minutes`` starts no new cell after that many minutes
(the cell in progress finishes), and ``--resume_from=benchmarks/results/predinet_table1.json``
writes the finished cells recorded in a results file back into ``root_dir`` first, so a machine
without the run directories goes on with the cells not yet finished:

    python -m benchmarks.reproduce_predinet --mode=table1 --root_dir=/tmp/predinet_table1 \
        --resume_from=benchmarks/results/predinet_table1.json --session_minutes=120 \
        --output=benchmarks/results/predinet_table1
"""

import glob
import importlib.util
import itertools
import json
import os
import platform
import statistics
import time

from absl import app, flags

from benchmarks import results_io
from keras_relational import json_files
from keras_relational.environments import relations_game
from keras_relational.experiments import accuracy_targets

MODES = ("table1", "curricula")
# Shanahan et al. 2020: the released pentomino file of a task holds 250,000 images (the authors'
# notebook trains on a "mini" file of 50,000, on which the MLP baselines overfit).
PAPER_TRAIN_EXAMPLES = 250_000
TABLE1_TASKS = ("same", "between", "occurs", "xoccurs", "colour_and_or_shape")
CENTRALS = ("mlp1", "mlp2", "relation_net", "mha", "predinet")
# Table S2: plain SGD at 0.01; the Supplement's variant (Figs. S12, S14, S15): Adam at 1e-4.
OPTIMIZERS = {"sgd": 0.01, "adam": 1e-4}
NAMES = {"mlp1": "MLP1", "mlp2": "MLP2", "relation_net": "RN", "mha": "MHA",
         "predinet": "PrediNet"}
# Shanahan et al. 2020, Figs. 4, 5 and S13: name -> (target task, curriculum task, figure).
COMBINATIONS = {
    "A": ("column_patterns_3", "between", "Fig. 4"),
    "B": ("column_patterns_5", "between", "Fig. 5 / S13"),
    "C": ("match_rows", "row_patterns_3", "Fig. 5d"),
    "D": ("match_rows", "column_patterns_3", "Fig. 5a"),
    "E": ("row_patterns_5", "column_patterns_5", "Fig. 5e"),
}
# Shanahan et al. 2020, Sec. 5 (the curves themselves are not tabulated in the paper).
PAPER_CURRICULA = {
    "A": "stage 3: PrediNet fastest and the only one to reach 90 %; MHA fast but below 90 %",
    "B": "stage 3: PrediNet better than all four baselines",
    "C": "stage 3: PrediNet beats only 2 of the 4 baselines",
    "D": "stage 3: every baseline at chance (about 50 %); PrediNet about as in C",
    "E": "stage 3: every baseline at chance; PrediNet about 85 %",
}
# Shanahan et al. 2020, Table 1: accuracy (%) after 100,000 batches, mean +- spread of 10 runs.
PAPER = {
    ("same", "hexominoes"): {"mlp1": "96.1±0.66", "mlp2": "96.4±0.58", "relation_net": "73.2±5.12",
                             "mha": "94.7±13.58", "predinet": "100±0.0"},
    ("same", "stripes"): {"mlp1": "93.3±1.12", "mlp2": "94.0±1.17", "relation_net": "72.9±4.94",
                          "mha": "93.7±13.45", "predinet": "100±0.0"},
    ("between", "hexominoes"): {"mlp1": "98.7±0.45", "mlp2": "98.8±0.38",
                                "relation_net": "70.8±1.44", "mha": "89.2±10.19",
                                "predinet": "99.2±0.44"},
    ("between", "stripes"): {"mlp1": "96.9±0.78", "mlp2": "97.3±0.44", "relation_net": "65.2±4.51",
                             "mha": "85.5±10.61", "predinet": "98.7±0.66"},
    ("occurs", "hexominoes"): {"mlp1": "88.0±1.43", "mlp2": "94.8±3.15",
                               "relation_net": "61.6±1.13", "mha": "88.4±16.35",
                               "predinet": "98.5±0.81"},
    ("occurs", "stripes"): {"mlp1": "73.2±3.06", "mlp2": "87.3±6.48", "relation_net": "62.6±2.45",
                            "mha": "80.8±13.62", "predinet": "96.9±1.03"},
    ("xoccurs", "hexominoes"): {"mlp1": "81.5±2.21", "mlp2": "84.4±3.62",
                                "relation_net": "55.0±0.89", "mha": "54.7±0.76",
                                "predinet": "95.4±0.98"},
    ("xoccurs", "stripes"): {"mlp1": "78.2±2.61", "mlp2": "80.8±5.03", "relation_net": "54.0±1.25",
                             "mha": "53.6±0.70", "predinet": "95.5±1.01"},
    ("colour_and_or_shape", "hexominoes"): {"mlp1": "66.1±3.51", "mlp2": "66.9±7.52",
                                            "relation_net": "43.9±8.47", "mha": "96.9±1.20",
                                            "predinet": "97.8±0.46"},
}


# The authors' notebook (PrediNet.ipynb, train_model): every 500 batches, the accuracy on a fresh
# batch of 250 held-out hexominoes; while it is above 0.99 the next 500 batches apply no update.
# The paper does not mention it; "none" trains every batch.
PAUSE_RULES = {"none": None, "notebook": 0.99}

# Settings a run may change from its default: a run with another value gets its own directory
# (the value as a suffix) and rows (the value in the architecture column), and the summary
# counts only runs with every default (the paper's SGD; the spec's xoccurs reading).
# The generator's options apply to one task each (relations_game.TASK_OPTIONS).
VARIANT_CHOICES = {"optimizer": tuple(OPTIMIZERS), "pause_rule": tuple(PAUSE_RULES),
                   **{option: choices
                      for option, (_, choices) in relations_game.TASK_OPTIONS.items()}}
VARIANT_DEFAULTS = {name: choices[0] for name, choices in VARIANT_CHOICES.items()}


def _variant(settings):
    """The non-default settings of a run (its meta dict or the arguments it was started with),
    as ``((name, value), ...)``; a run from before a setting was recorded used its default."""
    return tuple((name, settings.get(name, default)) for name, default in VARIANT_DEFAULTS.items()
                 if settings.get(name, default) != default)


def _variant_suffix(settings):
    return "".join(f"_{value}" for _, value in _variant(settings))


def _variant_label(settings):
    labels = [f"{value.capitalize()} {OPTIMIZERS[value]:g}" if name == "optimizer"
              else "notebook's pause rule" if name == "pause_rule"
              else f"{name.replace('_', ' ')}: {value.replace('_', ' ')}"
              for name, value in _variant(settings)]
    return f" ({', '.join(labels)})" if labels else ""


def run_dir(root_dir, task, central, num_batches, seed, num_train_examples=PAPER_TRAIN_EXAMPLES,
            **variant):
    """A Table 1 cell's directory, named by everything that tells its runs apart (``variant``:
    settings of ``VARIANT_DEFAULTS`` given another value)."""
    return os.path.join(root_dir, f"{task}_{central}_{num_batches}b_{num_train_examples}train_"
                                  f"seed{seed}{_variant_suffix(variant)}")


def curriculum_dir(root_dir, combination, central, num_batches, seed,
                   num_train_examples=PAPER_TRAIN_EXAMPLES, **variant):
    """A curriculum cell's directory (one sub-directory per stage inside)."""
    return os.path.join(root_dir, f"curriculum_{combination}_{central}_{num_batches}b_"
                                  f"{num_train_examples}train_seed{seed}"
                                  f"{_variant_suffix(variant)}")


def _architecture(central, run):
    """The architecture's name, with the run's non-default settings."""
    return NAMES[central] + _variant_label(run)


def _read_json(path, default=None):
    if not os.path.exists(path):
        return default
    with open(path) as f:
        return json.load(f)


def load_results(root_dir):
    """``{(task, central): [result dicts]}`` of the finished Table 1 runs under ``root_dir``."""
    found = {}
    for path in sorted(glob.glob(os.path.join(root_dir, "*", "results.json"))):
        result = _read_json(path)
        result.update(_read_json(os.path.join(os.path.dirname(path), "meta.json"), {}))
        result["curve"] = _read_json(os.path.join(os.path.dirname(path), "curve.json"), [])
        result["run_dir"] = os.path.basename(os.path.dirname(path))  # for --resume_from
        if "task" in result and "combination" not in result:
            found.setdefault((result["task"], result["central"]), []).append(result)
    return found


def load_curricula(root_dir):
    """``{(combination, central): [cell dicts with per-stage results and curves]}``."""
    from keras_relational.experiments import relations_game_lib as lib

    found = {}
    for path in sorted(glob.glob(os.path.join(root_dir, "curriculum_*", "results.json"))):
        directory = os.path.dirname(path)
        cell = dict(_read_json(os.path.join(directory, "meta.json"), {}), stages={})
        cell["run_dir"] = os.path.basename(directory)  # for --resume_from
        for stage, result in _read_json(path).items():
            curve = _read_json(os.path.join(directory, stage, "curve.json"), [])
            cell["stages"][stage] = dict(result, curve=curve)
        if "combination" in cell and list(cell["stages"]) == list(lib.STAGES):
            found.setdefault((cell["combination"], cell["central"]), []).append(cell)
    return found


def _percent(result, object_set):
    value = result.get(object_set)
    return "n/a" if value is None else f"{100 * value:.1f}"


def _train_images(run):
    return run.get("num_train_examples", 0)


def _train_images_text(run):
    """The run's training-set size ("?" for runs from before it was recorded)."""
    return "?" if "num_train_examples" not in run else f"{run['num_train_examples']:,}"


def _load(run):
    """The machine's 15-minute load average when the run ended ("?" for runs from before it was
    recorded)."""
    load = run.get("load_average")
    return "?" if load is None else f"{load:.1f}"


def _minutes(run):
    """The run's wall time in minutes, "(GPU)" after it for a run that trained on a GPU."""
    gpu = " (GPU)" if run.get("machine", "").startswith("a GPU") else ""
    return f"{run.get('minutes', float('nan')):.1f}{gpu}"


def _paper_mean(paper):
    """The mean of a paper cell such as ``"96.1±0.66"`` (None for ``"n/a"``)."""
    try:
        return float(paper.split("±")[0])
    except ValueError:
        return None


def table1_cells():
    """Every (task, held-out set) of the paper's Table 1, in its order."""
    return [(task, object_set) for task in TABLE1_TASKS
            for object_set in ("hexominoes", "stripes") if (task, object_set) in PAPER]


def _seed_groups(runs):
    """``{(all defaults, num_batches, training images, variant): [runs]}`` in the table's order
    (seeds of one setting together; the runs with every default last)."""
    groups = {}
    for run in sorted(runs, key=lambda run: (not _variant(run), _variant(run),
                                              _train_images(run), run["num_batches"],
                                              run.get("seed", 0))):
        key = (not _variant(run), run["num_batches"], _train_images(run), _variant(run))
        groups.setdefault(key, []).append(run)
    return groups


def _seed_mean(runs, object_set):
    """Mean and sample standard deviation (in %) of ``object_set`` accuracy over ``runs``
    (``None`` where a run lacks it); the standard deviation is 0 for one run."""
    values = [100 * run[object_set] for run in runs if run.get(object_set) is not None]
    if not values or len(values) < len(runs):
        return None, None
    return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def _difference(ours, mean):
    """``ours - mean`` in points, signed, one decimal (no "-0.0"); "" if either is missing."""
    if ours is None or mean is None:
        return ""
    return f"{round(ours - mean, 1) + 0.0:+.1f}"


def table1_markdown(results):
    """Table 1's rows for the whole grid (a row per run, "not run" for a missing cell; where
    several seeds share a length and training-set size, a row with their mean ± sample standard
    deviation after them), then a summary: finished cells, PrediNet's cells within one point of
    the paper's mean (the seeds' mean of the longest setting) and the baselines' cells at the
    paper's 100,000 batches."""
    lines = ["| task | held-out set | architecture | seed | ours (%) | batches | training images "
             "| train min | load | paper (%) | ours − paper mean (points) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    finished = within_one = predinet_cells = full_length = baseline_cells = total = 0
    other_settings = {}  # PrediNet: variant label -> [cells within one point, cells run]
    for task, object_set in table1_cells():
        for central in CENTRALS:
            total += 1
            paper = PAPER[(task, object_set)].get(central, "n/a")
            mean = _paper_mean(paper)
            runs = results.get((task, central), [])
            if not runs:
                lines.append(f"| {task} | {object_set} | {NAMES[central]} | | not run | | | | | "
                             f"{paper} | |")
                continue
            finished += 1
            groups = _seed_groups(runs)
            for (_, batches, _, _), group in groups.items():
                for run in group:
                    capped = " (time cap)" if run.get("stopped_by_time_limit") else ""
                    ours = run.get(object_set)
                    lines.append(
                        f"| {task} | {object_set} | {_architecture(central, run)} | "
                        f"{run.get('seed', '?')} | "
                        f"{_percent(run, object_set)} | {run['num_batches']:,}{capped} | "
                        f"{_train_images_text(group[0])} | "
                        f"{_minutes(run)} | {_load(run)} | {paper} | "
                        f"{_difference(None if ours is None else 100 * ours, mean)} |")
                if len(group) > 1:
                    seeds_mean, seeds_std = _seed_mean(group, object_set)
                    text = "n/a" if seeds_mean is None else f"{seeds_mean:.1f}±{seeds_std:.1f}"
                    lines.append(
                        f"| {task} | {object_set} | {_architecture(central, group[0])} | "
                        f"mean of {len(group)} | "
                        f"{text} | {batches:,} | {_train_images_text(group[0])} | | | {paper} | "
                        f"{_difference(seeds_mean, mean)} |")
            # The summary counts the setting closest to the paper's (defaults, most batches, then
            # images); a cell with only runs of other settings counts as finished, not matched.
            best = groups[max(groups)]
            paper_setting = not _variant(best[0])
            if central == "predinet":
                for key in sorted({key[3] for key in groups if key[3]}):
                    ours, _ = _seed_mean(groups[max(k for k in groups if k[3] == key)],
                                         object_set)
                    counts = other_settings.setdefault(_variant_label(dict(key))[2:-1], [0, 0])
                    counts[0] += int(ours is not None and mean is not None
                                     and abs(ours - mean) <= 1.0)
                    counts[1] += 1
                predinet_cells += 1
                ours, _ = _seed_mean(best, object_set)
                within_one += int(paper_setting and ours is not None and mean is not None
                                  and abs(ours - mean) <= 1.0)
            else:
                baseline_cells += 1
                full_length += int(paper_setting and best[0]["num_batches"] >= 100_000)
    lines += ["", f"Finished: {finished} of {total} cells. PrediNet within one point of the "
              f"paper's mean (the mean over seeds): {within_one} of {predinet_cells} finished "
              f"cells. Baseline cells at the paper's 100,000 batches: {full_length} of "
              f"{baseline_cells} finished."]
    if other_settings:
        lines += ["", "PrediNet with other settings than the paper's, within one point of the "
                  "paper's mean: " + "; ".join(f"{label}: {within} of {cells} cells run"
                                               for label, (within, cells)
                                               in sorted(other_settings.items())) + "."]
    return "\n".join(lines)


CURVE_STAGES = {"stage_1_scratch": "stage 1: from scratch",
                "stage_3_reuse": "stage 3: central module reused",
                "stage_4_input_net": "stage 4: input CNN reused"}
TARGET_ACCURACY = 0.9  # Shanahan et al. 2020, Fig. 4: "the only one to reach 90%"


def batches_to_target(curve, object_set="stripes", target=TARGET_ACCURACY):
    """The first batch of a held-out ``curve`` at or above ``target``, compared in float32 as
    Keras measured it (None if never)."""
    for point in curve:
        accuracy = point.get(object_set)
        if accuracy is not None and accuracy_targets.reaches(accuracy, target):
            return point["batch"]
    return None


def _curricula_setting(cell):
    """What a curricula cell's seeds share (its variant and training images): a mean row's group."""
    return _variant(cell), _train_images(cell)


def curricula_markdown(results, combinations, centrals):
    """A row per curriculum cell: each stage's final held-out stripes accuracy, then the batches
    the target's stages 1, 3 and 4 took to reach 90 % on the held-out curve (the paper's Fig. 4
    compares how fast they learn). Where several seeds share a setting (variant and training
    images), a row with each stage's mean ± sample standard deviation follows them."""
    from keras_relational.experiments import relations_game_lib as lib

    lines = ["| combination | target ← curriculum | architecture | seed | "
             + " | ".join(f"{stage} stripes (%)" for stage in lib.STAGES)
             + " | batches to 90 % (stages 1 / 3 / 4) | batches a stage | train min | "
               "paper (Sec. 5) |",
             "|---|---|---|---|" + "---|" * len(lib.STAGES) + "---|---|---|---|"]
    for name in combinations:
        target, curriculum, figure = COMBINATIONS[name]
        for central in centrals:
            cells = results.get((name, central), [])
            head = f"| {name} ({figure}) | {target} ← {curriculum} |"
            if not cells:
                lines.append(f"{head} {NAMES[central]} | |" + " not run |" * len(lib.STAGES)
                             + f" | | | {PAPER_CURRICULA[name]} |")
            cells = sorted(cells, key=lambda cell: (_curricula_setting(cell), cell.get("seed", 0)))
            for _, group in itertools.groupby(cells, key=_curricula_setting):
                group = list(group)
                for cell in group:
                    stages = cell["stages"]
                    accuracies = " | ".join(_percent(stages[s], "stripes") for s in lib.STAGES)
                    batches = "/".join(
                        f"{stages[s]['num_batches']:,}"
                        + (" (time cap)" if stages[s].get("stopped_by_time_limit") else "")
                        for s in lib.STAGES)
                    to_target = " / ".join(
                        "never" if (b := batches_to_target(stages[s].get("curve", []))) is None
                        else f"{b:,}" for s in CURVE_STAGES)
                    lines.append(f"{head} {_architecture(central, cell)} | "
                                 f"{cell.get('seed', '?')} | {accuracies} | {to_target} | "
                                 f"{batches} | {_minutes(cell)} | "
                                 f"{PAPER_CURRICULA[name]} |")
                if len(group) > 1:
                    means = [_seed_mean([cell["stages"][s] for cell in group], "stripes")
                             for s in lib.STAGES]
                    lines.append(f"{head} {_architecture(central, group[0])} | "
                                 f"mean of {len(group)} | "
                                 + " | ".join("n/a" if mean is None else f"{mean:.1f}±{std:.1f}"
                                              for mean, std in means)
                                 + f" | | | | {PAPER_CURRICULA[name]} |")
    return "\n".join(lines)


def plot_curricula(results, output):
    """Draws ``<output>_<combination>.png`` for each combination with finished cells: the target
    task's held-out stripes accuracy against batches in stages 1, 3 and 4, a panel per
    architecture and seed (Shanahan et al. 2020, Fig. 4). Returns the paths written."""
    from keras_relational.experiments import plots_lib

    paths = []
    for name, (target, curriculum, figure) in COMBINATIONS.items():
        curves = {}
        for central in CENTRALS:
            for cell in results.get((name, central), []):
                curves[f"{_architecture(central, cell)}, seed {cell.get('seed', '?')}"] = {
                    label: [(point["batch"], point["stripes"])
                            for point in cell["stages"][stage].get("curve", [])
                            if point.get("stripes") is not None]
                    for stage, label in CURVE_STAGES.items()}
        if curves:
            paths.append(plots_lib.plot_transfer_curves(
                curves, f"{output}_{name}.png", target_accuracy=TARGET_ACCURACY,
                title=f"{name} ({figure}): {target} after {curriculum}, held-out stripes"))
    return paths


def _settings_text(settings):
    return (f"Ours: one run a row (a row 'mean of N' after several seeds of one setting: their "
            f"mean ± sample standard deviation), SGD lr 0.01, batch 10, trained on generated "
            f"pentomino images (the paper's released files hold {PAPER_TRAIN_EXAMPLES:,} a "
            f"task; the authors' notebook uses 50,000), accuracy on "
            f"{settings['num_eval_examples']:,} generated held-out images per set. A run (a stage "
            f"for the curricula) ends after its batches or at the first evaluation past its time "
            f"cap (\"time cap\"); each run's seed, cap and held-out curve are in the JSON file. "
            f"'train min' is the run's wall time (training + evaluation) on its machine (in "
            f"the JSON file; \"(GPU)\": a GPU's; this file was written on {_machine()}); "
            f"'load' is the machine's "
            f"15-minute load average when the run ended (above the core count, the run shared "
            f"the cores; '?': not recorded). Paper: mean ± spread over 10 runs of 100,000 batches.")


def _machine():
    """What trains here: the first GPU Keras' backend sees (the backend named), else the CPU."""
    cpu = f"a {os.cpu_count()}-core CPU ({platform.machine()})"
    import keras

    from keras_relational.experiments import devices

    gpus = devices.gpu_names()
    if not gpus:
        return cpu
    return f"a GPU, {gpus[0].split(' (')[0]} ({keras.backend.backend()}), beside {cpu}"


def write_results(output, mode, root_dir, settings, command=None):
    """Rewrites ``<output>.md`` and ``<output>.json`` from the finished runs (atomically)."""
    if mode == "table1":
        results = load_results(root_dir)
        table = table1_markdown(results)
        runs = [dict(run, task=task, central=central)
                for (task, central), found in sorted(results.items()) for run in found]
        title = "Relations Game, Table 1 (Shanahan et al. 2020)."
    else:
        results = load_curricula(root_dir)
        table = curricula_markdown(results, tuple(COMBINATIONS), CENTRALS)
        runs = [cell for _, found in sorted(results.items()) for cell in found]
        title = ("Relations Game, transfer curricula (Shanahan et al. 2020, Figs. 4-5, S13): "
                 "final held-out stripes accuracy of each stage.")
    text = f"{title} {_settings_text(settings)}\n\n{table}"
    if output:
        results_io.write_markdown(f"{output}.md", text, command=command)
        results_io.write_json(f"{output}.json", {"mode": mode, "settings": settings,
                                                 "runs": runs}, command=command)
    return text


def _capped_batches(directory, num_batches):
    """The fewest batches a time cap stopped a finished run (or a curriculum's stage) of
    ``directory`` at, below ``num_batches``; None if every run trained ``num_batches``."""
    results = _read_json(os.path.join(directory, "results.json"))
    runs = [results] if "num_batches" in results else list(results.values())
    capped = [run["num_batches"] for run in runs
              if run.get("stopped_by_time_limit") and run["num_batches"] < num_batches]
    return min(capped) if capped else None


def _set_aside(directory, batches):
    """Renames a capped run's ``directory`` to ``<directory>_capped<batches>b`` (``_2``, ... if
    taken), where ``load_results`` still finds it; returns the new path."""
    kept = f"{directory}_capped{batches}b"
    number = 1
    while os.path.exists(kept):
        number += 1
        kept = f"{directory}_capped{batches}b_{number}"
    os.rename(directory, kept)
    return kept


def restore_finished(root_dir, results_file, mode):
    """Writes the finished runs of a results file (``<output>.json``) back into ``root_dir``.

    A run directory that already has its ``results.json`` keeps it. Returns the directories
    restored (their base names).

    Raises:
        ValueError: naming ``--resume_from`` when the file is not a results file of ``mode``
            written by this script.
    """
    runs = results_io.read_results_json(results_file, mode, list)["runs"]
    restored = []
    for record in runs:
        name = record.get("run_dir") if isinstance(record, dict) else None
        if not name or os.path.basename(name) != name:
            raise ValueError(f"--resume_from expects every run of {results_file!r} to name its "
                             f"run directory (\"run_dir\"), received {str(record)[:200]!r}.")
        directory = os.path.join(root_dir, name)
        if os.path.exists(os.path.join(directory, "results.json")):
            continue
        os.makedirs(directory, exist_ok=True)
        if mode == "table1":
            result = {k: v for k, v in record.items() if k != "curve"}
            json_files.write_json(os.path.join(directory, "curve.json"), record.get("curve", []))
        else:
            result = {}
            for stage, stage_result in record["stages"].items():
                os.makedirs(os.path.join(directory, stage), exist_ok=True)
                json_files.write_json(os.path.join(directory, stage, "curve.json"),
                                      stage_result.get("curve", []))
                result[stage] = {k: v for k, v in stage_result.items() if k != "curve"}
            meta = {k: v for k, v in record.items() if k != "stages"}
            json_files.write_json(os.path.join(directory, "meta.json"), meta, indent=2)
        # results.json last: a kill before it leaves a directory the next run trains again.
        json_files.write_json(os.path.join(directory, "results.json"), result, indent=2)
        restored.append(name)
    return restored


def run(mode="table1", root_dir="/tmp/predinet_table1", tasks=TABLE1_TASKS,
        combinations=tuple(COMBINATIONS), centrals=CENTRALS, seeds=(0,), num_batches=100_000,
        max_minutes_per_cell=15.0, num_train_examples=PAPER_TRAIN_EXAMPLES, num_eval_examples=5_000,
        eval_interval=5_000, output=None, table_only=False, session_minutes=None, command=None,
        plot=False, optimizer="sgd", xoccurs_negatives="exclusive", colour_shape_layout="random",
        pause_rule="none", occurs_distractors="variants", retrain_capped=False,
        **train_kwargs):
    """Trains every missing cell of ``mode`` and rewrites the results files after each one.

    ``session_minutes``: start no new cell after that many minutes (the one in progress finishes).
    ``plot``: with ``mode="curricula"`` and an ``output``, also draw ``plot_curricula``'s PNGs.
    ``optimizer``: ``"sgd"`` (the paper's, lr 0.01) or ``"adam"`` (the Supplement's, lr 1e-4);
    runs of another optimizer than SGD get their own directories and rows.
    ``xoccurs_negatives``: the generator's ``xoccurs`` negatives (``"exclusive"``, the default, or
    ``"both_readings"``; ``RelationsGame``); ``xoccurs`` runs of the latter get their own
    directories and rows. ``colour_shape_layout``: likewise for ``colour_and_or_shape``
    (``"random"``, the default, or ``"column_pair"``), and ``occurs_distractors`` for ``occurs``
    (``"variants"``, the default, or ``"one_variant"``). ``pause_rule``: ``"none"`` (the paper's
    every batch trains) or ``"notebook"`` (``PAUSE_RULES``: the authors' notebook skips updates
    while a fresh validation batch is above 99 %; SGD only); its runs get their own directories
    and rows. ``retrain_capped``: a finished cell that its time cap stopped before
    ``num_batches`` (a run, or a stage of a curriculum) is trained again (e.g. on a GPU); the
    capped run is kept beside it, renamed ``<directory>_capped<batches>b``, and both are rows.

    ``train_kwargs`` go to ``relations_game_lib.train_eval`` (e.g. tiny ``central_kwargs`` and
    ``batch_size`` for a smoke test). Returns the markdown text of the results.
    """
    names = tasks if mode == "table1" else combinations
    options = {"xoccurs_negatives": xoccurs_negatives,
               "colour_shape_layout": colour_shape_layout,
               "occurs_distractors": occurs_distractors}
    for option, value in dict(options, optimizer=optimizer, pause_rule=pause_rule).items():
        if value not in VARIANT_CHOICES[option]:
            raise ValueError(f"`{option}`: expected one of {list(VARIANT_CHOICES[option])}, "
                             f"received {value!r}.")
    if PAUSE_RULES[pause_rule] is not None and optimizer != "sgd":
        raise ValueError(f"`pause_rule`: the notebook's rule pauses SGD; expected "
                         f"optimizer='sgd', received optimizer={optimizer!r}.")
    if plot:  # checked before hours of training
        if mode != "curricula" or not output:
            raise ValueError(f"`plot` draws the curricula's curves: expected mode='curricula' "
                             f"and an `output`, received mode={mode!r}, output={output!r}.")
        if importlib.util.find_spec("matplotlib") is None:
            raise ValueError("`plot` needs matplotlib: pip install "
                             "\"keras-relational[plots]\".")
    if output and os.path.splitext(output)[1] in (".md", ".json"):
        output = os.path.splitext(output)[0]
    settings = dict(seeds=list(seeds), num_batches=num_batches,
                    max_minutes_per_cell=max_minutes_per_cell,
                    num_train_examples=num_train_examples, num_eval_examples=num_eval_examples)
    session_start = time.time()
    if not table_only:
        from keras_relational.experiments import relations_game_lib as lib

        for seed in seeds:
            for name in names:
                for central in centrals:
                    if mode == "table1":
                        variant = {"optimizer": optimizer, "pause_rule": pause_rule}
                        variant.update({option: value for option, value in options.items()
                                        if relations_game.TASK_OPTIONS[option][0] == name})
                        directory = run_dir(root_dir, name, central, num_batches, seed,
                                            num_train_examples, **variant)
                        meta = {"task": name, "central": central, "seed": seed, **variant}
                        protocol = {"task": name}
                    else:
                        # No combination has xoccurs or colour_and_or_shape.
                        variant = {"optimizer": optimizer, "pause_rule": pause_rule}
                        directory = curriculum_dir(root_dir, name, central, num_batches, seed,
                                                   num_train_examples, **variant)
                        target, curriculum, _ = COMBINATIONS[name]
                        meta = {"combination": name, "task": target,
                                "curriculum_task": curriculum, "central": central, "seed": seed,
                                **variant}
                        protocol = {"task": target, "curriculum_task": curriculum}
                    capped = None
                    if os.path.exists(os.path.join(directory, "results.json")):
                        capped = _capped_batches(directory, num_batches)
                        if not retrain_capped or capped is None:
                            continue
                    if (session_minutes is not None
                            and time.time() - session_start > 60.0 * session_minutes):
                        print(f"--session_minutes={session_minutes:g} passed: not starting "
                              f"{os.path.basename(directory)}", flush=True)
                        continue
                    if capped is not None:
                        kept = _set_aside(directory, capped)
                        print(f"--retrain_capped: {os.path.basename(directory)} stopped at its "
                              f"time cap after {capped:,} batches; kept as "
                              f"{os.path.basename(kept)}, trained again", flush=True)
                    print(f"== {mode} cell {meta}", flush=True)
                    start = time.time()
                    lib.train_eval(
                        directory, central=central, num_batches=num_batches,
                        num_train_examples=num_train_examples,
                        num_eval_examples=num_eval_examples, eval_interval=eval_interval,
                        seed=seed, export=False, time_limit_s=60.0 * max_minutes_per_cell,
                        optimizer=optimizer, learning_rate=OPTIMIZERS[optimizer],
                        pause_above_accuracy=PAUSE_RULES[pause_rule],
                        **options,
                        **protocol, **train_kwargs)
                    meta["minutes"] = (time.time() - start) / 60.0
                    meta["max_minutes_per_cell"] = max_minutes_per_cell
                    meta["num_train_examples"] = num_train_examples
                    meta["load_average"] = os.getloadavg()[2]
                    meta["machine"] = _machine()
                    json_files.write_json(os.path.join(directory, "meta.json"), meta, indent=2)
                    write_results(output, mode, root_dir, settings, command)
    text = write_results(output, mode, root_dir, settings, command)
    print("\n" + text, flush=True)
    if plot:
        for path in plot_curricula(load_curricula(root_dir), output):
            print(f"curves: {path}", flush=True)
    return text


def define_flags():
    flags.DEFINE_enum("mode", "table1", list(MODES), "Table 1 cells or the transfer curricula.")
    flags.DEFINE_string("root_dir", "/tmp/predinet_table1", "Where runs are kept (resumable).")
    flags.DEFINE_list("tasks", list(TABLE1_TASKS), "Table 1 tasks (--mode=table1).")
    flags.DEFINE_list("combinations", list(COMBINATIONS),
                      "Curriculum combinations A-E (--mode=curricula).")
    flags.DEFINE_list("centrals", list(CENTRALS), "Architectures.")
    flags.DEFINE_list("seeds", ["0"], "Seeds (the paper: 10 runs).")
    flags.DEFINE_integer("num_batches", 100_000, "Batches of 10 per run / stage (paper: 100,000).")
    flags.DEFINE_float("max_minutes_per_cell", 15.0,
                       "Training time cap of a run (a stage for the curricula), in minutes.")
    flags.DEFINE_integer("num_train_examples", PAPER_TRAIN_EXAMPLES,
                         "Generated pentomino training images a task (the paper's released files: "
                         "250,000; the authors' notebook: 50,000).", lower_bound=1)
    flags.DEFINE_integer("num_eval_examples", 5_000, "Held-out images per object set.")
    flags.DEFINE_integer("eval_interval", 5_000, "Batches between held-out evaluations (also the "
                         "granularity of the time cap and of the curves).")
    flags.DEFINE_enum("optimizer", "sgd", list(OPTIMIZERS), "sgd: the paper's (lr 0.01); adam: "
                      "the Supplement's variant (lr 1e-4, Figs. S12, S14, S15), in its own run "
                      "directories and rows.")
    flags.DEFINE_enum("xoccurs_negatives", "exclusive",
                      list(VARIANT_CHOICES["xoccurs_negatives"]),
                      "xoccurs negatives: exclusive (none or two copies of the top object; the "
                      "spec's reading) or both_readings (none or three), in their own run "
                      "directories and rows.")
    flags.DEFINE_enum("colour_shape_layout", "random",
                      list(VARIANT_CHOICES["colour_shape_layout"]),
                      "colour_and_or_shape: two random cells (the paper's 'randomly placed') or "
                      "column_pair (rows 0 and 2 of one column, as in DeepMind's released "
                      "samples), in their own run directories and rows.")
    flags.DEFINE_enum("occurs_distractors", "variants",
                      list(VARIANT_CHOICES["occurs_distractors"]),
                      "occurs: the other bottom objects are variants of the top one (the "
                      "spec's reading) or one_variant (random objects but for one variant in a "
                      "negative, as between's middle object in DeepMind's released data), in "
                      "their own run directories and rows.")
    flags.DEFINE_enum("pause_rule", "none", list(PAUSE_RULES),
                      "none: every batch trains (the paper); notebook: the authors' notebook's "
                      "rule (every 500 batches a fresh batch of 250 held-out hexominoes; while "
                      "above 99 %, the next 500 batches apply no update), in its own run "
                      "directories and rows.")
    flags.DEFINE_bool("table_only", False, "Only rewrite the results from finished runs.")
    flags.DEFINE_bool("retrain_capped", False, "Train again the finished cells that the time cap "
                      "stopped before --num_batches (e.g. on a GPU); each capped run is kept "
                      "as <directory>_capped<batches>b, a row of its own.")
    flags.DEFINE_bool("plot", False, "--mode=curricula: also draw <output>_<combination>.png, "
                      "the target's held-out curves in stages 1, 3 and 4 (needs matplotlib).")
    flags.DEFINE_float("session_minutes", None, "Start no new cell after this many minutes (the "
                       "cell in progress finishes).", lower_bound=0.0)
    flags.DEFINE_string("resume_from", None, "A results file of this script (<output>.json) "
                        "whose finished runs are written into --root_dir first (a machine "
                        "without the run directories goes on from there).")
    flags.DEFINE_string("output", None, "Results path without extension: <output>.md (the docs' "
                        "table) and <output>.json, e.g. benchmarks/results/predinet_table1.")


def main(argv):
    del argv
    FLAGS = flags.FLAGS
    for name in FLAGS.tasks:
        if name not in TABLE1_TASKS:
            raise ValueError(f"`--tasks`: expected names from {list(TABLE1_TASKS)}, received "
                             f"{name!r}.")
    for name in FLAGS.combinations:
        if name not in COMBINATIONS:
            raise ValueError(f"`--combinations`: expected names from {list(COMBINATIONS)}, "
                             f"received {name!r}.")
    for name in FLAGS.centrals:
        if name not in CENTRALS:
            raise ValueError(f"`--centrals`: expected names from {list(CENTRALS)}, received "
                             f"{name!r}.")
    if FLAGS.resume_from:
        try:
            restored = restore_finished(FLAGS.root_dir, FLAGS.resume_from, FLAGS.mode)
        except ValueError as error:
            raise app.UsageError(str(error)) from None
        print(f"--resume_from: {len(restored)} finished run(s) restored into {FLAGS.root_dir}")
    run(mode=FLAGS.mode, root_dir=FLAGS.root_dir, tasks=FLAGS.tasks,
        combinations=FLAGS.combinations, centrals=FLAGS.centrals,
        seeds=[int(s) for s in FLAGS.seeds], num_batches=FLAGS.num_batches,
        max_minutes_per_cell=FLAGS.max_minutes_per_cell,
        num_train_examples=FLAGS.num_train_examples, num_eval_examples=FLAGS.num_eval_examples,
        eval_interval=FLAGS.eval_interval, output=FLAGS.output, table_only=FLAGS.table_only,
        session_minutes=FLAGS.session_minutes, plot=FLAGS.plot, optimizer=FLAGS.optimizer,
        xoccurs_negatives=FLAGS.xoccurs_negatives,
        colour_shape_layout=FLAGS.colour_shape_layout, pause_rule=FLAGS.pause_rule,
        occurs_distractors=FLAGS.occurs_distractors, retrain_capped=FLAGS.retrain_capped)


if __name__ == "__main__":
    define_flags()
    app.run(main)
