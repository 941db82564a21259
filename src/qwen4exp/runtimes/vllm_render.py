"""The renderer of vLLM's `qwen4exp` tokenizer mode (docs/RUNTIMES.md, "vLLM").

vLLM hands a renderer each chat request's messages and its template
arguments (`ChatParams.chat_template_kwargs`: the request's
`chat_template_kwargs`, its top-level `reasoning_effort`,
`add_generation_prompt`, and the tools as vLLM parsed them). This one renders
them with provenance in the model folder's chat format and returns the token
ids, so vLLM never tokenizes a flat string: an atom spelled by a caller stays
ordinary BPE text. `render_request` is the one conversion from vLLM's request
shape to `render_chat`'s; the parsers reuse it to rebuild the prompt they
continue.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from vllm.exceptions import VLLMValidationError
from vllm.renderers.base import BaseRenderer

from qwen4exp.errors import Qwen4ExpError
from qwen4exp.formats import OPTION_NAMES
from qwen4exp.formats import chat_format as format_named
from qwen4exp.encode.core import TEMPLATE_FORMAT

from qwen4exp.runtimes.vllm_requests import materialize_messages, template_arguments

__all__ = ["Qwen4ExpRenderer", "render_request", "render_arguments"]



def _refuse(message: str, parameter: str) -> VLLMValidationError:
    return VLLMValidationError(f"qwen4exp renderer: {message}", parameter=parameter)


def _tools(tools: Any) -> list | None:
    """The tools as the request spelled them: vLLM's model_dump adds
    `"description": null` (and `"parameters": null`) for fields the caller
    left out; they are dropped so the schema renders as sent."""
    if tools is None:
        return None
    out = []
    for tool in tools:
        if hasattr(tool, "model_dump"):  # a pydantic ChatCompletionToolsParam
            tool = tool.model_dump()
        fn = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(fn, dict) and any(fn.get(k, 0) is None for k in ("description", "parameters")):
            tool = {**tool, "function": {k: v for k, v in fn.items()
                                         if not (v is None and k in ("description", "parameters"))}}
        out.append(tool)
    return out


#: The content parts vLLM's request model reads as media (vllm/renderers/
#: chat_utils.py, MM_PARSER_MAP), and the Qwen templates' own two types; a part
#: without a type is media when it has one of these keys, as vLLM reads it.
_MEDIA_TYPES = frozenset({"image_url", "input_image", "image_pil", "image_embeds", "audio_url",
                          "input_audio", "audio_embeds", "video_url", "video_embeds", "image", "video"})


def _first_media_part(messages: Any) -> tuple[int, int, Any] | None:
    """(message, part, type) of the first media content part, or None. Only
    list contents are read (vLLM hands validated lists)."""
    if not isinstance(messages, list):
        return None
    for i, msg in enumerate(messages):
        content = msg.get("content") if isinstance(msg, dict) else None
        if not isinstance(content, list):
            continue
        for j, part in enumerate(content):
            if not isinstance(part, dict):
                continue
            kind = part.get("type")
            if kind in _MEDIA_TYPES or (kind is None and not _MEDIA_TYPES.isdisjoint(part)):
                return i, j, kind
    return None


def _refuse_part(i: int, j: int, kind: Any, reason: str) -> VLLMValidationError:
    return _refuse(f"messages[{i}].content[{j}]: {kind!r} parts are not supported ({reason})", "messages")


#: Content parts vLLM reads as text besides "text" (the Responses API's).
_TEXT_PART_TYPES = frozenset({"input_text", "output_text"})


def _message(msg: Any, i: int) -> Any:
    """One OpenAI message in render_chat's shape. vLLM hands the request's
    messages as dicts; `reasoning` (vLLM's and newer OpenAI clients' name) is
    `reasoning_content`, and `developer` is `system` (as vLLM maps it for
    templates without that role); parts other than text are refused (the
    renderer says why for media parts first). Everything else is passed as
    sent: render_chat reads content strings or text parts, tool calls with
    arguments as a dict or a JSON string, and ignores `tool_call_id`/`name`."""
    if not isinstance(msg, dict):
        return msg  # render_chat names what is wrong with it
    content = msg.get("content")
    renamed = False
    if isinstance(content, list):
        for j, part in enumerate(content):
            kind = part.get("type") if isinstance(part, dict) else None
            if kind in _TEXT_PART_TYPES:
                renamed = True
            elif kind != "text":
                # The 3.5+ formats would write an image's placeholder, but vLLM
                # would get no image: refuse instead of prompting without it.
                raise _refuse_part(i, j, kind, "the qwen4exp renderer passes text only")
    role = msg.get("role")
    reasoning = msg.get("reasoning")
    if role != "developer" and reasoning is None and not renamed:
        return msg
    msg = dict(msg)
    if renamed:  # the Responses API's input_text / output_text parts are text parts
        msg["content"] = [{**p, "type": "text"} if p.get("type") in _TEXT_PART_TYPES else p
                          for p in content or ()]
    if role == "developer":
        msg["role"] = "system"
    if reasoning is not None:
        del msg["reasoning"]
        other = msg.get("reasoning_content")
        if other is not None and other != reasoning:
            raise _refuse(f"messages[{i}] has both reasoning and reasoning_content, and they differ",
                          "messages")
        msg["reasoning_content"] = reasoning
    return msg


def _materialize(messages: Any) -> list:
    """The messages with vLLM's lazy iterables as lists (vllm_requests), an
    item its request model refuses an HTTP 400 naming it."""
    try:
        return materialize_messages(messages)
    except Qwen4ExpError as exc:
        raise _refuse(str(exc), "messages") from None


def render_arguments(tok, messages: Any, kwargs: dict) -> tuple[list, dict]:
    """(messages, options) for `tok.render_chat` from a request's messages and
    its chat_template_kwargs; VLLMValidationError for what the renderer cannot
    honour (a template of its own, continue_final_message, documents). A
    tokenizer of a folder's own template takes every key as a template
    variable (vllm_requests.template_arguments). Other
    keys are ignored, as vLLM's `hf` renderer ignores variables a template does
    not use: vLLM adds server-wide ones (cohere_format) to every request."""
    q = tok.qwen4exp_tokenizer
    own = q.chat_format == TEMPLATE_FORMAT
    if kwargs.get("chat_template") is not None:
        what = "its own Jinja template" if own else f"chat format ({q.chat_format})"
        raise _refuse("a chat template cannot be used with --tokenizer-mode qwen4exp: the model folder's "
                      f"{what} is rendered by qwen4exp itself, with provenance; leave chat_template out",
                      "chat_template")
    if kwargs.get("continue_final_message"):
        raise _refuse("continue_final_message is not supported: qwen4exp renders whole turns",
                      "continue_final_message")
    if own:
        template = q.core.template.template
        try:
            kwargs = {**kwargs, "tools": _tools(kwargs.get("tools"))}
            return template_arguments(q, _materialize(messages), kwargs,
                                      reads_parts=_reads_content_parts(template))
        except Qwen4ExpError as exc:
            raise _refuse(str(exc), "messages") from None
    if kwargs.get("documents"):
        raise _refuse("documents are not part of the Qwen chat formats", "documents")
    messages = _materialize(messages)
    options = {"add_generation_prompt": kwargs.get("add_generation_prompt", True)}
    tools = _tools(kwargs.get("tools"))
    if tools is not None:
        options["tools"] = tools
    fmt_options = format_named(tok.qwen4exp_tokenizer.chat_format).options
    # The render options of any format (enable_thinking, ...) are passed on:
    # a format that lacks one refuses it, naming it.
    for key in OPTION_NAMES:
        value = kwargs.get(key)
        if value is None:
            continue
        # vLLM turns reasoning_effort="none" into enable_thinking=False as well;
        # that is how the Qwen formats spell it.
        if key == "reasoning_effort" and value == "none" and (
                key not in fmt_options or kwargs.get("enable_thinking") is False):
            continue
        options[key] = value
    return [_message(m, i) for i, m in enumerate(messages)], options


@lru_cache(maxsize=8)
def _reads_content_parts(template: str) -> bool:
    """Whether a template iterates over a message's content parts (vLLM's
    "openai" content format), as vLLM's hf renderer detects it."""
    try:
        from vllm.renderers.hf import _detect_content_format
    except ImportError:  # another vLLM: the common case, a template of strings
        return False
    return _detect_content_format(template, default="string") == "openai"


