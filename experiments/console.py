"""The binaries' console scripts print the same ``--help`` as ``python -m`` does.

absl's ``--help`` prints ``__main__``'s docstring and key flags. Under ``python -m
keras_relational.experiments.train_boxworld`` the binary is ``__main__``; under the installed
``train_boxworld`` console script ``__main__`` is a generated wrapper with neither, so each
binary's ``run()`` calls ``adopt_main_help(__name__)`` before ``absl.app.run(main)``.

:func:`quiet_dependencies` keeps the binaries' consoles free of known-harmless third-party
start-up messages (``--verbose_dependencies`` shows them); :func:`quiet_tensorflow_startup` does
the same for notebooks. The binaries' flag checks are
:mod:`keras_relational.experiments.flag_checks`.
"""

import os
import sys
import warnings

from absl import flags, logging


def adopt_main_help(module_name):
    """Gives ``__main__`` the docstring and key flags of the binary ``module_name``.

    A no-op when the binary itself is ``__main__`` (``python -m``).
    """
    main_module = sys.modules["__main__"]
    binary = sys.modules[module_name]
    if binary is main_module:
        return
    main_module.__doc__ = binary.__doc__
    for flag in flags.FLAGS.get_key_flags_for_module(module_name):
        flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)


# --- Quiet dependencies: the binaries' start-up noise ---------------------------------------
# Known-harmless messages of our dependencies that a binary hides unless --verbose_dependencies
# is given. Library users who import the package see everything: only binaries call
# quiet_dependencies(), at their start.
VERBOSE_DEPENDENCIES_FLAG = "verbose_dependencies"
# Python warnings (category, message regex) that are known to be harmless.
_HARMLESS_WARNINGS = (
    # TensorFlow Probability's distributions at SavedModel export (PolicySaver): their
    # parameters are not StructuredValue-encodable; the exported policies do not need them.
    (UserWarning, r"Encoding a StructuredValue with type tfp\."),
)
# TensorFlow's C++ logs written after absl::InitializeLog (XLA banners, runtime warnings):
# 2 hides INFO and WARNING; errors still show.
_TF_CPP_MIN_LOG_LEVEL = "2"


# C++ lines that TF_CPP_MIN_LOG_LEVEL does not reach, matched per line: TensorFlow 2.21 writes
# the logs of its shared libraries' start-up before absl::InitializeLog, straight to stderr
# whatever the level: absl's banner, CUDA probing on a machine without a GPU driver, and the
# oneDNN notice (twice per TensorFlow import) on CPUs where oneDNN is on by default (those with
# AVX512_VNNI, AVX512_BF16 or AMX; on older CPUs TensorFlow prints no notice).
HARMLESS_STDERR_LINES = (
    r"WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR",
    r"[IW]\d{4} [^\n]*port\.cc:\d+\] oneDNN custom operations are on\. ",
    r"[IW]\d{4} [^\n]*cudart_stub\.cc:\d+\] Could not find cuda drivers on your machine",
    r"E\d{4} [^\n]*cuda_platform\.cc:\d+\] failed call to cuInit",
    r"[IW]\d{4} [^\n]*cpu_feature_guard\.cc:\d+\] ",
    r"To enable the following instructions: .* rebuild TensorFlow with the appropriate compiler",
)
# The filter process: copies its stdin (the binary's stderr) to its stdout (the real stderr)
# line by line, dropping the lines above. A separate process, not a thread, so that whatever
# the binary writes before a crash still comes out; it ignores Ctrl-C (the binary gets it) and
# ends when the last writer closes the pipe.
_FILTER_SOURCE = """
import re, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
harmless = re.compile(sys.argv[1].encode())
out = sys.stdout.buffer
for line in sys.stdin.buffer:
    if not harmless.match(line):
        out.write(line)
        out.flush()
"""


def _filter_stderr(patterns):
    """Routes file descriptor 2 through a filter process dropping lines matching ``patterns``."""
    import atexit
    import subprocess

    try:
        real_stderr = os.dup(2)
        read_end, write_end = os.pipe()
        process = subprocess.Popen(
            [sys.executable, "-c", _FILTER_SOURCE, "|".join(f"(?:{p})" for p in patterns)],
            stdin=read_end, stdout=real_stderr, stderr=real_stderr, close_fds=True)
    except OSError:
        return None  # no filter: the messages stay visible
    sys.stderr.flush()
    os.dup2(write_end, 2)
    for fd in (read_end, write_end):
        os.close(fd)

    def restore():  # at a normal exit: the filter prints everything before the process ends
        try:
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        os.dup2(real_stderr, 2)
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:  # a child process still holds the pipe open
            pass

    atexit.register(restore)
    return process


