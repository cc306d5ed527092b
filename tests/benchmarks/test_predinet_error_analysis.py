"""benchmarks/predinet_error_analysis.py: the kinds of examples agree with the labels, and a tiny
Table 1 run is analysed into results files."""

import json
import os
import sys

import numpy as np
import pytest

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if _REPO_ROOT not in sys.path:  # `benchmarks` is a folder of scripts run from the repo root
    sys.path.insert(0, _REPO_ROOT)

from benchmarks import predinet_error_analysis as analysis  # noqa: E402


@pytest.mark.parametrize("object_set", ["pentominoes", "stripes"])
def test_kinds_agree_with_the_labels(object_set):
    data, kinds = analysis.sample_with_kinds("xoccurs", object_set, 400, seed=1)
    assert set(kinds) <= {"0 copies", "1 copies", "2 copies", "3 copies"}
    # xoccurs holds for exactly one copy of the top object.
    np.testing.assert_array_equal(data["labels"], [kind == "1 copies" for kind in kinds])
    data, kinds = analysis.sample_with_kinds("occurs", object_set, 400, seed=1)
    np.testing.assert_array_equal(data["labels"], [kind != "0 copies" for kind in kinds])
    data, kinds = analysis.sample_with_kinds("same", object_set, 400, seed=1)
    np.testing.assert_array_equal(data["labels"], [kind == "identical" for kind in kinds])
    if object_set == "stripes":  # stripes only differ in colour
        assert set(kinds) == {"identical", "colour differs"}


def test_colour_and_or_shape_label_is_the_pair_kind():
    data, kinds = analysis.sample_with_kinds("colour_and_or_shape", "hexominoes", 400, seed=2)
    np.testing.assert_array_equal(data["labels"],
                                  [analysis.PAIR_KINDS.index(kind) for kind in kinds])


@pytest.mark.slow
def test_a_tiny_run_is_analysed_into_results_files(tmp_path):
    from benchmarks import reproduce_predinet as reproduce

    root = str(tmp_path / "runs")
    reproduce.run("table1", root, tasks=("xoccurs",), centrals=("mlp1",), num_batches=2,
                  eval_interval=1, num_train_examples=20, num_eval_examples=10, batch_size=5,
                  num_monitor_examples=10, steps_per_execution=1)
    output = str(tmp_path / "results" / "errors")
    text = analysis.run(root, num_examples=30, output=output, command="pytest tiny")
    assert "### xoccurs" in text and "### same" not in text
    with open(output + ".json") as f:
        (record,) = json.load(f)["runs"]
    assert record["run_dir"] == "xoccurs_mlp1_2b_20train_seed0"
    assert list(record["analysis"]) == ["pentominoes", "hexominoes", "stripes"]
    for result in record["analysis"].values():
        kinds = result["kinds"]
        assert sum(entry["count"] for entry in kinds.values()) == 30
        overall = sum(entry["accuracy"] * entry["count"] for entry in kinds.values()) / 30
        assert overall == pytest.approx(result["accuracy"])
    with open(output + ".md") as f:
        assert f.readline().startswith("Written by `pytest tiny`")


def test_both_readings_negatives_have_no_copy_or_three():
    data, kinds = analysis.sample_with_kinds("xoccurs", "hexominoes", 400, seed=3,
                                             xoccurs_negatives="both_readings")
    assert set(kinds) == {"0 copies", "1 copies", "3 copies"}
    np.testing.assert_array_equal(data["labels"], [kind == "1 copies" for kind in kinds])
