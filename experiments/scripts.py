"""The console scripts: one function per binary that imports the binary only when it runs.

A binary imports its dependencies (TensorFlow, dm_env, TF-Agents, matplotlib, ...) when its
module loads, before its ``run()`` could catch anything, or (the training binaries, whose flags
need no Keras) inside its ``main()``; so each console script (setup.cfg's ``console_scripts``) is
a function here that imports the binary and calls its ``run()``, and turns a missing third-party
dependency raised by either into one line naming the extra that installs it
(``pip install "keras-relational[rl]"``) or, where Keras' default TensorFlow backend is missing
but another backend is installed, the variable to set (``KERAS_BACKEND=jax``). This module
imports nothing beyond the standard library.
"""

import importlib
import importlib.util
import os
import sys

# One console script per binary, named after it (setup.cfg's console_scripts).
BINARIES = ("train_boxworld", "play_boxworld", "train_babi", "answer_babi",
            "train_relations_game", "predict_relations", "analyse_relations_game",
            "train_palindromes", "train_rule_learning", "same_colour_demo", "train_char_lm",
            "plot_results", "plot_attention", "train_sc2")

# The top-level module of each third-party dependency the binaries import -> the extra of
# setup.cfg that installs it.
EXTRA_OF_MODULE = {
    "tensorflow": "tensorflow",
    "jax": "jax",
    "jaxlib": "jax",
    "dm_env": "envs",
    "tree": "envs",
    "PIL": "envs",
    "tf_agents": "rl",
    "tf_keras": "rl",
    "tensorflow_probability": "rl",
    "tensorboard": "rl",
    "gym": "rl",
    "gin": "rl",
    "cloudpickle": "rl",
    "matplotlib": "plots",
    "ray": "distributed",
    "pysc2": "sc2",
    "s2clientprotocol": "sc2",
    "ale_py": "atari",
}
# TF-Agents' metadata cannot resolve next to the rl extra's pins: it goes in without its deps
# (docs/install.md).
TF_AGENTS_LINE = "pip install --no-deps tf-agents==0.19.0"
# Keras backends other than TensorFlow that a user may have installed instead.
_OTHER_BACKENDS = ("jax", "torch")


def install_line(extra):
    """The command that installs ``extra`` (with TF-Agents for ``rl``)."""
    line = f'pip install "keras-relational[{extra}]"'
    return f"{line} && {TF_AGENTS_LINE}" if extra == "rl" else line


def _raised_by_keras_backend(error):
    """Whether ``error`` came from Keras loading its backend (not from our own import)."""
    backend_folder = os.path.join("keras", "src", "backend", "")
    traceback = error.__traceback__
    while traceback is not None:
        if backend_folder in traceback.tb_frame.f_code.co_filename:
            return True
        traceback = traceback.tb_next
    return False


def missing_dependency_message(program, error, environ=None):
    """One line for ``error`` (a ``ModuleNotFoundError``) raised while running ``program``:
    what is missing and what to install or set; None when ``error`` is not about one of the
    known third-party dependencies (then it is a bug, and its traceback should show)."""
    environ = os.environ if environ is None else environ
    name = (getattr(error, "name", None) or "").split(".")[0]
    extra = EXTRA_OF_MODULE.get(name)
    if extra is None:
        return None
    if name == "tensorflow" and _raised_by_keras_backend(error) and environ.get(
            "KERAS_BACKEND", "tensorflow") == "tensorflow":
        # Keras loads its default backend, TensorFlow, on import: with JAX or PyTorch installed
        # instead, the user has to name that backend.
        others = [b for b in _OTHER_BACKENDS if importlib.util.find_spec(b) is not None]
        if others:
            return (f"{program}: No module named 'tensorflow', Keras' default backend: set "
                    f"KERAS_BACKEND={others[0]} (installed), or install TensorFlow: "
                    f"{install_line('tensorflow')}")
    return f"{program}: No module named '{name}': {install_line(extra)}"


def launch(program):
    """Imports the binary ``program`` and calls its ``run()``; a missing dependency ends the
    program with one line (exit status 1) instead of a traceback."""
    try:
        binary = importlib.import_module(f"keras_relational.experiments.{program}")
        binary.run()
    except ModuleNotFoundError as error:
        message = missing_dependency_message(program, error)
        if message is None:
            raise
        sys.exit(message)


def _console_script(program):
    def script():
        launch(program)

    script.__name__ = script.__qualname__ = program
    script.__doc__ = f"The ``{program}`` console script."
    return script


for _program in BINARIES:
    globals()[_program] = _console_script(_program)
del _program
