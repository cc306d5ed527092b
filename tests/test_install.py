"""The package installed from a wheel: one import identity, and the binaries' documented commands.

The top-level folders ``agents/``, ``environments/`` and ``experiments/`` are installed inside the
``keras_relational`` namespace (setup.cfg's ``package_dir``), so every command and import names
``keras_relational.<folder>``, which works the same from a checkout (editable install) and from
the wheel; the bare top-level ``experiments`` package works in neither once outside the
checkout.
"""

import ast
import concurrent.futures
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
    # experiments/scripts.py imports the binary inside the console script (a missing dependency
    # is one line naming its extra) and calls its run().
    assert scripts == {name: f"keras_relational.experiments.scripts:{name}" for name in _BINARIES}
    from keras_relational.experiments import scripts as scripts_module

    assert set(scripts_module.BINARIES) == set(_BINARIES)
    assert all(callable(getattr(scripts_module, name)) for name in _BINARIES)
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
    _check_console_scripts_in_each_install_variant(wheel, venv, outside)


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
# [gymnasium]: the Gymnasium door needs neither Keras nor TensorFlow nor JAX; importing the
# environments package does not import Gymnasium, the door's module registers the ids.
_GYMNASIUM = _BLOCK_HEAVY + """
import sys
import keras_relational.environments
assert "gymnasium" not in sys.modules
import gymnasium as gym
from gymnasium.utils.env_checker import check_env
import keras_relational.environments.gymnasium_boxworld as gym_boxworld
gym.register_envs(gym_boxworld)
env = gym.make("keras_relational/BoxWorld-v0", goal_length=1, num_distractors=0, room_size=6)
check_env(env.unwrapped, skip_render_check=True)
envs = gym.make_vec("keras_relational/BridgeBoxWorld-v0", num_envs=2)
observations, infos = envs.reset(seed=0)
print("gymnasium ok", observations.shape)
"""
# [gymnax] under KERAS_BACKEND=jax: the functional Box-World as a gymnax Environment.
_GYMNAX = """
import jax
from keras_relational.environments.gymnax_boxworld import GymnaxBoxWorld
env = GymnaxBoxWorld(goal_length=1, num_distractors=0, room_size=6)
params = env.default_params
obs, state = env.reset(jax.random.key(0), params)
step = env.step(jax.random.key(1), state, 0, params)
print("gymnax ok", obs.shape, len(step))
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
    for extra in ("tensorflow", "jax", "envs", "rl", "distributed", "plots", "gymnasium",
                  "gymnax"):
        assert f"Provides-Extra: {extra}" in metadata, extra
    assert 'Requires-Dist: matplotlib; extra == "plots"' in metadata
    # [envs]: NumPy, dm_env and Pillow only; Keras, TensorFlow, JAX and torch cannot be imported.
    envs_only = _run([str(python), "-c", _ENVS_ONLY, str(outside)], cwd=outside)
    assert envs_only.returncode == 0, envs_only.stderr[-3000:]
    assert "envs-only ok" in envs_only.stdout and (outside / "episode.gif").exists()
    # [gymnasium] and [gymnax]: the two doors to the Box-Worlds.
    gymnasium = _run([str(python), "-c", _GYMNASIUM], cwd=outside)
    assert gymnasium.returncode == 0, gymnasium.stderr[-3000:]
    assert "gymnasium ok (2, 7, 10, 3)" in gymnasium.stdout, gymnasium.stdout
    gymnax = _run([str(python), "-c", _GYMNAX], cwd=outside, env_update={"KERAS_BACKEND": "jax"})
    assert gymnax.returncode == 0, gymnax.stderr[-3000:]
    assert "gymnax ok (8, 8, 3)" in gymnax.stdout, gymnax.stdout
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
    rl = _run([str(python), "-c", "import keras_relational.agents.tf_agents.train_eval as t; "
               "print(t.train_eval.__name__)"], cwd=outside)
    assert rl.returncode == 0 and "train_eval" in rl.stdout, rl.stderr[-3000:]
    plots = _run([str(python.parent / "plot_results"), "--help"], cwd=outside)
    assert plots.returncode == 1 and "plot_results ROOT_DIR" in plots.stdout, plots.stderr


# --- Each install line, each console script ---------------------------------------------------
# The wheel's venv sees the whole pinned stack; an install variant (an extra, or none) is
# simulated by making every top-level module unimportable whose distribution that variant would
# not install: the closure of the wheel's Requires-Dist for the extra over the installed
# distributions' own metadata. A .pth file loads the blocker at start-up in every process of the
# venv; KR_TEST_BLOCKED_MODULES (comma-separated) names the modules.
_VARIANT_BLOCKER = '''
import importlib.util, os, sys
_blocked = frozenset(filter(None, os.environ.get("KR_TEST_BLOCKED_MODULES", "").split(",")))
if _blocked:
    class _NotInstalled:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in _blocked:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    sys.meta_path.insert(0, _NotInstalled())
    _find_spec = importlib.util.find_spec
    def _find_spec_unless_blocked(name, package=None):
        if name.split(".")[0] in _blocked:
            return None
        return _find_spec(name, package)
    importlib.util.find_spec = _find_spec_unless_blocked
'''
# The README's install lines: the base package, each backend, the environments and the RL side
# (with tf-agents --no-deps). KERAS_BACKEND where the line sets it.
_INSTALL_VARIANTS = (
    ((), {}, ()),
    (("tensorflow",), {}, ()),
    (("jax",), {}, ()),
    (("jax",), {"KERAS_BACKEND": "jax"}, ()),
    (("envs",), {}, ()),
    (("rl",), {}, ("tf-agents",)),
)
_MISSING_LINE = re.compile(r"^(\w+): No module named '([\w.]+)'(?:, Keras' default backend: set "
                           r"KERAS_BACKEND=(\w+) \(installed\), or install TensorFlow)?: pip "
                           r'install "keras-relational\[(\w+)\]"')


def _normalized(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def _installed_closure(requirements, extras=()):
    """The normalized names of the installed distributions that ``requirements`` (strings, with
    ``extra`` markers evaluated for ``extras``) pull in, recursively."""
    import importlib.metadata

    from packaging.requirements import Requirement

    found, pending = {}, [(r, tuple(extras)) for r in requirements]
    while pending:
        text, active = pending.pop()
        requirement = Requirement(text)
        if requirement.marker is not None and not any(
                requirement.marker.evaluate({"extra": e}) for e in (active or ("",))):
            continue
        key = _normalized(requirement.name)
        new_extras = set(requirement.extras) - found.get(key, set())
        if key in found and not new_extras:
            continue
        try:
            distribution = importlib.metadata.distribution(requirement.name)
        except importlib.metadata.PackageNotFoundError:
            continue
        found.setdefault(key, set()).update(requirement.extras)
        pending.extend((r, tuple(requirement.extras)) for r in distribution.requires or ())
    return set(found)


def _modules_not_installed(requirements, extras, also):
    """The top-level modules of the stack that ``requirements`` with ``extras`` (plus the
    distributions ``also``) do not install."""
    import importlib.metadata

    installed = _installed_closure(requirements, extras) | _installed_closure(also) | {
        "keras-relational"}
    return sorted(module for module, distributions in
                  importlib.metadata.packages_distributions().items()
                  if module.isidentifier() and not any(_normalized(d) in installed
                                                       for d in distributions))


def _requires_dist(wheel):
    return [line.split(":", 1)[1].strip() for line in _metadata(wheel).splitlines()
            if line.startswith("Requires-Dist:")]


def _console_outcome(name, variant, result, blocked, environment, requirements):
    """``"help"``, the extra a one-line message names, or ``"KERAS_BACKEND=..."``."""
    where = f"{name} in {variant}: {result.stderr[-2000:]}"
    assert result.returncode == 1, where
    assert "Traceback" not in result.stderr, where
    if "Try --helpfull" in result.stdout:
        return "help"
    lines = result.stderr.strip().splitlines()
    match = _MISSING_LINE.match(lines[-1] if lines else "")
    assert match and match.group(1) == name, where
    module, backend, extra = match.group(2, 3, 4)
    assert module.split(".")[0] in blocked, where  # really missing in this variant
    if backend is not None:  # KERAS_BACKEND=<an installed backend>
        assert backend not in blocked and "KERAS_BACKEND" not in environment, where
        return f"KERAS_BACKEND={backend}"
    # the named extra installs the module
    assert module.split(".")[0] not in _modules_not_installed(
        requirements, (extra,), ("tf-agents",) if extra == "rl" else ()), where
    return extra


def _check_console_scripts_in_each_install_variant(wheel, venv, outside):
    """Each console script answers ``--help`` or names the missing extra (or KERAS_BACKEND) in
    one line, in each install variant; with the whole stack every one answers ``--help``."""
    site_packages = _run([str(venv / "bin" / "python"), "-c", "import sysconfig; print("
                          "sysconfig.get_path('purelib'))"], cwd=outside).stdout.strip()
    with open(os.path.join(site_packages, "_kr_test_variant.py"), "w") as f:
        f.write(_VARIANT_BLOCKER)
    with open(os.path.join(site_packages, "_kr_test_variant.pth"), "w") as f:
        f.write("import _kr_test_variant\n")
    requirements = _requires_dist(wheel)
    outcomes = {}
    for extras, environment, also in (*_INSTALL_VARIANTS, (None, None, None)):
        if extras is None:  # the whole stack of `make venv`: the binaries that [rl] did not run
            extras, environment, also, blocked = ("all",), {}, (), []
            names = [n for n in _BINARIES if outcomes["[rl]", n] != "help"]
        else:
            blocked = _modules_not_installed(requirements, extras, also)
            names = _BINARIES
        variant = f"[{','.join(extras)}]" + "".join(f" {k}={v}" for k, v in environment.items())
        env_update = {"KR_TEST_BLOCKED_MODULES": ",".join(blocked), **environment}
        # Two processes at a time: most of a --help's time is imports, waiting on the disk.
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            results = pool.map(lambda name, env_update=env_update: _run(
                [str(venv / "bin" / name), "--help"], cwd=outside, env_update=env_update), names)
            for name, result in zip(names, results, strict=True):
                outcomes[variant, name] = _console_outcome(
                    name, variant, result, blocked, environment, requirements)
    # [jax] without KERAS_BACKEND, a binary run for real (--help loads no Keras): Keras' default
    # backend is missing, and the line says to set the variable rather than dying inside Keras.
    blocked = _modules_not_installed(requirements, ("jax",), ())
    result = _run([str(venv / "bin" / "train_rule_learning"), f"--root_dir={outside / 'rules'}",
                   "--seeds=1", "--epochs=1"], cwd=outside,
                  env_update={"KR_TEST_BLOCKED_MODULES": ",".join(blocked)})
    assert _console_outcome("train_rule_learning", "[jax]", result, blocked, {},
                            requirements) == "KERAS_BACKEND=jax", result.stderr[-2000:]
    # With the whole stack (a superset of [rl]) every console script answers --help.
    assert all("help" in (outcomes["[rl]", n], outcomes.get(("[all]", n))) for n in _BINARIES)
    return outcomes


def test_missing_dependency_message_names_the_extra_or_the_backend_variable():
    from keras_relational.experiments import scripts

    def missing(name):
        return ModuleNotFoundError(f"No module named {name!r}", name=name)

    assert scripts.missing_dependency_message("plot_results", missing("matplotlib.pyplot")) == (
        "plot_results: No module named 'matplotlib': pip install \"keras-relational[plots]\"")
    assert scripts.missing_dependency_message("train_boxworld", missing("tf_agents")) == (
        "train_boxworld: No module named 'tf_agents': pip install \"keras-relational[rl]\" && "
        "pip install --no-deps tf-agents==0.19.0")
    assert scripts.missing_dependency_message("train_babi", missing("keras_relational.x")) is None
    # TensorFlow missing for our own import: the extra, whatever the backend.
    assert scripts.missing_dependency_message("train_babi", missing("tensorflow"), {}).endswith(
        'pip install "keras-relational[tensorflow]"')
    # TensorFlow missing where Keras loads its default backend, with JAX installed instead.
    try:
        exec(compile("raise ModuleNotFoundError(\"No module named 'tensorflow'\", "
                     "name='tensorflow')", os.path.join("keras", "src", "backend", "__init__.py"),
                     "exec"))
    except ModuleNotFoundError as error:
        from_keras = error
    if importlib.util.find_spec("jax") is not None:
        message = scripts.missing_dependency_message("train_babi", from_keras, {})
        assert "set KERAS_BACKEND=jax (installed)" in message, message
    assert scripts.missing_dependency_message(
        "train_babi", from_keras, {"KERAS_BACKEND": "jax"}).endswith(
        'pip install "keras-relational[tensorflow]"')
