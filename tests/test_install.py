"""The package installed from a wheel: one import identity, and the binaries' documented commands.

The top-level folders ``agents/``, ``environments/`` and ``experiments/`` are installed inside the
``keras_relational`` namespace (setup.cfg's ``package_dir``), so every command and import names
``keras_relational.<folder>``, which works the same from a checkout (editable install) and from
the wheel; the bare top-level ``experiments`` package works in neither once outside the
checkout.
"""

import ast
import configparser
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import zipfile

import pytest

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_BINARIES = ("train_boxworld", "play_boxworld", "train_babi", "answer_babi",
             "train_relations_game", "predict_relations", "analyse_relations_game",
             "train_palindromes", "train_rule_learning", "same_colour_demo", "train_char_lm",
             "plot_results", "plot_attention", "train_sc2")


def _setup_cfg():
    config = configparser.ConfigParser()
    config.read(os.path.join(_REPO_ROOT, "setup.cfg"))
    return config


def _package_dirs():
    """``{installed package name: source folder}`` from setup.cfg's ``package_dir``."""
    mapping = {}
    for line in _setup_cfg()["options"]["package_dir"].strip().splitlines():
        name, folder = (part.strip() for part in line.split("="))
        mapping[name] = folder
    return mapping


def test_every_binary_has_a_console_script_calling_its_run():
    scripts = {}
    for line in _setup_cfg()["options.entry_points"]["console_scripts"].strip().splitlines():
        name, target = (part.strip() for part in line.split("="))
        scripts[name] = target
    assert scripts == {name: f"keras_relational.experiments.{name}:run" for name in _BINARIES}
    for name in _BINARIES:  # statically: importing the binaries loads TensorFlow
        with open(os.path.join(_REPO_ROOT, "experiments", f"{name}.py")) as f:
            tree = ast.parse(f.read())
        functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
        assert "run" in functions and not functions["run"].args.args, name
        calls = {ast.unparse(node.func) for node in ast.walk(functions["run"])
                 if isinstance(node, ast.Call)}
        assert "app.run" in calls, (name, calls)


# The bare top-level names (experiments, agents, environments) as a module path: in a command
# (python -m, runpy), an import statement or a ``reference``. They resolve only from the
# checkout's root, and there give a module a second identity.
_BARE_NAME = re.compile(r"(python -m |runpy\.run_module\(\"|^\s*import |^\s*from )"
                        r"(experiments|agents|environments)\b"
                        r"|`(experiments|agents|environments)\.\w")
_MENTION_SUFFIXES = (".py", ".ipynb", ".md", ".cfg", ".toml", ".yml", ".yaml", ".sh")


def _mention_files():
    for root, dirs, files in os.walk(_REPO_ROOT):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in (
            "__pycache__", "build", "dist", "site", "runs") and not d.endswith(".egg-info")]
        for name in files:
            if name.endswith(_MENTION_SUFFIXES) or name == "Makefile":
                yield os.path.join(root, name)


def test_commands_and_imports_name_the_installed_package():
    found = []
    for path in _mention_files():
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if _BARE_NAME.search(line):
                    where = f"{os.path.relpath(path, _REPO_ROOT)}:{number}"
                    found.append(f"{where}: {line.strip()[:160]}")
    assert not found, "use keras_relational.<experiments|agents|environments>:\n" + "\n".join(
        found)


def _stack_site_packages():
    """The folders holding the third-party stack (Keras, absl, NumPy, and torch where it is
    installed: it may live in another folder), never the checkout."""
    folders = []
    torch = ("torch",) if importlib.util.find_spec("torch") is not None else ()
    for module in ("keras", "absl", "numpy", *torch):
        spec = importlib.util.find_spec(module)
        folder = os.path.dirname(os.path.dirname(spec.origin))
        if folder not in folders:
            folders.append(folder)
    assert not any(os.path.realpath(f) == os.path.realpath(_REPO_ROOT) for f in folders)
    return folders


def _run(command, cwd, env_update=None, **kwargs):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    for name in ("PYTHONPATH", "TF_USE_LEGACY_KERAS", "KERAS_BACKEND"):
        env.pop(name, None)
    env.update(env_update or {})
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=240, **kwargs)


def _flag_lines(help_text):
    return sorted(line.strip() for line in help_text.splitlines() if line.startswith("  --"))


