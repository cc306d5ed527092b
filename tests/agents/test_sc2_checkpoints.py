"""``train_sc2``'s checkpoints (issues 28 and 29): a run cut by ``max_seconds`` resumes as the
uninterrupted run, for both trainers; environments that cannot be saved (the game) resume the
weights, the optimizer and the counters exactly; an unreadable newest checkpoint falls back to
the next; a checkpoint of other settings is refused, naming the setting.

No pysc2 needed: the stand-in environment of test_sc2_learning.py (tests/environments/
test_sc2.py resumes a run on pysc2's mock, in a process of its own; tests/test_random_kills.py
kills the binary at random moments).
"""

import contextlib
import copy
import os
import pickle
import shutil
import sys
from unittest import mock

import numpy as np
import pytest

from keras_relational.agents.sc2 import checkpointing
from keras_relational.agents.sc2 import policy as sc2_policy
from keras_relational.agents.sc2 import train_eval as sc2_train_eval
from keras_relational.agents.sc2.config import SC2Config

# Grappler off: its passes over each new function cost these tiny runs more than they save.
pytestmark = pytest.mark.usefixtures("no_graph_optimizer")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_sc2_learning import SMALL  # noqa: E402
from test_sc2_tf_agents import SIZE, SpecTinySC2  # noqa: E402

MODEL_KWARGS = {k: v for k, v in SMALL.items()
                if k not in ("screen_size", "num_functions", "num_blocks", "num_heads")}
SETTINGS = dict(compile_mode="eager", num_envs=2, unroll_length=2, screen_size=SIZE,
                num_blocks=1, num_heads=1, num_iterations=2)


class RestorableTinySC2(SpecTinySC2):
    """The stand-in with ``get_state`` / ``set_state``, as ``SC2Environment`` has on pysc2's
    mock: a resumed run continues its episodes and its random observations."""

    def get_state(self):
        return copy.deepcopy(dict(rng=self.rng.bit_generator.state, t=self.t,
                                  available=self.available))

    def set_state(self, state):
        state = copy.deepcopy(state)
        self.rng.bit_generator.state = state["rng"]
        self.t, self.available = state["t"], state["available"]


def _run(root, trainer, environment=RestorableTinySC2, export_policy=False, **overrides):
    """One ``train_eval`` call on two stand-ins. Without ``export_policy`` its greedy policy's
    SavedModel (most of a tiny run's time) is not written: only the cut run's first piece checks
    it here, and tests/agents/test_sc2_tf_agents.py checks what the export serves."""
    lines = []
    skipped = (contextlib.nullcontext() if export_policy else
               mock.patch.object(sc2_policy, "export_policy", lambda model, directory: None))
    with skipped:
        result = sc2_train_eval.train_eval(
            str(root), **dict(SETTINGS, trainer=trainer, **overrides),
            environments=[environment(7), environment(8)], model_kwargs=MODEL_KWARGS,
            print_fn=lines.append)
    return result, lines


def _checkpoint(root, update):
    with np.load(os.path.join(checkpointing.checkpoint_dir(root), f"ckpt-{update}.npz")) as data:
        arrays = {name: data[name] for name in data.files if name not in ("meta", "actor")}
        actor = pickle.loads(data["actor"].tobytes())
    return arrays, actor


_RUNS = {}


def _runs(trainer, tmp_path_factory):
    """An uninterrupted run of 2 updates, and the same run cut after update 1 by
    ``max_seconds`` and resumed by the same call without it (made once per trainer)."""
    if trainer not in _RUNS:
        whole = tmp_path_factory.mktemp(f"whole_{trainer}")
        cut = tmp_path_factory.mktemp(f"cut_{trainer}")
        expected, _ = _run(whole, trainer)
        first = _run(cut, trainer, export_policy=True, max_seconds=1e-6)
        second = _run(cut, trainer)
        _RUNS[trainer] = (trainer, whole, cut, expected, first, second)
    return _RUNS[trainer]


@pytest.fixture(params=["compiled", "tf_agents"])
def runs(request, tmp_path_factory):
    return _runs(request.param, tmp_path_factory)


@pytest.fixture
def compiled_runs(tmp_path_factory):
    """The compiled trainer's runs: what the checks of the files and settings need (they do not
    depend on the trainer)."""
    return _runs("compiled", tmp_path_factory)


