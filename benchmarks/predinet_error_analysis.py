r"""Where the Table 1 models of ``reproduce_predinet`` go wrong: accuracy by kind of example.

For each finished Table 1 run of an analysed task under ``--root_dir`` (its ``model.keras``),
draws fresh images of the training objects (pentominoes) and of each held-out set, with
the objects that made them, and reports the accuracy on each kind of example:

* ``occurs`` / ``xoccurs``: by the number of copies of the top object in the bottom row (0-3).
  ``xoccurs`` is true for exactly one copy (our reading of the paper; see
  ``RelationsGame(xoccurs_negatives=...)``), so its negatives have 0, 2 or 3 copies. Each
  number of copies is also split by the near variants among the other bottom objects: those
  that differ from the top object in colour only or in shape only (every stripes variant, since
  stripes share one shape), the objects a model most easily takes for copies.
* ``same`` / ``colour_and_or_shape``: by how the two objects differ (identical, shape differs,
  colour differs, both differ; stripes only differ in colour). Two shapes differ when their 3x3
  arrays do (the paper's identity), so a pair may be one free polyomino turned, flipped or moved
  inside its box: the shape differences are also split into "same free shape" and "other free
  shape". For ``colour_and_or_shape``, a confusion table: the classes predicted for each kind.

Accuracy on the pentominoes (training objects, new images) tells a model that never fit the
training distribution from one that fits it and fails to transfer. Writes ``<output>.md`` and
``<output>.json`` (atomically); ``--tasks`` analyses some tasks again and keeps the other tasks'
runs of an existing ``<output>.json`` (drawn with the same ``--num_examples`` and ``--seed``):

    python -m benchmarks.predinet_error_analysis --root_dir=/tmp/predinet_table1 \
        --output=benchmarks/results/predinet_error_analysis
"""

import fnmatch
import json
import os

import numpy as np
from absl import app, flags

from benchmarks import results_io
from keras_relational.environments import polyominoes, relations_game

TASKS = ("same", "occurs", "xoccurs", "colour_and_or_shape")
PAIR_KINDS = ("identical", "shape differs", "colour differs", "both differ")
OBJECT_SETS = ("pentominoes", "hexominoes", "stripes")


def _differences(first, second):
    """``(shape differs, colour differs)`` of two objects (colour: the stripe pair for stripes)."""
    return (first.mask.tobytes() != second.mask.tobytes(),
            (first.outer, first.middle) != (second.outer, second.middle))


def example_kind(task, objects):
    """The kind of one example (``{(row, col): GameObject}``), as a short text."""
    if task in ("occurs", "xoccurs"):
        top = objects[(0, 1)].key()
        return f"{sum(objects[(2, col)].key() == top for col in range(3))} copies"
    shape_differs, colour_differs = _differences(*list(objects.values())[:2])
    return PAIR_KINDS[int(shape_differs) + 2 * int(colour_differs)]


FREE_SHAPE_SPLIT = ("same free shape", "other free shape")


def free_shape(mask):
    """A key of the free polyomino of a 3x3 mask: the smallest of its 8 dihedral images, each
    cropped to its bounding box, so one polyomino turned, flipped or moved inside the box has one
    key."""
    forms = []
    for element in range(8):
        image = polyominoes.dihedral(np.asarray(mask), element)
        rows, cols = np.flatnonzero(image.any(1)), np.flatnonzero(image.any(0))
        cropped = np.ascontiguousarray(image[rows[0]:rows[-1] + 1, cols[0]:cols[-1] + 1])
        forms.append((cropped.shape, cropped.astype(bool).tobytes()))
    return min(forms)


def free_shape_split(task, objects):
    """For a pair whose 3x3 arrays differ (``same``, ``colour_and_or_shape``): whether the two
    are one free polyomino ("same free shape") or not ("other free shape"); None otherwise."""
    if task not in ("same", "colour_and_or_shape"):
        return None
    first, second = list(objects.values())[:2]
    if first.mask.tobytes() == second.mask.tobytes():
        return None
    return FREE_SHAPE_SPLIT[free_shape(first.mask) != free_shape(second.mask)]


