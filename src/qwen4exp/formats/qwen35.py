"""The Qwen3.5 chat formats: "qwen3.5", "qwen3.6" and "qwen3.8".

One template family (Qwen3.5 / 3.6 / 3.8 models' `chat_template.jinja`):

* a tool call is XML text between the TOOL_CALL and TOOL_CALL_END markers
  (markers.Marker): TOOL_CALL, then
  `\\n<function=NAME>\\n<parameter=KEY>\\nVALUE\\n</parameter>\\n</function>\\n`,
  then TOOL_CALL_END; `<function=` and `<parameter=` are ordinary text
  (DATA), only the TOOL_CALL pair are markers. Values: strings verbatim,
  dicts and lists as `tojson`, other values as Python's str() in qwen3.5
  (`True`, `None`) and as JSON in 3.6 / 3.8 (`true`, `null`);
* every message's content, and the reasoning, is trimmed (str.strip());
* the system prompt comes after the tools block, inside the same system turn;
* an assistant turn after the last user query always has a THINK block,
  empty or not; before it only with preserve_thinking (3.6: off by default,
  3.8: on by default);
* the generation prompt opens a THINK block (the marker and a newline; or
  writes an empty block when enable_thinking is False);
* an image or video part is a placeholder, the VISION_START, IMAGE_PAD (or
  VIDEO_PAD) and VISION_END markers, in user, assistant and tool messages
  (qwen4exp.render.media); with add_vision_id a "Picture N: " label before it;
* 3.8 writes a reasoning-effort instruction at the top of the system turn
  (xhigh, the default, and low; none for medium or with thinking off), and
  leaves out a system turn that would be empty.

The templates' decisions that read caller text (the last query skips a user
message that looks like a TOOL_RESPONSE block; 3.5 / 3.6 take reasoning
out of content that contains the THINK_END marker) are made from roles and fields here
instead: docs/FORMAT.md ("Where the formats depart from the templates").
"""

from __future__ import annotations

from typing import Any

from qwen4exp.render.validate import ASSISTANT, TOOL, USER, XML_JSON, XML_PYTHON, Request, Rules
from qwen4exp.formats._descriptor import ChatFormat, RenderedParts, fingerprints
from qwen4exp.formats._turns import close_tool_response, write_calls
from qwen4exp.formats._control import (
    IM_START, IM_END, THINK, THINK_END, TOOL_CALL, TOOL_CALL_END, TOOL_RESPONSE, TOOL_CALL_PAIR,
    NO_THINKING_PROMPT,
)

__all__ = ["QWEN35", "QWEN36", "QWEN38", "render_qwen35", "FORMATS"]

QWEN35 = Rules("qwen3.5", trim=True, calls=XML_PYTHON, needs_query=True, thinking=True,
               preserve=None, effort=None, media=True)
QWEN36 = Rules("qwen3.6", trim=True, calls=XML_JSON, needs_query=True, thinking=True,
               preserve=False, effort=None, media=True)
QWEN38 = Rules("qwen3.8", trim=True, calls=XML_JSON, needs_query=True, thinking=True,
               preserve=True, effort="xhigh", media=True)

# Parts strictly alternate CONTROL, DATA, ... as formats/_control.py says.
_TOOLS_HEAD = b"# Tools\n\nYou have access to the following functions:\n\n<tools>"
# After the schemas, up to the system prompt: DATA and CONTROL parts, in order.
_TOOLS_TAIL = (
    b"\n</tools>\n\nIf you choose to call a function ONLY reply in the following format "
    b"with NO suffix:\n\n",
    TOOL_CALL,
    b"\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n"
    b"</parameter>\n<parameter=example_parameter_2>\nThis is the value for the second "
    b"parameter\nthat can span\nmultiple lines\n</parameter>\n</function>\n",
    TOOL_CALL_END,
    b"\n\n<IMPORTANT>\nReminder:\n- Function calls MUST follow the specified format: an inner "
    b"<function=...></function> block must be nested within ",
    TOOL_CALL_PAIR,
)
_TOOLS_LAST = (
    b" XML tags\n- Required parameters MUST be specified\n- You may provide optional reasoning "
    b"for your function call in natural language BEFORE the function call, but NOT after\n"
    b"- If there is no function call available, answer the question like normal with your "
    b"current knowledge and do not tell the user about function calls\n</IMPORTANT>"
)
# qwen3.8's instruction per reasoning effort (none for medium).
_EFFORT_TEXT = {
    "xhigh": b"Reasoning effort is set to xhigh. Please think carefully through the task, "
             b"validate key assumptions, consider plausible alternatives, and prioritize "
             b"correctness, consistency, and clarity in the final answer.",
    "medium": b"",
    "low": b"Reasoning effort is set to low. Keep your thinking brief and focused, moving "
           b"directly to the conclusion without unnecessary elaboration.",
}
_FUNCTION = b"\n<function="
_FUNCTION_END = b"</function>\n"
_THINKING_PROMPT = (THINK, b"\n")


