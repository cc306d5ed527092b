"""The kill tests' helpers: the soak's command for a binary (``tests/experiments/``' fault tests),
and a SIGKILL once a training process has checkpointed (the kill -9 resume tests' first half,
``tests/agents/test_train_eval.py``, ``tests/agents/test_compiled_loop.py``)."""

import signal
import subprocess
import time

import benchmark_scripts


def soak_command(name, root, *overrides):
    """``benchmarks/fault_soak.py``'s command for the binary ``name`` (a key of its ``BINARIES``:
    the one place its tiny flags are written), writing to ``root``, with ``overrides`` appended
    (absl: the last value of a flag wins)."""
    return [*benchmark_scripts.load("fault_soak").command(name, root), *overrides]


def kill_after_checkpoint(command, checkpoint_steps, at_least, timeout, poll_seconds,
                          popen=subprocess.Popen, **popen_kwargs):
    """Starts ``command`` and sends it SIGKILL once ``checkpoint_steps()`` (the steps of its
    complete checkpoints, ascending) holds one of at least ``at_least``; returns the newest.

    Fails the test if the process exits first, or if no such checkpoint appears within
    ``timeout`` seconds. ``popen``: :class:`subprocess.Popen`, or ``warm_python.Popen`` for a
    binary that imports Keras anyway.
    """
    process = popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                    **popen_kwargs)
    try:
        deadline = time.time() + timeout
        while time.time() < deadline and not [s for s in checkpoint_steps() if s >= at_least]:
            time.sleep(poll_seconds)
            assert process.poll() is None, "training process died before a checkpoint"
        assert [s for s in checkpoint_steps() if s >= at_least], \
            f"no checkpoint within {timeout} s"
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    assert process.returncode == -signal.SIGKILL
    return checkpoint_steps()[-1]  # the newest complete checkpoint (written whole, renamed)
