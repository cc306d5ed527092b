"""Runs in a fresh Python process (started by layer_contract.check_fresh_process).

Loads the exported SavedModel with ``tf.saved_model.load`` and calls its ``serve`` endpoint, and
loads the ``.keras`` file with whatever Keras backend ``KERAS_BACKEND`` selects (JAX in the
contract), writing both outputs to an .npz for the parent test to compare.
"""

import importlib
import json
import sys

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


if __name__ == "__main__":
    main(sys.argv[1])
