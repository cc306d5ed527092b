"""The package's data flow runs one way: layers -> models -> analysis.

Layers import no models, analysis, agents, environments or binaries; models import no analysis,
agents, environments or binaries; no module imports another package's private (``_x``) module.
Read from the source with ``ast``, so nothing is imported.
"""

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "keras_relational"
FORBIDDEN = {
    "layers": ("models", "analysis", "agents", "environments", "experiments"),
    "models": ("analysis", "agents", "environments", "experiments"),
}


def imported_modules(path):
    """Every module ``path`` imports (``from a import b`` counts as ``a`` and ``a.b``)."""
    modules = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules.add(node.module)
            modules.update(f"{node.module}.{alias.name}" for alias in node.names)
    return modules


@pytest.mark.parametrize("folder", sorted(FORBIDDEN))
def test_each_folder_imports_only_the_stages_before_it(folder):
    files = sorted((PACKAGE / folder).glob("*.py"))
    assert files
    for path in files:
        for module in imported_modules(path):
            for stage in FORBIDDEN[folder]:
                assert not module.startswith(f"keras_relational.{stage}"), (
                    f"{path.relative_to(PACKAGE.parent)} imports {module}")


def test_no_module_imports_another_packages_private_module():
    for path in sorted(PACKAGE.rglob("*.py")):
        package = ".".join(path.relative_to(PACKAGE.parent).parts[:-1])
        for module in imported_modules(path):
            parts = module.split(".")
            private = [i for i, part in enumerate(parts) if part.startswith("_")
                       and not part.startswith("__")]
            if private and parts[0] == "keras_relational":
                owner = ".".join(parts[:private[0]])
                assert owner == package, (
                    f"{path.relative_to(PACKAGE.parent)} imports {module}, private to {owner}")
