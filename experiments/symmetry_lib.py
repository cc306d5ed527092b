"""What Mitchell & Bowers' two experiments (Tables I and II) share: results, export, statistics.

``rule_learning_lib`` trains the rule-learning models (Table I), ``palindromes_lib`` the sequence
models on the palindrome language (Table II, scored by ``palindromes_eval_lib``). Every run writes a
``results.json`` (``write_json``), a ``.keras`` file and a SavedModel (``export_model``);
``summarize`` turns several runs into medians (the paper's statistic) and ``mann_whitney_p``
compares two models' runs.
"""

import os

import keras
import numpy as np

from keras_relational import faults, json_files, whole_files


def write_json(path, payload, sort_keys=True):
    """Writes ``payload`` as indented strict JSON (NaN as null), atomically."""
    json_files.write_json(path, payload, indent=2, sort_keys=sort_keys)


def export_model(model, root_dir, export=True):
    """Saves ``root_dir/model.keras`` and the SavedModel ``root_dir/saved_model`` if ``export``."""
    if not export:
        return
    os.makedirs(root_dir, exist_ok=True)  # nothing else creates it when TensorBoard is off
    faults.point("export")  # the fault tests kill here: results.json is not written yet
    whole_files.write_whole(os.path.join(root_dir, "model.keras"), model.save)
    whole_files.write_whole(os.path.join(root_dir, "saved_model"),
                            lambda path: model.export(path, verbose=False))


def sparse_crossentropy(reduction="sum_over_batch_size"):
    """Softmax cross-entropy on integer labels and logits (both experiments' loss)."""
    return keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=reduction)


def median(values):
    """The median of ``values`` as a float (NaN for none)."""
    return float(np.median(np.asarray(values, np.float64))) if len(values) else float("nan")


def mann_whitney_p(a, b):
    """Two-sided Mann-Whitney U p-value (SciPy if installed, else None)."""
    try:
        from scipy.stats import mannwhitneyu
    except ImportError:  # SciPy is optional
        return None
    if len(a) < 2 or len(b) < 2 or (len(set(a)) == 1 and set(a) == set(b)):
        return None
    return float(mannwhitneyu(a, b, alternative="two-sided").pvalue)


def summarize(runs, keys):
    """Medians over runs of the (nested) result ``keys``, e.g. ``[("long", "string_accuracy")]``."""
    summary = {}
    for key in keys:
        values = []
        for run in runs:
            value = run
            for part in key:
                value = value[part]
            values.append(value)
        summary["/".join(key)] = {"median": median(values), "values": values}
    return summary
