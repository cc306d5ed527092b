"""The package's layering, checked on the source (AST) and in a fresh process.

Data flows one way: environments and layers know nothing of what is built on them.

* environments import no TensorFlow or Keras (NumPy + dm_env only), nor the parts that do;
* layers import no models, agents, environments or experiments;
* models import no agents, environments or experiments;
* agents define no layers (no class in agents/ subclasses a Keras layer or model);
* no library package imports the experiments (the binaries sit on top);
* no module imports another package's private ``_name`` module or helper;
* only the TF-Agents trainer (``agents/tf_agents/``) imports TF-Agents (and TensorFlow
  Probability): its package routes ``tf.keras`` to tf-keras first; elsewhere a function may
  import them only after importing ``keras_relational.agents.tf_agents`` (the switch), so the
  shared core and the compiled trainer have no import side effect;
* no two modules import each other, directly or through others (no cycle, also through imports
  inside functions);
* a default shared across the package is written once: no function argument or config field
  spells out the dtype policy's, the level source's or the trainer's default (they name
  ``validation.DEFAULT_DTYPE_POLICY``, ``level_banks.DEFAULT_LEVEL_SOURCE``,
  ``keras_relational.agents.config.DEFAULT_TRAINER``).

The checker itself is tested on small synthetic sources, so a violation cannot pass unseen.
"""

import ast
import configparser
import functools
import os
import re
import subprocess
import sys
import textwrap

import pytest

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_ROOT = "keras_relational"
_TENSORFLOW_AND_KERAS = ("keras", "tensorflow", "tf_keras", "tf_agents", "tensorflow_probability")

# Area -> the module prefixes it must not import.
_FORBIDDEN = {
    "environments": _TENSORFLOW_AND_KERAS + tuple(
        f"{_ROOT}.{area}" for area in ("layers", "models", "analysis", "agents", "experiments")),
    "layers": tuple(f"{_ROOT}.{area}"
                    for area in ("models", "analysis", "agents", "environments", "experiments")),
    "models": tuple(f"{_ROOT}.{area}" for area in ("analysis", "agents", "environments",
                                                   "experiments")),
    "analysis": tuple(f"{_ROOT}.{area}" for area in ("agents", "environments", "experiments")),
    "agents": (f"{_ROOT}.experiments",),
    "core": tuple(f"{_ROOT}.{area}" for area in ("agents", "environments", "experiments")),
    "experiments": (),
}
# The tensor forms of the environments (`environments/**/tensor.py`, `environments/tensor_base.py`,
# their helpers `environments/tensor_ops.py`, the on-device level generators
# `environments/tensor_random.py` and `environments/**/tensor_levels.py`)
# are written with keras.ops (any backend) and may import Keras, nothing else of the stack; they are
# loaded lazily, so importing keras_relational.environments still loads no Keras.
_TENSOR_MODULE = re.compile(
    rf"^{_ROOT}\.environments\.(\w+\.)*tensor(_base|_levels|_ops|_random)?$")


def forbidden_prefixes(module):
    """The module prefixes ``module`` must not import."""
    area = area_of(module)
    if area == "environments" and _TENSOR_MODULE.match(module):
        return tuple(prefix for prefix in _FORBIDDEN[area] if prefix != "keras")
    return _FORBIDDEN[area]


# A base class naming one of these (after resolving imports) is a Keras layer (a model is one).
_KERAS_LAYER = re.compile(
    r"^(keras|tf_keras|tensorflow\.keras|tensorflow\.python\.keras)(\.src)?"
    r"(\.layers\.\w+(\.\w+)*|\.Layer|\.Model|\.Sequential|\.models\.\w+)$"
    r"|^keras_relational\.(layers\.\w+(\.\w+)*|[A-Z]\w*)$")


def area_of(module):
    """``keras_relational.environments.boxworld`` -> ``"environments"``; the package top: core."""
    parts = module.split(".")
    if parts[0] != _ROOT:
        raise ValueError(f"module must be under {_ROOT}, received module={module!r}.")
    return parts[1] if len(parts) >= 2 and parts[1] in _FORBIDDEN else "core"


