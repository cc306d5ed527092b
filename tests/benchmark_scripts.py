"""The scripts of ``benchmarks/`` as the tests use them: a script's path (to run it), and the
script imported as a module, the way its own run imports it.

``benchmarks/`` is a folder of scripts, not a package: most run as ``python benchmarks/<name>.py``
and import their neighbours by name (``import results_io``, the soak's ``import random_kills``);
a few run as ``python -m benchmarks.<name>`` from the repository root and import theirs as
``from benchmarks import results_io``. :func:`load` puts both folders on ``sys.path`` (appended,
so a script's name never hides an installed module) and imports a script under the name its
neighbours use (``benchmarks.<name>`` for a script that imports ``from benchmarks``), once a
process: a test and the scripts share one module, and absl flags are defined once. A script's
top may set variables for its own process (``KERAS_BACKEND`` before Keras loads); the test
process's environment is restored after the import, or every later subprocess of the worker
would inherit them.
"""

import importlib
import os
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCHMARKS = os.path.join(REPO_ROOT, "benchmarks")


def path(name):
    """``benchmarks/<name>.py``'s path; a name that is not a script there is refused."""
    script = os.path.join(BENCHMARKS, f"{name}.py")
    if not os.path.isfile(script):
        raise FileNotFoundError(f"benchmark_scripts expects the name of a script in "
                                f"{BENCHMARKS} (without .py), received {name!r}.")
    return script


def load(name):
    """``benchmarks/<name>.py`` imported as the module ``<name>`` (``benchmarks.<name>`` for a
    script run with ``-m``), the same object on every call in a process, with the process's
    environment as it was before the import."""
    with open(path(name)) as f:
        run_as_module = "from benchmarks import" in f.read()  # `python -m benchmarks.<name>`
    for folder in (BENCHMARKS, REPO_ROOT):  # `import results_io` / `from benchmarks import ...`
        if folder not in sys.path:
            sys.path.append(folder)
    environment = dict(os.environ)
    try:
        module = importlib.import_module(f"benchmarks.{name}" if run_as_module else name)
    finally:
        if os.environ != environment:
            os.environ.clear()
            os.environ.update(environment)
    if os.path.realpath(getattr(module, "__file__", "") or "") != os.path.realpath(path(name)):
        raise ImportError(f"benchmark_scripts.load({name!r}) imported {module!r}, not "
                          f"{path(name)}: another module of that name comes first on sys.path.")
    return module
