"""benchmarks/reproduce_tpr_babi.py at tiny settings: finished runs are kept and not re-run, the
results files are rewritten from all finished runs, Table 1's all-tasks preset runs, and an
interrupted run keeps its time budget and best checkpoint (babi_lib's progress file)."""

import json
import os
import shutil

import benchmark_scripts
import numpy as np
import pytest

reproduce = benchmark_scripts.load("reproduce_tpr_babi")

TINY = dict(num_train=8, num_valid=4, num_test=4, epochs=1, entity_dim=4, relation_dim=3,
            hidden_dim=8, batch_size=8, jit_compile=False, export=False, verbose=0,
            max_minutes=None, target_val_accuracy=None)


def test_parse_tasks():
    assert reproduce.parse_tasks("1-3,6") == (1, 2, 3, 6)
    assert reproduce.parse_tasks("4,1") == (4, 1)  # in the order given
    for bad in ("0-2", "21", "a", ""):
        with pytest.raises(ValueError, match="--tasks"):
            reproduce.parse_tasks(bad)


def test_runs_name_a_folder_per_cell_and_share_table_2_with_table_3():
    assert reproduce.runs("table2", (1, 2), ()) == [
        ("W+M+B/task1", {"tasks": (1,), "operations": "W+M+B", "seed": 0}),
        ("W+M+B/task2", {"tasks": (2,), "operations": "W+M+B", "seed": 0})]
    # Seed 0 keeps the one-seed folder names; a task's seeds run one after the other.
    assert [folder for folder, _ in reproduce.runs("table2", (5, 1), (), seeds=(0, 2))] == [
        "W+M+B/task5", "W+M+B/task5-seed2", "W+M+B/task1", "W+M+B/task1-seed2"]
    assert reproduce.runs("table3", (3,), ("W",), seeds=(4,))[0] == (
        "W/task3-seed4", {"tasks": (3,), "operations": "W", "seed": 4})
    assert reproduce.parse_cell_folder("W+M/task13-seed2") == ("W+M", 13, 2)
    assert reproduce.parse_cell_folder("W+M+B/task3") == ("W+M+B", 3, 0)
    for other in ("all_tasks", "W+M+B/task3.stale-20261127T120000", "W/task3-seed"):
        assert reproduce.parse_cell_folder(other) is None
    cells = [folder for folder, _ in reproduce.runs("table3", (3,), ("W", "W+M+B"))]
    assert cells == ["W/task3", "W+M+B/task3"]
    ((folder, joint),) = reproduce.runs("table1", (), ())
    assert folder == "all_tasks" and joint["tasks"] == tuple(range(1, 21))
    # Schlag & Schmidhuber 2018, all-tasks sizes (authors' code): E 90, R 20, S 130.
    assert (joint["entity_dim"], joint["relation_dim"], joint["max_sentences"]) == (90, 20, 130)
    ((_, systematic),) = reproduce.runs("systematic", (), ())
    assert systematic["systematic"] and systematic["entity_dim"] == 90
    assert "max_sentences" not in systematic


