"""benchmarks/paper_preset_loss_terms.py: the archive it reads, the command that continues the
run with its own settings, and the split of the learner scalars by a gem in the unroll."""

import json
import tarfile

import benchmark_scripts
import pytest

script = benchmark_scripts.load("paper_preset_loss_terms")


def _row(step, loss, reward_max, gradient_norm=50.0):
    terms = dict.fromkeys(script.TERMS, 1.0)
    terms.update(transitions=2.0, loss=loss, reward_max=reward_max, gradient_norm=gradient_norm,
                 clipped_gradient_norm=min(gradient_norm, 40.0))
    return dict(step=step, losses=terms)


def test_archive_and_the_command_that_continues_it(tmp_path):
    run = tmp_path / "src" / "zambaldi_fig3_relational"
    run.mkdir(parents=True)
    record = dict(preset="zambaldi_fig3_relational", flags=["--level_source=device"],
                  pieces=[dict(device="NVIDIA H200")])
    (run / "gpu_session_run.json").write_text(json.dumps(record))
    (run / "curves.jsonl").write_text(json.dumps(dict(step=7)) + "\n")
    archive = tmp_path / "run.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(run, arcname=run.name)
    run_dir, read = script.extract_run(str(archive), str(tmp_path / "out"))
    assert read == record and script.read_curve(run_dir) == [dict(step=7)]
    command = script.resume_command(run_dir, read, updates=3, start_step=7)
    # The run's own flags; only how long it runs and how often it logs and checkpoints change.
    assert command[3:] == ["--preset=zambaldi_fig3_relational", "--trainer=compiled",
                           "--level_source=device", f"--root_dir={run_dir}",
                           "--num_iterations=10", "--log_interval=1",
                           "--checkpoint_interval=10", "--eval_episodes=0", "--test_presets="]
    with tarfile.open(tmp_path / "empty.tar.gz", "w:gz"):
        pass
    with pytest.raises(ValueError, match="--archive: expected one run directory"):
        script.extract_run(str(tmp_path / "empty.tar.gz"), str(tmp_path / "empty"))


def test_the_terms_split_by_a_gem_in_the_unroll():
    rows = [_row(1, 1300.0, 10.0), _row(2, -120.0, 1.0, gradient_norm=12.0), _row(3, -80.0, 0.0)]
    summary = script.summarize(rows)
    assert summary["all"]["updates"] == 3
    assert summary["with a gem"]["updates"] == 1
    assert summary["with a gem"]["terms"]["loss"]["median"] == 1300.0
    assert summary["without"]["terms"]["loss"] == dict(median=-100.0, low=-120.0, high=-80.0)
    # With rewards x 0.1 the gem is 1: the 1.0 reward of update 2 is one.
    assert script.summarize(rows, reward_scale=0.1)["with a gem"]["updates"] == 2
    text = script.markdown(dict(preset="p", archive="a.tar.gz", start_step=0, device="d",
                                flags=["--level_source=device"], backend="jax", seconds=5.0,
                                rows=rows, summary=summary))
    assert "| 1 | 1300 |" in text
    assert "Updates whose gradient the clip scaled down: 2 of 3." in text
    assert "entropy per transition, median: 0.5000 (ln 4 = 1.3863" in text
