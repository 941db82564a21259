"""The Qwen3-Coder chat format, "qwen3-coder" (Qwen3-Coder-30B-A3B-Instruct,
Qwen3-Coder-480B-A35B-Instruct: the Qwen3 vocabulary, no thinking).

Its official template (tests/data/chat_templates/qwen3_coder.jinja), written
here without Jinja:

* the tools block describes each tool in XML, not JSON:
  `\\n<function>\\n<name>NAME</name>\\n<description>...</description>\\n<parameters>`,
  one `\\n<parameter>\\n<name>KEY</name>\\n<type>..</type>\\n<description>..</description>`
  block per property, then every other key of a property, of `parameters`
  and of the tool as `\\n<KEY>VALUE</KEY>` (`render_extra_keys`: dicts and
  lists as `tojson`, anything else as Python's str()); descriptions are
  trimmed; all of it is ordinary text (DATA);
* without a system message but with tools, a default system prompt; the
  tools block follows the system prompt inside the same system turn;
* a tool call is XML text between the TOOL_CALL markers, as in the Qwen3.5
  formats (`\\n<function=NAME>\\n<parameter=KEY>\\nVALUE\\n</parameter>\\n</function>\\n`,
  scalars as Python's str(): True, None), each call preceded by a newline;
  an assistant turn with calls has its content trimmed, one without is
  written as given;
* tool results: each TOOL_RESPONSE `\\nRESULT\\n` TOOL_RESPONSE_END `\\n`, a run of
  them in one user turn; a tool message first in the conversation (after
  the system message, if any) opens no turn;
* no reasoning (a `reasoning_content` is not written) and a bare generation prompt.

The markers are the Qwen3 vocabulary's IM_START, IM_END, TOOL_CALL,
TOOL_CALL_END, TOOL_RESPONSE and TOOL_RESPONSE_END; `<function=`,
`<parameter=`, `<tools>`, `<name>` are text. Where the renderer departs
from the template (only on requests it cannot render, or renders from the
Python repr of a list) is listed in docs/FORMAT.md ("Where the formats
depart from the templates").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from qwen4exp.render.segments import utf8
from qwen4exp.render.validate import ASSISTANT, TOOL, USER, XML_PYTHON, Request, Rules, tojson
from qwen4exp.formats._turns import text_user_turn
from qwen4exp.formats._descriptor import ChatFormat, RenderedParts, fingerprints
from qwen4exp.formats._control import (
    IM_START, IM_END, TOOL_CALL, TOOL_CALL_END, TOOL_RESPONSE, TOOL_RESPONSE_END, TOOL_CALL_END_IM_END,
    XML_TOOLS_TAIL, XML_TOOLS_LAST,
)

__all__ = ["QWEN3_CODER", "render_qwen3_coder", "tool_schema_xml", "FORMATS"]

# Parts strictly alternate CONTROL, DATA, ... as formats/_control.py says.
_DEFAULT_SYSTEM = b"You are Qwen, a helpful AI assistant that can interact with a computer to solve tasks."
_TOOLS_HEAD = b"\n\n# Tools\n\nYou have access to the following functions:\n\n<tools>"
# After the schemas, up to the turn's end: DATA and CONTROL parts, in order.
_TOOLS_TAIL = (*XML_TOOLS_TAIL, XML_TOOLS_LAST, IM_END, b"\n")
_FUNCTION = b"\n<function="
_FUNCTION_END = b"</function>\n"


# --------------------------------------------------------------------------- tool schemas
# Jinja's `~` and `| string` are Python's str(); `| trim` is str(x).strip();
# an absent key (Undefined) writes nothing. A value that is not a mapping has
# none of the keys the template asks for (`x.name` is Undefined).


_ABSENT = object()  # Jinja's Undefined


def _get(obj: Any, key: str) -> Any:
    return obj.get(key, _ABSENT) if isinstance(obj, Mapping) else _ABSENT


def _str(value: Any) -> str:
    return "" if value is _ABSENT else str(value)


def _extra_keys(out: list[str], obj: Any, handled: tuple[str, ...]) -> None:
    """render_extra_keys: every other key as `\\n<KEY>VALUE</KEY>`."""
    if not isinstance(obj, Mapping):
        return
    for key, value in obj.items():
        if key in handled:
            continue
        if isinstance(value, (Mapping, list, tuple)):  # Jinja: a mapping, or a sequence but not a string
            text = tojson(value)
        else:
            text = str(value)
        out += ("\n<", str(key), ">", text, "</", str(key), ">")


def tool_schema_xml(tool: Any) -> str:
    """One tool of the tools block, as the template writes it (the text from
    its leading newline through `</function>`). `tool` is a JSON-serialisable
    dict (validation checked it)."""
    fn = tool.get("function", tool) if isinstance(tool, Mapping) else tool
    out = ["\n<function>\n<name>", _str(_get(fn, "name")), "</name>"]
    description = _get(fn, "description")
    if description is not _ABSENT:
        out += ("\n<description>", str(description).strip(), "</description>")
    out.append("\n<parameters>")
    parameters = _get(fn, "parameters")
    properties = _get(parameters, "properties")
    if isinstance(properties, Mapping):
        for key, fields in properties.items():
            out += ("\n<parameter>\n<name>", str(key), "</name>")
            kind = _get(fields, "type")
            if kind is not _ABSENT:
                out += ("\n<type>", str(kind), "</type>")
            description = _get(fields, "description")
            if description is not _ABSENT:
                out += ("\n<description>", str(description).strip(), "</description>")
            _extra_keys(out, fields, ("name", "type", "description"))
            out.append("\n</parameter>")
    _extra_keys(out, parameters, ("type", "properties"))
    out.append("\n</parameters>")
    _extra_keys(out, fn, ("type", "name", "description", "parameters"))
    out.append("\n</function>")
    return "".join(out)


def _tool_schema(tool: Any, where: str) -> bytes:
    return utf8(tool_schema_xml(tool), where)


QWEN3_CODER = Rules("qwen3-coder", trim=False, calls=XML_PYTHON, needs_query=False, thinking=None,
                    preserve=None, effort=None, tool_schema=_tool_schema)


# --------------------------------------------------------------------------- the renderer


def _trimmed(data: bytes) -> bytes:
    """`data` (UTF-8) as Jinja's |trim leaves it (str.strip())."""
    return data.decode("utf-8").strip().encode("utf-8")


