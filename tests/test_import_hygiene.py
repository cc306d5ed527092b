"""`import keras_relational` and the agents' shared core leave tf.keras alone; only the
TF-Agents trainer (`keras_relational.agents.tf_agents`) routes it to tf-keras. The supervised
binaries define and check their flags without loading Keras, TensorFlow or JAX."""

import json
import os
import subprocess
import sys
import textwrap

import benchmark_scripts
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


# Each supervised binary -> a bad value of one of its enum flags and the absl error it gives.
_BAD_ENUM_FLAGS = {
    "train_relations_game": ("--central=nope", "flag --central=nope: value should be one of "
                             "<predinet|mlp1|mlp2|relation_net|mha>"),
    "train_babi": ("--operations=nope", "flag --operations=nope: value should be one of "
                   "<W|W+M|W+B|W+M+B>"),
    "train_char_lm": ("--dtype_policy=nope", "flag --dtype_policy=nope: value should be one of "
                      "<float32|mixed_bfloat16|mixed_float16>"),
    "train_palindromes": ("--distribution_strategy=nope", "flag --distribution_strategy=nope: "
                          "value should be one of <default|mirrored|multi_worker|tpu|"
                          "data_parallel>"),
    "train_rule_learning": ("--distribution_strategy=nope", "flag --distribution_strategy=nope"),
    "same_colour_demo": ("--distribution_strategy=nope", "flag --distribution_strategy=nope"),
}
# Imports every console-script binary in turn (removing its flags before the next one), parses
# the flags of those in BAD, good and bad, and prints {binary: [heavy modules loaded, the good
# parse's error, the bad one's]} (no errors where it parsed nothing).
_IMPORT_AND_PARSE = """
    import importlib, json, sys
    from absl import flags
    from keras_relational.experiments import scripts
    HEAVY = ("keras", "tensorflow", "jax", "matplotlib", "tf_agents", "torch")
    results = {}
    for binary in scripts.BINARIES:
        before = set(flags.FLAGS)
        importlib.import_module("keras_relational.experiments." + binary)
        errors = []
        for extra in ([], [BAD[binary]]) if binary in BAD else ():
            flags.FLAGS.unparse_flags()
            try:
                flags.FLAGS(["binary", "--root_dir=/tmp/unused", *extra])
                errors.append(None)
            except flags.Error as error:
                errors.append(str(error))
        results[binary] = [sorted(m for m in sys.modules if m.split(".")[0] in HEAVY), *errors]
        for name in set(flags.FLAGS) - before:
            delattr(flags.FLAGS, name)
    print("RESULTS" + json.dumps(results))
"""


def test_binaries_define_and_check_their_flags_without_keras():
    # The binaries import their training libraries (Keras, TensorFlow, JAX, matplotlib,
    # TF-Agents) inside main(), so --help and a bad flag answer at once, before any of them loads.
    from keras_relational.experiments import scripts

    bad = {binary: flag for binary, (flag, _) in _BAD_ENUM_FLAGS.items()}
    result = run_python(f"BAD = {bad!r}\n" + textwrap.dedent(_IMPORT_AND_PARSE))
    assert result.returncode == 0, result.stderr[-3000:]
    results = json.loads(result.stdout.split("RESULTS", 1)[1])
    assert list(results) == list(scripts.BINARIES) and len(results) == 14, list(results)
    for binary, (heavy, *errors) in results.items():
        assert heavy == [], (binary, heavy)
        if binary not in _BAD_ENUM_FLAGS:
            assert errors == [], (binary, errors)
            continue
        good_error, bad_error = errors
        assert good_error is None, (binary, good_error)
        assert bad_error is not None and bad_error.startswith(_BAD_ENUM_FLAGS[binary][1]), (
            binary, bad_error)


def test_a_bad_enum_flag_is_absl_error_naming_the_choices():
    result = subprocess.run(
        [sys.executable, "-m", "keras_relational.experiments.train_relations_game",
         "--root_dir=/tmp/unused", "--central=nope"],
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), cwd=_REPO_ROOT, capture_output=True,
        text=True, timeout=300)
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert ("FATAL Flags parsing error: flag --central=nope: value should be one of "
            "<predinet|mlp1|mlp2|relation_net|mha>") in result.stderr, result.stderr[-3000:]


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


def test_the_shared_core_and_the_compiled_trainer_have_no_import_side_effect():
    # The compiled trainer needs no TensorFlow: importing it (and every module of the shared
    # core) must neither set TF_USE_LEGACY_KERAS nor touch tf.keras; nor may it import TF-Agents.
    result = run_python("""
        import os
        import sys
        import keras_relational.agents
        from keras_relational.agents import config, curves, networks, optimizers, play, presets
        from keras_relational.agents import vtrace
        from keras_relational.agents.compiled import train_eval
        from keras_relational.agents.sc2 import train_eval as sc2_train_eval
        assert "TF_USE_LEGACY_KERAS" not in os.environ, os.environ["TF_USE_LEGACY_KERAS"]
        assert "tf_agents" not in sys.modules
        assert "keras_relational.agents.tf_agents" not in sys.modules
        import tensorflow as tf
        module = tf.keras.layers.Dense.__module__
        assert module.startswith("keras."), module   # Keras 3, as without our package
        print("ok")
    """, KERAS_BACKEND="tensorflow")
    assert result.returncode == 0, result.stderr[-3000:]


def test_layer_package_adds_little_to_the_keras_import():
    """Our own modules must not add to the import time (no heavy work at import).

    The absolute time of `import keras_relational` (< 5 s once TensorFlow is cached) is dominated
    by TensorFlow and is a machine-dependent speed figure: it is measured by
    benchmarks/import_time.py on an idle machine and reported in the README, not asserted here,
    where parallel test workers share the cores.
    """
    import_time = benchmark_scripts.load("import_time")
    # No warm-up process: this test process has imported Keras and TensorFlow already.
    total, own = import_time.measure(repeats=2, warm_up=False)
    assert len(own) == 2
    print(f"import keras_relational: {min(total):.2f} s in all, {min(own):.3f} s for our modules")
    assert min(own) < 1.0, f"our own modules took {min(own):.2f} s to import (limit 1 s)"


def test_the_tf_agents_trainer_routes_tf_keras_to_tf_keras():
    # The layer package (and so Keras 3 and TensorFlow) is imported first, then the agents, then
    # TF-Agents, which uses `import tensorflow.keras` as well as the `tf.keras` attribute.
    result = run_python("""
        import os
        import keras
        import keras_relational
        import keras_relational.agents.tf_agents
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
        import keras_relational.agents.tf_agents
    """)
    assert result.returncode != 0
    assert "LegacyKerasError" in result.stderr
    assert "already resolved to Keras 3" in result.stderr


def test_agents_fails_clearly_when_flag_is_switched_off():
    result = run_python("import keras_relational.agents.tf_agents", TF_USE_LEGACY_KERAS="0")
    assert result.returncode != 0
    assert "TF_USE_LEGACY_KERAS='0'" in result.stderr