def _from_base(node, module, is_package):
    """The absolute module of ``from <base> import ...`` (relative imports resolved)."""
    if not node.level:
        return node.module
    package = (module if is_package else module.rpartition(".")[0]).split(".")
    anchor = package[:len(package) - (node.level - 1)]
    return ".".join(anchor + ([node.module] if node.module else []))


def _imports(module, tree, is_package):
    """``[(line, dotted name)]`` of every import anywhere in ``tree`` (also inside functions).

    ``from a import b`` yields both ``a`` and ``a.b`` (``b`` may be a sub-module).
    """
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _from_base(node, module, is_package)
            found.append((node.lineno, base))
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names
                      if alias.name != "*"]
    return found


def _aliases(module, tree, is_package):
    """Local name -> the dotted origin an import binds it to."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                root = alias.name.split(".")[0]
                names[alias.asname or root] = alias.name if alias.asname else root
        elif isinstance(node, ast.ImportFrom):
            base = _from_base(node, module, is_package)
            for alias in node.names:
                names[alias.asname or alias.name] = f"{base}.{alias.name}"
    return names


def _is_private_of_another_package(module, imported, packages):
    """True if ``imported`` reaches a ``_name`` (not a dunder) that is private to another package.

    A private module (``pkg._utils``) or helper (``pkg.mod._helper``) belongs to its package
    ``pkg`` (and its sub-packages); ``packages`` tells a package from a module.
    """
    parts = imported.split(".")
    for index, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            owner = ".".join(parts[:index])
            package = owner if owner in packages else owner.rpartition(".")[0]
            return not (module == package or module.startswith(package + "."))
    return False


@functools.cache
def _known_packages():
    return frozenset({_ROOT} | {f"{_ROOT}.{area}" for area in _FORBIDDEN} | {
        module for module, _, is_package in source_modules() if is_package})


def violations(module, source, is_package=False, packages=None):
    """The layering rules ``module`` (a dotted name under keras_relational) breaks, as messages.

    ``packages``: the dotted names that are packages (default: this checkout's).
    """
    packages = _known_packages() if packages is None else packages
    tree = ast.parse(source)
    area = area_of(module)
    found = []
    for line, imported in _imports(module, tree, is_package):
        # `from keras_relational import SpatialEntities` loads keras_relational.layers.
        normalized = re.sub(rf"^{_ROOT}\.([A-Z]\w*)$", rf"{_ROOT}.layers.\1", imported)
        for prefix in forbidden_prefixes(module):
            if normalized == prefix or normalized.startswith(prefix + "."):
                found.append(f"{module}:{line}: {area} imports {imported}")
        if imported.startswith(_ROOT) and _is_private_of_another_package(module, imported,
                                                                          packages):
            found.append(f"{module}:{line}: imports another package's private {imported}")
    found += _tf_agents_violations(module, tree, is_package)
    if area == "agents":
        names = _aliases(module, tree, is_package)
        layer_classes = set()
        classes = [node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
        changed = True
        while changed:  # a class on a local layer class is a layer too
            changed = False
            for node in classes:
                if node.name in layer_classes:
                    continue
                for base in node.bases:
                    dotted = ast.unparse(base)
                    root, _, rest = dotted.partition(".")
                    origin = names.get(root, root) + (f".{rest}" if rest else "")
                    if dotted in layer_classes or _KERAS_LAYER.match(origin):
                        layer_classes.add(node.name)
                        found.append(f"{module}:{node.lineno}: agents define the layer "
                                     f"{node.name}({dotted})")
                        changed = True
                        break
    return found


_TF_AGENTS_PACKAGE = f"{_ROOT}.agents.tf_agents"
_NEEDS_LEGACY_KERAS = ("tf_agents", "tensorflow_probability")


def _is_under(name, prefix):
    return name == prefix or name.startswith(prefix + ".")


def _tf_agents_violations(module, tree, is_package):
    """TF-Agents imported outside agents/tf_agents without the tf-keras switch before it."""
    if _is_under(module, _TF_AGENTS_PACKAGE):
        return []
    found = []

    def check(body, switched):  # statements in order; `switched` once the package is imported
        for node in body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                for line, imported in _imports(module, node, is_package):
                    if _is_under(imported, _TF_AGENTS_PACKAGE):
                        switched = True
                    elif not switched and any(_is_under(imported, name)
                                              for name in _NEEDS_LEGACY_KERAS):
                        found.append(f"{module}:{line}: imports {imported} outside "
                                     f"{_TF_AGENTS_PACKAGE} without importing that package first")
                continue
            blocks = [getattr(node, field, []) for field in ("body", "orelse", "finalbody")]
            blocks += [handler.body for handler in getattr(node, "handlers", [])]
            for block in blocks:  # a function, class or compound statement
                check(block, switched)

    check(tree.body, False)
    return sorted(set(found))


def import_cycles(graph):
    """The strongly connected components (more than one module) of ``{module: imported}``."""
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(node):  # Tarjan's algorithm
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                other = stack.pop()
                on_stack.discard(other)
                component.append(other)
                if other == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def import_graph(modules):
    """``{module: package modules it imports}`` (imports inside functions too) of
    ``[(module, source, is_package)]``; a name resolves to the longest module it names."""
    names = {module for module, _, _ in modules}

    def resolve(name):
        while name and name not in names:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for module, source, is_package in modules:
        tree = ast.parse(source)
        edges = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                edges.update(resolve(alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = _from_base(node, module, is_package)
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    edges.add(full if full in names else resolve(base))
        graph[module] = edges - {None, module}
    return graph


def _package_dirs():
    config = configparser.ConfigParser()
    config.read(os.path.join(_REPO_ROOT, "setup.cfg"))
    mapping = {}
    for line in config["options"]["package_dir"].strip().splitlines():
        name, folder = (part.strip() for part in line.split("="))
        mapping[name] = folder
    return mapping


def source_modules():
    """``[(dotted module name, path, is_package)]`` of every source file of the package."""
    modules = {}
    for package, folder in _package_dirs().items():
        top = os.path.join(_REPO_ROOT, folder)
        for root, dirs, files in os.walk(top):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            relative = os.path.relpath(root, top)
            prefix = package if relative == "." else f"{package}.{relative.replace(os.sep, '.')}"
            for name in files:
                if name.endswith(".py"):
                    is_package = name == "__init__.py"
                    module = prefix if is_package else f"{prefix}.{name[:-3]}"
                    modules[module] = (os.path.join(root, name), is_package)
    return sorted((module, path, is_package) for module, (path, is_package) in modules.items())


def test_the_package_keeps_its_layers():
    modules = source_modules()
    assert {area_of(module) for module, _, _ in modules} >= {
        "core", "layers", "models", "agents", "environments", "experiments"}
    found = []
    for module, path, is_package in modules:
        with open(path) as f:
            found += violations(module, f.read(), is_package)
    assert not found, "\n".join(found)


def test_no_import_cycles():
    modules = []
    for module, path, is_package in source_modules():
        with open(path) as f:
            modules.append((module, f.read(), is_package))
    cycles = import_cycles(import_graph(modules))
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


# Argument (or dataclass field) name -> the literal its shared default must not be written as.
_SHARED_DEFAULTS = {"dtype_policy": "float32", "level_source": "numpy", "trainer": "tf_agents"}


def literal_defaults(source):
    """``[(line, name)]`` where ``source`` writes a shared default as a literal: a function's
    argument default, or a dataclass field's (``name: type = "float32"`` or
    ``_field("float32", ...)``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            arguments = node.args.posonlyargs + node.args.args
            pairs = list(zip(arguments[len(arguments) - len(node.args.defaults):],
                             node.args.defaults, strict=True))
            pairs += [(a, d) for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults,
                                             strict=True) if d]
            found += [(d.lineno, a.arg) for a, d in pairs if isinstance(d, ast.Constant)
                      and a.arg in _SHARED_DEFAULTS and _SHARED_DEFAULTS[a.arg] == d.value]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) \
                and node.value is not None and node.target.id in _SHARED_DEFAULTS:
            value = node.value
            if isinstance(value, ast.Call) and value.args:
                value = value.args[0]
            if isinstance(value, ast.Constant) and value.value == _SHARED_DEFAULTS[node.target.id]:
                found.append((node.lineno, node.target.id))
    return found


