import importlib.util
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("pysc2") is None,
    reason="pysc2 is not installed (optional extra: pip install 'keras-relational[sc2]')")

CHECK = os.path.join(os.path.dirname(__file__), "sc2_mock_check.py")


def test_adapter_conformance_and_agent_on_mock_env():
    # A fresh process: PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python must precede protobuf's import.
    # TensorFlow runs with the pure-Python protobuf; the JAX backend builds this model ~50x slower.
    env = dict(os.environ, PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION="python",
               KERAS_BACKEND="tensorflow")
    result = subprocess.run([sys.executable, CHECK], capture_output=True, text=True, env=env,
                            timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "agent ok" in result.stdout


def test_import_helper_names_the_protobuf_variable():
    code = ("import google.protobuf.internal.api_implementation as a; "
            "from keras_relational.environments.sc2 import import_pysc2; import_pysc2()")
    env = dict(os.environ, PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION="upb")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                            timeout=120)
    assert result.returncode != 0
    assert "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python" in result.stderr
