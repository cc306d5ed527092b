"""benchmarks/predinet_error_analysis.py: the kinds of examples agree with the labels, and a tiny
Table 1 run is analysed into results files."""

import json

import benchmark_scripts
import numpy as np
import pytest

analysis = benchmark_scripts.load("predinet_error_analysis")


@pytest.mark.parametrize("object_set", ["pentominoes", "stripes"])
def test_kinds_agree_with_the_labels(object_set):
    data, kinds, _ = analysis.sample_with_kinds("xoccurs", object_set, 400, seed=1)
    assert set(kinds) <= {"0 copies", "1 copies", "2 copies", "3 copies"}
    # xoccurs holds for exactly one copy of the top object.
    np.testing.assert_array_equal(data["labels"], [kind == "1 copies" for kind in kinds])
    data, kinds, _ = analysis.sample_with_kinds("occurs", object_set, 400, seed=1)
    np.testing.assert_array_equal(data["labels"], [kind != "0 copies" for kind in kinds])
    data, kinds, _ = analysis.sample_with_kinds("same", object_set, 400, seed=1)
    np.testing.assert_array_equal(data["labels"], [kind == "identical" for kind in kinds])
    if object_set == "stripes":  # stripes only differ in colour
        assert set(kinds) == {"identical", "colour differs"}


def test_colour_and_or_shape_label_is_the_pair_kind():
    data, kinds, splits = analysis.sample_with_kinds("colour_and_or_shape", "hexominoes", 400,
                                                     seed=2)
    np.testing.assert_array_equal(data["labels"],
                                  [analysis.PAIR_KINDS.index(kind) for kind in kinds])
    # The free-shape split exactly for the pairs whose arrays differ; both halves occur.
    for kind, split in zip(kinds, splits, strict=True):
        assert (split is None) == (kind in ("identical", "colour differs"))
    assert set(splits) == {None, *analysis.FREE_SHAPE_SPLIT}


def test_free_shape_is_one_key_per_free_polyomino():
    from keras_relational.environments import polyominoes

    for object_set in ("pentominoes", "hexominoes"):
        bases = polyominoes.bases(object_set)
        keys = {analysis.free_shape(base) for base in bases}
        assert len(keys) == len(bases) == 8  # the 8 free shapes of each set stay apart
        for base in bases:  # every turn and flip (which may move it in its box): one key
            assert {analysis.free_shape(polyominoes.dihedral(base, e))
                    for e in range(8)} == {analysis.free_shape(base)}
    v = np.array([[1, 0, 0], [1, 0, 0], [1, 1, 1]])
    p_moved = np.array([[0, 1, 1], [0, 1, 1], [0, 1, 0]])  # P, one column to the right
    p = np.array([[1, 1, 0], [1, 1, 0], [1, 0, 0]])
    assert analysis.free_shape(p_moved) == analysis.free_shape(p) != analysis.free_shape(v)


def test_the_extra_tables_and_keeping_other_tasks(tmp_path):
    result = {"accuracy": 0.5,
              "kinds": {kind: {"accuracy": 0.5, "count": 10} for kind in analysis.PAIR_KINDS},
              "by_free_shape": {"both differ": {"same free shape": {"accuracy": 0.25,
                                                                    "count": 4}}},
              "confusion": {"both differ": [0, 6, 1, 3]}}
    records = [{"run_dir": "colour_and_or_shape_predinet_x", "task": "colour_and_or_shape",
                "analysis": {"hexominoes": result}},
               {"run_dir": "same_mlp1_x", "task": "same",
                "analysis": {"stripes": {"accuracy": 1.0, "kinds": {}, "by_free_shape": {}}}}]
    text = analysis.markdown(records)
    assert "| colour_and_or_shape_predinet_x | hexominoes | - | - | 25.0 (4) | - |" in text
    assert "| colour_and_or_shape_predinet_x | hexominoes | both differ | 0.0 | 60.0 | 10.0 | " \
           "30.0 |" in text
    assert text.count("by free shape") == 1  # stripes have no shape differences
    output = str(tmp_path / "errors")
    with open(output + ".json", "w") as f:
        json.dump({"num_examples": 30, "seed": 1, "runs": records}, f)
    assert analysis.kept_records(output, ("same",), 30, 1) == records[:1]
    with pytest.raises(ValueError, match=r"--output: .*errors.json holds runs analysed on "
                                         r"num_examples=30, seed=1; this analysis draws "
                                         r"num_examples=40, seed=1"):
        analysis.kept_records(output, ("same",), 40, 1)
    assert analysis.kept_records(str(tmp_path / "none"), ("same",), 40, 1) == []


@pytest.mark.slow
def test_a_tiny_run_is_analysed_into_results_files(tmp_path):
    reproduce = benchmark_scripts.load("reproduce_predinet")

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
    # The near-variant split of xoccurs adds up to the copies' kinds.
    for result in record["analysis"].values():
        for kind, entry in result["kinds"].items():
            assert sum(split["count"] for name, split in result["by_near_variants"].items()
                       if name.startswith(kind + ",")) == entry["count"]
    # --run_patterns: a pattern no run matches analyses nothing.
    assert analysis.finished_runs(root, run_patterns=("same_*",)) == []
    assert len(analysis.finished_runs(root, run_patterns=("same_*", "xoccurs_mlp1_*"))) == 1


def test_both_readings_negatives_have_no_copy_or_three():
    data, kinds, _ = analysis.sample_with_kinds("xoccurs", "hexominoes", 400, seed=3,
                                             xoccurs_negatives="both_readings")
    assert set(kinds) == {"0 copies", "1 copies", "3 copies"}
    np.testing.assert_array_equal(data["labels"], [kind == "1 copies" for kind in kinds])


@pytest.mark.parametrize("task", ["occurs", "xoccurs"])
@pytest.mark.parametrize("object_set", ["pentominoes", "stripes"])
def test_near_variants_are_counted_from_the_pixels_too(task, object_set):
    from keras_relational.environments.relations_game import parsing

    data, kinds, splits = analysis.sample_with_kinds(task, object_set, 300, seed=4)
    seen = set()
    for image, kind, split in zip(data["images"], kinds, splits, strict=True):
        objects = parsing.parse_image(image)
        top = objects[(0, 1)]
        near = 0
        for col in range(3):
            other = objects[(2, col)]
            same_shape = parsing.shape_of(other) == parsing.shape_of(top)
            same_colour = parsing.colour_of(other) == parsing.colour_of(top)
            identical = parsing.identity(other) == parsing.identity(top)
            near += int(not identical and (same_shape or same_colour))
        assert split == f"{kind}, {near} near"
        seen.add(split)
    if object_set == "stripes":  # one shape: every other bottom object is a near variant
        assert all(int(s[0]) + int(s.split(", ")[1][0]) == 3 for s in seen)
    else:
        assert {"0 copies, 3 near", "0 copies, 1 near"} <= seen
    assert seen <= set(analysis.near_split_order())
