"""benchmarks/reproduce_predinet.py at tiny settings: every Table 1 task kind, both modes,
resumption per cell and the results files rewritten after each cell."""

import json
import os
import sys

import pytest

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if _REPO_ROOT not in sys.path:  # `benchmarks` is a folder of scripts run from the repo root
    sys.path.insert(0, _REPO_ROOT)

from benchmarks import reproduce_predinet as reproduce  # noqa: E402

TINY = dict(num_batches=2, eval_interval=1, num_train_examples=20, num_eval_examples=10,
            batch_size=5, num_monitor_examples=10, steps_per_execution=1,
            central_kwargs={"num_heads": 2})


@pytest.mark.slow
def test_table1_cells_resume_and_rewrite_the_results(tmp_path, capsys):
    root, output = str(tmp_path / "runs"), str(tmp_path / "results" / "table1.md")
    text = reproduce.run("table1", root, tasks=("xoccurs", "colour_and_or_shape"),
                         centrals=("mha",), output=output, command="pytest tiny", **TINY)
    for task, sets in (("xoccurs", ("hexominoes", "stripes")),
                       ("colour_and_or_shape", ("hexominoes",))):
        for object_set in sets:
            assert f"| {task} | {object_set} | MHA |" in text
    assert "colour_and_or_shape | stripes" not in text  # no stripes version in the paper
    with open(str(tmp_path / "results" / "table1.md")) as f:
        assert f.readline().startswith("Written by `pytest tiny`")
    with open(str(tmp_path / "results" / "table1.json")) as f:
        report = json.load(f)
    assert {(r["task"], r["num_batches"]) for r in report["runs"]} == {
        ("xoccurs", 2), ("colour_and_or_shape", 2)}
    cell = reproduce.run_dir(root, "xoccurs", "mha", 2, 0)
    assert os.path.exists(os.path.join(cell, "curve.json"))
    capsys.readouterr()
    # Finished cells are not trained again; the table is rebuilt from their results.
    again = reproduce.run("table1", root, tasks=("xoccurs", "colour_and_or_shape"),
                          centrals=("mha",), output=output, command="pytest tiny", **TINY)
    assert "== table1 cell" not in capsys.readouterr().out
    assert again == text


@pytest.mark.slow
def test_curricula_mode_and_time_cap(tmp_path):
    root = str(tmp_path / "runs")
    text = reproduce.run("curricula", root, combinations=("E",), centrals=("mlp1",),
                         output=str(tmp_path / "curricula"), max_minutes_per_cell=0.0,
                         **dict(TINY, central_kwargs=None))
    assert "| E (Fig. 5e) | row_patterns_5 ← column_patterns_5 | MLP1 |" in text
    with open(str(tmp_path / "curricula.json")) as f:
        (cell,) = json.load(f)["runs"]
    assert cell["combination"] == "E" and len(cell["stages"]) == 4
    for stage in cell["stages"].values():
        # A zero-minute cap stops each stage at its first evaluation (after 1 batch).
        assert stage["stopped_by_time_limit"] and stage["num_batches"] == 1
        assert [point["batch"] for point in stage["curve"]] == [1]
        assert 0.0 <= stage["curve"][0]["stripes"] <= 1.0
