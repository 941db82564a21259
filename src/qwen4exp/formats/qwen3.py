"""The Qwen3 chat formats: "qwen3" (the hybrid-thinking models' template, the
Qwen4Exp format) and "qwen3-2507" (Qwen3-*-Instruct-2507: no thinking).

Both write a tool call as one JSON object between the TOOL_CALL markers and
content as given (no trimming). Differences from the Jinja templates, all on
requests that spell atoms or that the templates cannot render, are listed in
docs/FORMAT.md ("Where the formats depart from the templates"):

* reasoning comes only from `reasoning_content` (the qwen3 template also
  splits `content` on a literal THINK_END marker);
* the last query is the last `user` message (the template skips user
  messages that look like a TOOL_RESPONSE block);
* content lists of text parts are joined (the templates fail on them, or,
  for tool messages, write the list's Python repr); a missing/None assistant
  content renders as "" (the templates fail on it).
"""

from __future__ import annotations

from qwen4exp.render.validate import ASSISTANT, JSON_CALLS, TOOL, USER, Request, Rules
from qwen4exp.formats._descriptor import ChatFormat, RenderedParts, fingerprints
from qwen4exp.formats._turns import text_user_turn, close_tool_response, write_calls
from qwen4exp.formats._control import (
    IM_START, IM_END, THINK, THINK_END, TOOL_CALL, TOOL_RESPONSE, TOOL_CALL_PAIR, TOOL_CALL_END_IM_END,
    NO_THINKING_PROMPT,
)

__all__ = ["QWEN3", "QWEN3_2507", "render_qwen3", "render_qwen3_2507", "FORMATS"]

QWEN3 = Rules("qwen3", trim=False, calls=JSON_CALLS, needs_query=False, thinking=True,
              preserve=None, effort=None)
QWEN3_2507 = Rules("qwen3-2507", trim=False, calls=JSON_CALLS, needs_query=False,
                   thinking=None, preserve=None, effort=None)

# The template's fixed text as byte chunks, built once; parts alternate
# CONTROL, DATA, ... as formats/_control.py says.
_TOOLS_HEAD = (
    b"# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    b"You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
)
# After the schemas: the preamble's remaining DATA and CONTROL parts, in order.
_TOOLS_TAIL = (
    b"\n</tools>\n\nFor each function call, return a json object with function name and "
    b"arguments within ",
    TOOL_CALL_PAIR,
    b" XML tags:\n",
    TOOL_CALL,
    b'\n{"name": <function-name>, "arguments": <args-json-object>}\n',
    TOOL_CALL_END_IM_END,
    b"\n",
)
_CALL_NAME = b'\n{"name": "'
_CALL_ARGS = b'", "arguments": '
_CALL_CLOSE = b"}\n"


