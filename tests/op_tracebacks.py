"""TensorFlow's graph building in the suite's processes, without each op's Python stack.

Graph mode records the Python stack of every op it creates (``tf_stack.extract_stack`` in
``ops._create_c_op``), only for the "defined at" lines of an error raised later by that op. In
the suite's TF-Agents and Keras runs, which build their graphs over and over at tiny scale, that
record was 11-15 % of a test file's CPU (tests/agents/test_presets.py, test_train_eval.py plus
experiments/test_train_babi.py, measured with and without on a 2-core machine). The test process
(tests/conftest.py, once it imports TensorFlow: a process under JAX never does) and the warm
fork servers' children (tests/warm_python.py) build graphs without it; nothing the tests check
reads an op's stack. ``KERAS_RELATIONAL_TF_OP_TRACEBACKS=1`` keeps TensorFlow's default, for a
graph error's full message.
"""

import functools
import importlib.abc
import importlib.util
import inspect
import os
import sys

_OPS = "tensorflow.python.framework.ops"

ENVIRONMENT_VARIABLE = "KERAS_RELATIONAL_TF_OP_TRACEBACKS"


def skip_recording():
    """Makes the imported TensorFlow create graph ops without recording their Python stack.

    Returns whether it did: not with ``KERAS_RELATIONAL_TF_OP_TRACEBACKS=1``. Raises where this
    TensorFlow's ``ops._create_c_op`` takes no ``extract_traceback`` (a TensorFlow other than
    the pinned one), rather than silently measuring another suite.
    """
    if os.environ.get(ENVIRONMENT_VARIABLE) == "1":
        return False
    from tensorflow.python.framework import ops

    create = ops._create_c_op
    if isinstance(create, functools.partial):  # already done in this process
        return True
    if "extract_traceback" not in inspect.signature(create).parameters:
        raise RuntimeError(
            f"tests/op_tracebacks.py: this TensorFlow's ops._create_c_op has no extract_traceback "
            f"argument (its signature: {inspect.signature(create)}); update the helper or set "
            f"{ENVIRONMENT_VARIABLE}=1")
    ops._create_c_op = functools.partial(create, extract_traceback=False)
    return True


class _AfterTensorFlowOps(importlib.abc.MetaPathFinder):
    """Finds TensorFlow's ``ops`` module as Python would, applies :func:`skip_recording` as soon
    as the module has run, and leaves ``sys.meta_path``."""

    def find_spec(self, name, path=None, target=None):
        if name != _OPS:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        execute = spec.loader.exec_module

        def exec_module(module):
            execute(module)
            skip_recording()

        spec.loader.exec_module = exec_module
        return spec


def skip_recording_once_imported():
    """:func:`skip_recording` when this process imports TensorFlow (at once if it has), without
    importing it: a test process under JAX stays without TensorFlow."""
    if _OPS in sys.modules:
        skip_recording()
    else:
        sys.meta_path.insert(0, _AfterTensorFlowOps())
