"""One run per root directory (issue 48): ``keras_relational.run_lock``.

A lock another process holds refuses naming its process id; a lock left by a process killed with
SIGKILL is taken over. One short subprocess (a holder that sleeps) serves both.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from keras_relational import run_lock


def _holder(root):
    """A process that holds ``root``'s lock until killed."""
    code = textwrap.dedent(f"""
        import time
        from keras_relational import run_lock
        with run_lock.hold({root!r}):
            print("held", flush=True)
            time.sleep(600)
    """)
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "held"
    return process


def _trainers():
    from keras_relational.agents.compiled import train_eval as compiled
    from keras_relational.agents.sc2 import train_eval as sc2
    from keras_relational.experiments import (
        babi_lib,
        char_lm_lib,
        palindromes_lib,
        relations_game_lib,
        rule_learning_lib,
        same_colour_lib,
    )

    return [compiled.train_eval, sc2.train_eval, babi_lib.train_eval, char_lm_lib.train_eval,
            palindromes_lib.palindromes_train_eval, palindromes_lib.train_seeds,
            relations_game_lib.train_eval, rule_learning_lib.rule_learning_train_eval,
            rule_learning_lib.train_seeds, same_colour_lib.train_eval]


def test_a_second_start_refuses_naming_the_holder_and_a_killed_holder_is_taken_over(tmp_path):
    root = str(tmp_path / "run")
    holder = _holder(root)
    try:
        with open(run_lock.lock_path(root)) as f:
            assert json.load(f)["pid"] == holder.pid
        start = time.time()
        with pytest.raises(run_lock.RunLockError,
                           match=rf"in use by another run: process {holder.pid} on host "):
            with run_lock.hold(root):
                pass
        assert time.time() - start < 5  # refused at once, not waiting for the holder
        # Every trainer's train_eval takes the lock first: refused before writing anything.
        for train_eval in _trainers():
            with pytest.raises(run_lock.RunLockError, match=rf"process {holder.pid} on host"):
                train_eval(root)
        assert os.listdir(root) == [run_lock.FILENAME]
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert os.path.exists(run_lock.lock_path(root))  # kill -9 left the file, not the lock
    lines = []
    with run_lock.hold(root, warn=lines.append):
        with open(run_lock.lock_path(root)) as f:
            assert json.load(f)["pid"] == os.getpid()
    assert len(lines) == 1 and f"process {holder.pid}" in lines[0] and "Taking over" in lines[0]
    assert not os.path.exists(run_lock.lock_path(root))  # released: the file is gone


def test_the_lock_is_reentrant_and_leaves_no_trace(tmp_path):
    root = str(tmp_path / "fresh")
    with run_lock.hold(root) as path:
        with run_lock.hold(root):  # a library function calling another on the same root
            assert os.path.exists(path)
        assert os.path.exists(path)
    assert not os.path.exists(root)  # a directory it created and nothing else wrote

    @run_lock.locks_root_dir
    def train_eval(root_dir, steps=1):
        with open(os.path.join(root_dir, "result.json"), "w") as f:
            f.write(str(steps))
        return os.path.exists(run_lock.lock_path(root_dir))

    assert train_eval(root, steps=2) and os.listdir(root) == ["result.json"]

