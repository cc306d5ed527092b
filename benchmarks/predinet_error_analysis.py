r"""Where the Table 1 models of ``reproduce_predinet`` go wrong: accuracy by kind of example.

For each finished Table 1 run of an analysed task under ``--root_dir`` (its ``model.keras``),
draws fresh images of the training objects (pentominoes) and of each held-out set, with
the objects that made them, and reports the accuracy on each kind of example:

* ``occurs`` / ``xoccurs``: by the number of copies of the top object in the bottom row (0-3).
  ``xoccurs`` is true for exactly one copy (our reading of the paper; see
  ``RelationsGame(xoccurs_negatives=...)``), so its negatives have 0, 2 or 3 copies.
* ``same`` / ``colour_and_or_shape``: by how the two objects differ (identical, shape differs,
  colour differs, both differ; stripes only differ in colour).

Accuracy on the pentominoes (training objects, new images) tells a model that never fit the
training distribution from one that fits it and fails to transfer. Writes ``<output>.md`` and
``<output>.json`` (atomically):

    python -m benchmarks.predinet_error_analysis --root_dir=/tmp/predinet_table1 \
        --output=benchmarks/results/predinet_error_analysis
"""

import json
import os

import numpy as np
from absl import app, flags

from benchmarks import results_io

TASKS = ("same", "occurs", "xoccurs", "colour_and_or_shape")
PAIR_KINDS = ("identical", "shape differs", "colour differs", "both differ")
OBJECT_SETS = ("pentominoes", "hexominoes", "stripes")


def example_kind(task, objects):
    """The kind of one example (``{(row, col): GameObject}``), as a short text."""
    if task in ("occurs", "xoccurs"):
        top = objects[(0, 1)].key()
        return f"{sum(objects[(2, col)].key() == top for col in range(3))} copies"
    first, second = list(objects.values())[:2]
    shape_differs = first.mask.tobytes() != second.mask.tobytes()
    colour_differs = (first.outer, first.middle) != (second.outer, second.middle)
    return PAIR_KINDS[int(shape_differs) + 2 * int(colour_differs)]


def kind_order(task):
    return [f"{n} copies" for n in range(4)] if task in ("occurs", "xoccurs") else list(PAIR_KINDS)


def sample_with_kinds(task, object_set, num_examples, seed, **generator_kwargs):
    """``(data, kinds)``: ``num_examples`` generated examples (the dict of
    ``relations_game.generate``; ``generator_kwargs`` go to ``RelationsGame``) and the kind of
    each."""
    from keras_relational.environments.relations_game.generator import RelationsGame
    from keras_relational.environments.relations_game.rendering import render

    game = RelationsGame(task, object_set, seed=seed, **generator_kwargs)
    images = np.zeros((num_examples, 36, 36, 3), dtype=np.uint8)
    labels = np.zeros(num_examples, dtype=np.int64)
    tasks = np.zeros(num_examples, dtype=np.int64)
    kinds = []
    for i in range(num_examples):
        objects, labels[i], tasks[i] = game.sample_objects()
        images[i] = render(objects)
        kinds.append(example_kind(task, objects))
    return {"images": images, "labels": labels, "tasks": tasks}, kinds


def analyse_run(run_dir, num_examples=4_000, seed=2024, batch_size=250):
    """``{object_set: {"accuracy", "kinds": {kind: {"accuracy", "count"}}}}`` of one run, on
    data drawn as its training data was (its ``xoccurs_negatives`` or
    ``colour_shape_layout``)."""
    import keras

    import keras_relational.layers  # noqa: F401  (registers the layers for load_model)
    from keras_relational.experiments import relations_game_lib as lib

    with open(os.path.join(run_dir, "meta.json")) as f:
        meta = json.load(f)
    task = meta["task"]
    # The generator's options the run was trained with (absent: the defaults).
    generator_kwargs = {option: meta[option] for option in ("xoccurs_negatives",
                                                            "colour_shape_layout")
                        if option in meta}
    model = keras.saving.load_model(os.path.join(run_dir, "model.keras"))
    analysis = {}
    for object_set in ("pentominoes",) + lib.held_out_sets(task):
        data, kinds = sample_with_kinds(task, object_set, num_examples, seed, **generator_kwargs)
        logits = model.predict(lib.make_dataset(data, batch_size), verbose=0)
        correct = np.argmax(logits, -1) == data["labels"]
        kinds = np.array(kinds)
        analysis[object_set] = {
            "accuracy": float(correct.mean()),
            "kinds": {kind: {"accuracy": float(correct[kinds == kind].mean()),
                             "count": int((kinds == kind).sum())}
                      for kind in kind_order(task) if (kinds == kind).any()}}
    return analysis


def finished_runs(root_dir, tasks=TASKS):
    """``(run directory, run record)`` of the finished Table 1 runs of ``tasks`` under
    ``root_dir`` that saved a model (``reproduce_predinet.load_results``)."""
    from benchmarks import reproduce_predinet

    return [(os.path.join(root_dir, run["run_dir"]), run)
            for (task, _), found in sorted(reproduce_predinet.load_results(root_dir).items())
            if task in tasks for run in found
            if os.path.exists(os.path.join(root_dir, run["run_dir"], "model.keras"))]


def markdown(records):
    """One table per task: a row per (run, object set), a column per kind of example."""
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
                cells = []
                for kind in kinds:
                    entry = result["kinds"].get(kind)
                    cells.append("-" if entry is None else
                                 f"{100 * entry['accuracy']:.1f} ({entry['count']})")
                lines.append(f"| {record['run_dir']} | {object_set} | "
                             f"{100 * result['accuracy']:.1f} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def run(root_dir, tasks=TASKS, num_examples=4_000, seed=2024, output=None, command=None):
    """Analyses every finished run of ``tasks`` and writes the results files; returns the text."""
    records = []
    for directory, meta in finished_runs(root_dir, tasks):
        print(f"== {os.path.basename(directory)}", flush=True)
        records.append({"run_dir": os.path.basename(directory), "task": meta["task"],
                        "central": meta.get("central"), "seed": meta.get("seed"),
                        "analysis": analyse_run(directory, num_examples, seed)})
    text = (f"Relations Game: accuracy of the Table 1 models by kind of example (cells: accuracy % "
            f"(examples)), on {num_examples:,} fresh images per object set (seed {seed}); "
            f"pentominoes are the training objects in new images. Each run is measured on data "
            f"drawn as its training data was (a `..._both_readings` xoccurs run on negatives "
            f"with no copy or three copies).\n\n" + markdown(records))
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
    print(run(FLAGS.root_dir, tuple(FLAGS.tasks), FLAGS.num_examples, FLAGS.seed,
              FLAGS.output, command=results_io.command_line()))


if __name__ == "__main__":
    flags.DEFINE_string("root_dir", "/tmp/predinet_table1", "reproduce_predinet's Table 1 runs.")
    flags.DEFINE_list("tasks", list(TASKS), "Tasks to analyse.")
    flags.DEFINE_integer("num_examples", 4_000, "Fresh images per object set.", lower_bound=1)
    flags.DEFINE_integer("seed", 2024, "Seed of the fresh images.")
    flags.DEFINE_string("output", None, "Results path without extension (.md and .json).")
    app.run(main)
