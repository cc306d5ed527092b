"""benchmarks/reproduce_predinet.py at tiny settings: every Table 1 task kind, both modes,
resumption per cell and the results files rewritten after each cell."""

import json
import os

import benchmark_scripts
import numpy as np
import pytest

reproduce = benchmark_scripts.load("reproduce_predinet")

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
    cell = reproduce.run_dir(root, "xoccurs", "mha", 2, 0, num_train_examples=20)
    assert os.path.basename(cell) == "xoccurs_mha_2b_20train_seed0"
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
                         output=str(tmp_path / "curricula"), max_minutes_per_cell=0.0, plot=True,
                         **dict(TINY, central_kwargs=None))
    assert "| E (Fig. 5e) | row_patterns_5 ← column_patterns_5 | MLP1 | 0 |" in text
    # --plot: the curves of the one combination run, a PNG.
    assert sorted(os.listdir(tmp_path)) == ["curricula.json", "curricula.md", "curricula_E.png",
                                            "runs"]
    with open(str(tmp_path / "curricula_E.png"), "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="`plot` draws the curricula's curves"):
        reproduce.run("table1", root, tasks=(), output=str(tmp_path / "t"), plot=True)
    with open(str(tmp_path / "curricula.json")) as f:
        (cell,) = json.load(f)["runs"]
    assert cell["combination"] == "E" and len(cell["stages"]) == 4
    for stage in cell["stages"].values():
        # A zero-minute cap stops each stage at its first evaluation (after 1 batch).
        assert stage["stopped_by_time_limit"] and stage["num_batches"] == 1
        assert [point["batch"] for point in stage["curve"]] == [1]
        assert 0.0 <= stage["curve"][0]["stripes"] <= 1.0


def _table_lines(text):
    return [line for line in text.splitlines() if line.startswith("| ")]


@pytest.mark.slow
def test_resume_from_a_results_file_on_a_machine_without_the_runs(tmp_path, capsys):
    output = str(tmp_path / "results" / "table1")
    first = reproduce.run("table1", str(tmp_path / "first"), tasks=("same",), centrals=("mlp1",),
                          output=output, command="pytest tiny", **dict(TINY, central_kwargs=None))
    # The whole grid is listed, the missing cells as "not run".
    assert "| same | hexominoes | MLP1 | not run" not in first
    assert "| xoccurs | stripes | PrediNet | | not run | | | | | 95.5±1.01 | |" in first
    assert "Finished: 2 of 45 cells." in first
    # A fresh root_dir: the finished cell comes back from the JSON file and is not trained again.
    fresh = str(tmp_path / "fresh")
    restored = reproduce.restore_finished(fresh, output + ".json", "table1")
    assert restored == ["same_mlp1_2b_20train_seed0"]
    capsys.readouterr()
    again = reproduce.run("table1", fresh, tasks=("same",), centrals=("mlp1",), output=output,
                          command="pytest tiny", **dict(TINY, central_kwargs=None))
    assert "== table1 cell" not in capsys.readouterr().out
    assert _table_lines(again) == _table_lines(first)
    with open(output + ".json") as f:
        (record,) = json.load(f)["runs"]
    assert [point["batch"] for point in record["curve"]] == [1, 2]  # the curve came back too
    # Restoring again keeps what is there.
    assert reproduce.restore_finished(fresh, output + ".json", "table1") == []


@pytest.mark.slow
def test_resume_from_restores_curricula_cells(tmp_path, capsys):
    output = str(tmp_path / "curricula")
    first = reproduce.run("curricula", str(tmp_path / "first"), combinations=("E",),
                          centrals=("mlp1",), output=output, max_minutes_per_cell=0.0,
                          **dict(TINY, central_kwargs=None))
    fresh = str(tmp_path / "fresh")
    assert len(reproduce.restore_finished(fresh, output + ".json", "curricula")) == 1
    capsys.readouterr()
    again = reproduce.run("curricula", fresh, combinations=("E",), centrals=("mlp1",),
                          output=output, max_minutes_per_cell=0.0,
                          **dict(TINY, central_kwargs=None))
    assert "== curricula cell" not in capsys.readouterr().out
    assert _table_lines(again) == _table_lines(first)
    assert "| A (Fig. 4) | column_patterns_3 ← between | PrediNet | | not run |" in again


def test_session_minutes_starts_no_new_cell(tmp_path, capsys):
    text = reproduce.run("table1", str(tmp_path / "runs"), tasks=("same",), centrals=("mlp1",),
                         session_minutes=0.0, **dict(TINY, central_kwargs=None))
    assert ("--session_minutes=0 passed: not starting same_mlp1_2b_20train_seed0"
            in capsys.readouterr().out)
    assert "Finished: 0 of 45 cells." in text


@pytest.mark.slow
def test_retrain_capped_trains_a_capped_cell_again_and_keeps_the_capped_run(tmp_path, capsys):
    # A cell its time cap stopped early (as RN's on the CPU) is trained again with
    # retrain_capped (as on a GPU); the capped run stays, renamed, a row of its own.
    root, output = str(tmp_path / "runs"), str(tmp_path / "table1")
    cell = dict(tasks=("same",), centrals=("mlp1",), output=output,
                **dict(TINY, central_kwargs=None))
    reproduce.run("table1", root, max_minutes_per_cell=0.0, **cell)
    capsys.readouterr()
    reproduce.run("table1", root, **cell)  # without retrain_capped: finished, not trained again
    assert "== table1 cell" not in capsys.readouterr().out
    text = reproduce.run("table1", root, retrain_capped=True, **cell)
    assert ("same_mlp1_2b_20train_seed0 stopped at its time cap after 1 batches; kept as "
            "same_mlp1_2b_20train_seed0_capped1b, trained again" in capsys.readouterr().out)
    assert sorted(os.listdir(root)) == ["same_mlp1_2b_20train_seed0",
                                        "same_mlp1_2b_20train_seed0_capped1b"]
    with open(f"{output}.json") as f:
        runs = json.load(f)["runs"]
    assert sorted((r["num_batches"], r["stopped_by_time_limit"]) for r in runs) == [
        (1, True), (2, False)]
    assert "| same | hexominoes | MLP1 | 0 |" in text and "| 1 (time cap) |" in text
    capsys.readouterr()
    reproduce.run("table1", root, retrain_capped=True, **cell)  # nothing capped is left
    assert "== table1 cell" not in capsys.readouterr().out


@pytest.mark.parametrize("content, message", [
    ("not json", "expects a results file written by this script"),
    ('{"mode": "curricula", "runs": []}', "expects a results file of --mode=table1"),
    ('{"mode": "table1", "runs": {}}', "expects a results file of --mode=table1"),
    ('{"mode": "table1", "runs": [{"task": "same"}]}', 'expects every run of .* to name its run '
                                                       'directory'),
    ('{"mode": "table1", "runs": [{"run_dir": "../escape"}]}', 'expects every run of .* to name '
                                                               'its run directory'),
])
def test_resume_from_rejects_other_files(tmp_path, content, message):
    path = tmp_path / "results.json"
    path.write_text(content)
    with pytest.raises(ValueError, match="--resume_from " + message):
        reproduce.restore_finished(str(tmp_path / "runs"), str(path), "table1")


def test_table1_summary_counts_predinet_within_one_point_and_full_length_baselines():
    def run(accuracy, batches, images=250_000):
        return {"hexominoes": accuracy, "stripes": accuracy, "num_batches": batches,
                "num_train_examples": images, "minutes": 1.0, "load_average": 2.5, "seed": 0}
    results = {("same", "predinet"): [run(0.9996, 100_000)],  # paper 100: within one point
               # paper 99.2 / 98.7; the 250,000-image run counts, not the 50,000-image one.
               ("between", "predinet"): [run(0.992, 100_000, 50_000), run(0.97, 100_000)],
               ("same", "mlp1"): [run(0.9, 30_000), run(0.95, 100_000)]}
    text = reproduce.table1_markdown(results)
    # -0.04 points shows as +0.0, not -0.0.
    assert ("| same | hexominoes | PrediNet | 0 | 100.0 | 100,000 | 250,000 | 1.0 | 2.5 | "
            "100±0.0 | +0.0 |" in text)
    assert ("| between | stripes | PrediNet | 0 | 97.0 | 100,000 | 250,000 | 1.0 | 2.5 | "
            "98.7±0.66 | -1.7 |" in text)
    rows = [line for line in text.splitlines() if line.startswith("| between | stripes | Predi")]
    assert [row.split(" | ")[6] for row in rows] == ["50,000", "250,000"]
    assert "mean of" not in text  # one seed a setting: no mean rows
    assert ("Finished: 6 of 45 cells. PrediNet within one point of the paper's mean (the mean "
            "over seeds): 2 of 4 finished cells. Baseline cells at the paper's 100,000 batches: "
            "2 of 2 finished." in text)


def test_table1_seeds_of_one_setting_get_a_mean_row_that_the_summary_counts():
    def run(seed, hexominoes, stripes, images=250_000):
        return {"hexominoes": hexominoes, "stripes": stripes, "num_batches": 100_000,
                "num_train_examples": images, "minutes": 1.0, "load_average": 2.5, "seed": seed}
    # Paper 95.4 / 95.5. Seeds 0 and 1 (250,000 images): mean 95.0 (std 2.83) / 90.0 (std 0).
    results = {("xoccurs", "predinet"): [run(1, 0.97, 0.90), run(0, 0.93, 0.90),
                                         run(0, 0.5, 0.5, images=50_000)]}
    text = reproduce.table1_markdown(results)
    rows = [line for line in text.splitlines() if line.startswith("| xoccurs | hexominoes | Pr")]
    assert [row.split(" | ")[3:5] for row in rows] == [
        ["0", "50.0"], ["0", "93.0"], ["1", "97.0"], ["mean of 2", "95.0±2.8"]]
    assert rows[-1].endswith("| 100,000 | 250,000 | | | 95.4±0.98 | -0.4 |")
    assert "| xoccurs | stripes | PrediNet | mean of 2 | 90.0±0.0 |" in text
    # Hexominoes' mean is within one point; stripes' (-5.5) is not.
    assert "PrediNet within one point of the paper's mean (the mean over seeds): 1 of 2" in text


def test_runs_of_the_supplements_adam_get_their_own_directories_rows_and_no_summary_count():
    assert os.path.basename(reproduce.run_dir("/r", "same", "mha", 100, 0, 20,
                                              optimizer="adam")) == (
        "same_mha_100b_20train_seed0_adam")
    assert os.path.basename(reproduce.run_dir(
        "/r", "xoccurs", "mha", 100, 0, 20, optimizer="sgd",
        xoccurs_negatives="both_readings")) == "xoccurs_mha_100b_20train_seed0_both_readings"
    assert os.path.basename(reproduce.run_dir("/r", "same", "mha", 100, 0, 20)) == (
        "same_mha_100b_20train_seed0")
    assert os.path.basename(reproduce.curriculum_dir("/r", "A", "mha", 100, 1, 20,
                                                     optimizer="adam")) == (
        "curriculum_A_mha_100b_20train_seed1_adam")

    def run(accuracy, optimizer):
        return {"hexominoes": accuracy, "stripes": accuracy, "num_batches": 100_000,
                "num_train_examples": 250_000, "minutes": 1.0, "load_average": 2.5, "seed": 0,
                "optimizer": optimizer}
    # SGD (the paper's setting) misses by 5 points; the Adam run is within one but not counted.
    text = reproduce.table1_markdown({("same", "predinet"): [run(0.95, "sgd"),
                                                             run(0.999, "adam")],
                                      ("between", "predinet"): [run(0.99, "adam")]})
    rows = [line for line in text.splitlines() if line.startswith("| same | hexominoes | Pred")]
    assert [row.split(" | ")[2:5] for row in rows] == [["PrediNet (Adam 0.0001)", "0", "99.9"],
                                                        ["PrediNet", "0", "95.0"]]
    assert "mean over seeds): 0 of 4 finished cells" in text
    with pytest.raises(ValueError, match="`optimizer`: expected one of \\['sgd', 'adam'\\]"):
        reproduce.run("table1", "/nonexistent", optimizer="rmsprop")


@pytest.mark.slow
def test_an_adam_cell_trains_with_adam_at_the_supplements_rate(tmp_path):
    import keras

    import keras_relational.layers  # noqa: F401  (registers the layers for load_model)

    root = str(tmp_path / "runs")
    text = reproduce.run("table1", root, tasks=("same",), centrals=("mlp1",), optimizer="adam",
                         **dict(TINY, central_kwargs=None))
    assert "| same | hexominoes | MLP1 (Adam 0.0001) | 0 |" in text
    directory = reproduce.run_dir(root, "same", "mlp1", 2, 0, 20, optimizer="adam")
    with open(os.path.join(directory, "meta.json")) as f:
        assert json.load(f)["optimizer"] == "adam"
    model = keras.saving.load_model(os.path.join(directory, "model.keras"))
    assert type(model.optimizer).__name__ == "Adam"
    assert float(model.optimizer.learning_rate) == pytest.approx(1e-4)


@pytest.mark.slow
def test_xoccurs_with_the_other_readings_negatives_is_a_row_of_its_own(tmp_path):
    root = str(tmp_path / "runs")
    tiny = dict(TINY, central_kwargs=None)
    reproduce.run("table1", root, tasks=("xoccurs",), centrals=("mlp1",), **tiny)
    text = reproduce.run("table1", root, tasks=("xoccurs", "same"), centrals=("mlp1",),
                         xoccurs_negatives="both_readings", **tiny)
    rows = [line for line in text.splitlines() if line.startswith("| xoccurs | stripes | MLP1")]
    assert [row.split(" | ")[2] for row in rows] == [
        "MLP1 (xoccurs negatives: both readings)", "MLP1"]
    # The option only changes xoccurs: `same` ran once, in its usual directory.
    assert sorted(os.listdir(root)) == ["same_mlp1_2b_20train_seed0",
                                        "xoccurs_mlp1_2b_20train_seed0",
                                        "xoccurs_mlp1_2b_20train_seed0_both_readings"]
    with open(os.path.join(root, "xoccurs_mlp1_2b_20train_seed0_both_readings",
                           "results.json")) as f:
        assert json.load(f)["xoccurs_negatives"] == "both_readings"  # recorded by train_eval
    with pytest.raises(ValueError, match="`xoccurs_negatives`: expected one of"):
        reproduce.run("table1", root, xoccurs_negatives="both")


@pytest.mark.slow
def test_colour_and_or_shape_in_column_pairs_is_a_row_of_its_own(tmp_path):
    root = str(tmp_path / "runs")
    text = reproduce.run("table1", root, tasks=("colour_and_or_shape",), centrals=("mlp1",),
                         colour_shape_layout="column_pair", **dict(TINY, central_kwargs=None))
    assert "| colour_and_or_shape | hexominoes | MLP1 (colour shape layout: column pair) | 0 |" in (
        text)
    directory = os.path.join(root, "colour_and_or_shape_mlp1_2b_20train_seed0_column_pair")
    with open(os.path.join(directory, "results.json")) as f:
        assert json.load(f)["colour_shape_layout"] == "column_pair"
    with pytest.raises(ValueError, match="`colour_shape_layout`: expected one of"):
        reproduce.run("table1", root, colour_shape_layout="rows")


def test_a_float32_accuracy_of_exactly_90_percent_reaches_the_target():
    # Keras stores 450 correct of 500 as 0.8999999762; it is 90 %, not short of it.
    curve = [{"batch": 5000, "stripes": float(np.float32(449) / np.float32(500))},
             {"batch": 10000, "stripes": float(np.float32(450) / np.float32(500))}]
    assert reproduce.batches_to_target(curve) == 10000
    assert reproduce.batches_to_target(curve[:1]) is None


def test_curricula_table_gives_the_batches_each_target_stage_took_to_reach_90_percent():
    def stage(points):
        curve = [{"batch": 5000 * (i + 1), "stripes": p, "hexominoes": p}
                 for i, p in enumerate(points)]
        return {"stripes": points[-1], "hexominoes": points[-1], "num_batches": 5000 * len(points),
                "curve": curve}
    cell = {"combination": "A", "central": "predinet", "seed": 0, "minutes": 3.0,
            "stages": {"stage_1_scratch": stage([0.5, 0.95]),
                       "stage_2_curriculum": stage([0.99, 0.99]),
                       "stage_3_reuse": stage([0.9, 0.85]),  # the first crossing counts
                       "stage_4_input_net": dict(stage([0.6, 0.89]),
                                                 stopped_by_time_limit=True)}}
    assert reproduce.batches_to_target(cell["stages"]["stage_3_reuse"]["curve"]) == 5000
    text = reproduce.curricula_markdown({("A", "predinet"): [cell]}, ("A",), ("predinet",))
    assert ("| A (Fig. 4) | column_patterns_3 ← between | PrediNet | 0 | 95.0 | 99.0 | 85.0 | "
            "89.0 | 10,000 / 5,000 / never | 10,000/10,000/10,000/10,000 (time cap) | 3.0 |"
            in text)


def test_curricula_table_adds_the_mean_over_seeds_of_one_setting():
    def cell(seed, stage_3, **meta):
        stages = {stage: {"stripes": 0.5, "num_batches": 10} for stage in
                  ("stage_1_scratch", "stage_2_curriculum", "stage_4_input_net")}
        stages["stage_3_reuse"] = {"stripes": stage_3, "num_batches": 10}
        return dict(meta, combination="C", central="predinet", seed=seed, minutes=1.0,
                    stages=stages)
    cells = [cell(1, 0.7), cell(0, 0.5), cell(0, 0.9, optimizer="adam")]
    text = reproduce.curricula_markdown({("C", "predinet"): cells}, ("C",), ("predinet",))
    rows = [line for line in text.splitlines() if "| PrediNet" in line]
    # Seeds 0 and 1 of the paper's setting, their mean (stage 3: 50 and 70 -> 60 ± 14.1),
    # then the Adam run alone: one seed of a setting gets no mean row.
    assert [row.split(" | ")[3] for row in rows] == ["0", "1", "mean of 2", "0"]
    assert rows[2].split(" | ")[4:8] == ["50.0±0.0", "50.0±0.0", "60.0±14.1", "50.0±0.0"]
    assert "Adam" in rows[3]


def test_runs_under_the_notebooks_pause_rule_are_rows_of_their_own_counted_apart():
    assert os.path.basename(reproduce.run_dir("/r", "occurs", "predinet", 100, 0, 20,
                                              pause_rule="notebook")) == (
        "occurs_predinet_100b_20train_seed0_notebook")

    def run(accuracy, seed, **variant):
        return {"hexominoes": accuracy, "stripes": accuracy, "num_batches": 100_000,
                "num_train_examples": 250_000, "minutes": 1.0, "load_average": 2.5,
                "seed": seed, **variant}
    text = reproduce.table1_markdown({("occurs", "predinet"): [
        run(0.95, 0), run(0.985, 0, pause_rule="notebook"), run(0.99, 1, pause_rule="notebook"),
        run(0.90, 0, optimizer="adam")]})
    rows = [line.split(" | ")[2:5] for line in text.splitlines()
            if line.startswith("| occurs | hexominoes | Pred")]
    assert rows == [["PrediNet (Adam 0.0001)", "0", "90.0"],
                    ["PrediNet (notebook's pause rule)", "0", "98.5"],
                    ["PrediNet (notebook's pause rule)", "1", "99.0"],
                    ["PrediNet (notebook's pause rule)", "mean of 2", "98.8±0.4"],
                    ["PrediNet", "0", "95.0"]]
    # The paper's setting misses; the pause rule's mean is within one point on hexominoes
    # (98.5 % in the paper) but not on stripes (96.9 %), each counted apart.
    assert "mean over seeds): 0 of 2 finished cells" in text
    assert ("other settings than the paper's, within one point of the paper's mean: Adam "
            "0.0001: 0 of 2 cells run; notebook's pause rule: 1 of 2 cells run.") in text
    with pytest.raises(ValueError, match=r"`pause_rule`.*optimizer='sgd'.*'adam'"):
        reproduce.run("table1", "/nonexistent", optimizer="adam", pause_rule="notebook")
    with pytest.raises(ValueError, match=r"`pause_rule`: expected one of \['none', 'notebook'\]"):
        reproduce.run("table1", "/nonexistent", pause_rule="always")


@pytest.mark.slow
def test_a_notebook_pause_cell_records_its_checks(tmp_path):
    root = str(tmp_path / "runs")
    text = reproduce.run("table1", root, tasks=("same",), centrals=("mlp1",),
                         pause_rule="notebook", pause_interval=1, num_validation_examples=20,
                         **dict(TINY, central_kwargs=None))
    assert "| same | hexominoes | MLP1 (notebook's pause rule) | 0 |" in text
    directory = reproduce.run_dir(root, "same", "mlp1", 2, 0, 20, pause_rule="notebook")
    with open(os.path.join(directory, "results.json")) as f:
        results = json.load(f)
    assert results["pause_above_accuracy"] == pytest.approx(0.99)
    with open(os.path.join(directory, "pause_checks.json")) as f:
        checks = json.load(f)
    assert [c["batch"] for c in checks] == [1, 2]
    assert results["paused_batches"] == int(checks[0]["paused"])


def test_occurs_with_one_variant_per_negative_is_a_row_of_its_own():
    assert os.path.basename(reproduce.run_dir("/r", "occurs", "predinet", 100, 0, 20,
                                              occurs_distractors="one_variant")) == (
        "occurs_predinet_100b_20train_seed0_one_variant")
    text = reproduce.table1_markdown({("occurs", "predinet"): [
        {"hexominoes": 0.985, "stripes": 0.95, "num_batches": 100_000, "seed": 0,
         "num_train_examples": 250_000, "occurs_distractors": "one_variant"}]})
    assert "| occurs | hexominoes | PrediNet (occurs distractors: one variant) | 0 | 98.5 |" in text
    assert "occurs distractors: one variant: 1 of 2 cells run." in text
    with pytest.raises(ValueError, match="`occurs_distractors`: expected one of"):
        reproduce.run("table1", "/nonexistent", occurs_distractors="random")