def test_a_cut_run_resumes_as_the_uninterrupted_run(runs):
    trainer, whole, cut, expected, (first, first_lines), (second, second_lines) = runs
    assert first["updates"] == 1 and not first["finished"]
    assert first_lines[-1].startswith("Stopped at update 1 of 2 (--max_seconds=1e-06)")
    assert os.path.exists(first["keras_file"]) and os.path.exists(first["policy_dir"])
    assert f"Resuming from {cut}: update 1" in second_lines
    assert not any("WARNING" in line for line in second_lines), second_lines
    assert second_lines[-1].startswith("update 2: loss")
    assert second["updates"] == 2 and second["finished"]
    # Weights, optimizer variables, sampling state and episode returns: exactly the
    # uninterrupted run's (the stand-in environments and the sampler are restored too).
    arrays, actor = _checkpoint(whole, 2)
    resumed_arrays, resumed_actor = _checkpoint(cut, 2)
    assert sorted(arrays) == sorted(resumed_arrays)
    assert any(name.startswith("o") for name in arrays) and any(
        name.startswith("w") for name in arrays)
    for name, array in arrays.items():
        np.testing.assert_array_equal(resumed_arrays[name], array, err_msg=name)
    assert resumed_actor["episodes"] == actor["episodes"]
    key = "rng" if trainer == "compiled" else "sample_count"
    assert resumed_actor[key] == actor[key]
    assert second["loss"] == expected["loss"] and second["episodes"] == expected["episodes"]
    assert second["mean_return"] == expected["mean_return"]
    # The exported .keras file reloads as the trained model.
    import keras

    loaded = keras.saving.load_model(second["keras_file"])
    assert len(loaded.weights) == sum(name.startswith("w") for name in arrays)
    for i, variable in enumerate(loaded.weights):
        np.testing.assert_array_equal(np.asarray(variable), arrays[f"w{i:05d}"])


def test_a_finished_run_is_not_trained_again(compiled_runs, tmp_path):
    trainer, _, cut, _, _, (second, _) = compiled_runs
    root = tmp_path / "run"
    shutil.copytree(cut, root)
    before = {name: os.path.getmtime(os.path.join(checkpointing.checkpoint_dir(root), name))
              for name in os.listdir(checkpointing.checkpoint_dir(root))}
    result, lines = _run(root, trainer)
    assert lines[0] == f"Resuming from {root}: update 2"
    assert not any(line.startswith("update ") for line in lines), lines
    assert result["updates"] == 2 and result["loss"] == second["loss"]
    assert result["episodes"] == second["episodes"]
    after = {name: os.path.getmtime(os.path.join(checkpointing.checkpoint_dir(root), name))
             for name in os.listdir(checkpointing.checkpoint_dir(root))}
    assert after == before  # no checkpoint written again


def test_environments_that_cannot_be_saved_resume_everything_else(runs):
    # As the game: the stand-in without get_state. The trainer restored from the checkpoint holds
    # its weights, optimizer variables, sampling state and episode returns exactly.
    trainer, _, cut, *_ = runs
    config = SC2Config(**SETTINGS, trainer=trainer)
    checkpoint = checkpointing.read(str(cut), config, MODEL_KWARGS)
    assert checkpoint.update == 2
    environments = [SpecTinySC2(1), SpecTinySC2(2)]
    names, mask = environments[0].argument_mask()
    from keras_relational.models.sc2_agent import sc2_agent

    build = (sc2_train_eval._tf_agents_trainer if trainer == "tf_agents"
             else sc2_train_eval._compiled_trainer)
    restored = build(config, environments, lambda: sc2_agent(
        screen_size=SIZE, num_functions=mask.shape[0], num_blocks=1, num_heads=1,
        **MODEL_KWARGS), names, mask)
    warnings = []
    checkpointing.restore(checkpoint, restored, warn=warnings.append)
    assert len(warnings) == 1 and "new episodes" in warnings[0], warnings
    arrays, actor = _checkpoint(cut, 2)
    weights = [np.asarray(v) for v in restored.keras_model.weights]
    optimizer = [np.asarray(v) for v in restored.optimizer_variables()]
    assert len(weights) + len(optimizer) == len(arrays)
    for i, value in enumerate(weights):
        np.testing.assert_array_equal(value, arrays[f"w{i:05d}"])
    for i, value in enumerate(optimizer):
        np.testing.assert_array_equal(value, arrays[f"o{i:05d}"])
    assert int(optimizer[0]) == 2  # Adam's step count continues
    state = restored.get_state()
    assert state["episodes"] == actor["episodes"] and state["environments"] is None
    if trainer == "compiled":
        assert restored.actor.rng.bit_generator.state == actor["rng"]
    else:
        assert state["sample_count"] == actor["sample_count"] > 0
        assert state["train_step"] == actor["train_step"] == 2


