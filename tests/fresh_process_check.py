"""Runs in a fresh Python process (started by layer_contract.check_fresh_process).

Loads the exported SavedModel with ``tf.saved_model.load`` and calls its ``serve`` endpoint, and
loads the ``.keras`` file with whatever Keras backend ``KERAS_BACKEND`` selects (JAX in the
contract), writing both outputs to an .npz for the parent test to compare.

``python fresh_process_check.py JOB`` runs one job; ``--serve`` (layer_contract's server) makes
the imports every job makes once, then forks a child per job path read from stdin: each job runs
in a process that has done nothing but those imports, without paying for them (several seconds
of CPU each: most of a job's cost).
"""

import importlib
import json
import os
import sys
import traceback

import numpy as np


def main(job_path):
    with open(job_path) as f:
        job = json.load(f)
    arrays = np.load(job["inputs"])
    inputs = [arrays[f"arr_{i}"] for i in range(len(arrays.files))]
    results = {}
    if "keras_file" in job:
        import keras

        import keras_relational.layers  # noqa: F401  (imports and registers every layer)

        for module in job.get("extra_imports", []):
            importlib.import_module(module)

        model = keras.saving.load_model(job["keras_file"])
        outputs = model.predict(inputs if job["multiple_inputs"] else inputs[0], verbose=0)
        for i, output in enumerate(keras.tree.flatten(outputs)):
            results[f"jax_{i}"] = np.asarray(output)
        results["backend"] = np.asarray(keras.backend.backend())
    if "saved_model" in job:
        import tensorflow as tf

        reloaded = tf.saved_model.load(job["saved_model"])
        tensors = [tf.constant(x) for x in inputs]
        outputs = reloaded.serve(tensors if job["multiple_inputs"] else tensors[0])
        for i, output in enumerate(tf.nest.flatten(outputs)):
            results[f"saved_model_{i}"] = output.numpy()
    np.savez(job["outputs"], **results)


def serve():
    """Runs each job path read from stdin (one a line) in a forked child; prints its exit code.

    The child's stdout and stderr go to ``<job path>.log``. Only imports happen before the fork
    (no TensorFlow or JAX computation, so no thread of theirs holds a lock the child needs);
    under the JAX backend, what ``main`` imports for a job with both checks.
    """
    if os.environ.get("KERAS_BACKEND") == "jax":
        import keras  # noqa: F401

        import keras_relational.layers  # noqa: F401
    import tensorflow  # noqa: F401

    for line in sys.stdin:
        job_path = line.strip()
        pid = os.fork()
        if pid == 0:  # the child: run the job, never return into the loop
            code = 1
            try:
                log = os.open(job_path + ".log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(log, 1)
                os.dup2(log, 2)
                main(job_path)
                code = 0
            except BaseException:  # noqa: BLE001  (reported in the log, as a process would)
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "--serve":
        serve()
    else:
        main(sys.argv[1])
