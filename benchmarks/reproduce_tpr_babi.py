r"""Single-task TPR-RNN error on generated bAbI tasks, next to Schlag & Schmidhuber (2018) Table 2.

    python benchmarks/reproduce_tpr_babi.py --root_dir=/tmp/tpr_babi_repro --tasks=1,2,6 \
        --max_minutes=20 --output=benchmarks/results/tpr_babi.md

Each task trains its own model (single-task setting: E=15, R=10, H=40, batch 128, Nadam 1e-3 with
50 warm-up steps, global clip 5) on generated data (9,000 train / 1,000 valid / 1,000 test
questions), with a wall-clock budget per task, early stopping on validation accuracy (the test
error is measured at the best validation checkpoint). Prints a markdown table.

Caveats: the data are our procedural generator's stories, not the Facebook bAbI files (pass
--data_dir to use real files); one seed per task (the paper reports best and mean of 5 runs).
"""

import os
import platform

import results_io  # benchmarks/results_io.py, beside this script
from absl import app, flags

from keras_relational import json_files
from keras_relational.experiments import babi_lib
from keras_relational.progress_bar import progress_lines

# Schlag & Schmidhuber 2018, Table 2 (single-task, test error %, 5 runs).
PAPER_BEST = {1: "0.0", 2: "0.0", 3: "1.2", 4: "0.0", 5: "0.5", 6: "0.0", 7: "0.5", 8: "0.1",
              9: "0.0", 10: "0.3", 11: "0.0", 12: "0.0", 13: "0.3", 14: "0.0", 15: "0.0",
              16: "0.0", 17: "0.4", 18: "0.1", 19: "0.0", 20: "0.0"}
PAPER_MEAN = {1: "0.02 ± 0.05", 2: "0.06 ± 0.09", 3: "1.78 ± 0.58", 4: "0.02 ± 0.04",
              5: "0.61 ± 0.17", 6: "0.22 ± 0.19", 7: "2.78 ± 1.81", 8: "0.47 ± 0.45",
              9: "0.14 ± 0.13", 10: "1.24 ± 1.30", 11: "0.14 ± 0.11", 12: "0.04 ± 0.05",
              13: "0.42 ± 0.11", 14: "0.24 ± 0.29", 15: "0.0 ± 0.0", 16: "0.02 ± 0.045",
              17: "0.9 ± 0.69", 18: "0.64 ± 0.33", 19: "12.64 ± 17.39", 20: "0.0 ± 0.00"}

FLAGS = flags.FLAGS
flags.DEFINE_string("root_dir", "/tmp/tpr_babi_repro", "Output directory (one folder per task).")
flags.DEFINE_list("tasks", ["1", "2", "6"], "Generated bAbI tasks, one model each.")
flags.DEFINE_string("data_dir", None, "Real bAbI files instead of generated ones.")
flags.DEFINE_float("max_minutes", 20.0, "Training budget per task (wall clock).")
flags.DEFINE_float("target_val_accuracy", 0.998, "Stop a task early at this validation accuracy.")
flags.DEFINE_integer("num_train", 9000, "Generated training questions per task.")
flags.DEFINE_integer("seed", 0, "Seed.")
flags.DEFINE_enum("operations", None, list(babi_lib.OPERATIONS),
                  "Table 3 ablation (memory operations); default: all three (W+M+B).")
flags.DEFINE_string("output", None, "Also write the table to this markdown file (and the "
                    "results to a .json beside it), e.g. benchmarks/results/tpr_babi.md.")


def main(argv):
    del argv
    rows = []
    tasks = [int(t) for t in FLAGS.tasks]
    for task in progress_lines(tasks, len(tasks), describe=lambda t: f"task {t}"):
        results = babi_lib.train_eval(
            os.path.join(FLAGS.root_dir, f"task{task}"), tasks=(task,), data_dir=FLAGS.data_dir,
            num_train=FLAGS.num_train, max_minutes=FLAGS.max_minutes,
            target_val_accuracy=FLAGS.target_val_accuracy, seed=FLAGS.seed, verbose=2,
            operations=FLAGS.operations,
        )
        rows.append((task, results))
        print(f"task {task}: test error {results['test_error'][task]:.2f} % after "
              f"{results['epochs']} epochs / {results['steps']} steps, "
              f"{results['train_seconds'] / 60:.1f} min", flush=True)
    lines = [
        f"Scale: single-task, {FLAGS.num_train} train questions per task, one seed "
        f"({FLAGS.seed}), memory operations {FLAGS.operations or 'W+M+B'}, "
        f"budget {FLAGS.max_minutes:g} min per task, "
        f"{os.cpu_count()} CPU cores ({platform.processor() or platform.machine()}), "
        f"{'real bAbI files' if FLAGS.data_dir else 'generated data'}.",
        "",
        "| Task | Test error (%) | Epochs | Steps | Train time (min) | Paper best (%) "
        "| Paper mean ± std (%) |",
        "|---|---|---|---|---|---|---|",
    ]
    for task, r in rows:
        lines.append(f"| {task} | {r['test_error'][task]:.2f} | {r['epochs']} | {r['steps']} | "
                     f"{r['train_seconds'] / 60:.1f} | {PAPER_BEST.get(task, '-')} | "
                     f"{PAPER_MEAN.get(task, '-')} |")
    failed = [task for task, r in rows if r["test_error"][task] > 5.0]
    lines += ["", f"Failed tasks (> 5 % test error, the paper's criterion): {len(failed)} of "
                  f"{len(rows)}{' (' + ', '.join(map(str, failed)) + ')' if failed else ''}."]
    table = "\n".join(lines)
    print(table)
    os.makedirs(FLAGS.root_dir, exist_ok=True)
    with open(os.path.join(FLAGS.root_dir, "table.md"), "w") as f:
        f.write(table + "\n")
    summary = {str(t): {k: v for k, v in r.items() if k not in ("model", "vocabulary")}
               for t, r in rows}
    json_files.write_json(os.path.join(FLAGS.root_dir, "results.json"), summary, indent=2,
                          default=str)
    if FLAGS.output:
        results_io.write_markdown(FLAGS.output, table)
        results_io.write_json(os.path.splitext(FLAGS.output)[0] + ".json", {"tasks": summary})


if __name__ == "__main__":
    app.run(main)
