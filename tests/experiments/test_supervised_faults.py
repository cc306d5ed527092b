"""Faults during a supervised binary's training (issue 29), on the same-colour demo.

SIGKILL while a backup is written and while the model is exported (a deterministic point,
``KERAS_RELATIONAL_KILL_AT``), then a corrupt newest backup: each restart resumes from the
newest valid backup (``keras_relational.experiments.safe_backup.SafeBackupAndRestore``), and
backups that cannot be read at all are a clear error.
"""

import glob
import os
import sys
import textwrap

import pytest
import warm_python
from kill_checks import soak_command

from keras_relational.experiments import same_colour_lib
from keras_relational.experiments.safe_backup import BackupError

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_TINY = dict(num_train=64, epochs=3)
# benchmarks/fault_soak.py runs the absl binary with _TINY's settings (tests/test_random_kills.py
# leaves its random kill to the test below, whose first kill is of the binary).
_BINARY = "same_colour_demo"


def _killed_run(root, kill_at, binary=False):
    """Runs the demo's library (``binary``: its absl binary) until ``kill_at``."""
    code = textwrap.dedent(f"""
        from keras_relational.experiments import same_colour_lib
        same_colour_lib.train_eval({root!r}, **{_TINY!r})
    """)
    command = soak_command(_BINARY, root) if binary else [sys.executable, "-c", code]
    env = warm_python.binary_env(KERAS_RELATIONAL_KILL_AT=kill_at)
    done = warm_python.run(command, cwd=_REPO_ROOT, env=env,
                           capture_output=True, text=True, timeout=600)
    assert done.returncode == -9, (done.returncode, done.stderr[-3000:])
    return done.stdout


@pytest.mark.slow
def test_same_colour_demo_survives_kills_and_corrupt_backups(tmp_path):
    root = str(tmp_path / "run")
    backup = os.path.join(root, "backup")
    # The binary killed while writing the second epoch's backup: epoch 1 is in place, epoch 2
    # unfinished.
    _killed_run(root, "backup_write:2", binary=True)
    assert sorted(os.listdir(backup)) == ["latest.weights.h5", "partial.weights.h5",
                                          "training_metadata.json",
                                          "training_metadata.json.partial"]
    # The unfinished epoch-2 weights corrupted: the restart skips them with a warning, resumes
    # from epoch 1 (runs epochs 2 and 3 only), and is killed while exporting the model.
    with open(os.path.join(backup, "partial.weights.h5"), "r+b") as f:
        f.truncate(100)
    out = _killed_run(root, "export:1")
    assert "skipping the unreadable backup" in out and "partial" in out, out
    assert "resuming from" in out and "(epoch 1)" in out, out
    assert "Epoch 1/3" not in out and "Epoch 2/3" in out, out
    assert not os.path.exists(os.path.join(root, "model.keras"))
    # The restart resumes after the last epoch (no training) and exports.
    lines = []
    result = _capture(lambda: same_colour_lib.train_eval(root, **_TINY), lines)
    assert not any("Epoch" in line for line in lines), lines
    assert os.path.exists(result["model"]) and not os.path.exists(backup)
    # Backups that cannot be read at all: a clear error naming the directory.
    os.remove(result["model"])
    os.makedirs(backup)
    for name in ("latest.weights.h5", "training_metadata.json"):
        with open(os.path.join(backup, name), "w") as f:
            f.write("garbage")
    with pytest.raises(BackupError, match=r"No backup in .*backup can be restored.*afresh"):
        same_colour_lib.train_eval(root, **_TINY)
    assert sorted(glob.glob(os.path.join(backup, "*"))) == sorted(
        os.path.join(backup, n) for n in ("latest.weights.h5", "training_metadata.json"))


def _capture(function, lines):
    import contextlib
    import io

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        result = function()
    lines.extend(buffer.getvalue().splitlines())
    return result
