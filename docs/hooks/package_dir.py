"""A griffe extension that mirrors setup.cfg's ``package_dir`` mapping for the API reference.

The repository keeps ``agents/``, ``environments/`` and ``experiments/`` at the top level, and the
distribution installs them as ``keras_relational.agents`` and so on. Griffe (which reads the
sources for mkdocstrings) finds ``keras_relational`` through the editable install, but its finder
maps only top-level packages, so this extension loads each folder and attaches it as the
sub-package of the same name. Configured in mkdocs.yml (``extensions:``).
"""

from pathlib import Path

import griffe

# setup.cfg [options] package_dir: keras_relational.<name> = <name>
MAPPED_FOLDERS = ("agents", "environments", "experiments")


class PackageDir(griffe.Extension):
    def on_package(self, *, pkg, loader, **kwargs):
        if pkg.name != "keras_relational":
            return
        root = Path(pkg.filepath).parent.parent
        for name in MAPPED_FOLDERS:
            if (root / name / "__init__.py").exists() and name not in pkg.members:
                pkg.set_member(name, loader.load(root / name, submodules=True))