def _render(req: Request, thinking: bool) -> RenderedParts:
    """The stream's parts (alternating CONTROL, DATA, ...; see above), per
    message, the part indices where its span starts and ends (flat: start0,
    end0, start1, ...), and whether the generation prompt left a THINK block
    open (never here: with thinking on, the model writes THINK itself). A
    message's span is its turn from its IM_START marker through the newline
    after its IM_END marker; the tools preamble belongs to
    the system message's span (to none without one); each tool message of a
    shared turn spans its own TOOL_RESPONSE block (the first one also the
    turn's opening, the last one its closing); the generation prompt belongs
    to no message. `thinking`: the qwen3 format (reasoning blocks, the
    no-thinking prompt) rather than qwen3-2507."""
    parts: list[bytes] = []
    add, extend = parts.append, parts.extend
    spans: list[int] = []
    mark = spans.append
    msgs = req.messages
    n = len(msgs)

    if req.tools:
        head = b"system\n" if req.system is None else b"system\n" + req.system + b"\n\n"
        extend((IM_START, b"\n".join((head + _TOOLS_HEAD, *req.tools)) + _TOOLS_TAIL[0]))
        extend(_TOOLS_TAIL[1:])
    elif req.system is not None:
        extend((IM_START, b"system\n" + req.system, IM_END, b"\n"))
    if req.system is not None:
        spans += (0, len(parts))

    # The last query is the last `user` message; with none, no assistant turn
    # comes after it (the template's default index is the last message).
    last_query = n - 1
    if thinking:
        for i in range(n - 1, -1, -1):
            if msgs[i].role == USER:
                last_query = i
                break

    for i, (role, content, reasoning, calls) in enumerate(msgs):
        assert isinstance(content, bytes)  # no media parts: validation refuses them here
        if role == USER:
            mark(len(parts))
            extend(text_user_turn(content))
        elif role == ASSISTANT:
            mark(len(parts))
            if i > last_query and (i == n - 1 or reasoning):
                reasoning = (reasoning or b"").strip(b"\n")
                extend((IM_START, b"assistant\n", THINK, b"\n" + reasoning + b"\n", THINK_END))
                body = b"\n\n" + content.lstrip(b"\n")
            else:
                add(IM_START)
                body = b"assistant\n" + content
            if calls:
                add(body + b"\n" if content else body)
                write_calls(parts, calls, _json_call)
            else:
                extend((body, IM_END, b"\n"))
        elif role == TOOL:
            mark(len(parts))
            if i == 0 or msgs[i - 1].role != TOOL:
                extend((IM_START, b"user\n"))
            else:
                add(b"\n")  # after the previous block's TOOL_RESPONSE_END
            extend((TOOL_RESPONSE, b"\n" + content + b"\n"))
            close_tool_response(parts, msgs, i)
        else:  # SYSTEM: only ever messages[0], rendered above
            continue
        mark(len(parts))

    if req.add_generation_prompt:
        extend((IM_START, b"assistant\n"))
        if thinking and not req.enable_thinking:
            extend(NO_THINKING_PROMPT)
    return RenderedParts(parts, spans, False)


def _json_call(name: bytes, arguments: bytes) -> bytes:
    return b"".join((_CALL_NAME, name, _CALL_ARGS, arguments, _CALL_CLOSE))


def render_qwen3(req: Request) -> RenderedParts:
    """The Qwen3 template (Qwen3 hybrid-thinking models)."""
    return _render(req, True)


def render_qwen3_2507(req: Request) -> RenderedParts:
    """The Qwen3-Instruct-2507 template: Qwen3's without reasoning (an
    assistant's `reasoning_content` is not written) and with a bare generation prompt."""
    return _render(req, False)


# The descriptor's parse facts are its defaults: JSON calls and tools, "\n" before a
# first call, and no THINK in a generation prompt (the model writes it).
# Official templates by fingerprint (formats/_descriptor.py): Qwen3's first release, its
# revision that tolerates non-string content, its training variant; 2507's and its training one.
FORMATS = (
    ChatFormat("qwen3", "qwen3", QWEN3, render_qwen3, vocabulary_default=True, template_file="qwen3.jinja",
               models="Qwen3 hybrid-thinking models (Qwen3-0.6B ... Qwen3-235B-A22B)",
               templates=fingerprints("87a2728cb8dc9fe424d624542f6060ec05a1d285ebbec578bb078900e33396b5",
                                      "a55ee1b1660128b7098723e0abcd92caa0788061051c62d51cbe87d9cf1974d8",
                                      "1d944ff8f268b611abb296cdd24d0f51981eef1c8647ac321c3a0258f61eb6c9"),
               hints=("<function-name>", "enable_thinking")),
    ChatFormat("qwen3-2507", "qwen3", QWEN3_2507, render_qwen3_2507, template_file="qwen3_instruct_2507.jinja",
               models="Qwen3-*-Instruct-2507 (no thinking)", hints=("<function-name>",),
               templates=fingerprints("64f85b198065d0fba2a81f37e10ed68161ce2c19a754c7100e67e0ca2ee9c326",
                                      "48e17aa3caf5bf20075b6e7366864ee943e00b6f0752aadfe8b670c2ab0291a5")),
)
