"""Faults during Box-World training (issue 29): no fault loses more than one checkpoint interval.

One run is driven through every fault in turn: a non-finite loss (in process), SIGKILL while a
checkpoint is written and while the policies are exported (subprocesses stopped at a
deterministic point by ``KERAS_RELATIONAL_KILL_AT``, see ``keras_relational.faults``), a
truncated newest checkpoint and a garbage checkpoint index; each time the resumed run continues
from the newest valid checkpoint.
"""

import glob
import json
import math
import os
import sys
import textwrap

import pytest
import warm_python

from keras_relational.agents.tf_agents import checkpoints
from keras_relational.agents.tf_agents.learning import NonFiniteLossError
from keras_relational.agents.tf_agents.train_eval import train_eval

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_TINY = dict(env_kwargs=dict(goal_length=1, num_distractors=0), num_envs=4, unroll_length=5,
             model_kwargs=dict(key_dim=8, mlp_hidden_units=(16,), head_units=(16,)),
             log_interval=1, checkpoint_interval=2, eval_episodes=0,
             policy_save_interval=10_000, jit_compile=False, actor_jit_compile=False)


def _steps(root):
    files = glob.glob(os.path.join(checkpoints.checkpoint_dir(root), "ckpt-*.index"))
    return sorted(int(f.rsplit("-", 1)[1].split(".")[0]) for f in files)


def _killed_run(root, num_iterations, kill_at):
    code = textwrap.dedent(f"""
        from keras_relational.agents.tf_agents.train_eval import train_eval
        train_eval({root!r}, num_iterations={num_iterations}, **{_TINY!r})
    """)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", KERAS_RELATIONAL_KILL_AT=kill_at)
    done = warm_python.run([sys.executable, "-c", code], cwd=_REPO_ROOT, env=env,
                           capture_output=True, text=True, timeout=600,
                           preload=warm_python.TF_AGENTS_PRELOAD)
    assert done.returncode == -9, (done.returncode, done.stderr[-3000:])  # killed at the point
    return done.stdout


def _nan_loss_from_step(monkeypatch, bad_step):
    """The learner's step reports a NaN loss from train step ``bad_step`` on."""
    import tensorflow as tf
    from tf_agents.train import learner

    original = learner.Learner._train

    def train(self, *args):
        loss_info = original(self, *args)
        if int(self.train_step.numpy()) >= bad_step:
            return loss_info._replace(loss=tf.constant(float("nan")))
        return loss_info

    monkeypatch.setattr(learner.Learner, "_train", train)


@pytest.mark.slow
def test_training_survives_nan_kills_and_corrupt_checkpoints(tmp_path, monkeypatch):
    root = str(tmp_path / "run")
    # 1. A NaN loss at step 3 stops training there, with the state of step 2 on disk.
    _nan_loss_from_step(monkeypatch, 3)
    with pytest.raises(NonFiniteLossError, match=r"loss became nan at train step 3.*ckpt-2"):
        train_eval(root, num_iterations=8, print_fn=lambda line: None, **_TINY)
    monkeypatch.undo()
    assert _steps(root) == [2]
    # 2. Killed while writing the checkpoint of step 4: its files are complete, unindexed.
    out = _killed_run(root, 8, "checkpoint_write:1")
    assert "Resuming from" in out and "train step 2" in out, out
    assert _steps(root) == [2, 4]
    # 3. The newest checkpoint truncated, the index garbage: resumes from step 2 with a warning
    #    naming ckpt-4, trains to 8, and is killed while exporting the policies.
    (data,) = glob.glob(os.path.join(checkpoints.checkpoint_dir(root), "ckpt-4.data-*"))
    with open(data, "r+b") as f:
        f.truncate(os.path.getsize(data) // 2)
    with open(os.path.join(checkpoints.checkpoint_dir(root), "checkpoint"), "w") as f:
        f.write("not a checkpoint index {{{")
    out = _killed_run(root, 8, "export:1")
    assert "skipping the unreadable checkpoint" in out and "ckpt-4" in out, out
    assert "train step 2" in out, out
    assert _steps(root)[-1] == 8
    assert not os.path.exists(os.path.join(root, "result.json"))
    # 4. The restarted run resumes at the end, exports and writes strict JSON (NaN as null).
    lines = []
    result = train_eval(root, num_iterations=8, print_fn=lines.append, **_TINY)
    assert any("train step 8" in line for line in lines), lines
    assert result["train_step"] == 8
    with open(os.path.join(root, "result.json")) as f:
        written = json.load(f, parse_constant=lambda token: pytest.fail(f"bare {token}"))
    assert written["eval_solve_rate"] is None and math.isnan(result["eval_solve_rate"])
    for policy in ("policy", "collect_policy", "greedy_policy"):
        assert os.path.exists(os.path.join(root, "policies", policy, "saved_model.pb")), policy
    # 5. No readable checkpoint at all: a clear error naming the directory, nothing overwritten.
    for path in glob.glob(os.path.join(checkpoints.checkpoint_dir(root), "ckpt-*.data-*")):
        with open(path, "wb") as f:
            f.write(b"garbage")
    before = sorted(os.listdir(checkpoints.checkpoint_dir(root)))
    with pytest.raises(checkpoints.CheckpointError,
                       match=r"No checkpoint in .*train/checkpoints can be restored.*afresh"):
        train_eval(root, num_iterations=10, print_fn=lambda line: None, **_TINY)
    assert sorted(os.listdir(checkpoints.checkpoint_dir(root))) == before


def test_a_checkpoint_with_an_unreadable_actor_state_is_not_resumed(tmp_path):
    import tensorflow as tf

    root = str(tmp_path)
    train_step = tf.Variable(0, dtype=tf.int64)
    saver = checkpoints.CheckpointSaver(root, train_step=train_step)
    for step in (2, 4):
        train_step.assign(step)
        saver.save(train_step)
        with open(os.path.join(checkpoints.checkpoint_dir(root), f"ckpt-{step}.actor.pkl"),
                  "wb") as f:
            f.write(b"\x80\x04K\x01." if step == 2 else b"garbage, not a pickle")
    prefix = os.path.join(checkpoints.checkpoint_dir(root), "ckpt-4")
    assert "its actor state ckpt-4.actor.pkl" in checkpoints.checkpoint_problem(prefix)
    warnings = []
    assert checkpoints.prepare_resume(root, warn=warnings.append) == 2  # the older one, whole
    assert "ckpt-4" in warnings[0] and "actor state" in warnings[0]
    assert os.path.exists(prefix + ".actor.pkl.corrupt") and _steps(root) == [2]
