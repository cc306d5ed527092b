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
