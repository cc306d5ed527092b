"""``train_sc2`` without the game: the flags, the seven maps, and the error naming SC2PATH
(no pysc2 needed: the game is looked for before anything is built)."""

import os
import subprocess
import sys

import pytest

from keras_relational.environments.sc2.maps import MINI_GAMES, check_game

BINARY = [sys.executable, "-m", "keras_relational.experiments.train_sc2"]


@pytest.mark.subprocess
def test_missing_game_names_sc2path(tmp_path):
    env = dict(os.environ, SC2PATH=str(tmp_path / "nowhere"))
    result = subprocess.run(BINARY + [f"--root_dir={tmp_path}", "--map=BuildMarines"],
                            capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode != 0
    assert "SC2PATH=" in result.stderr and "nowhere" in result.stderr
    assert "--mock" in result.stderr
    assert not os.listdir(tmp_path)  # nothing was built or written


@pytest.mark.subprocess
def test_help_lists_the_seven_maps_and_a_bad_map_is_refused(tmp_path):
    result = subprocess.run(BINARY + ["--helpfull"], capture_output=True, text=True,
                            timeout=120)
    assert all(name in result.stdout for name in MINI_GAMES), result.stdout[-2000:]
    assert "--trainer" in result.stdout and "tf_agents" in result.stdout
    bad = subprocess.run(BINARY + ["--map=Zerg"], capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "--map" in bad.stderr


@pytest.mark.subprocess
@pytest.mark.parametrize("flag, message", [
    ("--max_seconds=0", "`max_seconds`: expected a finite number > 0 or None, received 0.0"),
    ("--checkpoint_interval=0", "--checkpoint_interval")])
def test_bad_checkpoint_flags_are_refused_before_anything_runs(tmp_path, flag, message):
    result = subprocess.run(BINARY + [f"--root_dir={tmp_path}", "--mock", flag],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode != 0 and message in result.stderr, result.stderr[-2000:]
    assert "Traceback" not in result.stderr and not os.listdir(tmp_path)


def test_check_game_names_the_missing_map(tmp_path, monkeypatch):
    (tmp_path / "Versions").mkdir()
    monkeypatch.setenv("SC2PATH", str(tmp_path))
    try:
        check_game("MoveToBeacon")
    except FileNotFoundError as error:
        assert "MoveToBeacon.SC2Map" in str(error) and "SC2PATH" in str(error)
    else:
        raise AssertionError("a missing map was accepted")
    (tmp_path / "Maps" / "mini_games").mkdir(parents=True)
    (tmp_path / "Maps" / "mini_games" / "MoveToBeacon.SC2Map").write_bytes(b"")
    assert check_game("MoveToBeacon") == str(tmp_path)


@pytest.mark.subprocess
def test_a_checkpoint_of_another_map_stops_the_binary_naming_it(tmp_path):
    # The settings are checked before pysc2 or the model is needed: a one-line error, nothing
    # written (tests/agents/test_sc2_checkpoints.py checks every kind of mismatch in-process).
    import numpy as np

    from keras_relational.agents.compiled import checkpointing as files
    from keras_relational.agents.sc2 import checkpointing
    from keras_relational.agents.sc2.config import SC2Config

    saved = SC2Config(mock=True, map_name="MoveToBeacon", num_envs=2)
    files.write(checkpointing.checkpoint_dir(str(tmp_path)), 1, {"w00000": np.zeros(2),
                "actor": np.zeros(1, np.uint8)},
                dict(format=checkpointing.FORMAT, update=1, settings=checkpointing.settings(saved)))
    listing = sorted(os.listdir(tmp_path / "checkpoints"))
    result = subprocess.run(BINARY + [f"--root_dir={tmp_path}", "--mock", "--map=DefeatRoaches",
                                      "--num_envs=2"], capture_output=True, text=True, timeout=300)
    assert result.returncode != 0
    assert "train_sc2: The checkpoint" in result.stderr, result.stderr[-3000:]
    assert "map_name='MoveToBeacon' (--map)" in result.stderr
    assert "map_name='DefeatRoaches'" in result.stderr and "Traceback" not in result.stderr
    assert sorted(os.listdir(tmp_path)) == ["checkpoints"]
    assert sorted(os.listdir(tmp_path / "checkpoints")) == listing
