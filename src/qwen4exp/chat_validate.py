"""Validation of a chat request for the Qwen4Exp chat format (docs/FORMAT.md, section 3).

`validate_request` checks a whole request before a single byte is rendered and
returns it normalised: every caller string checked for lone surrogates, content
parts joined, tool arguments and tool schemas turned into the exact text the
renderer writes. Nothing here ever looks at what caller text *spells*: only
types, roles and order decide structure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, NamedTuple

from .errors import ChatFormatError
from .segments import utf8

__all__ = [
    "SYSTEM",
    "USER",
    "ASSISTANT",
    "TOOL",
    "Message",
    "Request",
    "validate_request",
    "tojson",
]

# Role codes of a normalised message.
SYSTEM, USER, ASSISTANT, TOOL = 0, 1, 2, 3
_ROLES = {"system": SYSTEM, "user": USER, "assistant": ASSISTANT, "tool": TOOL}

# Structured parts the text-only artifact refuses (docs/FORMAT.md, "Content").
_MEDIA_PARTS = frozenset({"image", "image_url", "video", "video_url", "audio", "input_audio"})
_MISSING = object()
# `type(x) is dict or isinstance(x, Mapping)`: the exact check first, since the
# abstract-class check costs more than the rest of a message's validation.


class Message(NamedTuple):
    role: int
    content: str  # joined text; "" for an assistant turn without content
    reasoning: str | None  # assistant `reasoning_content`, else None
    calls: tuple[tuple[str, str], ...]  # (name, rendered arguments) per tool call


class Request(NamedTuple):
    messages: tuple[Message, ...]
    system: str | None  # content of messages[0] when it is the system message
    tools: tuple[str, ...]  # each tool schema as `tojson` renders it; () = no tools preamble
    add_generation_prompt: bool
    enable_thinking: bool


_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False)
_new = tuple.__new__


def tojson(value: Any) -> str:
    """The text transformers' `tojson` filter writes for `value`.

    transformers overrides Jinja's filter with `json.dumps(x, ensure_ascii=False,
    indent=None, separators=None, sort_keys=False)`: default separators
    (", " and ": "), insertion order, non-ASCII verbatim, and no HTML escaping.
    `allow_nan=False` only adds a rejection: NaN/Infinity are not JSON.
    (One shared encoder: `json.dumps` with options builds a new one per call.)
    """
    return _ENCODER.encode(value)


# `where` names the field in error messages ("messages[3].tool_calls[0].name").
# It is only formatted on the error path: the hot path passes its parts.


def _exact(value: str) -> str:
    """An exact str: a subclass (numpy.str_, one overriding isascii/strip/encode)
    is copied once, so no overridden method ever runs on caller text."""
    return value if type(value) is str else str.__str__(value)


def _text(value: str, where: str) -> str:
    # Lone surrogates make the stream unencodable: name where they are.
    value = _exact(value)
    if not value.isascii():
        utf8(value, where)
    return value


def _json_text(value: Any, where: str, what: str) -> str:
    try:
        text = tojson(value)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ChatFormatError(f"{where}: {what} is not JSON-serialisable ({exc})") from None
    return _text(text, where)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _content(value: Any, i: int, optional: bool) -> str:
    if isinstance(value, str):
        value = _exact(value)
        if not value.isascii():
            utf8(value, f"messages[{i}].content")
        return value
    where = f"messages[{i}].content"
    if value is None:
        if optional:
            return ""
        raise ChatFormatError(f"{where}: content is required (a string or a list of text parts)")
    if isinstance(value, (list, tuple)):
        texts = []
        for j, part in enumerate(value):
            pwhere = f"{where}[{j}]"
            if type(part) is not dict and not isinstance(part, Mapping):
                raise ChatFormatError(
                    f"{pwhere}: a content part must be a dict, not {type(part).__name__}"
                )
            kind = part.get("type")
            if isinstance(kind, str) and kind in _MEDIA_PARTS:
                raise ChatFormatError(
                    f"{pwhere}: {kind!r} parts are not supported (the artifact is text-only)"
                )
            if kind != "text":
                raise ChatFormatError(f"{pwhere}: unknown content part type {kind!r}")
            text = part.get("text")
            if not isinstance(text, str):
                raise ChatFormatError(
                    f"{pwhere}.text: a text part needs a string 'text', not {type(text).__name__}"
                )
            texts.append(_text(text, f"{pwhere}.text"))
        return "".join(texts)
    raise ChatFormatError(
        f"{where}: content must be a string or a list of text parts, not {type(value).__name__}"
    )


def _arguments(value: Any, where: str) -> str:
    if isinstance(value, dict):
        return _json_text(value, where, "tool arguments")
    if isinstance(value, str):
        _text(value, where)
        try:
            parsed = json.loads(value, parse_constant=_reject_constant)
        except (ValueError, RecursionError) as exc:
            raise ChatFormatError(
                f"{where}: malformed tool arguments (a string must parse as a JSON object: {exc})"
            ) from None
        if not isinstance(parsed, dict):
            raise ChatFormatError(
                f"{where}: malformed tool arguments (the string parses as "
                f"{type(parsed).__name__}, not a JSON object)"
            )
        return value  # rendered verbatim
    raise ChatFormatError(
        f"{where}: malformed tool arguments (need a JSON object: a dict or a string "
        f"that parses as one, not {type(value).__name__})"
    )


def _tool_calls(value: Any, i: int) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)):
        raise ChatFormatError(
            f"messages[{i}].tool_calls: tool_calls must be a list, not {type(value).__name__}"
        )
    calls = []
    for j, call in enumerate(value):
        cwhere = f"messages[{i}].tool_calls[{j}]"
        if type(call) is not dict and not isinstance(call, Mapping):
            raise ChatFormatError(f"{cwhere}: a tool call must be a dict, not {type(call).__name__}")
        kind = call.get("type", "function")
        if kind != "function":
            raise ChatFormatError(f"{cwhere}.type: unsupported tool call type {kind!r}")
        if "function" in call:
            fn = call["function"]
            cwhere += ".function"
            if type(fn) is not dict and not isinstance(fn, Mapping):
                raise ChatFormatError(
                    f"{cwhere}: must be a dict with 'name' and 'arguments', not {type(fn).__name__}"
                )
        else:
            fn = call
        name = fn.get("name")
        if not isinstance(name, str) or not name:
            raise ChatFormatError(f"{cwhere}.name: a tool call needs a non-empty string name")
        _text(name, f"{cwhere}.name")
        if "arguments" not in fn:
            raise ChatFormatError(f"{cwhere}.arguments: malformed tool arguments (missing)")
        calls.append((name, _arguments(fn["arguments"], f"{cwhere}.arguments")))
    return tuple(calls)


def _tools(tools: Any) -> tuple[str, ...]:
    if tools is None:
        return ()
    if not isinstance(tools, list):
        raise ChatFormatError(f"tools: must be a list of dicts, not {type(tools).__name__}")
    out = []
    for k, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise ChatFormatError(
                f"tools[{k}]: a tool must be a dict (a JSON schema), not {type(tool).__name__}"
            )
        out.append(_json_text(tool, f"tools[{k}]", "the tool schema"))
    return tuple(out)


def _flag(value: Any, name: str) -> bool:
    """A bool option; numpy's bool_ counts (it is what a numpy mask yields)."""
    if isinstance(value, bool):
        return value
    if type(value).__module__ == "numpy" and type(value).__name__ in ("bool_", "bool"):
        return bool(value)
    kind = type(value)
    raise ChatFormatError(f"{name}: must be a bool, not {kind.__module__}.{kind.__qualname__}"
                          if kind.__module__ != "builtins" else f"{name}: must be a bool, not {kind.__name__}")


def validate_request(
    messages: Any, tools: Any, add_generation_prompt: Any, enable_thinking: Any
) -> Request:
    """Check a whole request and return it normalised, or raise.

    Raises ChatFormatError (role, order, content, tool calls, tools, options)
    or TextEncodingError (a lone surrogate), naming the message index and field.
    """
    add_generation_prompt = _flag(add_generation_prompt, "add_generation_prompt")
    enable_thinking = _flag(enable_thinking, "enable_thinking")
    if not isinstance(messages, list):
        raise ChatFormatError(f"messages: must be a list of messages, not {type(messages).__name__}")
    if not messages:
        raise ChatFormatError("messages: a conversation needs at least one message")

    out = []
    system = None
    roles = _ROLES
    for i, msg in enumerate(messages):
        if type(msg) is not dict and not isinstance(msg, Mapping):
            raise ChatFormatError(
                f"messages[{i}]: a message must be a dict, not {type(msg).__name__}"
            )
        role_name = msg.get("role", _MISSING)
        role = roles.get(role_name) if isinstance(role_name, str) else None
        if role is None:
            if role_name is _MISSING:
                raise ChatFormatError(f"messages[{i}].role: missing (every message needs a role)")
            raise ChatFormatError(
                f"messages[{i}].role: unsupported role {role_name!r} "
                "(expected 'system', 'user', 'assistant' or 'tool')"
            )
        if role == SYSTEM and i != 0:
            what = "a second system message" if system is not None else "a system message"
            raise ChatFormatError(f"messages[{i}].role: {what} is only allowed as the first message")
        content = _content(msg.get("content"), i, role == ASSISTANT)
        if role == ASSISTANT:
            reasoning = msg.get("reasoning_content")
            if reasoning is not None:
                if not isinstance(reasoning, str):
                    raise ChatFormatError(
                        f"messages[{i}].reasoning_content: must be a string or None, "
                        f"not {type(reasoning).__name__}"
                    )
                reasoning = _exact(reasoning)
                if not reasoning.isascii():
                    utf8(reasoning, f"messages[{i}].reasoning_content")
            calls = msg.get("tool_calls")
            calls = () if calls is None else _tool_calls(calls, i)
            out.append(_new(Message, (role, content, reasoning, calls)))
        else:
            if role == SYSTEM:
                system = content
            out.append(_new(Message, (role, content, None, ())))

    return Request(tuple(out), system, _tools(tools), add_generation_prompt, enable_thinking)
