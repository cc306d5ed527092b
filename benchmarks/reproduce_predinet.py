r"""Reproduces part of Table 1 of Shanahan et al. (2020) at CPU scale and prints a markdown table.

Each (task, architecture) cell is one run of ``relations_game_lib.train_eval``: train on generated
pentominoes (SGD 0.01, batches of 10, as in the paper), then measure accuracy on fresh hexomino
and stripes sets. The paper's numbers (mean +- spread over 10 runs of 100,000 batches) are
printed next to ours (1 seed, ``--num_batches`` batches, stated in the table).

    python -m benchmarks.reproduce_predinet --root_dir=/tmp/predinet_table1 \
        --tasks=same,between,occurs --centrals=predinet,mlp1,mlp2,mha --num_batches=100000 \
        --output=benchmarks/results/predinet_table1.md

Runs already finished under ``root_dir`` are reused, so the table can be extended run by run
(e.g. a longer PrediNet run and shorter baselines: ``--num_batches`` is part of the run's
directory name). ``--table_only`` prints the table of whatever has finished.
"""

import glob
import json
import os
import time

from absl import app, flags

from benchmarks import results_io
from keras_relational import json_files

FLAGS = flags.FLAGS
flags.DEFINE_string("root_dir", "/tmp/predinet_table1", "Where runs and results are kept.")
flags.DEFINE_list("tasks", ["same", "between", "occurs"], "Table 1 tasks.")
flags.DEFINE_list("centrals", ["predinet", "mlp1", "mlp2", "mha"], "Architectures.")
flags.DEFINE_integer("num_batches", 100_000, "Batches of 10 per run (paper: 100,000).")
flags.DEFINE_integer("num_train_examples", 50_000, "Generated pentomino training images.")
flags.DEFINE_integer("num_eval_examples", 5_000, "Held-out images per object set.")
flags.DEFINE_integer("eval_interval", 5_000, "Batches between monitor evaluations.")
flags.DEFINE_integer("seed", 0, "Seed.")
flags.DEFINE_bool("table_only", False, "Only print the table of finished runs.")
flags.DEFINE_string("output", None, "Markdown file to write the table to (printed anyway), e.g. "
                    "benchmarks/results/predinet_table1.md.")

NAMES = {"mlp1": "MLP1", "mlp2": "MLP2", "relation_net": "RN", "mha": "MHA",
         "predinet": "PrediNet"}
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


def run_dir(root_dir, task, central, num_batches, seed):
    return os.path.join(root_dir, f"{task}_{central}_{num_batches}b_seed{seed}")


def load_results(root_dir):
    """``{(task, central): [result dicts with "num_batches", "minutes", ...]}`` of finished runs."""
    found = {}
    for path in sorted(glob.glob(os.path.join(root_dir, "*", "results.json"))):
        with open(path) as f:
            result = json.load(f)
        meta_path = os.path.join(os.path.dirname(path), "meta.json")
        if os.path.exists(meta_path):
            with open(meta_path) as f:
                result.update(json.load(f))
        if "task" in result:
            found.setdefault((result["task"], result["central"]), []).append(result)
    return found


def markdown_table(results, tasks, centrals):
    lines = ["| task | held-out set | architecture | ours (%) | batches | train min | "
             "paper (%) |", "|---|---|---|---|---|---|---|"]
    for task in tasks:
        for object_set in ("hexominoes", "stripes"):
            if (task, object_set) not in PAPER:
                continue
            for central in centrals:
                paper = PAPER[(task, object_set)].get(central, "n/a")
                runs = results.get((task, central), [])
                if not runs:
                    lines.append(f"| {task} | {object_set} | {NAMES[central]} | not run | | | "
                                 f"{paper} |")
                    continue
                for run in runs:
                    lines.append(
                        f"| {task} | {object_set} | {NAMES[central]} | "
                        f"{100 * run[object_set]:.1f} | {run['num_batches']:,} | "
                        f"{run.get('minutes', float('nan')):.1f} | {paper} |")
    return "\n".join(lines)


def main(argv):
    del argv
    if not FLAGS.table_only:
        from keras_relational.experiments import relations_game_lib

        for task in FLAGS.tasks:
            for central in FLAGS.centrals:
                directory = run_dir(FLAGS.root_dir, task, central, FLAGS.num_batches, FLAGS.seed)
                meta_path = os.path.join(directory, "meta.json")
                start = time.time()
                relations_game_lib.train_eval(
                    directory, central=central, task=task, num_batches=FLAGS.num_batches,
                    num_train_examples=FLAGS.num_train_examples,
                    num_eval_examples=FLAGS.num_eval_examples,
                    eval_interval=FLAGS.eval_interval, seed=FLAGS.seed, export=False)
                if not os.path.exists(meta_path):
                    json_files.write_json(meta_path, {"task": task, "central": central,
                                                      "minutes": (time.time() - start) / 60.0})
    text = (f"Relations Game, Table 1 subset. Ours: 1 seed, SGD lr 0.01, batch 10, "
            f"{FLAGS.num_train_examples:,} generated pentomino training images, accuracy on "
            f"{FLAGS.num_eval_examples:,} generated held-out images per set; 'train min' is the "
            f"wall time of the run (training + evaluation) on a shared 2-core CPU. Paper: mean ± "
            f"spread over 10 runs of 100,000 batches.\n\n"
            + markdown_table(load_results(FLAGS.root_dir), FLAGS.tasks, FLAGS.centrals))
    print("\n" + text)
    if FLAGS.output:
        results_io.write_markdown(FLAGS.output, text)


if __name__ == "__main__":
    app.run(main)