def test_an_unreadable_newest_checkpoint_falls_back_and_none_readable_is_an_error(
        compiled_runs, tmp_path):
    trainer, _, cut, *_ = compiled_runs
    root = tmp_path / "run"
    shutil.copytree(cut, root)
    directory = checkpointing.checkpoint_dir(root)
    newest = os.path.join(directory, "ckpt-2.npz")
    with open(newest, "r+b") as f:
        f.truncate(os.path.getsize(newest) // 2)
    result, lines = _run(root, trainer)
    assert lines[0].startswith(f"WARNING: skipping the unreadable checkpoint {newest}"), lines
    assert "update 1" in lines[0] and lines[1] == f"Resuming from {root}: update 1"
    assert result["updates"] == 2 and os.path.exists(newest + ".corrupt")
    for name in ("ckpt-1.npz", "ckpt-2.npz"):
        with open(os.path.join(directory, name), "wb") as f:
            f.write(b"not a checkpoint")
    with pytest.raises(checkpointing.CheckpointError,
                       match=r"No checkpoint in .*checkpoints can be restored .*ckpt-2.*afresh"):
        _run(root, trainer)
    assert sorted(os.listdir(directory)) == ["ckpt-1.npz", "ckpt-2.npz", "ckpt-2.npz.corrupt"]


@pytest.mark.parametrize("setting, value, flag", [
    ("map_name", "DefeatRoaches", "--map"), ("num_heads", 2, "--num_heads"),
    ("trainer", None, "--trainer"), ("model_kwargs", None, "--tiny_model")])
def test_a_checkpoint_of_other_settings_is_refused_naming_the_setting(compiled_runs, setting,
                                                                      value, flag):
    trainer, _, cut, *_ = compiled_runs
    listing = sorted(os.listdir(cut))
    before = os.path.getmtime(os.path.join(cut, "result.json"))
    config = SC2Config(**SETTINGS, trainer=trainer)
    model_kwargs = MODEL_KWARGS
    if setting == "trainer":
        config = SC2Config(**SETTINGS, trainer="tf_agents")
    elif setting == "model_kwargs":
        model_kwargs = dict(MODEL_KWARGS, key_dim=16)
    else:
        config = SC2Config(**dict(SETTINGS, trainer=trainer, **{setting: value}))
    with pytest.raises(checkpointing.SettingsMismatchError, match=rf"{setting}=.*\({flag}\)"):
        sc2_train_eval.train_eval(str(cut), config, model_kwargs=model_kwargs,
                                  environments=[RestorableTinySC2(7), RestorableTinySC2(8)],
                                  print_fn=lambda line: None)
    assert sorted(os.listdir(cut)) == listing  # nothing written
    assert os.path.getmtime(os.path.join(cut, "result.json")) == before
    # What a resumed run may change is not a mismatch.
    relaxed = SC2Config(**dict(SETTINGS, trainer=trainer, num_iterations=5, log_interval=3,
                               checkpoint_interval=7, max_seconds=60.0, compile_mode="xla"))
    assert checkpointing.read(str(cut), relaxed, MODEL_KWARGS).update == 2


@pytest.mark.parametrize("field, value, message", [
    ("checkpoint_interval", 0, "`checkpoint_interval` to be a positive integer"),
    ("max_seconds", 0, r"`max_seconds`: expected a finite number > 0 or None"),
    ("max_seconds", float("inf"), r"`max_seconds`: expected a finite number > 0 or None")])
def test_config_checks_the_checkpoint_fields(field, value, message):
    with pytest.raises(ValueError, match=message):
        SC2Config(**{field: value})