def test_table2_keeps_finished_tasks_and_rewrites_the_table(tmp_path, capsys, monkeypatch):
    from keras_relational.experiments import babi_lib

    trained = []

    def fake_train_eval(root_dir, tasks, operations, **options):  # babi_lib's is tested apart
        trained.append((os.path.relpath(root_dir, root), tasks, operations, options["seed"]))
        return {"test_error": {tasks[0]: 2.0 * tasks[0]}, "train_seconds": 60.0, "epochs": 2,
                "steps": 8, "best_val_accuracy": 0.9, "model": object(), "vocabulary": None}

    monkeypatch.setattr(babi_lib, "train_eval", fake_train_eval)
    root, output = str(tmp_path / "runs"), str(tmp_path / "results" / "tpr_babi.md")
    os.makedirs(os.path.dirname(output))
    text = reproduce.run("table2", root, tasks=(4, 1), output=output, command="pytest tiny",
                         seeds=(3,), max_minutes=20.0)
    assert trained == [("W+M+B/task4-seed3", (4,), "W+M+B", 3),
                       ("W+M+B/task1-seed3", (1,), "W+M+B", 3)]
    # Runs recorded without a patience used babi_lib's default, 30 epochs.
    assert "| 1 | 3 | 2.00 | 2 | 8 | 1.0 | 30 | patience | yes |" in text
    assert "| 4 | 3 | 8.00 |" in text and "one seed (3)" in text
    assert "Finished: 2 of 2 tasks." in text and "Failed tasks" in text and ": 1 (4)." in text
    assert "at most 20 min of training per run (wall clock, on a shared machine" in text
    with open(output) as f:
        assert f.readline().startswith("Written by `pytest tiny`")
    with open(os.path.splitext(output)[0] + ".json") as f:
        data = json.load(f)
    assert set(data["runs"]) == {"W+M+B/task1-seed3", "W+M+B/task4-seed3"}
    record = data["runs"]["W+M+B/task4-seed3"]
    assert record["test_error"] == {"4": 8.0} and len(record["load_average_after"]) == 3
    capsys.readouterr()
    # A finished task is not trained again; the table is rebuilt from the kept results.
    again = reproduce.run("table2", root, tasks=(4, 1), output=output, command="pytest tiny",
                          seeds=(3,), max_minutes=20.0)
    assert "== table2 run" not in capsys.readouterr().out and again == text
    assert len(trained) == 2
    # --session_minutes=0 starts nothing new; Table 3 reuses Table 2's W+M+B runs.
    partial = reproduce.run("table3", root, tasks=(1, 6), operations=("W", "W+M+B"),
                            session_minutes=0.0, command="pytest tiny")
    assert "not starting W/task1" in capsys.readouterr().out and len(trained) == 2
    assert "| 1 | - | 2.00 |" in partial and "| 6 | - | - |" in partial
    assert "| W | none (of 0 finished) | 3, 6, 9, 10, 12, 13, 17, 19 |" in partial
    # A command for other tasks keeps the rows (and the results file's runs) of finished ones.
    table = reproduce.run("table2", root, tasks=(6, 4), table_only=True, command="pytest tiny",
                          output=output)
    assert "Finished: 2 of 3 tasks (not run yet: 6)." in table and len(trained) == 2
    assert "| 1 | 3 | 2.00 |" in table
    with open(os.path.splitext(output)[0] + ".json") as f:
        assert set(json.load(f)["runs"]) == {"W+M+B/task1-seed3", "W+M+B/task4-seed3"}
    # Table 3 keeps a task with an ablation run of its own, not one with only Table 2's run.
    reproduce.run("table3", root, tasks=(4,), operations=("W",), command="pytest tiny")
    assert trained[-1] == ("W/task4", (4,), "W", 0)
    table = reproduce.run("table3", root, tasks=(6,), operations=("W", "W+M+B"),
                          table_only=True, command="pytest tiny")
    assert [line.split(" | ")[0] for line in table.splitlines() if line[:3] in ("| 1", "| 4",
                                                                                "| 6")] == [
        "| 4", "| 6"]


def test_resume_from_a_results_file_keeps_its_finished_runs(tmp_path, monkeypatch):
    """A fresh machine continues a table from the committed results file: the runs recorded
    there are not trained again and stay in the rewritten table."""
    from keras_relational.experiments import babi_lib

    trained = []

    def fake_train_eval(root_dir, tasks, operations, **options):
        trained.append(tasks[0])
        return {"test_error": {tasks[0]: 1.0}, "train_seconds": 60.0, "epochs": 1, "steps": 4,
                "best_val_accuracy": 0.9, "model": object(), "vocabulary": None}

    monkeypatch.setattr(babi_lib, "train_eval", fake_train_eval)
    first, output = str(tmp_path / "first"), str(tmp_path / "tpr_babi.md")
    reproduce.run("table2", first, tasks=(4,), output=output, command="pytest tiny")
    results_file = os.path.splitext(output)[0] + ".json"
    second = str(tmp_path / "second")  # another machine: no run folders
    assert reproduce.restore_finished(second, results_file, "table2") == ["W+M+B/task4"]
    assert reproduce.restore_finished(second, results_file, "table2") == []  # kept, not rewritten
    text = reproduce.run("table2", second, tasks=(4, 1), output=output, command="pytest tiny",
                         patience=None)
    assert trained == [4, 1] and "Finished: 2 of 2 tasks." in text
    # Task 1 trained to its budget (no patience); task 4 kept from the first machine's run.
    assert "| 1 | 0 | 1.00 | 1 | 4 | 1.0 | none | - | yes |" in text
    assert "| 4 | 0 | 1.00 | 1 | 4 | 1.0 | 30 | patience | yes |" in text
    with pytest.raises(ValueError, match=r"--resume_from expects a results file of "
                                         r"--mode=table3, received .*\(mode 'table2'\)"):
        reproduce.restore_finished(second, results_file, "table3")
    with pytest.raises(ValueError, match=r"--resume_from expects a results file written by"):
        reproduce.restore_finished(second, str(tmp_path / "missing.json"), "table2")


