"""benchmarks/frames_to_solve.py: which progress lines count towards a threshold, the setting
names, and one tiny resumable run of the script whose curve records its episodes."""

import json
import os
import subprocess
import sys

import benchmark_scripts
import pytest

study = benchmark_scripts.load("frames_to_solve")


def _row(step, rate, episodes=None):
    row = dict(step=step, frames=1280 * step, solve_rate=rate)
    if episodes is not None:
        row["episodes"] = episodes
    return row


def test_a_rate_over_a_handful_of_episodes_does_not_count():
    # The first line of a run covers one update: its one finished episode was solved (the
    # room-8 run that stopped as "finished at 1,280 frames" after one piece).
    rows = [_row(1, 1.0, episodes=1), _row(26, 0.4, episodes=280), _row(51, 0.93, episodes=300),
            _row(52, 1.0, episodes=2), _row(77, 0.99, episodes=310)]
    assert study.frames_to(rows, 0.5) == 51 * 1280
    assert study.frames_to(rows, 0.98) == 77 * 1280
    assert study.frames_to(rows, 0.98, min_episodes=400) is None
    assert [r["step"] for r in study.counted_rows(rows)] == [26, 51, 77]
    # Rows written before the curves recorded episodes: a row counts when it covers a whole
    # progress interval (the first line of a run or of a resumed piece covers one update).
    old = [_row(1, 1.0), _row(26, 0.2), _row(51, 0.95), _row(52, 1.0), _row(77, 0.99)]
    assert [r["step"] for r in study.counted_rows(old, log_interval=25)] == [26, 51, 77]
    assert study.frames_to(old, 0.98, log_interval=25) == 77 * 1280
    assert study.frames_to([_row(1, None, episodes=0)], 0.0) is None


def test_setting_names():
    assert "room12" in study.all_settings() and "paper/papers" in study.all_settings()
    hyper, level, model = study.setting("room12/num_envs=64")
    assert hyper["num_envs"] == 64 and level["room_size"] == 12 and level["goal_length"] == (1,)
    assert model == study.BASE_MODEL
    with pytest.raises(ValueError, match=r"--settings expects names from --list.*'room9'"):
        study.setting("room9")
    hyper, _, _ = study.setting("room8/num_envs=64_minibatches=4")
    assert (hyper["num_envs"], hyper["learner_minibatches"]) == (64, 4)


def test_every_setting_is_a_valid_compiled_trainer_config():
    # A misspelt or refused hyperparameter fails here, not hours into a study.
    from keras_relational.agents import presets
    from keras_relational.agents.compiled.train_eval import make_config

    for name in study.all_settings():
        if name.startswith(study.PRESET_PREFIX):  # the preset as it is, through its curriculum
            configs = presets.curriculum_configs(name[len(study.PRESET_PREFIX):])
            assert len(configs) == 1 + len(study.setting(name)[0]["curriculum"]), name
            continue
        hyper, env_kwargs, model = study.setting(name)
        source = hyper.get("initial_weights_from")
        hyper = study.initial_weights("/runs", hyper)
        if source is not None:  # another setting's run under the same root: its trained agent
            study.setting(source)
            assert hyper["initial_weights"] == (
                f"/runs/{source.replace('/', '__')}/keras_model.keras")
        config = make_config(None, None, env_kwargs, None, model_kwargs=model, **hyper)
        assert all(getattr(config, key) == value for key, value in hyper.items()), name


@pytest.mark.slow  # compiles the relational agent's update
def test_a_tiny_run_resumes_and_writes_the_results_files(tmp_path):
    # The results' folder does not exist yet: the script makes it.
    root, output = str(tmp_path / "runs"), str(tmp_path / "results" / "fts")
    command = [sys.executable, benchmark_scripts.path("frames_to_solve"), f"--root={root}",
               "--settings=demo", "--max_frames=1920", "--log_interval=2", "--min_episodes=1",
               "--piece_seconds=600", f"--output={output}"]
    env = dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600,
                          cwd=benchmark_scripts.REPO_ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    with open(output + ".json") as f:
        (result,) = json.load(f)["results"]
    assert result["setting"] == "demo" and result["frames"] == 1920  # 3 updates of 32 x 20
    assert result["finished"]  # its max_frames reached: the same command trains no more
    rows = [json.loads(line) for line in open(os.path.join(root, "demo", "curves.jsonl"))]
    assert [r["step"] for r in rows] == [1, 3] and all("episodes" in r for r in rows)
    with open(output + ".md") as f:
        assert "counted over at least 1 episodes" in f.read()
    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600,
                           cwd=benchmark_scripts.REPO_ROOT)
    assert again.returncode == 0 and "Training" not in again.stdout, again.stdout[-2000:]


def test_a_curriculum_presets_frames_count_its_earlier_stages(tmp_path):
    from keras_relational.agents import curves
    from keras_relational.agents.compiled.curriculum import RESULT_FILE, stage_dir

    name = "preset:cpu_room12_relational_curriculum"
    assert name in study.all_settings() and study.setting(name)[1]["room_size"] == 12
    with pytest.raises(ValueError, match="preset:<name>.*'preset:zambaldi_fig9'"):
        study.setting("preset:zambaldi_fig9")
    root = str(tmp_path)
    directory = study._directory(root, name)
    assert study._rows(root, name) == []
    def row(step, rate, frames_per_step):
        return dict(_row(step, rate, episodes=64), frames=step * frames_per_step,
                    wall_seconds=float(step))

    stages = [[row(25, 0.5, 640), row(200, 0.98, 640)],  # room 6, stopped at 98 %
              [row(1, 0.0, 1280), row(26, 0.99, 1280)]]
    for index, rows in enumerate(stages, 1):
        os.makedirs(stage_dir(directory, index))
        with open(os.path.join(stage_dir(directory, index), curves.FILENAME), "w") as f:
            f.writelines(json.dumps(row) + "\n" for row in rows)
    rows = study._rows(root, name)
    assert [(r["frames"], r["stage_frames"]) for r in rows] == [(129_280, 1280),
                                                                (161_280, 33_280)]
    assert [r["wall_seconds"] for r in rows] == [201.0, 226.0]  # after the first stage's 200 s
    assert study.frames_to(rows, 0.98) == 161_280  # the last stage's levels only
    assert not study._curriculum_finished(root, name)
    with open(os.path.join(directory, RESULT_FILE), "w") as f:
        json.dump(dict(finished=True), f)
    assert study._curriculum_finished(root, name)


def test_the_loss_table_gives_the_policy_entropy_a_step():
    losses = dict(loss=1.0, entropy=1.386 * 1280, transitions=1280.0)
    text = study.loss_table([dict(setting="room12", losses=losses)])
    assert text.splitlines()[-1].endswith("| 1.00 | - | - | - | - | - | - | - | - | 1.386 |")
    assert study.loss_table([dict(setting="x", losses=dict(loss=1.0))]).endswith("| - |")
