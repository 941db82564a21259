"""The package's shape: no import cycle among the modules of src/qwen4exp
(imports inside functions count), the command line (qwen4exp.cli) imported
by no library module, and each template marker spelled in at most two
modules (markers.py, which every other module uses, and the vocabulary
descriptors, which list a tiktoken vocabulary's added tokens and load
without the package, from setup.py); and the
tests' own: no test module imports another."""

from __future__ import annotations

import ast
import os
import re

import pytest

from conftest import REPO

SRC = os.path.join(REPO, "src")
PYX = os.path.join(REPO, "pyx")
PACKAGE = "qwen4exp"


def _modules() -> dict[str, str]:
    """Module name -> source file, for every .py under src/qwen4exp and every
    pyx/_NAME.pyx (the extension qwen4exp._native._NAME)."""
    found = {}
    for folder, _, names in os.walk(os.path.join(SRC, PACKAGE)):
        for name in names:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                parts = os.path.relpath(path, SRC)[: -len(".py")].split(os.sep)
                if parts[-1] == "__init__":
                    parts.pop()
                found[".".join(parts)] = path
    for name in os.listdir(PYX):
        if name.endswith(".pyx"):
            found[f"{PACKAGE}._native.{name[:-4]}"] = os.path.join(PYX, name)
    return found


MODULES = _modules()


def _is_package(module: str) -> bool:
    return MODULES.get(module, "").endswith("__init__.py")


def _target(name: str) -> str | None:
    """The package module a dotted name imports (the longest known prefix)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


_PYX_IMPORT = re.compile(r"^\s*(?:from\s+(\.*[\w.]*)\s+(c?import)\s+(.+)|(c?import)\s+([\w., ]+))", re.M)


def _imports_of(module: str) -> set[str]:
    """The package modules `module` imports anywhere in its body."""
    path = MODULES[module]
    base = module if _is_package(module) else module.rpartition(".")[0]
    if path.endswith(".pyx"):  # Cython syntax: read the import lines
        statements = []
        for m in _PYX_IMPORT.finditer(open(path, encoding="utf-8").read()):
            if m.group(1) is not None:
                level = len(m.group(1)) - len(m.group(1).lstrip("."))
                names = [n.split(" as ")[0].strip(" ()") for n in m.group(3).split(",")]
                statements.append((m.group(1).lstrip("."), level, names))
            else:
                statements += [(n.split(" as ")[0].strip(), 0, None) for n in m.group(5).split(",")]
    else:
        tree = ast.parse(open(path, encoding="utf-8").read(), path)
        statements = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                statements += [(a.name, 0, None) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                statements.append((node.module or "", node.level, [a.name for a in node.names]))
    out = set()
    for name, level, names in statements:
        if level:
            anchor = base
            for _ in range(level - 1):
                anchor = anchor.rpartition(".")[0]
            name = f"{anchor}.{name}" if name else anchor
        if name != PACKAGE and not name.startswith(PACKAGE + "."):
            continue
        for sub in names or [None]:
            target = _target(f"{name}.{sub}" if sub else name)
            if target is not None and target != module:
                out.add(target)
    return out


GRAPH = {m: _imports_of(m) for m in MODULES}


def _parents(module: str):
    while "." in module:
        module = module.rpartition(".")[0]
        yield module


def test_the_import_graph_is_read():
    """The parser sees the imports that are known to exist, at module and at
    function level, absolute and relative, in .py and .pyx."""
    assert "qwen4exp.encode.tokenizer" in GRAPH["qwen4exp"]
    assert "qwen4exp.cli.batch" in GRAPH["qwen4exp.cli.main"]
    assert "qwen4exp.render.chat" in GRAPH["qwen4exp.cli.sources"]  # inside make_record
    assert "qwen4exp.render.requests" in GRAPH["qwen4exp.runtimes.ray"]
    assert "qwen4exp._native._alloc" in GRAPH["qwen4exp._native._encoder"]


def test_no_import_cycle():
    """A module imported by something it imports sees the other half-built.
    Each module's own parent packages are left out: importing qwen4exp.x
    always runs qwen4exp/__init__.py first, which is not a cycle of x's."""
    cycles = []
    state = {}

    def visit(module, stack):
        state[module] = "open"
        stack.append(module)
        for nxt in sorted(GRAPH[module]):
            if nxt in _parents(module):
                continue
            if state.get(nxt) == "open":
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[module] = "done"

    for module in sorted(GRAPH):
        if module not in state:
            visit(module, [])
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_no_library_module_imports_the_cli():
    """Only `python -m qwen4exp` (__main__.py, the command line's other name)
    reaches into qwen4exp.cli."""
    cli = f"{PACKAGE}.cli"
    assert GRAPH[f"{PACKAGE}.__main__"] == {f"{cli}.main"}
    library = [m for m in GRAPH if m != cli and not m.startswith(cli + ".") and m != f"{PACKAGE}.__main__"]
    offenders = {m: sorted(t for t in GRAPH[m] if t == cli or t.startswith(cli + ".")) for m in library}
    assert not {m: t for m, t in offenders.items() if t}