@pytest.mark.slow
def test_table1_preset_runs_at_tiny_scale(tmp_path):
    # The preset's sizes (E 90, R 20, S 130) with 2 questions per task and split, one epoch.
    options = dict(TINY, num_train=2, num_valid=1, num_test=1, batch_size=20)
    for size in ("entity_dim", "relation_dim", "hidden_dim"):
        options.pop(size)
    text = reproduce.run("table1", str(tmp_path), **options)
    with open(tmp_path / "all_tasks" / "result.json") as f:
        record = json.load(f)
    assert set(record["test_error"]) == {str(t) for t in range(1, 21)}
    assert record["run_options"]["entity_dim"] == 90 and record["steps"] == 2
    with open(tmp_path / "all_tasks" / "vocabulary.json") as f:
        assert json.load(f)["max_sentences"] == 130
    assert "Mean test error:" in text and "1.34 ± 0.52" in text


def test_an_interrupted_run_keeps_its_budget(tmp_path):
    from keras_relational.experiments import babi_lib

    limit = babi_lib._TimeLimit(max_minutes=1.0, spent_seconds=90.0)
    assert limit.seconds() >= 90.0

    class Model:
        stop_training = False

    limit.set_model(Model())
    limit.on_epoch_end(0)  # 90 s spent before > the 1-minute budget
    assert limit.model.stop_training


def test_systematic_mode_reports_the_accuracy_per_new_name(tmp_path, monkeypatch):
    from keras_relational.environments import babi
    from keras_relational.experiments import babi_lib

    def fake_train_eval(root_dir, tasks, systematic, **options):
        assert systematic and tasks == babi.SYSTEMATIC_TASKS and options["batch_size"] == 32
        accuracy = {name: {"all": 90.0, "seen": 95.0, "unseen": None if name == "Alex" else 80.0,
                           "asked": 85.0} for name in babi.NEW_NAMES}
        return {"test_error": {t: 1.0 for t in tasks}, "train_seconds": 6.0, "epochs": 1,
                "steps": 3, "systematic": accuracy}

    monkeypatch.setattr(babi_lib, "train_eval", fake_train_eval)
    text = reproduce.run("systematic", str(tmp_path), command="pytest tiny")
    assert "| Alex | 8/8 | 90.0 | 95.0 | - | 85.0 |" in text
    assert "| Logan | 1/8 | 90.0 | 95.0 | 80.0 | 85.0 |" in text
    assert "Mean test error: 1.00 %; failed tasks (> 5 %): 0;" in text


def test_table2_says_why_each_run_stopped():
    def record(**changes):
        options = dict(target_val_accuracy=0.998, max_minutes=20.0, epochs=200, patience=None)
        options.update(changes.pop("options", {}))
        return dict(dict(best_val_accuracy=0.9, train_seconds=300.0, epochs=50,
                         run_options=options), **changes)

    assert reproduce._stopped_by(record(best_val_accuracy=0.999)) == "target"
    # Keras' float32 accuracy of exactly the target (0.9 is stored as 0.8999999762) reached it.
    assert reproduce._stopped_by(record(best_val_accuracy=float(np.float32(0.9)),
                                        options={"target_val_accuracy": 0.9})) == "target"
    assert reproduce._stopped_by(record(train_seconds=1201.0)) == "time"
    assert reproduce._stopped_by(record(epochs=200)) == "epochs"
    assert reproduce._stopped_by(record(options={"patience": 30})) == "patience"
    # Recorded before the option existed: babi_lib's default patience, 30 epochs.
    old = record()
    del old["run_options"]["patience"]
    assert reproduce._stopped_by(old) == "patience"
    assert reproduce._stopped_by(record()) == "-"  # none of the stops: an interrupted record


