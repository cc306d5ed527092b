"""tests/op_tracebacks.py: the suite's graphs are built without each op's Python stack."""

import os
import subprocess
import sys

import op_tracebacks
import pytest
import warm_python

tf = pytest.importorskip("tensorflow")  # conftest skips the record only where TensorFlow is

_OP_STACK = """
import tensorflow as tf
graph = tf.Graph()
with graph.as_default():
    op = (tf.constant(1.0) + 1).op
print("stack recorded:", op.traceback is not None)
"""


def test_the_test_process_records_no_op_stack_and_graph_errors_still_name_their_op():
    graph = tf.Graph()
    with graph.as_default():
        op = (tf.constant(1.0) + 1).op
    assert op.traceback is None

    @tf.function
    def gather(values):
        return tf.gather(values, [5])

    with pytest.raises(tf.errors.InvalidArgumentError, match=r"(?s)GatherV2.*not in \[0, 1\)"):
        gather(tf.constant([1.0]))


def test_the_variable_keeps_tensorflows_default(monkeypatch):
    monkeypatch.setenv(op_tracebacks.ENVIRONMENT_VARIABLE, "1")
    assert op_tracebacks.skip_recording() is False


@pytest.mark.subprocess
def test_a_warm_child_builds_graphs_as_the_test_process():
    # The training binaries' environment: their server, not one more importing TensorFlow.
    done = warm_python.run([sys.executable, "-c", _OP_STACK], capture_output=True, text=True,
                           timeout=300, env=warm_python.binary_env())
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "stack recorded: False"


@pytest.mark.subprocess
def test_the_test_process_imports_no_tensorflow_for_it():
    # A test process under JAX (the JAX-backend pytest runs) stays without TensorFlow; the
    # record is skipped when something imports it.
    code = ("import sys, conftest; import keras; print(keras.backend.backend(), "
            "'tensorflow' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, cwd=os.path.dirname(os.path.abspath(__file__)),
                          env=dict(os.environ, KERAS_BACKEND="jax"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "jax False"