def render_request(tok, messages: Any, kwargs: dict):
    """(RenderedChat, token ids as a list) of a chat request, rendered by the
    vLLM tokenizer `tok`'s qwen4exp tokenizer in its chat format.
    VLLMValidationError (HTTP 400) for a request the format does not accept,
    naming the message and field."""
    q = tok.qwen4exp_tokenizer
    messages, options = render_arguments(tok, messages, kwargs)
    try:
        chat = q.render_chat(messages, **options)
        return chat, q.encode_chat(chat).tolist()
    except Qwen4ExpError as exc:
        raise _refuse(str(exc), "messages") from None


class Qwen4ExpRenderer(BaseRenderer):
    """Renders chat requests with provenance and gives vLLM the ids."""

    def __init__(self, config, tokenizer) -> None:
        super().__init__(config, tokenizer)
        if tokenizer is not None and not hasattr(tokenizer, "qwen4exp_tokenizer"):
            raise TypeError("the qwen4exp renderer needs the qwen4exp tokenizer (--tokenizer-mode qwen4exp), "
                            f"not {type(tokenizer).__name__}")

    def render_messages(self, messages, params):
        tok = self.get_tokenizer()
        messages = _materialize(messages)
        media = _first_media_part(messages)
        if media is not None:
            raise self._media_refusal(*media)
        kwargs = dict(params.chat_template_kwargs or {})
        if params.chat_template is not None:  # the request's own, or the server's --chat-template
            kwargs["chat_template"] = params.chat_template
        source = messages
        if tok.qwen4exp_tokenizer.chat_format == TEMPLATE_FORMAT and params.chat_template is None:
            source = self._vllm_conversation(tok, messages, params)
        chat, ids = render_request(tok, source, kwargs)
        # The prompt text is for logs and return_prompt_text only: vLLM uses the ids.
        return _conversation(messages), {"prompt_token_ids": ids, "prompt": chat.text}

    def _vllm_conversation(self, tok, messages: list, params) -> list:
        """The messages as vLLM's `hf` renderer hands a model folder's own
        template (its parse_chat_messages: content as a string or text parts
        by the template's content format, tool-call arguments as dicts,
        `reasoning` also as `reasoning_content`); media parts were refused
        before. The values stay the caller's: the template renders them as DATA."""
        try:
            from vllm.renderers.chat_utils import parse_chat_messages
        except ImportError:  # another vLLM: template_arguments converts them itself
            return messages
        given = params.chat_template_content_format
        content_format = given if given in ("string", "openai") else (
            "openai" if _reads_content_parts(tok.qwen4exp_tokenizer.core.template.template) else "string")
        conversation, _, _ = parse_chat_messages(messages, self.model_config, content_format=content_format)
        return conversation

    def _media_refusal(self, i: int, j: int, kind: Any) -> VLLMValidationError:
        """The HTTP 400 for a media part, before any media is fetched. A
        text-only architecture gets the reason vLLM's `hf` renderer gives
        (its multimodal registry's ValueError, also a 400); a vision one is
        told that this renderer does not pass media to vLLM's processor
        (docs/RUNTIMES.md, "Media")."""
        config = self.model_config
        if not config.is_multimodal_model:
            name = config.served_model_name or config.model
            return _refuse_part(i, j, kind, f"{name} is not a multimodal model")
        return _refuse_part(i, j, kind, "the qwen4exp renderer does not pass images or videos to "
                            "vLLM's multimodal processor; see docs/RUNTIMES.md, Media")

    async def render_messages_async(self, messages, params):
        # About 0.1 ms for a 4 KB chat: cheaper inline than through a thread pool.
        return self.render_messages(messages, params)


def _conversation(messages) -> list[dict]:
    """vLLM's parsed conversation (it reads the last message's role and content
    for `echo`): role, content as text, and the tool fields as sent."""
    out = []
    for msg in messages:
        if not isinstance(msg, dict):
            continue
        content = msg.get("content")
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        item = {"role": msg.get("role"), "content": content}
        for key in ("tool_calls", "tool_call_id", "name", "reasoning", "reasoning_content"):
            if msg.get(key) is not None:
                item[key] = msg[key]
        out.append(item)
    return out
