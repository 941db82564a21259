"""The provenance-preserving Qwen4Exp chat renderer (docs/FORMAT.md, section 3).

`render_chat` writes the Qwen3 chat template's bytes for an OpenAI-style
request, but as a segmented stream: every caller byte is DATA and only the
markers the template itself emits are TRUSTED_CONTROL. Rendering goes through
two primitives, `data(text)` and `control(marker)`; structure is decided from
roles, order and fields only, never from what caller text spells.

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

from functools import partial
from itertools import accumulate, cycle
from typing import Any

from .chat_validate import ASSISTANT, TOOL, USER, Request, validate_request
from .segments import Kind, RenderedChat, Segment

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

_TOOLS_HEAD = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
)
_TOOLS_TAIL = (
    "\n</tools>\n\nFor each function call, return a json object with function name and "
    "arguments within "
)
_TOOLS_FORMAT = '\n{"name": <function-name>, "arguments": <args-json-object>}\n'

_DATA = Kind.DATA
_CONTROL = Kind.TRUSTED_CONTROL
_make_segment = partial(tuple.__new__, Segment)  # Segment(*t) without the Python-level __new__


class _Stream:
    """Collects the stream as str parts plus where each same-kind run starts.

    `runs` holds the index into `parts` at which each run begins; runs
    alternate in kind, the first being CONTROL when `first_control`.
    Everything is joined once, in `finish`.
    """

    __slots__ = ("parts", "runs", "control_run", "first_control")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.runs: list[int] = []
        self.control_run: bool | None = None  # kind of the last run; None: no run yet
        self.first_control = False

    def data(self, text: str) -> None:
        if text:
            if self.control_run is not False:
                self.runs.append(len(self.parts))
                self.control_run = False
            self.parts.append(text)

    def control(self, marker: str) -> None:
        if marker not in CONTROL_MARKERS:  # internal invariant: never caller text
            raise AssertionError(f"not a template marker: {marker!r}")
        if self.control_run is not True:
            if self.control_run is None:
                self.first_control = True
            self.runs.append(len(self.parts))
            self.control_run = True
        self.parts.append(marker)

    def finish(self) -> tuple[bytes, tuple[int, ...], bool]:
        """(data, segment boundaries, first segment is control): RenderedChat._commit's form."""
        parts = self.parts
        bounds = self.runs + [len(parts)]
        # One join + encode per run: byte lengths come from the encoded runs.
        chunks = ["".join(parts[a:b]).encode("utf-8") for a, b in zip(bounds, bounds[1:])]
        data = b"".join(chunks)  # validated text: encoding cannot fail
        return data, tuple(accumulate(map(len, chunks), initial=0)), self.first_control


def _render(req: Request, out: _Stream) -> None:
    data, control = out.data, out.control
    msgs = req.messages
    n = len(msgs)

    if req.tools:
        control(IM_START)
        data("system\n")
        if req.system is not None:
            data(req.system)
            data("\n\n")
        data(_TOOLS_HEAD)
        for schema in req.tools:
            data("\n")
            data(schema)
        data(_TOOLS_TAIL)
        control(TOOL_CALL)
        control(TOOL_CALL_END)
        data(" XML tags:\n")
        control(TOOL_CALL)
        data(_TOOLS_FORMAT)
        control(TOOL_CALL_END)
        control(IM_END)
        data("\n")
    elif req.system is not None:
        control(IM_START)
        data("system\n")
        data(req.system)
        control(IM_END)
        data("\n")

    # The last query is the last `user` message; with none, no assistant turn
    # comes after it (the template's default index is the last message).
    last_query = n - 1
    for i in range(n - 1, -1, -1):
        if msgs[i].role == USER:
            last_query = i
            break

    for i, msg in enumerate(msgs):
        role = msg.role
        if role == USER:
            control(IM_START)
            data("user\n")
            data(msg.content)
            control(IM_END)
            data("\n")
        elif role == ASSISTANT:
            content = msg.content
            control(IM_START)
            data("assistant\n")
            reasoning = msg.reasoning or ""
            if i > last_query and (i == n - 1 or reasoning):
                control(THINK)
                data("\n")
                data(reasoning.strip("\n"))
                data("\n")
                control(THINK_END)
                data("\n\n")
                data(content.lstrip("\n"))
            else:
                data(content)
            first = True
            for name, arguments in msg.calls:
                if content or not first:
                    data("\n")
                first = False
                control(TOOL_CALL)
                data('\n{"name": "')
                data(name)
                data('", "arguments": ')
                data(arguments)
                data("}\n")
                control(TOOL_CALL_END)
            control(IM_END)
            data("\n")
        elif role == TOOL:
            if i == 0 or msgs[i - 1].role != TOOL:
                control(IM_START)
                data("user")
            data("\n")
            control(TOOL_RESPONSE)
            data("\n")
            data(msg.content)
            data("\n")
            control(TOOL_RESPONSE_END)
            if i == n - 1 or msgs[i + 1].role != TOOL:
                control(IM_END)
                data("\n")
        # SYSTEM: only ever messages[0], rendered above.

    if req.add_generation_prompt:
        control(IM_START)
        data("assistant\n")
        if not req.enable_thinking:
            control(THINK)
            data("\n\n")
            control(THINK_END)
            data("\n\n")


def _build(messages: Any, tools: Any, add_generation_prompt: Any, enable_thinking: Any):
    req = validate_request(messages, tools, add_generation_prompt, enable_thinking)
    stream = _Stream()
    _render(req, stream)
    return stream.finish()


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