@pytest.mark.subprocess
def test_wheel_installs_and_runs_outside_the_checkout(tmp_path):
    # Build from a copy, so setuptools' build/ and *.egg-info never land in the checkout.
    source = tmp_path / "source"
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    for folder in sorted(set(_package_dirs().values())):
        shutil.copytree(os.path.join(_REPO_ROOT, folder), source / folder, ignore=ignore)
    for name in ("setup.cfg", "pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(os.path.join(_REPO_ROOT, name), source / name)
    wheels = tmp_path / "wheels"
    built = _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                  "--no-build-isolation", "-w", str(wheels), str(source)], cwd=tmp_path)
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = wheels.glob("keras_relational-*.whl")

    # Every package folder of the source tree is in the wheel (setup.cfg lists packages by hand).
    names = set(zipfile.ZipFile(wheel).namelist())
    assert any(n.endswith(".dist-info/licenses/LICENSE") or n.endswith(".dist-info/LICENSE")
               for n in names), "the wheel does not ship LICENSE (setup.cfg license_files)"
    for package, folder in _package_dirs().items():
        for root, _, files in os.walk(source / folder):
            if "__init__.py" in files:
                relative = os.path.relpath(root, source / folder)
                installed = os.path.normpath(os.path.join(*package.split("."), relative))
                assert f"{installed}/__init__.py" in names, f"{installed} is not in the wheel"

    # A fresh venv that sees the third-party stack (not the checkout) through a .pth file.
    venv = tmp_path / "venv"
    created = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp_path)
    assert created.returncode == 0, created.stderr[-3000:]
    python = venv / "bin" / "python"
    site_packages = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_path("
                          "'purelib'))"], cwd=tmp_path).stdout.strip()
    with open(os.path.join(site_packages, "_stack.pth"), "w") as f:
        f.write("\n".join(_stack_site_packages()) + "\n")
    installed = _run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
                      "--no-deps", str(wheel)], cwd=tmp_path)
    assert installed.returncode == 0, installed.stderr[-3000:]

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    imported = _run([str(python), "-c", "import sys, keras_relational.environments as e; "
                     "print(e.__file__); print(sorted(m for m in ('keras', 'tensorflow') "
                     "if m in sys.modules))"], cwd=outside)
    assert imported.returncode == 0, imported.stderr[-3000:]
    module_file, heavy = imported.stdout.strip().splitlines()
    assert module_file.startswith(site_packages), module_file  # the wheel's copy
    assert heavy == "[]", heavy

    # absl's --help prints the docstring and the binary's flags, then exits with status 1.
    module_help = _run([str(python), "-m", "keras_relational.experiments.train_boxworld",
                        "--help"], cwd=outside)
    script_help = _run([str(venv / "bin" / "train_boxworld"), "--help"], cwd=outside)
    for result in (module_help, script_help):
        assert result.returncode == 1, result.stderr[-3000:]
        assert "No module named" not in result.stderr, result.stderr[-3000:]
        assert "python -m keras_relational.experiments.train_boxworld" in result.stdout
        assert "--root_dir" in result.stdout, result.stdout[-3000:]
    assert _flag_lines(script_help.stdout) == _flag_lines(module_help.stdout)
    for name in _BINARIES:
        assert (venv / "bin" / name).exists(), name
    _check_documented_install_paths(wheel, python, outside)


# What each install path of the README promises, run in the wheel's venv. The venv sees the
# whole pinned stack (it is offline: nothing is downloaded), so the environments-only path
# blocks Keras and TensorFlow to prove it needs neither.
_BLOCK_HEAVY = """
import sys
class _Blocked:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("keras", "tensorflow", "tf_keras", "jax", "torch"):
            raise ImportError(f"{name} is not installed (envs-only install)")
sys.meta_path.insert(0, _Blocked())
"""
_ENVS_ONLY = _BLOCK_HEAVY + """
import os, sys, numpy as np
from keras_relational import environments
env = environments.BoxWorld(goal_length=1, num_distractors=0, room_size=6, seed=0)
frames = environments.record_episode(env, lambda timestep: np.random.randint(4), max_steps=5)
environments.save_episode(frames, os.path.join(sys.argv[1], "episode.gif"))
bridge = environments.BridgeBoxWorld(seed=0)
assert bridge.reset().observation.shape == (7, 10, 3)
print("envs-only ok", len(frames))
"""
_LAYERS = """
import keras, numpy as np, keras_relational
entities = keras_relational.SpatialEntities()(np.zeros((1, 4, 4, 3), "float32"))
outputs = keras_relational.RelationalModule(num_blocks=1, key_dim=4)(entities)
print(keras.backend.backend(), tuple(outputs.shape))
"""


def _metadata(wheel):
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return archive.read(name).decode()


def _check_documented_install_paths(wheel, python, outside):
    """Each install line of the README (an extra, a backend) as far as it runs offline."""
    metadata = _metadata(wheel)
    for extra in ("tensorflow", "jax", "envs", "rl", "distributed", "plots"):
        assert f"Provides-Extra: {extra}" in metadata, extra
    assert 'Requires-Dist: matplotlib; extra == "plots"' in metadata
    # [envs]: NumPy, dm_env and Pillow only; Keras, TensorFlow, JAX and torch cannot be imported.
    envs_only = _run([str(python), "-c", _ENVS_ONLY, str(outside)], cwd=outside)
    assert envs_only.returncode == 0, envs_only.stderr[-3000:]
    assert "envs-only ok" in envs_only.stdout and (outside / "episode.gif").exists()
    # The layers on TensorFlow (Keras' default backend) and on JAX (KERAS_BACKEND=jax).
    for backend in ("tensorflow", "jax"):
        layers = _run([str(python), "-c", _LAYERS], cwd=outside,
                      env_update={"KERAS_BACKEND": backend})
        assert layers.returncode == 0, layers.stderr[-3000:]
        assert layers.stdout.split()[0] == backend and "(1, 16, 5)" in layers.stdout
    # PyTorch is documented for the layers; it runs only where torch is installed.
    if importlib.util.find_spec("torch") is not None:
        layers = _run([str(python), "-c", _LAYERS], cwd=outside, env_update={
            "KERAS_BACKEND": "torch"})
        assert layers.returncode == 0 and layers.stdout.startswith("torch"), layers.stderr
    # [rl] (with tf-agents --no-deps) and [plots]: the RL library imports, the plotting console
    # script answers.
    rl = _run([str(python), "-c", "import keras_relational.agents.train_eval as t; "
               "print(t.train_eval.__name__)"], cwd=outside)
    assert rl.returncode == 0 and "train_eval" in rl.stdout, rl.stderr[-3000:]
    plots = _run([str(python.parent / "plot_results"), "--help"], cwd=outside)
    assert plots.returncode == 1 and "plot_results ROOT_DIR" in plots.stdout, plots.stderr
