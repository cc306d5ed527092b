"""``train_boxworld --trainer=compiled`` killed with SIGKILL resumes from its newest checkpoint and
ends exactly where an uninterrupted run of the same flags ends."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from absl import flags
from absl.testing import flagsaver

from keras_relational.agents.compiled import checkpointing
from keras_relational.agents.compiled import train_eval as compiled_train_eval

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_FLAGS = dict(trainer="compiled", goal_length="1", num_distractors="0", room_size="5",
              observation_type="one_hot", num_envs="2", unroll_length="3", key_dim="8",
              head_width="8", log_interval="1", checkpoint_interval="1", eval_episodes="0")


def _command(root, num_iterations):
    return [sys.executable, "-m", "keras_relational.experiments.train_boxworld",
            f"--root_dir={root}", f"--num_iterations={num_iterations}",
            *(f"--{name}={value}" for name, value in _FLAGS.items())]


def _steps(root):
    return [int(os.path.basename(path)[len("ckpt-"):-len(".npz")])
            for path in checkpointing.checkpoints(root)]


def _arrays(root):
    with np.load(checkpointing.checkpoints(root)[-1]) as data:
        return {key: data[key] for key in data.files}


def _binary_config(import_binary, num_iterations):
    """The config the binary builds from ``_command``'s flags."""
    train_boxworld = import_binary("train_boxworld")
    was_parsed = flags.FLAGS.is_parsed()
    with flagsaver.as_parsed(num_iterations=str(num_iterations), **_FLAGS):
        flags.FLAGS.mark_as_parsed()
        try:
            return train_boxworld.config_from_flags()
        finally:
            if not was_parsed:
                flags.FLAGS.unparse_flags()


@pytest.mark.slow  # three runs, each compiling its update (two processes and this one)
def test_resumes_after_kill_9_as_the_uninterrupted_run(tmp_path, import_binary, monkeypatch):
    root = str(tmp_path / "killed")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    process = subprocess.Popen(_command(root, 100_000), cwd=_REPO_ROOT, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 600
        while time.time() < deadline and not [s for s in _steps(root) if s >= 2]:
            time.sleep(0.05)
            assert process.poll() is None, "training process died before a checkpoint"
        assert [s for s in _steps(root) if s >= 2], "no checkpoint within 600 s"
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    assert process.returncode == -signal.SIGKILL
    killed_at = _steps(root)[-1]  # the newest complete checkpoint (written whole, renamed)
    final = killed_at + 2
    restarted = subprocess.run(_command(root, final), cwd=_REPO_ROOT, env=env,
                               capture_output=True, text=True, timeout=600)
    assert restarted.returncode == 0, restarted.stderr[-3000:]
    assert f"Resuming from {root}: train step {killed_at}" in restarted.stdout, restarted.stdout

    whole = str(tmp_path / "whole")
    # The reference run's export is not compared (test_compiled_loop.py checks the exports).
    monkeypatch.setattr(compiled_train_eval, "export_keras_model",
                        lambda model, root_dir: (None, None, None))
    expected = compiled_train_eval.train_eval(
        whole, _binary_config(import_binary, final), print_fn=lambda line: None)
    again, reference = _arrays(root), _arrays(whole)
    assert sorted(again) == sorted(reference)
    for key in reference:
        if key != "meta":
            np.testing.assert_array_equal(again[key], reference[key], err_msg=key)
    assert json.loads(str(again["meta"])) == json.loads(str(reference["meta"]))
    with open(os.path.join(root, "result.json")) as f:
        result = json.load(f)
    assert result["train_step"] == expected["train_step"] == final
    assert result["frames"] == expected["frames"]
    timeless = lambda rows: [(r["step"], r["solve_rate"], r["average_return"])  # noqa: E731
                             for r in rows]
    from keras_relational.agents import curves

    assert timeless(curves.read_curve(root)) == timeless(curves.read_curve(whole))


def test_an_unreadable_newest_checkpoint_is_skipped_and_none_readable_is_an_error(tmp_path):
    root = str(tmp_path)
    template = {"w": np.zeros((2, 3), "float32"), "step": np.zeros((), "int32")}
    for step in (2, 4):
        checkpointing.save(root, {"w": np.full((2, 3), step, "float32"),
                                  "step": np.array(step, "int32")}, dict(step=step))
    newest = checkpointing.checkpoints(root)[-1]
    with open(newest, "r+b") as f:
        f.truncate(os.path.getsize(newest) // 2)
    warnings = []
    state, meta = checkpointing.restore(root, template, warn=warnings.append)
    assert meta["step"] == 2 and float(np.asarray(state["w"])[0, 0]) == 2.0
    assert len(warnings) == 1 and "ckpt-4.npz" in warnings[0] and "ckpt-2" in warnings[0]
    assert os.path.exists(newest + ".corrupt") and _steps(root) == [2]
    with open(checkpointing.checkpoints(root)[-1], "wb") as f:
        f.write(b"garbage")
    with pytest.raises(checkpointing.CheckpointError,
                       match=r"No checkpoint in .*checkpoints can be restored.*ckpt-2.*afresh"):
        checkpointing.restore(root, template)
    assert _steps(root) == [2]  # nothing overwritten or moved
