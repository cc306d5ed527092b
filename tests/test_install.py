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
_BINARIES = ("train_boxworld", "play_boxworld", "train_babi", "train_relations_game",
             "train_palindromes", "train_rule_learning", "same_colour_demo")


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
    """The folders holding the third-party stack (Keras, absl, NumPy), never the checkout."""
    folders = []
    for module in ("keras", "absl", "numpy"):
        spec = importlib.util.find_spec(module)
        folder = os.path.dirname(os.path.dirname(spec.origin))
        if folder not in folders:
            folders.append(folder)
    assert not any(os.path.realpath(f) == os.path.realpath(_REPO_ROOT) for f in folders)
    return folders


def _run(command, cwd, **kwargs):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    for name in ("PYTHONPATH", "TF_USE_LEGACY_KERAS", "KERAS_BACKEND"):
        env.pop(name, None)
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
