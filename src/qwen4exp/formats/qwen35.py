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
* 3.8 writes a reasoning-effort instruction at the top of the system turn
  (xhigh, the default, and low; none for medium or with thinking off), and
  leaves out a system turn that would be empty.

The templates' decisions that read caller text (the last query skips a user
message that looks like a TOOL_RESPONSE block; 3.5 / 3.6 take reasoning
out of content that contains the THINK_END marker) are made from roles and fields here
instead: docs/FORMAT.md ("Where the formats depart from the templates").
"""

from __future__ import annotations

from ..chat_validate import ASSISTANT, TOOL, USER, XML_JSON, XML_PYTHON, Request, Rules
from ._control import (
    IM_START, IM_END, THINK, THINK_END, TOOL_CALL, TOOL_CALL_END, TOOL_RESPONSE,
    TOOL_RESPONSE_END, TOOL_CALL_PAIR, TOOL_CALL_END_IM_END, TOOL_RESPONSE_END_IM_END,
    NO_THINKING_PROMPT,
)

__all__ = ["QWEN35", "QWEN36", "QWEN38", "render_qwen35"]

QWEN35 = Rules("qwen3.5", trim=True, calls=XML_PYTHON, needs_query=True, thinking=True,
               preserve=None, effort=None)
QWEN36 = Rules("qwen3.6", trim=True, calls=XML_JSON, needs_query=True, thinking=True,
               preserve=False, effort=None)
QWEN38 = Rules("qwen3.8", trim=True, calls=XML_JSON, needs_query=True, thinking=True,
               preserve=True, effort="xhigh")

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


def render_qwen35(req: Request) -> tuple[list[bytes], list[int], bool]:
    """Parts, message spans and whether the generation prompt left a THINK
    block open (as formats/qwen3.py's) of a request in the qwen3.5 / 3.6 / 3.8
    format; which one is told by the resolved options (`reasoning_effort` is
    set only in 3.8, `preserve_thinking` only in 3.6 / 3.8).

    Only a tool message at index 0 starts without a turn of its own (the
    template opens the shared user turn only after another message): its
    newline then joins the preceding DATA part, or the stream starts with an
    empty CONTROL part that the caller drops."""
    parts: list[bytes] = []
    add, extend = parts.append, parts.extend
    spans: list[int] = []
    mark = spans.append
    msgs = req.messages
    n = len(msgs)
    system = req.system
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
            extend((IM_START, b"user\n" + content, IM_END, b"\n"))
        elif role == ASSISTANT:
            mark(len(parts))
            if keep_reasoning or i > last_query:
                extend((IM_START, b"assistant\n", THINK, b"\n" + (reasoning or b"") + b"\n",
                        THINK_END))
                body = b"\n\n" + content
            else:
                add(IM_START)
                body = b"assistant\n" + content
            if calls:
                add(body + b"\n\n" if content else body)
                for k, (name, params) in enumerate(calls):
                    if k:
                        extend((TOOL_CALL_END, b"\n"))
                    extend((TOOL_CALL, b"".join((_FUNCTION, name, b">\n", params, _FUNCTION_END))))
                extend((TOOL_CALL_END_IM_END, b"\n"))
            else:
                extend((body, IM_END, b"\n"))
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
            extend((TOOL_RESPONSE, b"\n" + content + b"\n"))
            if i == n - 1 or msgs[i + 1].role != TOOL:
                extend((TOOL_RESPONSE_END_IM_END, b"\n"))
            else:
                add(TOOL_RESPONSE_END)
        else:  # SYSTEM: only ever messages[0], rendered above
            continue
        mark(len(parts))

    opens_reasoning = req.add_generation_prompt and req.enable_thinking
    if req.add_generation_prompt:
        extend((IM_START, b"assistant\n"))
        extend(_THINKING_PROMPT if opens_reasoning else NO_THINKING_PROMPT)
    return parts, spans, opens_reasoning
