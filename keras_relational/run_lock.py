"""One run per root directory: a lock every training binary holds on its ``root_dir``.

Two trainers on one ``root_dir`` would both write its checkpoints, backups and results, each
resuming from or overwriting the other's. :func:`hold` takes an exclusive ``fcntl.flock`` on
``root_dir/.run.lock`` for the run's lifetime; the file records the holder's process id, host and
start time, so a second start refuses with :class:`RunLockError` naming them. The operating system
releases a ``flock`` when its process ends, however it ends: a lock file left by a process killed
with ``kill -9`` holds no lock, and the next run takes it over (with a line saying so). The lock is
re-entrant within a process (a library function that holds it may call another that takes it).

POSIX only (``fcntl``); on a file system without ``flock`` support (some network file systems)
the lock cannot be taken and :class:`RunLockError` says so. Pure Python.

Example:

>>> with hold("/tmp/run"):  # doctest: +SKIP
...     train(...)
"""

import contextlib
import errno
import fcntl
import functools
import inspect
import json
import os
import socket
import sys
import threading
import time

FILENAME = ".run.lock"
_held = {}  # real path of a held lock file -> [file object, depth]
_guard = threading.Lock()


class RunLockError(RuntimeError):
    """Another process holds the root directory's lock (or it cannot be taken)."""


def lock_path(root_dir):
    """The lock file of ``root_dir``."""
    return os.path.join(root_dir, FILENAME)


def _describe(record):
    if not record:
        return "a process that has not written its id yet"
    started = record.get("started")
    when = time.strftime(" since %Y-%m-%d %H:%M:%S UTC", time.gmtime(started)) \
        if isinstance(started, (int, float)) else ""
    return (f"process {record.get('pid')} on host {record.get('host')}{when}"
            + (f" ({record['command']})" if record.get("command") else ""))


def _read_record(f):
    f.seek(0)
    try:
        record = json.loads(f.read() or "null")
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def _acquire(path, root_dir, warn):
    while True:
        f = open(path, "a+")  # noqa: SIM115  (held open for the run's lifetime)
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            holder = _read_record(f)
            f.close()
            if error.errno in (errno.EWOULDBLOCK, errno.EACCES, errno.EAGAIN):
                raise RunLockError(
                    f"root_dir {root_dir!r} is in use by another run: {_describe(holder)} holds "
                    f"its lock {path}. Wait for that run to finish (or stop it), or train with "
                    f"another root_dir.") from None
            raise RunLockError(f"Cannot lock root_dir {root_dir!r} ({path}: {error}); one run "
                               f"per root directory cannot be ensured here.") from error
        # The file may have been removed by its holder between our open and our lock: then
        # the lock is on a deleted file, and the next run would not see it. Open it again.
        try:
            if os.stat(path).st_ino == os.fstat(f.fileno()).st_ino:
                break
        except FileNotFoundError:
            pass
        f.close()
    left = _read_record(f)
    if left and left.get("pid") is not None:
        warn(f"Taking over the lock of root_dir {root_dir} left by {_describe(left)}, which "
             f"ended without releasing it (killed?).")
    f.seek(0)
    f.truncate()
    f.write(json.dumps(dict(pid=os.getpid(), host=socket.gethostname(), started=time.time(),
                            command=" ".join(sys.argv)[:300])) + "\n")
    f.flush()
    return f


@contextlib.contextmanager
def hold(root_dir, warn=print):
    """Holds ``root_dir``'s lock (creating the directory) while the block runs.

    Raises:
        RunLockError: another process holds it; the message names its process id and host.
    """
    created = not os.path.isdir(root_dir)
    os.makedirs(root_dir, exist_ok=True)
    path = os.path.realpath(lock_path(root_dir))
    with _guard:
        entry = _held.get(path)
        if entry is None:
            try:
                entry = _held[path] = [_acquire(path, root_dir, warn), 0, created]
            except BaseException:
                if created:
                    with contextlib.suppress(OSError):
                        os.rmdir(root_dir)
                raise
        entry[1] += 1
    try:
        yield path
    finally:
        with _guard:
            entry[1] -= 1
            if entry[1] == 0:
                del _held[path]
                with contextlib.suppress(OSError):
                    os.unlink(path)  # while still locked: no other run can hold this file
                entry[0].close()  # releases the flock
                if entry[2]:  # a directory this lock created, left empty (a refused start)
                    with contextlib.suppress(OSError):
                        os.rmdir(root_dir)


def locks_root_dir(function):
    """Decorates a ``train_eval(root_dir, ...)``: its whole call holds ``root_dir``'s lock."""
    signature = inspect.signature(function)

    @functools.wraps(function)
    def locked(*args, **kwargs):
        root_dir = signature.bind_partial(*args, **kwargs).arguments["root_dir"]
        with hold(root_dir):
            return function(*args, **kwargs)

    return locked


__all__ = ["FILENAME", "RunLockError", "hold", "lock_path", "locks_root_dir"]
