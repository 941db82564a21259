"""The package version: the installed distribution's metadata, else pyproject.toml.

`importlib.metadata` knows the version of the *installed* qwen4exp. A source
tree on PYTHONPATH (the developer setup in README.md) may sit beside a
different installed copy, so the metadata is only trusted when it describes
the files this module was imported from; otherwise the version is read from
the tree's pyproject.toml.
"""

from __future__ import annotations

import os
import re
from importlib import metadata

_HERE = os.path.dirname(os.path.realpath(__file__))
_PYPROJECT = os.path.join(_HERE, os.pardir, os.pardir, "pyproject.toml")


def _installed() -> str | None:
    try:
        dist = metadata.distribution("qwen4exp")
    except metadata.PackageNotFoundError:
        return None
    installed_init = os.path.realpath(str(dist.locate_file(os.path.join("qwen4exp", "__init__.py"))))
    if installed_init != os.path.join(_HERE, "__init__.py"):
        return None  # another copy is installed; this one is a source tree
    return dist.version


def _source_tree() -> str | None:
    try:
        with open(_PYPROJECT, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return None
    project = text.split("[project]", 1)[-1]
    m = re.search(r'^version\s*=\s*"([^"]+)"', project, re.MULTILINE)
    return m.group(1) if m else None


def package_version() -> str:
    """The version string, "0+unknown" when neither source says."""
    return _installed() or _source_tree() or "0+unknown"
