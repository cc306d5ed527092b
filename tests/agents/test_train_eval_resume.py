"""A TF-Agents run cut into pieces continues bit-identically: same weights, curve and results.

The actor's state travels through each checkpoint's ``ckpt-<step>.actor.pkl``
(keras_relational.agents.tf_agents.actor_state). Two cuts: an iteration limit (the final checkpoint
of a piece, as ``--max_seconds`` writes it) and a run killed after an interval checkpoint written
inside the learner, between two progress lines.
"""

import glob
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from keras_relational.agents import curves
from keras_relational.agents.tf_agents import actor_state, checkpoints
from keras_relational.agents.tf_agents.train_eval import make_config, train_eval

_TINY = dict(env_kwargs=dict(goal_length=1, num_distractors=0, room_size=5, max_steps=7,
                             observation_type="one_hot"),
             num_envs=3, unroll_length=4, log_interval=2, checkpoint_interval=3,
             policy_save_interval=10_000, eval_episodes=3, eval_num_envs=3, jit_compile=False,
             actor_jit_compile=False,
             model_kwargs=dict(key_dim=8, mlp_hidden_units=(8,), head_units=(8,)))
_TIMELESS = ("frames_per_second", "wall_seconds")


def _tensors(root, step):
    reader = tf.train.load_checkpoint(os.path.join(checkpoints.checkpoint_dir(root),
                                                   f"ckpt-{step}"))
    return {key: reader.get_tensor(key) for key in reader.get_variable_to_shape_map()
            if "save_counter" not in key}


def _curve(root):
    return [{k: v for k, v in row.items() if k not in _TIMELESS} for row in curves.read_curve(root)]


def _assert_same_run(root, reference, reference_result, result):
    final, again = _tensors(reference, 6), _tensors(root, 6)
    assert sorted(final) == sorted(again)
    for key in final:
        np.testing.assert_array_equal(again[key], final[key], err_msg=key)
    assert _curve(root) == _curve(reference)
    assert result["eval_solve_rate"] == reference_result["eval_solve_rate"]


@pytest.mark.slow  # four tiny runs (no XLA); no exports (conftest.no_exports: not what is tested)
def test_runs_in_pieces_equal_the_uninterrupted_run(tmp_path, no_exports):
    quiet = lambda line: None  # noqa: E731
    whole = str(tmp_path / "whole")
    expected = train_eval(whole, num_iterations=6, print_fn=quiet, **_TINY)
    assert [row["step"] for row in curves.read_curve(whole)] == [2, 4, 6]
    # Episodes end (a 7-step limit), so episodes are pending at the checkpoints.
    assert all(row["solve_rate"] is not None for row in curves.read_curve(whole))

    # 1. Two pieces cut by the iteration limit at a progress line.
    pieces = str(tmp_path / "pieces")
    train_eval(pieces, num_iterations=4, print_fn=quiet, **_TINY)
    lines = []
    result = train_eval(pieces, num_iterations=6, print_fn=lines.append, **_TINY)
    assert lines[0] == f"Resuming from {pieces}: train step 4", lines
    assert not any("WARNING" in line for line in lines), lines
    _assert_same_run(pieces, whole, expected, result)
    # Every kept checkpoint has its actor state; the pruned ones' went with them.
    directory = checkpoints.checkpoint_dir(pieces)
    states = glob.glob(os.path.join(directory, "*" + actor_state.SUFFIX))
    indexed = glob.glob(os.path.join(directory, "ckpt-*.index"))
    assert sorted(s[:-len(actor_state.SUFFIX)] for s in states) == sorted(
        i[:-len(".index")] for i in indexed)

    # 2. Killed after the interval checkpoint of step 3, written inside the learner between the
    #    progress lines of steps 2 and 4: the newer checkpoint is gone, the run resumes from 3.
    killed = str(tmp_path / "killed")
    shutil.copytree(whole, killed)
    for path in glob.glob(os.path.join(checkpoints.checkpoint_dir(killed), "ckpt-6.*")):
        os.unlink(path)
    lines = []
    result = train_eval(killed, num_iterations=6, print_fn=lines.append, **_TINY)
    assert f"Resuming from {killed}: train step 3" in lines, lines
    _assert_same_run(killed, whole, expected, result)

    # 3. Another run's settings are refused by name; a checkpoint without actor state (as an
    #    older version wrote) resumes the weights after a warning.
    other = make_config(num_iterations=6, **dict(_TINY, num_envs=2))
    with pytest.raises(actor_state.ActorStateError, match="num_envs=3; this run has num_envs=2"):
        actor_state.restore(pieces, 6, actor_state.fingerprint(other), target=None)
    os.unlink(actor_state.path_for(pieces, 6))
    warnings = []
    assert not actor_state.restore(pieces, 6, actor_state.fingerprint(other), None,
                                   warn=warnings.append)
    assert len(warnings) == 1 and "ckpt-6 has no actor state" in warnings[0], warnings
