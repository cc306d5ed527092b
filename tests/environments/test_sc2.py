import importlib.util
import json
import math
import os
import subprocess
import sys

import pytest
import warm_python

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("pysc2") is None,
    reason="pysc2 is not installed (optional extra: pip install 'keras-relational[sc2]')")

CHECK = os.path.join(os.path.dirname(__file__), "sc2_mock_check.py")
POLICY_CHECK = os.path.join(os.path.dirname(__file__), "sc2_policy_check.py")
TF_AGENTS_CHECK = os.path.join(os.path.dirname(__file__), "sc2_tf_agents_check.py")
RESUME_CHECK = os.path.join(os.path.dirname(__file__), "sc2_resume_check.py")
SIZE = 8
# The checks' environment: the pure-Python protobuf (pysc2's protos) from the first import on,
# TensorFlow's Keras. Their processes fork from a server that imported Keras with it
# (tests/warm_python.py), as each check imports Keras anyway.
_CHECK_ENV = dict(PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION="python", KERAS_BACKEND="tensorflow")


def _run_check(*args, timeout):
    return warm_python.run([sys.executable, *args], capture_output=True, text=True,
                           env=dict(os.environ, **_CHECK_ENV), timeout=timeout)


def test_adapter_conformance_and_agent_on_mock_env():
    # A process of its own: PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python must precede
    # protobuf's import. TensorFlow runs with the pure-Python protobuf; the JAX backend builds
    # this model ~50x slower.
    result = _run_check(CHECK, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "agent ok" in result.stdout


def test_tf_agents_train_steps_through_a_driver_on_mock_env():
    # The TF-Agents route (V-trace agent, composite target, PyDriver with the two-stage
    # policy) on pysc2's mock, in a process of its own for the protobuf variable; the generous
    # limit is for a loaded machine.
    result = _run_check(TF_AGENTS_CHECK, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "train step 2: loss" in result.stdout and "tf_agents ok" in result.stdout


@pytest.mark.slow
def test_a_resumed_mock_run_ends_with_the_uninterrupted_runs_weights():
    # train_eval cut by max_seconds and resumed on pysc2's mock (its state is checkpointed),
    # in a process of its own for the protobuf variable.
    result = _run_check(RESUME_CHECK, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Resuming from" in result.stdout and "resume ok" in result.stdout


def test_import_helper_names_the_protobuf_variable():
    code = ("import google.protobuf.internal.api_implementation as a; "
            "from keras_relational.environments.sc2 import import_pysc2; import_pysc2()")
    env = dict(os.environ, PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION="upb")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                            timeout=120)
    assert result.returncode != 0
    assert "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python" in result.stderr


@pytest.mark.slow
@pytest.mark.subprocess
def test_train_sc2_mock_trains_exports_and_a_fresh_process_serves_the_policy(tmp_path):
    # The binary sets the protobuf variable itself; eager updates skip the long graph trace.
    env = dict(os.environ, KERAS_BACKEND="tensorflow")
    env.pop("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", None)
    command = [sys.executable, "-m", "keras_relational.experiments.train_sc2",
               f"--root_dir={tmp_path}", "--mock", "--map=DefeatRoaches", "--num_envs=2",
               "--unroll_length=3", "--num_iterations=1", f"--screen_size={SIZE}",
               "--tiny_model", "--compile_mode=eager", "--mock_episode_length=2"]
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "update 1: loss" in result.stdout
    with open(tmp_path / "result.json") as f:
        summary = json.load(f)
    assert summary["updates"] == 1 and summary["episodes"] >= 2  # 2-step episodes
    assert all(math.isfinite(value) for value in summary["loss"].values())
    served = subprocess.run([sys.executable, POLICY_CHECK, summary["policy_dir"], str(SIZE)],
                            capture_output=True, text=True, env=env, timeout=600)
    assert served.returncode == 0, served.stdout[-3000:] + served.stderr[-3000:]
    assert "policy ok" in served.stdout