def near_variants(task, objects):
    """For ``occurs`` / ``xoccurs``: how many bottom objects differ from the top object in
    exactly one of shape and colour (None for the other tasks)."""
    if task not in ("occurs", "xoccurs"):
        return None
    top = objects[(0, 1)]
    return sum(shape_differs != colour_differs
               for shape_differs, colour_differs in (_differences(top, objects[(2, col)])
                                                     for col in range(3)))


def near_split_order():
    """The ``occurs`` / ``xoccurs`` splits: copies, then near variants among the others."""
    return [f"{copies} copies, {near} near" for copies in range(4)
            for near in range(4 - copies)]


def kind_order(task):
    return [f"{n} copies" for n in range(4)] if task in ("occurs", "xoccurs") else list(PAIR_KINDS)


def sample_with_kinds(task, object_set, num_examples, seed, **generator_kwargs):
    """``(data, kinds, splits)``: ``num_examples`` generated examples (the dict of
    ``relations_game.generate``; ``generator_kwargs`` go to ``RelationsGame``), the kind of each
    and its split: ``free_shape_split`` for the pair tasks, ``"<copies> copies, <n> near"``
    (``near_variants``) for ``occurs`` / ``xoccurs``."""
    from keras_relational.environments.relations_game.generator import RelationsGame
    from keras_relational.environments.relations_game.rendering import render

    game = RelationsGame(task, object_set, seed=seed, **generator_kwargs)
    images = np.zeros((num_examples, 36, 36, 3), dtype=np.uint8)
    labels = np.zeros(num_examples, dtype=np.int64)
    tasks = np.zeros(num_examples, dtype=np.int64)
    kinds, splits = [], []
    for i in range(num_examples):
        objects, labels[i], tasks[i] = game.sample_objects()
        images[i] = render(objects)
        kinds.append(example_kind(task, objects))
        near = near_variants(task, objects)
        splits.append(free_shape_split(task, objects) if near is None
                      else f"{kinds[-1]}, {near} near")
    return {"images": images, "labels": labels, "tasks": tasks}, kinds, splits


def analyse_run(run_dir, num_examples=4_000, seed=2024, batch_size=250):
    """``{object_set: {"accuracy", "kinds": {kind: {"accuracy", "count"}}}}`` of one run, on
    data drawn as its training data was (its generator options,
    ``relations_game.TASK_OPTIONS``). Pair tasks add ``"by_free_shape": {kind: {split: {"accuracy",
    "count"}}}`` for the shape differences; ``colour_and_or_shape`` adds ``"confusion": {kind:
    [examples predicted as each class]}``; ``occurs`` / ``xoccurs`` add ``"by_near_variants":
    {split: {"accuracy", "count"}}`` (``near_split_order``)."""
    import keras

    import keras_relational.layers  # noqa: F401  (registers the layers for load_model)
    from keras_relational.experiments import relations_game_lib as lib

    with open(os.path.join(run_dir, "meta.json")) as f:
        meta = json.load(f)
    task = meta["task"]
    # The generator's options the run was trained with (absent: the defaults).
    generator_kwargs = {option: meta[option] for option in relations_game.TASK_OPTIONS
                        if option in meta}
    model = keras.saving.load_model(os.path.join(run_dir, "model.keras"))
    analysis = {}
    for object_set in ("pentominoes",) + lib.held_out_sets(task):
        data, kinds, splits = sample_with_kinds(task, object_set, num_examples, seed,
                                                **generator_kwargs)
        logits = model.predict(lib.make_dataset(data, batch_size), verbose=0)
        predicted = np.argmax(logits, -1)
        correct = predicted == data["labels"]
        kinds, splits = np.array(kinds), np.array([str(split) for split in splits])
        result = analysis[object_set] = {
            "accuracy": float(correct.mean()),
            "kinds": {kind: {"accuracy": float(correct[kinds == kind].mean()),
                             "count": int((kinds == kind).sum())}
                      for kind in kind_order(task) if (kinds == kind).any()}}
        if task in ("same", "colour_and_or_shape"):
            result["by_free_shape"] = {
                kind: {split: {"accuracy": float(correct[chosen].mean()),
                               "count": int(chosen.sum())}
                       for split in FREE_SHAPE_SPLIT
                       if (chosen := (kinds == kind) & (splits == split)).any()}
                for kind in ("shape differs", "both differ") if (kinds == kind).any()}
        if task in ("occurs", "xoccurs"):
            result["by_near_variants"] = {
                split: {"accuracy": float(correct[splits == split].mean()),
                        "count": int((splits == split).sum())}
                for split in near_split_order() if (splits == split).any()}
        if task == "colour_and_or_shape":
            result["confusion"] = {
                kind: np.bincount(predicted[kinds == kind], minlength=len(PAIR_KINDS)).tolist()
                for kind in PAIR_KINDS if (kinds == kind).any()}
    return analysis