def test_runs_on_an_earlier_generators_data_are_set_aside_and_run_again(tmp_path, monkeypatch):
    from keras_relational.environments import babi
    from keras_relational.experiments import babi_lib

    sizes = dict(num_train=6, num_valid=3, num_test=3)
    trained = []

    def fake_train_eval(root_dir, tasks, operations, **options):  # writes its data as babi_lib
        trained.append(tasks[0])
        babi.write_task_files(os.path.join(root_dir, "data"), tasks[0], 6, 3, 3, 0)
        return {"test_error": {tasks[0]: 1.0}, "train_seconds": 60.0, "epochs": 1, "steps": 4,
                "best_val_accuracy": 0.9, "model": object(), "vocabulary": None}

    monkeypatch.setattr(babi_lib, "train_eval", fake_train_eval)
    root = str(tmp_path / "runs")
    reproduce.run("table2", root, tasks=(13, 1), **sizes)
    with open(os.path.join(root, "W+M+B", "task13", reproduce.RESULT)) as f:
        recorded = json.load(f)["data_sha256"]
    assert recorded == reproduce.current_data_sha256(13, sizes) is not None
    # A result recorded before the hash existed gets it from its data folder in the results.
    path = os.path.join(root, "W+M+B", "task13", reproduce.RESULT)
    with open(path) as f:
        record = json.load(f)
    del record["data_sha256"]
    with open(path, "w") as f:
        json.dump(record, f)
    assert reproduce.finished(root, ["W+M+B/task13"])["W+M+B/task13"]["data_sha256"] == recorded
    reproduce.run("table2", root, tasks=(13, 1), **sizes)
    assert trained == [13, 1]  # the same generator: kept
    # Task 13's stories from an earlier generator: set aside (not deleted) and run again.
    with open(os.path.join(root, "W+M+B", "task13", "data", "qa13_train.txt"), "a") as f:
        f.write("1 Mary went to the garden.\n2 Where is Mary? \tgarden\t1\n")
    text = reproduce.run("table2", root, tasks=(13, 1), **sizes)
    assert trained == [13, 1, 13] and "Finished: 2 of 2 tasks." in text
    (stale,) = [n for n in os.listdir(os.path.join(root, "W+M+B")) if ".stale-" in n]
    assert stale.startswith("task13.stale-")
    assert os.path.exists(os.path.join(root, "W+M+B", stale, reproduce.RESULT))
    # A result whose data cannot be checked (restored, recorded before the hash) is kept.
    task1 = os.path.join(root, "W+M+B", "task1")
    shutil.rmtree(os.path.join(task1, "data"))
    with open(os.path.join(task1, reproduce.RESULT)) as f:
        record = json.load(f)
    del record["data_sha256"]
    with open(os.path.join(task1, reproduce.RESULT), "w") as f:
        json.dump(record, f)
    reproduce.run("table2", root, tasks=(13, 1), **sizes)
    assert trained == [13, 1, 13]
    # A restored result with its recorded hash (no data folder) is checked all the same.
    record["data_sha256"] = "0" * 64
    with open(os.path.join(task1, reproduce.RESULT), "w") as f:
        json.dump(record, f)
    reproduce.run("table2", root, tasks=(13, 1), **sizes)
    assert trained == [13, 1, 13, 1]