def _with_media(parts: list[bytes], head: bytes, pieces: tuple, tail: bytes) -> bytes:
    """Append DATA `head` + the first text of a content with media parts, then
    each part's placeholder (CONTROL) and the text after it (DATA, `tail` after
    the last). Returns the placeholders not yet written, when no DATA follows
    them: the next CONTROL part starts with them (parts alternate)."""
    parts.append(head + pieces[0])
    last = len(pieces) - 1
    pending = b""
    for k in range(1, last, 2):
        pending += pieces[k].placeholder
        text = pieces[k + 1] + tail if k + 1 == last else pieces[k + 1]
        if text:
            parts += (pending, text)
            pending = b""
    return pending


def _xml_call(name: bytes, params: bytes) -> bytes:
    return b"".join((_FUNCTION, name, b">\n", params, _FUNCTION_END))


def render_qwen35(req: Request) -> RenderedParts:
    """Parts, message spans and whether the generation prompt left a THINK
    block open (as formats/qwen3.py's) of a request in the qwen3.5 / 3.6 / 3.8
    format; which one is told by the resolved options (`reasoning_effort` is
    set only in 3.8, `preserve_thinking` only in 3.6 / 3.8).

    Only a tool message at index 0 starts without a turn of its own (the
    template opens the shared user turn only after another message): its
    newline then joins the preceding DATA part, or the stream starts with
    DATA (an empty CONTROL part held its place while rendering)."""
    msgs, system = req.messages, req.system
    n = len(msgs)
    parts: list[bytes] = []
    spans: list[int] = []
    add, extend, mark = parts.append, parts.extend, spans.append
    effort = req.reasoning_effort  # None: not qwen3.8
    note = _EFFORT_TEXT[effort] if effort is not None and req.enable_thinking else b""

    if req.tools:
        head = b"system\n" + note + b"\n\n" + _TOOLS_HEAD if note else b"system\n" + _TOOLS_HEAD
        extend((IM_START, b"\n".join((head, *req.tools)) + _TOOLS_TAIL[0]))
        extend(_TOOLS_TAIL[1:])
        extend((_TOOLS_LAST + b"\n\n" + system if system else _TOOLS_LAST, IM_END, b"\n"))
    elif effort is None:
        if system is not None:
            extend((IM_START, b"system\n" + system, IM_END, b"\n"))
    elif system:
        extend((IM_START, b"system\n" + note + b"\n\n" + system if note else b"system\n" + system,
                IM_END, b"\n"))
    elif note:  # qwen3.8 writes no empty system turn, but one for the instruction
        extend((IM_START, b"system\n" + note, IM_END, b"\n"))
    if system is not None:
        spans += (0, len(parts))

    # The last query: the last `user` message (validation made sure there is one).
    last_query = n - 1
    while msgs[last_query].role != USER:
        last_query -= 1
    keep_reasoning = req.preserve_thinking is True

    for i, (role, content, reasoning, calls) in enumerate(msgs):
        if role == USER:
            mark(len(parts))
            if isinstance(content, bytes):
                extend((IM_START, b"user\n" + content, IM_END, b"\n"))
            else:  # media parts
                add(IM_START)
                extend((_with_media(parts, b"user\n", content, b"") + IM_END, b"\n"))
        elif role == ASSISTANT:
            mark(len(parts))
            if keep_reasoning or i > last_query:
                extend((IM_START, b"assistant\n", THINK, b"\n" + (reasoning or b"") + b"\n",
                        THINK_END))
                head = b"\n\n"
            else:
                add(IM_START)
                head = b"assistant\n"
            if isinstance(content, bytes):
                add(head + content + b"\n\n" if calls and content else head + content)
                pending = b""
            else:  # media parts (never empty; the calls' "\n\n" ends the last text)
                pending = _with_media(parts, head, content, b"\n\n" if calls else b"")
            if calls:
                write_calls(parts, calls, _xml_call)
            else:
                extend((pending + IM_END, b"\n"))
        elif role == TOOL:
            if i == 0:  # no turn opened (the template's loop.previtem is undefined)
                if parts:
                    mark(len(parts) - 1)
                    parts[-1] += b"\n"
                else:
                    mark(0)
                    extend((b"", b"\n"))
            elif msgs[i - 1].role != TOOL:
                mark(len(parts))
                extend((IM_START, b"user\n"))
            else:
                mark(len(parts))
                add(b"\n")  # after the previous block's TOOL_RESPONSE_END
            if isinstance(content, bytes):
                extend((TOOL_RESPONSE, b"\n" + content + b"\n"))
            else:  # media parts
                add(TOOL_RESPONSE)
                _with_media(parts, b"\n", content, b"\n")
            close_tool_response(parts, msgs, i)
        else:  # SYSTEM: only ever messages[0], rendered above
            continue
        mark(len(parts))

    opens_reasoning = req.add_generation_prompt and req.enable_thinking
    if req.add_generation_prompt:
        extend((IM_START, b"assistant\n"))
        extend(_THINKING_PROMPT if opens_reasoning else NO_THINKING_PROMPT)
    if parts and not parts[0]:  # the stream opened with the DATA after a first tool message
        del parts[0]
        return RenderedParts(parts, [max(k - 1, 0) for k in spans], opens_reasoning, first_control=False)
    return RenderedParts(parts, spans, opens_reasoning)


