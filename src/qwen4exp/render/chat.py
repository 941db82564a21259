"""The provenance-preserving chat renderer (docs/FORMAT.md, section 3).

`render_chat` writes an official Qwen chat template's bytes for an
OpenAI-style request, in the format it is asked for (formats/; `chat_formats()`
lists them), but as a segmented
stream: every caller byte is DATA and only the markers the template itself
emits are TRUSTED_CONTROL. Caller strings arrive from validation as UTF-8
bytes and only ever land in DATA parts; CONTROL parts are the formats'
constants. Structure is decided from roles, order, fields and options only,
never from what caller text spells. Each message's byte range is recorded as
it is written (`RenderedChat.message_spans`).
"""

from __future__ import annotations

from itertools import accumulate
from operator import attrgetter
from collections.abc import Sequence
from typing import Any

from qwen4exp.render.validate import validate_request
from qwen4exp.formats import chat_format as _chat_format
from qwen4exp.formats import chat_formats, default_format
from qwen4exp.render.media import locate as _locate_media
from qwen4exp.render.segments import ChatRecord, RenderedChat
from qwen4exp.shapes import MessageLike, ToolLike

__all__ = ["render_chat", "render_chat_into", "chat_formats"]

_role = attrgetter("role")


def _build(messages: Any, tools: Any, add_generation_prompt: Any, enable_thinking: Any,
           chat_format: Any, preserve_thinking: Any, reasoning_effort: Any, add_vision_id: Any = None):
    """The ChatRecord of a request (validated, rendered)."""
    fmt = default_format() if chat_format is None else _chat_format(chat_format)
    req = validate_request(messages, tools, add_generation_prompt, enable_thinking,
                           preserve_thinking, reasoning_effort, fmt.rules, add_vision_id)
    parts, spans, opens_reasoning, first_control = fmt.render(req)
    bounds = tuple(accumulate(map(len, parts), initial=0))
    roles = tuple(map(_role, req.messages))
    media = _locate_media(parts, first_control, req.media) if req.media else ()
    # the request's facts a completion parser needs, kept as rendered: the
    # tools as their validated JSON text (a snapshot the caller cannot mutate)
    return ChatRecord(b"".join(parts), bounds, first_control, None, spans, roles, fmt.name,
                      req.tools, req.add_generation_prompt, opens_reasoning, media)


def render_chat(
    messages: Sequence[MessageLike],
    *,
    tools: Sequence[ToolLike] | None = None,
    add_generation_prompt: bool = False,
    enable_thinking: bool | None = None,
    chat_format: str | None = None,
    preserve_thinking: bool | None = None,
    reasoning_effort: str | None = None,
    add_vision_id: bool | None = None,
) -> RenderedChat:
    """Render an OpenAI-style chat request as a segmented transcript in `chat_format`
    (`chat_formats()` lists them; None: the default vocabulary's default format,
    the Qwen4Exp format; `Tokenizer.render_chat` renders in a tokenizer's own).

    `enable_thinking`, `preserve_thinking`, `reasoning_effort` and
    `add_vision_id` (formats with media: "Picture N: " labels) left None take
    the format's default; one the format does not have is an error.
    Raises ChatFormatError for a request the format does not accept and
    TextEncodingError for lone surrogates, naming the message index and field.
    """
    chat = RenderedChat()
    chat._commit(_build(messages, tools, add_generation_prompt, enable_thinking, chat_format,
                         preserve_thinking, reasoning_effort, add_vision_id))
    return chat


def render_chat_into(messages: Sequence[MessageLike], out: RenderedChat, **options: Any) -> None:
    """Render into `out` (render_chat's keyword options), replacing its contents
    only once the whole request has been validated and rendered; on any error
    `out` is left exactly as it was."""
    if not isinstance(out, RenderedChat):
        raise TypeError(f"out must be a RenderedChat, not {type(out).__name__}")
    out._take(render_chat(messages, **options))