def test_table2_with_several_seeds_gives_each_tasks_best_and_mean(tmp_path, monkeypatch):
    """A run per (task, seed); a task with several seeds gets their best and mean ± sample
    standard deviation (the paper's statistics of 5 runs); the summary counts failures by the
    best seed and by the mean. Each seed's run draws (and is checked against) its own data."""
    from keras_relational.environments import babi
    from keras_relational.experiments import babi_lib

    errors = {(10, 0): 6.0, (10, 1): 2.0, (10, 2): 4.0, (17, 0): 11.0, (17, 1): 3.0,
              (1, 0): 0.0, (1, 1): 1.0}
    trained = []

    def fake_train_eval(root_dir, tasks, operations, seed, **options):
        trained.append((os.path.relpath(root_dir, root), seed))
        babi.write_task_files(os.path.join(root_dir, "data"), tasks[0], 6, 3, 3, seed)
        return {"test_error": {tasks[0]: errors[tasks[0], seed]}, "train_seconds": 60.0,
                "epochs": 1, "steps": 4, "best_val_accuracy": 0.9, "model": object(),
                "vocabulary": None}

    monkeypatch.setattr(babi_lib, "train_eval", fake_train_eval)
    root = str(tmp_path / "runs")
    sizes = dict(num_train=6, num_valid=3, num_test=3)
    reproduce.run("table2", root, tasks=(1, 17), **sizes)
    text = reproduce.run("table2", root, tasks=(10, 17), seeds=(0, 1), **sizes)
    text = reproduce.run("table2", root, tasks=(10,), seeds=(2,), **sizes)
    assert trained == [("W+M+B/task1", 0), ("W+M+B/task17", 0), ("W+M+B/task10", 0),
                       ("W+M+B/task10-seed1", 1), ("W+M+B/task17-seed1", 1),
                       ("W+M+B/task10-seed2", 2)]
    # Every seed finished under root_dir is listed, whatever --seeds the last command named.
    assert "| 10 | 0 | 6.00 |" in text and "| 10 | 2 | 4.00 |" in text
    assert "| 1 | 0 | 0.00 |" in text
    assert "| 10 | best / mean of 3 | 2.00 / 4.00 ± 2.00 |" in text
    assert "| 17 | best / mean of 2 | 3.00 / 7.00 ± 5.66 |" in text
    assert "| 1 | best / mean" not in text and "seeds 0, 1, 2" in text
    assert "Finished: 3 of 3 tasks." in text
    # Means 0, 4, 7 -> 3.67; bests 0, 2, 3 -> 1.67.
    assert "Mean test error over the finished tasks: 3.67 % (a task's mean over its seeds; " \
           "with each task's best seed 1.67 %" in text
    assert "by each task's best seed): 0." in text and "By the mean over each task's seeds: 1 " \
           "(17)." in text
    # Each seed's data is its own: nothing is set aside as stale or trained again.
    again = reproduce.run("table2", root, tasks=(1, 10, 17), seeds=(0, 1), **sizes)
    assert len(trained) == 7 and trained[-1] == ("W+M+B/task1-seed1", 1)
    assert not [n for n in os.listdir(os.path.join(root, "W+M+B")) if ".stale-" in n]
    assert "| 1 | 1 |" in again
    # Table 3 with several seeds: their errors in seed order; failed by the best seed. Only
    # rewriting the tables moves nothing aside (these runs' data is not the default sizes').
    table = reproduce.run("table3", root, tasks=(17,), operations=("W+M+B",), table_only=True)
    assert "| 17 | 11.00 / 3.00 |" in table and "| W+M+B | none (of 1 finished) |" in table
    assert not [n for n in os.listdir(os.path.join(root, "W+M+B")) if ".stale-" in n]


def test_seeds_are_checked_before_any_run(tmp_path):
    for mode, seeds, message in [("table2", (), r"distinct seeds >= 0, received \[\]"),
                                 ("table2", (1, 1), r"received \[1, 1\]"),
                                 ("table3", (-1,), r"received \[-1\]"),
                                 ("table1", (0, 1), "--mode=table1 takes one seed"),
                                 ("systematic", (0, 1), "--mode=systematic takes one seed")]:
        with pytest.raises(ValueError, match="--seeds"):
            reproduce.run(mode, str(tmp_path), tasks=(1,), seeds=seeds)
        with pytest.raises(ValueError, match=message):
            reproduce.check_seeds(mode, seeds)
    with pytest.raises(ValueError, match=r"seeds=\(...\), received seed=1"):
        reproduce.run("table2", str(tmp_path), tasks=(1,), seed=1)
    assert not os.path.exists(tmp_path / "W+M+B")
