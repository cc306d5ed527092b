"""What a kill can leave of the compiled trainer's checkpoints: a newest one cut short is skipped
for the one before it, and none readable is an error. (``train_boxworld --trainer=compiled``
killed with SIGKILL and restarted ends as the uninterrupted run: ``test_compiled_loop.py``.)"""

import os

import numpy as np
import pytest

from keras_relational.agents.compiled import checkpointing


def _steps(root):
    return [int(os.path.basename(path)[len("ckpt-"):-len(".npz")])
            for path in checkpointing.checkpoints(root)]


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
