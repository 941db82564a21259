"""The package version: the installed distribution's metadata, else pyproject.toml.

`importlib.metadata` knows the version of the *installed* qwen4exp. Only the
metadata in the folder this package was imported from is read: the first
`qwen4exp` on `sys.path` may be another copy (a source tree's
`src/qwen4exp.egg-info` once something put `src/` first), and that copy's
version says nothing about these files. A source tree (PYTHONPATH=src, or an
editable install whose metadata lives elsewhere) reads its pyproject.toml.
"""

from __future__ import annotations

import os
import re
from importlib import metadata

_HERE = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # the qwen4exp package
_PYPROJECT = os.path.join(_HERE, os.pardir, os.pardir, "pyproject.toml")


def _installed() -> str | None:
    here = os.path.join(_HERE, "__init__.py")
    for dist in metadata.distributions(name="qwen4exp", path=[os.path.dirname(_HERE)]):
        if dist.read_text("RECORD") is None:
            continue  # no install record: a source tree's build leftovers (qwen4exp.egg-info)
        if os.path.realpath(str(dist.locate_file(os.path.join("qwen4exp", "__init__.py")))) == here:
            return dist.version
    return None  # no metadata beside this copy: a source tree


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