def finished_runs(root_dir, tasks=TASKS, run_patterns=("*",)):
    """``(run directory, run record)`` of the finished Table 1 runs of ``tasks`` under
    ``root_dir`` that saved a model (``reproduce_predinet.load_results``) and whose directory
    name matches one of the shell patterns ``run_patterns``."""
    from benchmarks import reproduce_predinet

    return [(os.path.join(root_dir, run["run_dir"]), run)
            for (task, _), found in sorted(reproduce_predinet.load_results(root_dir).items())
            if task in tasks for run in found
            if any(fnmatch.fnmatchcase(run["run_dir"], pattern) for pattern in run_patterns)
            and os.path.exists(os.path.join(root_dir, run["run_dir"], "model.keras"))]


def _cell(entry):
    return "-" if entry is None else f"{100 * entry['accuracy']:.1f} ({entry['count']})"


def markdown(records):
    """One table per task: a row per (run, object set), a column per kind of example; for the
    pair tasks the shape differences split by free shape, and for ``colour_and_or_shape`` the
    classes predicted for each kind."""
    lines = []
    for task in TASKS:
        rows = [r for r in records if r["task"] == task]
        if not rows:
            continue
        kinds = kind_order(task)
        lines += [f"### {task}", "",
                  "| run | objects | accuracy (%) | " + " | ".join(kinds) + " |",
                  "|---|---|---|" + "---|" * len(kinds)]
        for record in rows:
            for object_set, result in record["analysis"].items():
                cells = [_cell(result["kinds"].get(kind)) for kind in kinds]
                lines.append(f"| {record['run_dir']} | {object_set} | "
                             f"{100 * result['accuracy']:.1f} | " + " | ".join(cells) + " |")
        lines.append("")
        split_rows = [(record, object_set, result) for record in rows
                      for object_set, result in record["analysis"].items()
                      if result.get("by_free_shape")]
        if split_rows:
            columns = [(kind, split) for kind in ("shape differs", "both differ")
                       for split in FREE_SHAPE_SPLIT]
            lines += [f"{task}: the shape differences by free shape (one polyomino turned, "
                      f"flipped or moved in its box, or two polyominoes): accuracy % "
                      f"(examples).", "",
                      "| run | objects | " + " | ".join(f"{kind}: {split}"
                                                       for kind, split in columns) + " |",
                      "|---|---|" + "---|" * len(columns)]
            for record, object_set, result in split_rows:
                cells = [_cell(result["by_free_shape"].get(kind, {}).get(split))
                         for kind, split in columns]
                lines.append(f"| {record['run_dir']} | {object_set} | " + " | ".join(cells)
                             + " |")
            lines.append("")
        near_rows = [(record, object_set, result) for record in rows
                     for object_set, result in record["analysis"].items()
                     if result.get("by_near_variants")]
        if near_rows:
            columns = [split for split in near_split_order()
                       if any(split in result["by_near_variants"] for _, _, result in near_rows)]
            lines += [f"{task}: the examples by copies of the top object and by near variants "
                      f"among the other bottom objects (differing from it in colour only or in "
                      f"shape only): accuracy % (examples).", "",
                      "| run | objects | " + " | ".join(columns) + " |",
                      "|---|---|" + "---|" * len(columns)]
            for record, object_set, result in near_rows:
                cells = [_cell(result["by_near_variants"].get(split)) for split in columns]
                lines.append(f"| {record['run_dir']} | {object_set} | " + " | ".join(cells)
                             + " |")
            lines.append("")
        confusion_rows = [(record, object_set, result) for record in rows
                          for object_set, result in record["analysis"].items()
                          if result.get("confusion")]
        if confusion_rows:
            lines += [f"{task}: the classes predicted for each kind of example (% of that kind's "
                      f"examples; the diagonal is the accuracy).", "",
                      "| run | objects | kind | " + " | ".join(f"as {kind}" for kind in PAIR_KINDS)
                      + " |", "|---|---|---|" + "---|" * len(PAIR_KINDS)]
            for record, object_set, result in confusion_rows:
                for kind, counts in result["confusion"].items():
                    total = sum(counts)
                    lines.append(f"| {record['run_dir']} | {object_set} | {kind} | "
                                 + " | ".join(f"{100 * c / total:.1f}" for c in counts) + " |")
            lines.append("")
    return "\n".join(lines)


