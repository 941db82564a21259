"""The provenance-preserving Qwen4Exp chat renderer (docs/FORMAT.md, section 3).

`render_chat` writes the Qwen3 chat template's bytes for an OpenAI-style
request, but as a segmented stream: every caller byte is DATA and only the
markers the template itself emits are TRUSTED_CONTROL. Caller strings arrive
from validation as UTF-8 bytes and only ever land in DATA parts; CONTROL parts
are module constants. Structure is decided from roles, order and fields only,
never from what caller text spells. Each message's byte range is recorded as
it is written (`RenderedChat.message_spans`).

Differences from the Jinja template (all on inputs that spell atoms or that the
template cannot render):

* reasoning comes only from `reasoning_content` (the template also splits
  `content` on a literal `</think>`);
* the last query is the last `user` message (the template skips user messages
  that look like `<tool_response>...</tool_response>`);
* content lists of text parts are joined (the template fails on them, or, for
  tool messages, writes the list's Python repr); a missing/None assistant
  content renders as "" (the template fails on it).
"""

from __future__ import annotations

from itertools import accumulate
from operator import attrgetter
from typing import Any

from .chat_validate import ASSISTANT, TOOL, USER, Request, validate_request
from .segments import RenderedChat

__all__ = ["render_chat", "render_chat_into", "CONTROL_MARKERS"]

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
THINK = "<think>"
THINK_END = "</think>"
TOOL_CALL = "<tool_call>"
TOOL_CALL_END = "</tool_call>"
TOOL_RESPONSE = "<tool_response>"
TOOL_RESPONSE_END = "</tool_response>"

#: The only spellings the renderer ever emits as TRUSTED_CONTROL.
CONTROL_MARKERS = frozenset(
    {IM_START, IM_END, THINK, THINK_END, TOOL_CALL, TOOL_CALL_END, TOOL_RESPONSE, TOOL_RESPONSE_END}
)

# The template's fixed text as byte chunks, built once. A rendered stream is a
# list of parts that strictly alternate CONTROL, DATA, CONTROL, ... and every
# CONTROL part is one of the constants below (markers the template writes side
# by side are pre-joined), so parts are segments and the boundaries are the
# running sum of part lengths: no per-call kind tracking, no marker checks.
_IM_START = IM_START.encode()
_IM_END = IM_END.encode()
_THINK = THINK.encode()
_THINK_END = THINK_END.encode()
_TOOL_CALL = TOOL_CALL.encode()
_TOOL_CALL_END = TOOL_CALL_END.encode()
_TOOL_RESPONSE = TOOL_RESPONSE.encode()
_TOOL_RESPONSE_END = TOOL_RESPONSE_END.encode()
_TOOL_CALL_PAIR = _TOOL_CALL + _TOOL_CALL_END
_TOOL_CALL_END_IM_END = _TOOL_CALL_END + _IM_END
_TOOL_RESPONSE_END_IM_END = _TOOL_RESPONSE_END + _IM_END

_TOOLS_HEAD = (
    b"# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    b"You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
)
# After the schemas: the preamble's remaining DATA and CONTROL parts, in order.
_TOOLS_TAIL = (
    b"\n</tools>\n\nFor each function call, return a json object with function name and "
    b"arguments within ",
    _TOOL_CALL_PAIR,
    b" XML tags:\n",
    _TOOL_CALL,
    b'\n{"name": <function-name>, "arguments": <args-json-object>}\n',
    _TOOL_CALL_END_IM_END,
    b"\n",
)
_NO_THINKING_PROMPT = (_THINK, b"\n\n", _THINK_END, b"\n\n")
_CALL_NAME = b'\n{"name": "'
_CALL_ARGS = b'", "arguments": '
_CALL_CLOSE = b"}\n"
_role = attrgetter("role")