# -- the template markers: spelled by the marker table only ----------------------------

# Written out here, not read from qwen4exp.markers: this is the check of that table.
MARKER_SPELLINGS = ("<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<tool_call>",
                    "</tool_call>", "<tool_response>", "</tool_response>")
MARKER_MODULES = {f"{PACKAGE}.markers", f"{PACKAGE}.vocabulary"}  # the table; the vocabulary descriptors


def test_markers_match_the_table():
    from qwen4exp.markers import Marker

    assert sorted(m.value for m in Marker) == sorted(MARKER_SPELLINGS)


@pytest.mark.parametrize("spelling", MARKER_SPELLINGS)
def test_each_marker_is_spelled_in_at_most_two_modules(spelling):
    """Every other module names a marker through qwen4exp.markers (code, help
    texts and messages built from Marker values; docstrings say "the IM_END
    marker"), so that one table holds the spellings for both directions."""
    spelled = sorted(m for m, path in MODULES.items() if path.endswith(".py")
                     and spelling in open(path, encoding="utf-8").read())
    assert len(spelled) <= 2 and set(spelled) <= MARKER_MODULES, spelled


# -- the tests: one helpers module, no test module importing another --------------------

TESTS = os.path.join(REPO, "tests")


def test_no_test_module_imports_another():
    """Shared code lives in tests/helpers.py (and the reference modules), so a
    test module can run, move or change alone."""
    offenders = {}
    for name in sorted(os.listdir(TESTS)):
        if not (name.startswith("test_") and name.endswith(".py")):
            continue
        tree = ast.parse(open(os.path.join(TESTS, name), encoding="utf-8").read(), name)
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            bad = [n for n in names if n.split(".")[0].startswith("test_")]
            if bad:
                offenders.setdefault(name, []).extend(bad)
    assert not offenders


# -- the layout (docs/ARCHITECTURE.md, "Layout") -------------------------------------


def test_the_package_top_has_at_most_16_entries():
    """The three paths show in the tree: subpackages, not a flat list of modules."""
    top = sorted(n for n in os.listdir(os.path.join(SRC, PACKAGE))
                 if n != "__pycache__" and not n.endswith((".so", ".pyd", ".c")) and not n.endswith(".egg-info"))
    assert len(top) <= 16, top


_TOKENIZER_PRIVATES = re.compile(r"(?<![\w.])(?:tok|tokenizer|self\._tok|_tok|self\._tokenizer)\._(?!_)[a-z]\w*")


def test_no_module_reaches_into_tokenizer_privates():
    """Only encode/tokenizer.py touches a Tokenizer's private names; the others go
    through Tokenizer.core (qwen4exp.encode.core.TokenizerCore), which is typed."""
    tokenizer = os.path.join(SRC, PACKAGE, "encode", "tokenizer.py")
    found = []
    for module, path in MODULES.items():
        if path == tokenizer or not path.endswith(".py"):
            continue
        for i, line in enumerate(open(path, encoding="utf-8"), 1):
            for m in _TOKENIZER_PRIVATES.finditer(line.split("#")[0]):
                found.append(f"{module}:{i}: {m.group(0)}")
    assert not found, found
