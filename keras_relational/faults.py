"""Deterministic fault injection for the fault tests: kill this process at a named point.

The training binaries call :func:`point` where a crash would be most harmful (while a checkpoint
or a backup is being written, while policies are exported). With the environment variable
``KERAS_RELATIONAL_KILL_AT=<name>`` (or ``<name>:<n>``) the process sends itself ``SIGKILL`` the
first (n-th) time it reaches the point ``<name>``, exactly as ``kill -9`` would; without the
variable a point costs one dictionary lookup. Pure Python.
"""

import os
import signal

ENVIRONMENT_VARIABLE = "KERAS_RELATIONAL_KILL_AT"
_reached = {}


def point(name):
    """SIGKILLs this process if ``$KERAS_RELATIONAL_KILL_AT`` names ``name`` (and its count)."""
    spec = os.environ.get(ENVIRONMENT_VARIABLE)
    if not spec:
        return
    target, _, count = spec.partition(":")
    if target != name:
        return
    _reached[name] = _reached.get(name, 0) + 1
    if _reached[name] >= int(count or 1):
        os.kill(os.getpid(), signal.SIGKILL)
