"""console.quiet_dependencies: binaries hide known-harmless dependency noise, libraries never."""

import os
import subprocess
import sys

from keras_relational.experiments import console

_NOISY_PROGRAM = """
import os, sys, warnings
sys.argv = ["/venv/bin/train_boxworld"] + sys.argv[1:]
from keras_relational.experiments import console
print("quieted", console.quiet_dependencies("keras_relational.experiments.train_boxworld"))
sys.stdout.flush()
os.write(2, b"I0000 00:00:17.4 42 port.cc:153] oneDNN custom operations are on. You may see "
            b"slightly different numerical results due to floating-point round-off errors.\\n")
os.write(2, b"I0000 00:00:17.5 42 cudart_stub.cc:31] Could not find cuda drivers on your "
            b"machine, GPU will not be used.\\n")
os.write(2, b"E0000 00:00:17.6 42 cuda_platform.cc:52] failed call to cuInit: INTERNAL\\n")
os.write(2, b"a real error\\n")
warnings.warn("Encoding a StructuredValue with type tfp.distributions.Categorical_ACTTypeSpec",
              UserWarning)
warnings.warn("another warning", UserWarning)
"""


def _run(*args):
    env = dict(os.environ)
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)
    return subprocess.run([sys.executable, "-c", _NOISY_PROGRAM, *args], capture_output=True,
                          text=True, timeout=120, env=env)


def test_a_binary_hides_the_known_noise_and_keeps_everything_else():
    quiet = _run()
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stdout.strip() == "quieted True"
    assert "a real error" in quiet.stderr and "another warning" in quiet.stderr
    for noise in ("oneDNN", "cudart_stub", "cuInit", "StructuredValue"):
        assert noise not in quiet.stderr, quiet.stderr
    verbose = _run("--verbose_dependencies")
    assert verbose.stdout.strip() == "quieted False"
    for line in ("oneDNN", "cudart_stub", "cuInit", "StructuredValue", "a real error"):
        assert line in verbose.stderr, verbose.stderr


def test_importing_a_binary_module_changes_nothing(monkeypatch):
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    assert not console.quiet_dependencies("keras_relational.experiments.train_boxworld",
                                          argv=["/venv/bin/pytest", "-q"])
    assert "TF_CPP_MIN_LOG_LEVEL" not in os.environ
    assert console.VERBOSE_DEPENDENCIES_FLAG in console.flags.FLAGS  # the flag exists anyway