# Official templates by fingerprint (formats/_descriptor.py), each with its training variant;
# the Qwen3.5-0.8B / 2B template is the same format with thinking off unless asked for.
_XML = ("<function=", "enable_thinking")
# XML calls after "\n\n"; the generation prompt writes THINK and its newline.
_SYNTAX: dict[str, Any] = dict(call_syntax="xml", newlines_before_calls=2, prompt_think_newline=True)
FORMATS = (
    ChatFormat("qwen3.5", "qwen3.6", QWEN35, render_qwen35, hints=_XML, template_file="qwen3_5_think.jinja", **_SYNTAX,
               models="Qwen3.5 (the 0.8B and 2B models' template turns thinking off by default)",
               templates={**fingerprints("a4aee8afcf2e0711942cf848899be66016f8d14a889ff9ede07bca099c28f715",
                                         "ccf356d8f238e287c047b1ef589850fd6b2b44e6cb29079e26c635fb9b8111ef"),
                          **fingerprints("273d8e0e683b885071fb17e08d71e5f2a5ddfb5309756181681de4f5a1822d80",
                                         "f32fe3e21c20f59d193244181c8b4c324c73a8cd313ddf825633a9ecfd2afad2",
                                         enable_thinking=False)}),
    ChatFormat("qwen3.6", "qwen3.6", QWEN36, render_qwen35, hints=(*_XML, "preserve_thinking"), **_SYNTAX,
               template_file="qwen3_6.jinja",
               models="Qwen3.6 (Qwen3.6-27B, Qwen3.6-35B-A3B)", vocabulary_default=True,
               templates=fingerprints("e84f32a23fdda27689f868aa4a1a5621f41133e51a48d7f3efcbea2839574259",
                                      "c5a26eaf3aab77fdc4ec696540ff896713ff0764f552ce9f597ede99fc673034")),
    ChatFormat("qwen3.8", "qwen3.6", QWEN38, render_qwen35, models="Qwen3.8 (Qwen3.8-27B)", **_SYNTAX,
               template_file="qwen3_8.jinja",
               hints=(*_XML, "preserve_thinking", "reasoning_effort"),
               templates=fingerprints("c3cf9e34abf4f9e36c2d72165aa9c132d3e2a725b6c2586aaa3a8af9d7a81041",
                                      "320c2f734288f91c341c1c3c9690e4e6aba07a27852bf88d7c8481c880168288")),
)
