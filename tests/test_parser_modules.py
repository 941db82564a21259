"""The parser does not lean on the renderer: the tool-call readers
and schema typing import nothing of the renderer's validator, and the reader
of a call body is the format's own form first (src/qwen4exp/parse/tool_calls.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import qwen4exp
from qwen4exp.formats import chat_format, chat_formats
from qwen4exp.parse.tool_call_json import JsonBody
from qwen4exp.parse.tool_call_xml import XmlBody
from qwen4exp.parse.tool_calls import CallContext

SRC = Path(qwen4exp.__file__).parent / "parse"
PARSER_MODULES = ["tool_calls.py", "tool_call_body.py", "tool_call_json.py", "tool_call_xml.py", "tool_schemas.py"]


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            names.add(("." * node.level) + (node.module or ""))
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


@pytest.mark.parametrize("module", PARSER_MODULES)
def test_parser_modules_do_not_import_the_renderer(module):
    imported = _imports(SRC / module)
    assert not {name for name in imported if name.endswith(("render.validate", ".chat", "formats"))}, imported


@pytest.mark.parametrize("fmt", chat_formats())
def test_the_format_chooses_the_reader(fmt):
    style = chat_format(fmt).tool_calls
    forms = CallContext(None, False, b"", style).forms
    assert forms[0] is (JsonBody if style == "json" else XmlBody) and set(forms) == {JsonBody, XmlBody}
