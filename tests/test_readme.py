"""The README as users read it: short, no development log, install lines that
work from a clone, the two commands (and CI running the second), and Python
snippets that run as they are, with no name left undefined."""

from __future__ import annotations

import ast
import builtins
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import qwen4exp

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text(encoding="utf-8")
SETUP_COMMAND = "python3 -m pip install . && python3 -m qwen4exp demo"
TEST_COMMAND = 'python3 -m pip install ".[test]" && python3 -m pytest'
SNIPPETS = re.findall(r"```python\n(.*?)```", README, re.S)


def test_length_and_the_two_commands():
    assert len(README.splitlines()) <= 250
    blocks = re.findall(r"```sh\n(.*?)```", README, re.S)
    assert [SETUP_COMMAND] in [b.strip().splitlines() for b in blocks]
    assert [TEST_COMMAND] in [b.strip().splitlines() for b in blocks]
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert TEST_COMMAND in ci.splitlines()


@pytest.mark.parametrize("path", ["README.md", "CHANGELOG.md", "docs/FORMAT.md", "docs/ARCHITECTURE.md",
                                  "docs/RELIABILITY.md", "docs/PERFORMANCE.md", "bench/README.md"])
def test_no_development_log(path):
    text = (REPO / path).read_text(encoding="utf-8")
    for pattern in (r"\bissues? #?\d+", r"\bissue-\d+", r"this (round|session)", r"\bruns? [G-K]\b", r"G–K",
                    r"\d+ (->|→) \d+ lines", r"\bround[- ]one"):
        assert not re.search(pattern, text, re.I), (path, pattern)


def test_no_issue_numbers_anywhere():
    for folder in ("src", "tests", "bench", "tools", "docs", "examples", "fuzz", ".ci"):
        for path in (REPO / folder).rglob("*"):
            if path.suffix in (".py", ".pyx", ".pxd", ".md", ".sh", "") and path.is_file():
                text = path.read_text(encoding="utf-8", errors="replace")
                assert not re.search(r"\bissues? #?\d+|\bissue-\d+", text, re.I), path


def test_install_lines_work_from_a_clone():
    assert not re.search(r"pip install \S*qwen4exp\[", README)
    assert 'pip install ".[cli]"' in README and 'pip install ".[ray]"' in README
    assert (REPO / "LICENSE").read_text(encoding="utf-8").lstrip().startswith("Apache License")


def _undefined_names(code: str) -> set[str]:
    """Names a flat snippet reads but never binds (imports, assignments,
    definitions, loop targets, parameters) and that are not builtins."""
    tree = ast.parse(code)
    bound = set(dir(builtins))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
    loaded = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return loaded - bound


def test_there_are_snippets():
    assert len(SNIPPETS) >= 4


@pytest.mark.parametrize("k", range(len(SNIPPETS)))
def test_snippet_runs_as_it_is(k, tmp_path):
    code = SNIPPETS[k]
    assert not _undefined_names(code), k
    where = os.path.dirname(os.path.dirname(os.path.abspath(qwen4exp.__file__)))
    env = dict(os.environ, PYTHONPATH=where)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