def _verbose_requested(argv):
    return any(arg in (f"--{VERBOSE_DEPENDENCIES_FLAG}", f"--{VERBOSE_DEPENDENCIES_FLAG}=true",
                       f"--{VERBOSE_DEPENDENCIES_FLAG}=1") for arg in argv[1:])


def _silence_gym_notice():
    """gym prints an "unmaintained" notice on import (read from gym_notices); TF-Agents imports
    gym, our binaries never use it. An empty notices table keeps it quiet."""
    import types

    if "gym" in sys.modules or "gym_notices.notices" in sys.modules:
        return
    notices = types.ModuleType("gym_notices.notices")
    notices.notices = {}
    package = types.ModuleType("gym_notices")
    package.notices = notices
    sys.modules["gym_notices"] = package
    sys.modules["gym_notices.notices"] = notices


def quiet_dependencies(module_name, argv=None):
    """Hides known-harmless third-party start-up messages in a binary (not in the library).

    Call it first thing in a binary module, before TensorFlow is imported:
    ``console.quiet_dependencies(__name__)``. It acts only when that module is the program being
    run (``python -m ...`` or its console script), never when it is imported, and not with
    ``--verbose_dependencies``. It sets ``TF_CPP_MIN_LOG_LEVEL=2`` (unless already set:
    TensorFlow's C++ INFO and WARNING logs), drops the C++ lines of
    :data:`HARMLESS_STDERR_LINES` from standard error (the start-up lines that level does not
    reach: the oneDNN notice, CUDA probing without a GPU driver, absl's pre-initialisation
    banner), hides gym's "unmaintained" notice and TensorFlow Probability's
    ``UserWarning`` s at SavedModel export, and lowers absl's Python logging to errors. It also
    defines the ``--verbose_dependencies`` flag.

    Returns:
        True when the messages were quieted.
    """
    argv = sys.argv if argv is None else argv
    owner = argv[0] if module_name == "__main__" else module_name
    if VERBOSE_DEPENDENCIES_FLAG not in flags.FLAGS:
        flags.DEFINE_bool(VERBOSE_DEPENDENCIES_FLAG, False,
                          "Show the start-up messages of TensorFlow, CUDA, gym and TensorFlow "
                          "Probability that the binary hides by default.", module_name=owner)
    program = os.path.basename(argv[0]) if argv else ""
    if module_name != "__main__" and program != module_name.rsplit(".", 1)[-1]:
        return False  # imported, not run: library behaviour
    if _verbose_requested(argv):
        return False
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", _TF_CPP_MIN_LOG_LEVEL)
    for category, message in _HARMLESS_WARNINGS:
        warnings.filterwarnings("ignore", message=message, category=category)
    _silence_gym_notice()
    logging.set_verbosity(logging.ERROR)
    _filter_stderr(HARMLESS_STDERR_LINES)
    return True
def quiet_tensorflow_startup():
    """Imports TensorFlow (where installed) with its start-up lines hidden, for notebooks.

    TensorFlow writes :data:`HARMLESS_STDERR_LINES` (the oneDNN notice, CUDA probing without a
    GPU driver, absl's pre-initialisation banner) to file descriptor 2 while it loads, before
    ``TF_CPP_MIN_LOG_LEVEL`` applies; a notebook shows them in the cell's output. This sets
    ``TF_CPP_MIN_LOG_LEVEL=2`` (unless set), imports TensorFlow with descriptor 2 sent to a
    temporary file, and writes back every captured line but those. A no-op where TensorFlow is
    not installed or already imported.

    Returns:
        The number of lines hidden.
    """
    import importlib.util
    import re
    import tempfile

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", _TF_CPP_MIN_LOG_LEVEL)
    if "tensorflow" in sys.modules or importlib.util.find_spec("tensorflow") is None:
        return 0
    harmless = re.compile("|".join(f"(?:{p})" for p in HARMLESS_STDERR_LINES))
    with tempfile.TemporaryFile() as captured:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(captured.fileno(), 2)
        try:
            import tensorflow  # noqa: F401
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
        captured.seek(0)
        lines = captured.read().decode(errors="replace").splitlines(keepends=True)
    kept = [line for line in lines if not harmless.match(line)]
    if kept:
        sys.stderr.write("".join(kept))
    return len(lines) - len(kept)