def test_shared_defaults_are_written_once():
    found = []
    for module, path, _ in source_modules():
        with open(path) as f:
            found += [f"{module}:{line}: {name}" for line, name in literal_defaults(f.read())]
    assert not found, "defaults written as literals:\n" + "\n".join(found)


def test_the_defaults_checker_finds_literals():
    source = textwrap.dedent('''
        def a(x, dtype_policy="float32"): ...
        def b(*, level_source="numpy"): ...
        def c(dtype_policy=validation.DEFAULT_DTYPE_POLICY, level_source="device", seed=None): ...
        class C:
            dtype_policy: str = _field("float32", "help")
            level_source: str = "numpy"
            other: str = "float32"
    ''')
    assert literal_defaults(source) == [(2, "dtype_policy"), (3, "level_source"),
                                        (6, "dtype_policy"), (7, "level_source")]


def test_the_cycle_checker_finds_a_cycle_through_a_function_import():
    modules = [
        ("keras_relational.environments.tensor_base",
         "def f():\n    from .tensor_levels import seed_state\n", False),
        ("keras_relational.environments.tensor_levels", "from .tensor_base import row_select\n",
         False),
        ("keras_relational.environments.tensor_ops", "import numpy\n", False),
    ]
    assert import_cycles(import_graph(modules)) == [[
        "keras_relational.environments.tensor_base",
        "keras_relational.environments.tensor_levels"]]
    assert import_cycles(import_graph(modules[1:])) == []