def _render(req: Request) -> tuple[list[bytes], list[int]]:
    """The stream's parts (alternating CONTROL, DATA, ...; see above) and, per
    message, the part indices where its span starts and ends (flat: start0,
    end0, start1, ...). A message's span is its turn from `<|im_start|>`
    through the newline after `<|im_end|>`; the tools preamble belongs to the
    system message's span (to none without one); each tool message of a
    shared turn spans its own `<tool_response>` block (the first one also the
    turn's opening, the last one its closing); the generation prompt belongs
    to no message."""
    parts: list[bytes] = []
    add, extend = parts.append, parts.extend
    spans: list[int] = []
    mark = spans.append
    msgs = req.messages
    n = len(msgs)

    if req.tools:
        head = b"system\n" if req.system is None else b"system\n" + req.system + b"\n\n"
        extend((_IM_START, b"\n".join((head + _TOOLS_HEAD, *req.tools)) + _TOOLS_TAIL[0]))
        extend(_TOOLS_TAIL[1:])
    elif req.system is not None:
        extend((_IM_START, b"system\n" + req.system, _IM_END, b"\n"))
    if req.system is not None:
        spans += (0, len(parts))

    # The last query is the last `user` message; with none, no assistant turn
    # comes after it (the template's default index is the last message).
    last_query = n - 1
    for i in range(n - 1, -1, -1):
        if msgs[i].role == USER:
            last_query = i
            break

    for i, (role, content, reasoning, calls) in enumerate(msgs):
        if role == USER:
            mark(len(parts))
            extend((_IM_START, b"user\n" + content, _IM_END, b"\n"))
        elif role == ASSISTANT:
            mark(len(parts))
            if i > last_query and (i == n - 1 or reasoning):
                reasoning = (reasoning or b"").strip(b"\n")
                extend((_IM_START, b"assistant\n", _THINK, b"\n" + reasoning + b"\n", _THINK_END))
                body = b"\n\n" + content.lstrip(b"\n")
            else:
                add(_IM_START)
                body = b"assistant\n" + content
            if calls:
                add(body + b"\n" if content else body)
                for k, (name, arguments) in enumerate(calls):
                    if k:
                        extend((_TOOL_CALL_END, b"\n"))
                    extend((_TOOL_CALL, b"".join((_CALL_NAME, name, _CALL_ARGS, arguments, _CALL_CLOSE))))
                extend((_TOOL_CALL_END_IM_END, b"\n"))
            else:
                extend((body, _IM_END, b"\n"))
        elif role == TOOL:
            mark(len(parts))
            if i == 0 or msgs[i - 1].role != TOOL:
                extend((_IM_START, b"user\n"))
            else:
                add(b"\n")  # after the previous block's </tool_response>
            extend((_TOOL_RESPONSE, b"\n" + content + b"\n"))
            if i == n - 1 or msgs[i + 1].role != TOOL:
                extend((_TOOL_RESPONSE_END_IM_END, b"\n"))
            else:
                add(_TOOL_RESPONSE_END)
        else:  # SYSTEM: only ever messages[0], rendered above
            continue
        mark(len(parts))

    if req.add_generation_prompt:
        extend((_IM_START, b"assistant\n"))
        if not req.enable_thinking:
            extend(_NO_THINKING_PROMPT)
    return parts, spans


def _build(messages: Any, tools: Any, add_generation_prompt: Any, enable_thinking: Any):
    """RenderedChat._commit's arguments for a request (validated, rendered)."""
    req = validate_request(messages, tools, add_generation_prompt, enable_thinking)
    parts, spans = _render(req)
    bounds = tuple(accumulate(map(len, parts), initial=0))
    roles = tuple(map(_role, req.messages))
    return b"".join(parts), bounds, True, None, (spans, roles)


def render_chat(
    messages: Any,
    *,
    tools: Any = None,
    add_generation_prompt: bool = False,
    enable_thinking: bool = True,
) -> RenderedChat:
    """Render an OpenAI-style chat request as a segmented Qwen4Exp transcript.

    Raises ChatFormatError for a request the format does not accept and
    TextEncodingError for lone surrogates, naming the message index and field.
    """
    chat = RenderedChat()
    chat._commit(*_build(messages, tools, add_generation_prompt, enable_thinking))
    return chat


def render_chat_into(
    messages: Any,
    out: RenderedChat,
    *,
    tools: Any = None,
    add_generation_prompt: bool = False,
    enable_thinking: bool = True,
) -> None:
    """Render into `out`, replacing its contents only once the whole request
    has been validated and rendered; on any error `out` is left exactly as it was."""
    if not isinstance(out, RenderedChat):
        raise TypeError(f"out must be a RenderedChat, not {type(out).__name__}")
    out._commit(*_build(messages, tools, add_generation_prompt, enable_thinking))
