"""docs/ARCHITECTURE.md names only what exists: every file it names is in the
repository, every function, class or constant it puts in backticks is defined
somewhere in the code, and every native module of its layout is a pyx/ file."""

from __future__ import annotations

import os
import re

from conftest import REPO

DOC = os.path.join(REPO, "docs", "ARCHITECTURE.md")
_FILE = re.compile(r"(?<![\w/.-])([\w/.-]*\w\.(?:py|pyx|pxd|pyi|h|json|jinja|sh|md|toml))\b")
_TICKED = re.compile(r"`([A-Za-z_][\w.]*)(?:\([^`]*\))?`")
# what a backticked word may be besides code: commands, options and values the doc quotes
_NOT_CODE = re.compile(r"^(?:[A-Z0-9_]+=?|qwen4exp|pytest|python|setup|pip|cli|src|docs|pyx|bench|tests|tools|fuzz)$")


def _text() -> str:
    with open(DOC, encoding="utf-8") as f:
        return f.read()


def _files() -> list[str]:
    out = []
    for folder, dirs, names in os.walk(REPO):
        dirs[:] = [d for d in dirs if not d.startswith((".", "__pycache__", "build")) and not d.endswith(".egg-info")]
        out += [os.path.relpath(os.path.join(folder, n), REPO).replace(os.sep, "/") for n in names]
    return out


def _sources() -> str:
    chunks = []
    for rel in _files():
        if rel.endswith((".py", ".pyx", ".pxd", ".pyi", ".h", ".sh")):
            with open(os.path.join(REPO, rel), encoding="utf-8", errors="replace") as f:
                chunks.append(f.read())
    return "\n".join(chunks)


def test_every_file_it_names_exists():
    files = _files()
    missing = sorted({name for name in _FILE.findall(_text())
                      if "NAME" not in name and not any(f == name or f.endswith("/" + name) for f in files)})
    assert not missing, f"docs/ARCHITECTURE.md names files that do not exist: {missing}"


def test_every_name_it_puts_in_backticks_is_in_the_code():
    code = _sources()
    words = set(re.findall(r"\w+", code))
    missing = []
    for name in set(_TICKED.findall(_text())):
        last = name.rstrip(".").rsplit(".", 1)[-1]
        if _NOT_CODE.match(last) or _FILE.fullmatch(name):
            continue
        if last not in words:
            missing.append(name)
    assert not missing, f"docs/ARCHITECTURE.md names what the code does not define: {sorted(missing)}"


def test_the_layout_lists_existing_modules_and_native_stages():
    text = _text()
    layout = text[text.index("## Layout"):text.index("## Step by step")]
    block = layout[layout.index("```") + 3: layout.rindex("```")]
    native = block[block.index("pyx/"):]
    for stage in re.findall(r"^  (_[a-z]\w*)\b", native, re.M):
        assert os.path.isfile(os.path.join(REPO, "pyx", stage + ".pyx")), stage
    package = os.path.join(REPO, "src", "qwen4exp")
    for folder in re.findall(r"^  ([a-z_]+)/", block, re.M):
        assert os.path.isdir(os.path.join(package, folder)), folder
    # and every module of the package is on the map
    listed = set(re.findall(r"([\w]+\.py)\b", block))
    for folder, _, names in os.walk(package):
        for name in names:
            if name.endswith(".py") and name != "__init__.py":
                assert name in listed, f"{os.path.relpath(os.path.join(folder, name), package)} is not on the map"