def test_importing_the_environments_loads_no_tensorflow_or_keras():
    # Every environments module but the tensor forms (which import Keras by design and are
    # loaded lazily), in a process that has imported nothing else.
    environments = [module for module, _, _ in source_modules()
                    if area_of(module) == "environments" and not _TENSOR_MODULE.match(module)]
    assert "keras_relational.environments.boxworld.tensor" not in environments
    code = textwrap.dedent(f"""
        import importlib
        import sys

        import keras_relational
        import keras_relational.environments
        for module in {environments!r}:
            importlib.import_module(module)
        print(sorted(m for m in sys.modules if m.split(".")[0] in {_TENSORFLOW_AND_KERAS!r}))
    """)
    env = dict(os.environ)
    for name in ("TF_USE_LEGACY_KERAS", "KERAS_BACKEND"):
        env.pop(name, None)
    result = subprocess.run([sys.executable, "-c", code], env=env, cwd=_REPO_ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "[]", result.stdout


# ------------------------------------------------------------------------------------------------
# The checker on synthetic sources: each rule reports its violation, and clean code passes.
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("module,source,expected", [
    ("keras_relational.environments.grid", "import tensorflow as tf\n", "imports tensorflow"),
    ("keras_relational.environments.grid",
     "def f():\n    from keras import ops\n    return ops\n", "imports keras"),
    ("keras_relational.environments.grid.render", "import keras.ops\n", "imports keras.ops"),
    ("keras_relational.environments.grid", "from keras_relational import SpatialEntities\n",
     "imports keras_relational.SpatialEntities"),
    ("keras_relational.environments.grid", "from keras_relational.models import symmetry\n",
     "imports keras_relational.models"),
    ("keras_relational.environments.boxworld.tensor", "import tensorflow as tf\n",
     "imports tensorflow"),
    ("keras_relational.environments.tensor_base", "from keras_relational.layers import x\n",
     "imports keras_relational.layers"),
    ("keras_relational.environments.tensors", "from keras import ops\n", "imports keras"),
    ("keras_relational.layers.attention", "from keras_relational.models import symmetry\n",
     "layers imports keras_relational.models"),
    ("keras_relational.layers.attention", "import keras_relational.agents.vtrace\n",
     "layers imports keras_relational.agents.vtrace"),
    ("keras_relational.layers.attention", "from keras_relational import environments\n",
     "layers imports keras_relational.environments"),
    ("keras_relational.models.torso", "from keras_relational.environments import boxworld\n",
     "models imports keras_relational.environments"),
    ("keras_relational.models.torso", "from ..agents import train_eval\n",
     "models imports keras_relational.agents"),
    ("keras_relational.agents.learner", "from keras_relational.experiments import x_lib\n",
     "agents imports keras_relational.experiments"),
    ("keras_relational.agents.net", "import keras\nclass Core(keras.layers.Layer):\n    pass\n",
     "agents define the layer Core"),
    ("keras_relational.agents.net",
     "import keras\nclass Base(keras.Model):\n    pass\nclass Net(Base):\n    pass\n",
     "agents define the layer Net"),
    ("keras_relational.agents.net", "from keras.layers import Layer as L\nclass C(L):\n    pass\n",
     "agents define the layer C"),
    ("keras_relational.agents.net", "import tensorflow as tf\nclass C(tf.keras.layers.Dense):\n"
     "    pass\n", "agents define the layer C"),
    ("keras_relational.agents.net", "from keras_relational.layers import predinet\n"
     "class C(predinet.PrediNet):\n    pass\n", "agents define the layer C"),
    ("keras_relational.agents.ray", "from keras_relational.layers import _checks\n",
     "private keras_relational.layers._checks"),
    ("keras_relational.models.torso", "from keras_relational.layers._utils import heads\n",
     "private keras_relational.layers._utils"),
    ("keras_relational.experiments.x", "from keras_relational.agents.queue import _plain\n",
     "private keras_relational.agents.queue._plain"),
    ("keras_relational.agents.compiled.loop", "from tf_agents.specs import tensor_spec\n",
     "imports tf_agents.specs outside keras_relational.agents.tf_agents"),
    ("keras_relational.agents.play", "def f():\n    import tensorflow_probability\n",
     "imports tensorflow_probability outside"),
    ("keras_relational.agents.sc2.net", "import tf_agents\n"
     "import keras_relational.agents.tf_agents\n", "imports tf_agents outside"),
    ("keras_relational.experiments.x", "def f():\n    if True:\n"
     "        from tf_agents import networks\n", "imports tf_agents outside"),
])
def test_the_checker_reports_a_violation(module, source, expected):
    found = violations(module, source)
    assert any(expected in message for message in found), found


@pytest.mark.parametrize("module,source", [
    ("keras_relational.environments.grid", "import numpy as np\nimport dm_env\n"
     "from keras_relational import validation\nfrom keras_relational.environments import babi\n"),
    ("keras_relational.layers.attention", "import keras\nfrom keras import ops\n"
     "from keras_relational.layers import _utils\nfrom . import _utils as u\n"),
    ("keras_relational.models.torso", "import keras\n"
     "from keras_relational.layers.spatial_entities import SpatialEntities\n"),
    ("keras_relational.agents.play", "def f():\n    import keras_relational.agents.tf_agents\n"
     "    import tensorflow_probability\n"),
    ("keras_relational.agents.tf_agents.net",
     "from tf_agents.networks import network\nimport keras\n"
     "class Bridge(network.Network):\n    pass\nclass Log(keras.callbacks.Callback):\n    pass\n"
     "from keras_relational.agents.tf_agents import _legacy_keras\n"
     "from keras_relational.agents.queue import _plain\n"
     "from keras_relational.environments import boxworld\n"),
    ("keras_relational.environments.boxworld.tensor", "import keras\nfrom keras import ops\n"),
    ("keras_relational.environments.tensor_base", "import keras\n"),
    ("keras_relational.environments.boxworld.env",
     "from keras_relational.environments.boxworld import _rules\n"
     "from keras_relational.environments import _base\nfrom .._base import Base\n"),
    ("keras_relational.experiments.train_x", "from keras_relational.agents import train_eval\n"
     "from keras_relational.environments import boxworld\nimport tensorflow as tf\n"),
])
def test_the_checker_passes_clean_code(module, source):
    assert violations(module, source, is_package=False) == []
