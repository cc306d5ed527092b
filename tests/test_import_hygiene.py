"""`import keras_relational` leaves tf.keras alone; `keras_relational.agents` routes it."""

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.subprocess

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_python(code, **env_overrides):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("TF_USE_LEGACY_KERAS", None)
    env.pop("KERAS_BACKEND", None)
    env.update(env_overrides)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, cwd=_REPO_ROOT,
                          capture_output=True, text=True, timeout=300)


def test_layer_package_does_not_touch_tf_keras():
    result = run_python("""
        import os
        import keras_relational
        assert "TF_USE_LEGACY_KERAS" not in os.environ, os.environ["TF_USE_LEGACY_KERAS"]
        import tensorflow as tf
        module = tf.keras.layers.Dense.__module__
        assert module.startswith("keras."), module   # Keras 3, as without our package
        print("ok")
    """)
    assert result.returncode == 0, result.stderr[-3000:]


def test_layer_package_imports_fast_once_tensorflow_is_cached():
    # The first run warms the OS file cache; the measured runs import keras (and with it
    # TensorFlow, the backend) and then keras_relational, timing each part in-process.
    code = """
        import time
        start = time.perf_counter()
        import keras
        middle = time.perf_counter()
        import keras_relational
        end = time.perf_counter()
        print(end - start, end - middle)
    """
    run_python(code)
    timings = []
    for _ in range(2):
        result = run_python(code)
        assert result.returncode == 0, result.stderr[-3000:]
        timings.append([float(v) for v in result.stdout.split()])
    total, own = min(t[0] for t in timings), min(t[1] for t in timings)
    print(f"import keras_relational: {total:.2f} s in all, {own:.2f} s for our own modules")
    assert total < 5.0, f"import keras_relational took {total:.2f} s (limit 5 s)"
    assert own < 1.0, f"our own modules took {own:.2f} s to import (limit 1 s)"


def test_agents_routes_tf_keras_to_tf_keras():
    # The layer package (and so Keras 3 and TensorFlow) is imported first, then the agents, then
    # TF-Agents, which uses `import tensorflow.keras` as well as the `tf.keras` attribute.
    result = run_python("""
        import os
        import keras
        import keras_relational
        import keras_relational.agents
        assert os.environ["TF_USE_LEGACY_KERAS"] == "1"
        import tensorflow as tf
        import tf_agents.networks
        import tensorflow.keras as tensorflow_keras
        for module in (tf.keras.layers.Dense.__module__, tf.keras.optimizers.Adam.__module__,
                       tensorflow_keras.optimizers.RMSprop.__module__):
            assert module.startswith("tf_keras."), module
        assert keras.__version__.startswith("3."), keras.__version__  # Keras 3 still there
        print("ok")
    """)
    assert result.returncode == 0, result.stderr[-3000:]


def test_agents_fails_clearly_when_tf_keras_is_already_keras3():
    result = run_python("""
        import tensorflow as tf
        tf.keras.layers.Dense   # materialises tf.keras as Keras 3
        import keras_relational.agents
    """)
    assert result.returncode != 0
    assert "LegacyKerasError" in result.stderr
    assert "already resolved to Keras 3" in result.stderr


def test_agents_fails_clearly_when_flag_is_switched_off():
    result = run_python("import keras_relational.agents", TF_USE_LEGACY_KERAS="0")
    assert result.returncode != 0
    assert "TF_USE_LEGACY_KERAS='0'" in result.stderr