def kept_records(output, tasks, num_examples, seed):
    """The records of ``<output>.json`` for tasks other than ``tasks`` (kept when some tasks
    are analysed again); none when the file does not exist.

    Raises:
        ValueError: naming ``output`` when its records were drawn with another
            ``num_examples`` or ``seed``.
    """
    path = f"{output}.json"
    if not os.path.exists(path):
        return []
    with open(path) as f:
        data = json.load(f)
    if (data.get("num_examples"), data.get("seed")) != (num_examples, seed):
        raise ValueError(f"--output: {path} holds runs analysed on num_examples="
                         f"{data.get('num_examples')}, seed={data.get('seed')}; this analysis "
                         f"draws num_examples={num_examples}, seed={seed}: analyse all tasks "
                         f"with its settings, or write another --output.")
    return [record for record in data["runs"] if record["task"] not in tasks]


def run(root_dir, tasks=TASKS, num_examples=4_000, seed=2024, output=None, command=None,
        run_patterns=("*",)):
    """Analyses every finished run of ``tasks`` (whose directory matches ``run_patterns``) and
    writes the results files (keeping the other tasks' runs of an existing ``<output>.json``);
    returns the text."""
    kept = kept_records(output, tasks, num_examples, seed) if output else []
    records = []
    for directory, meta in finished_runs(root_dir, tasks, run_patterns):
        print(f"== {os.path.basename(directory)}", flush=True)
        records.append({"run_dir": os.path.basename(directory), "task": meta["task"],
                        "central": meta.get("central"), "seed": meta.get("seed"),
                        "analysis": analyse_run(directory, num_examples, seed)})
    records = sorted(kept + records, key=lambda r: (TASKS.index(r["task"]), r["run_dir"]))
    text = (f"Relations Game: accuracy of the Table 1 models by kind of example (cells: accuracy % "
            f"(examples)), on {num_examples:,} fresh images per object set (seed {seed}); "
            f"pentominoes are the training objects in new images. Each run is measured on data "
            f"drawn as its training data was, with the generator options its name ends with "
            f"(a `..._both_readings` xoccurs run on negatives with no copy or three copies, a "
            f"`..._one_variant` occurs run on negatives with one variant among random "
            f"objects).\n\n" + markdown(records))
    if output:
        results_io.write_markdown(f"{output}.md", text, command=command)
        results_io.write_json(f"{output}.json", {"num_examples": num_examples, "seed": seed,
                                                 "runs": records}, command=command)
    return text


def main(argv):
    del argv
    FLAGS = flags.FLAGS
    unknown = sorted(set(FLAGS.tasks) - set(TASKS))
    if unknown:
        raise app.UsageError(f"--tasks: expected a subset of {list(TASKS)}, received {unknown}.")
    if FLAGS.output:
        try:
            kept_records(FLAGS.output, tuple(FLAGS.tasks), FLAGS.num_examples, FLAGS.seed)
        except ValueError as error:
            raise app.UsageError(str(error)) from None
    print(run(FLAGS.root_dir, tuple(FLAGS.tasks), FLAGS.num_examples, FLAGS.seed,
              FLAGS.output, command=results_io.command_line(),
              run_patterns=tuple(FLAGS.run_patterns)))


if __name__ == "__main__":
    flags.DEFINE_string("root_dir", "/tmp/predinet_table1", "reproduce_predinet's Table 1 runs.")
    flags.DEFINE_list("tasks", list(TASKS), "Tasks to analyse.")
    flags.DEFINE_list("run_patterns", ["*"], "Analyse only the runs whose directory name "
                      "matches one of these shell patterns, e.g. 'occurs_predinet_*'.")
    flags.DEFINE_integer("num_examples", 4_000, "Fresh images per object set.", lower_bound=1)
    flags.DEFINE_integer("seed", 2024, "Seed of the fresh images.")
    flags.DEFINE_string("output", None, "Results path without extension (.md and .json).")
    app.run(main)
