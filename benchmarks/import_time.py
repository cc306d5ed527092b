"""Time of ``import keras_relational`` in a fresh process once TensorFlow's files are cached.

Runs one warm-up process, then ``--repeats`` measured processes, each timing (in-process, with
``perf_counter``) ``import keras`` (which imports the TensorFlow backend) and then
``import keras_relational``. Prints the minimum and median of each. The goal is < 5 s in all.

    .venv/bin/python benchmarks/import_time.py [--repeats 5] \\
        [--output benchmarks/results/import_time.md]
"""

import argparse
import os
import statistics
import subprocess
import sys

import results_io  # benchmarks/results_io.py, beside this script

_CODE = """
import time
start = time.perf_counter()
import keras
middle = time.perf_counter()
import keras_relational
end = time.perf_counter()
print(end - start, end - middle)
"""


def measure(repeats, warm_up=True):
    """Two lists, the total seconds and our own modules' seconds, of ``repeats`` fresh
    processes, after one that only warms the file cache (unless ``warm_up`` is False: for a
    caller that has imported the same stack already)."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("TF_USE_LEGACY_KERAS", None)
    timings = []
    warm_ups = 1 if warm_up else 0  # a first process only warms the file cache
    for i in range(warm_ups + repeats):
        result = subprocess.run([sys.executable, "-c", _CODE], env=env, capture_output=True,
                                text=True, check=True)
        if i >= warm_ups:
            timings.append([float(v) for v in result.stdout.split()])
    return [t[0] for t in timings], [t[1] for t in timings]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--output", default=None,
                        help="also write the table to this markdown file (and .json beside it)")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    total, own = measure(args.repeats)
    table = (f"| what | min (s) | median (s) |\n|---|---|---|\n"
             f"| `import keras_relational` in all (Keras + TensorFlow + ours) | "
             f"{min(total):.2f} | {statistics.median(total):.2f} |\n"
             f"| our own modules (after `import keras`) | {min(own):.3f} | "
             f"{statistics.median(own):.3f} |")
    print(table)
    if args.output:
        note = (f"Fresh processes after one warm-up, {args.repeats} measured; load average "
                f"{load_before:.1f} before, {os.getloadavg()[0]:.1f} after, {os.cpu_count()} CPUs.")
        results_io.write_markdown(args.output, f"{note}\n\n{table}")
        results_io.write_json(os.path.splitext(args.output)[0] + ".json",
                              {"args": vars(args), "total_s": total, "own_s": own})


if __name__ == "__main__":
    main()