def _xml_call(name: bytes, params: bytes) -> bytes:
    return b"".join((_FUNCTION, name, b">\n", params, _FUNCTION_END))


def render_qwen3_coder(req: Request) -> RenderedParts:
    """Parts, message spans and whether the prompt opened reasoning (never) of
    a request in the qwen3-coder format (formats/qwen3.py's `_render` says what
    the spans are). A tool message first after the header (no turn opened)
    spans from its TOOL_RESPONSE block; the system message's span is its turn
    (the tools block included)."""
    msgs, system = req.messages, req.system
    parts: list[bytes] = []
    spans: list[int] = []
    add, extend, mark = parts.append, parts.extend, spans.append

    if req.tools:
        head = b"system\n" + (_DEFAULT_SYSTEM if system is None else system)
        extend((IM_START, head + _TOOLS_HEAD + b"".join(req.tool_texts) + _TOOLS_TAIL[0]))
        extend(_TOOLS_TAIL[1:])
    elif system is not None:
        extend((IM_START, b"system\n" + system, IM_END, b"\n"))
    if system is not None:
        spans += (0, len(parts))

    first = 1 if system is not None else 0  # the template's loop starts after the system message
    n = len(msgs)
    for i, (role, content, _reasoning, calls) in enumerate(msgs):
        assert isinstance(content, bytes)  # no media parts: validation refuses them here
        if role == USER:
            mark(len(parts))
            extend(text_user_turn(content))
        elif role == ASSISTANT:
            mark(len(parts))
            add(IM_START)
            if calls:
                text = _trimmed(content)
                add(b"assistant\n" + text + b"\n\n" if text else b"assistant\n")
                for k, (name, params) in enumerate(calls):
                    if k:
                        extend((TOOL_CALL_END, b"\n"))
                    extend((TOOL_CALL, _xml_call(name, params)))
                extend((TOOL_CALL_END_IM_END, b"\n"))
            else:
                extend((b"assistant\n" + content, IM_END, b"\n"))
        elif role == TOOL:
            if i > first and msgs[i - 1].role == TOOL:  # from the newline after the previous block
                mark(len(parts) - 1)
                add(TOOL_RESPONSE)
            else:
                mark(len(parts))
                if i > first:  # the template's loop.previtem is undefined for the first one
                    extend((IM_START, b"user\n"))
                add(TOOL_RESPONSE)
            extend((b"\n" + content + b"\n", TOOL_RESPONSE_END, b"\n"))
            if i < n - 1 and msgs[i + 1].role == TOOL:
                mark(len(parts) - 1)  # the next block's span starts at the newline
                continue
            extend((IM_END, b"\n"))
        else:  # SYSTEM: only ever messages[0], rendered above
            continue
        mark(len(parts))

    if req.add_generation_prompt:
        extend((IM_START, b"assistant\n"))
    return RenderedParts(parts, spans, False)


# The official template by fingerprint (formats/_descriptor.py).
FORMATS = (
    ChatFormat("qwen3-coder", "qwen3", QWEN3_CODER, render_qwen3_coder, template_file="qwen3_coder.jinja",
               models="Qwen3-Coder (Qwen3-Coder-30B-A3B-Instruct, Qwen3-Coder-480B-A35B-Instruct)",
               templates=fingerprints("32bf2564d2245b98298677d3ac2332ab50bc3279740c13c3974689464b38aa3c"),
               hints=("render_extra_keys", "<function="),
               call_syntax="xml", tool_schema_syntax="xml", newlines_before_calls=2),
)
