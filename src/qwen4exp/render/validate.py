"""Validation of a chat request, shared by every chat format (docs/FORMAT.md, section 3).

`validate_request` checks a whole request before a single byte is rendered and
returns it normalised: every caller string encoded to UTF-8 (which is where a
lone surrogate is caught, so each string is encoded exactly once; through the
UTF-8 form CPython caches on the str, so history re-rendered at every turn of
a conversation is converted once, not at every turn), content
parts joined, tool arguments and tool schemas turned into the exact bytes the
renderer writes, options resolved to the format's defaults. What differs
between formats (trimming, how a tool call's arguments are written, which
options exist) is described by the format's `Rules`. Nothing here ever looks
at what caller text *spells*: only types, roles and order decide structure.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from qwen4exp._native._encoder import utf8_cached
from qwen4exp.errors import ChatFormatError
from qwen4exp.render.media import MediaItem, Numbering
from qwen4exp.render.requests import reject_constant
from qwen4exp.render.segments import utf8

__all__ = [
    "SYSTEM",
    "USER",
    "ASSISTANT",
    "TOOL",
    "Message",
    "Request",
    "Rules",
    "JSON_CALLS",
    "XML_PYTHON",
    "XML_JSON",
    "validate_request",
    "tojson",
]

# Role codes of a normalised message.
SYSTEM, USER, ASSISTANT, TOOL = 0, 1, 2, 3
_ROLES = {"system": SYSTEM, "user": USER, "assistant": ASSISTANT, "tool": TOOL}

# Structured media parts: rendered in the formats with media (qwen4exp.render.media),
# refused with a message naming them elsewhere (docs/FORMAT.md, "Content").
_MEDIA_PARTS = frozenset({"image", "image_url", "video", "video_url", "audio", "input_audio"})
_MISSING = object()
# `type(x) is dict or isinstance(x, Mapping)`: the exact check first, since the
# abstract-class check costs more than the rest of a message's validation.


# How a format writes a tool call's arguments (Rules.calls).
JSON_CALLS = 0  # one JSON object: a dict as `tojson` writes it, a string verbatim
XML_PYTHON = 1  # <parameter=KEY> blocks; scalars as Python str() (True, None)
XML_JSON = 2  # <parameter=KEY> blocks; scalars as JSON (true, null)


class Rules(NamedTuple):
    """What a chat format accepts and how it writes caller values: the part of
    a format that validation needs (formats/ defines one per format)."""

    name: str
    trim: bool  # content and reasoning lose surrounding whitespace (Jinja's |trim: str.strip())
    calls: int  # JSON_CALLS, XML_PYTHON or XML_JSON
    needs_query: bool  # at least one user message
    thinking: bool | None  # enable_thinking's default; None: no thinking mode (only False accepted)
    preserve: bool | None  # preserve_thinking's default; None: no such option
    effort: str | None  # reasoning_effort's default; None: no such option
    media: bool = False  # image and video parts render (qwen4exp.render.media); add_vision_id exists
    # (tool, where) -> the bytes the tools block writes for one tool (a JSON-
    # serialisable dict); None: the schema as `tojson` writes it
    tool_schema: Callable[[Any, str], bytes] | None = None


class Message(NamedTuple):
    role: int
    # joined (and, where the format trims, stripped) text, UTF-8; with media
    # parts a tuple (text, MediaItem, text, ..., text) of DATA around each
    # placeholder, the texts holding the "Picture N: " labels (qwen4exp.render.media)
    content: bytes | tuple
    reasoning: bytes | None  # assistant `reasoning_content`, else None
    # (name, rendered arguments) per tool call: the JSON object for JSON_CALLS,
    # the <parameter=...> blocks for the XML forms
    calls: tuple[tuple[bytes, bytes], ...]


class Request(NamedTuple):
    messages: tuple[Message, ...]
    system: bytes | None  # content of messages[0] when it is the system message
    tools: tuple[bytes, ...]  # each tool schema as `tojson` renders it; () = no tools preamble
    add_generation_prompt: bool
    enable_thinking: bool  # resolved: the caller's value or the format's default
    preserve_thinking: bool | None  # resolved; None where the format has no such option
    reasoning_effort: str | None  # resolved; None where the format has no such option
    media: tuple[MediaItem, ...] = ()  # every media part, in order
    # each tool as the format's tools block writes it where that is not the
    # JSON text (Rules.tool_schema); () otherwise
    tool_texts: tuple[bytes, ...] = ()


_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False)
_new = tuple.__new__


def _not_json(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# The C encoder JSONEncoder.encode builds at every call, built once with the
# same options (a third of a small request's validation went to rebuilding
# it). No markers dict: a circular value ends in RecursionError, which
# validation reports like any other non-JSON value.
_C_ENCODE = json.encoder.c_make_encoder and json.encoder.c_make_encoder(  # type: ignore[attr-defined]
    None, _not_json, json.encoder.encode_basestring, None, ": ", ", ", False, False, False
)


def tojson(value: Any) -> str:
    """The text transformers' `tojson` filter writes for `value`.

    transformers overrides Jinja's filter with `json.dumps(x, ensure_ascii=False,
    indent=None, separators=None, sort_keys=False)`: default separators
    (", " and ": "), insertion order, non-ASCII verbatim, and no HTML escaping.
    `allow_nan=False` only adds a rejection: NaN/Infinity are not JSON.
    """
    if _C_ENCODE is None:  # no C accelerator (not CPython)
        return _ENCODER.encode(value)
    return "".join(_C_ENCODE(value, 0))


# `where` names the field in error messages ("messages[3].tool_calls[0].name").
# It is only formatted on the error path: the hot path passes its parts.


def _text(value: str, where: str) -> bytes:
    try:
        return utf8_cached(value)
    except UnicodeEncodeError:  # a lone surrogate: name where it is
        return utf8(value, where)


def _json_text(value: Any, where: str, what: str) -> bytes:
    try:
        text = tojson(value)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ChatFormatError(f"{where}: {what} is not JSON-serialisable ({exc})") from None
    return utf8(text, where)  # a fresh string: no UTF-8 form worth keeping



def _stripped(data: bytes) -> bytes:
    """`data` (UTF-8) without the whitespace str.strip() removes."""
    text = data.decode("utf-8")
    stripped = text.strip()
    return data if stripped is text else stripped.encode("utf-8")


def _content(value: Any, i: int, optional: bool, trim: bool,
             media: Numbering | None, system: bool = False) -> bytes | tuple:
    if isinstance(value, str):
        try:
            return utf8_cached(str.strip(value) if trim else value)
        except UnicodeEncodeError:
            return utf8(value, f"messages[{i}].content")
    where = f"messages[{i}].content"
    if value is None:
        if optional:
            return b""
        raise ChatFormatError(f"{where}: content is required (a string or a list of text parts)")
    if isinstance(value, (list, tuple)):
        assert media is not None  # validate_request makes one before the first content list
        texts: list[bytes] = []
        pieces: list[Any] | None = None  # (text, MediaItem, text, ...) once a media part is met
        for j, part in enumerate(value):
            pwhere = f"{where}[{j}]"
            if type(part) is not dict and not isinstance(part, Mapping):
                raise ChatFormatError(
                    f"{pwhere}: a content part must be a dict, not {type(part).__name__}"
                )
            kind = part.get("type")
            if isinstance(kind, str) and kind in _MEDIA_PARTS:
                item = media.part(part, kind, i, j, system)
                if pieces is None:
                    pieces = []
                pieces += (b"".join(texts) + item.label, item)
                texts = []
                continue
            if kind != "text":
                raise ChatFormatError(f"{pwhere}: unknown content part type {kind!r}")
            media.check_text_part(part, i, j)
            text = part.get("text")
            if not isinstance(text, str):
                raise ChatFormatError(
                    f"{pwhere}.text: a text part needs a string 'text', not {type(text).__name__}"
                )
            texts.append(_text(text, f"{pwhere}.text"))
        if pieces is not None:
            pieces.append(b"".join(texts))
            if trim:  # the whole rendered content is trimmed: only its two ends can move
                pieces[0] = pieces[0].decode("utf-8").lstrip().encode("utf-8")
                pieces[-1] = pieces[-1].decode("utf-8").rstrip().encode("utf-8")
            return tuple(pieces)
        return _stripped(b"".join(texts)) if trim else b"".join(texts)
    raise ChatFormatError(
        f"{where}: content must be a string or a list of text parts, not {type(value).__name__}"
    )


def _not_an_object(value: Any, where: str) -> ChatFormatError:
    return ChatFormatError(
        f"{where}: malformed tool arguments (need a JSON object: a dict or a string "
        f"that parses as one, not {type(value).__name__})"
    )


def _parsed_object(value: str, where: str) -> dict:
    """The object a JSON-object string spells, or ChatFormatError."""
    _text(value, where)  # a lone surrogate is a TextEncodingError, as elsewhere
    try:
        parsed = json.loads(value, parse_constant=reject_constant)
    except (ValueError, RecursionError) as exc:
        raise ChatFormatError(
            f"{where}: malformed tool arguments (a string must parse as a JSON object: {exc})"
        ) from None
    if not isinstance(parsed, dict):
        raise ChatFormatError(
            f"{where}: malformed tool arguments (the string parses as "
            f"{type(parsed).__name__}, not a JSON object)"
        )
    return parsed


def _arguments(value: Any, where: str) -> bytes:
    """A call's arguments as the JSON-call formats write them."""
    if isinstance(value, dict):
        return _json_text(value, where, "tool arguments")
    if isinstance(value, str):
        _parsed_object(value, where)
        return _text(value, where)  # rendered verbatim
    raise _not_an_object(value, where)


# Scalars of the XML forms, by style: (None, True, False).
_XML_SCALARS = {XML_PYTHON: (b"None", b"True", b"False"), XML_JSON: (b"null", b"true", b"false")}


def _xml_value(value: Any, where: str, style: int) -> bytes:
    """One argument value as the XML templates write it: a string verbatim;
    a dict or list as `tojson`; any other value as JSON (XML_JSON) or as
    Python's str() (XML_PYTHON: True, None; numbers print alike either way)."""
    kind = type(value)
    if kind is str:
        return _text(value, where)
    if value is None:
        return _XML_SCALARS[style][0]
    if kind is bool:
        return _XML_SCALARS[style][1 if value else 2]
    if kind is int:
        try:
            return str(value).encode()
        except ValueError:  # over the int-to-text digit limit: the JSON formats' ChatFormatError
            return _json_text(value, where, "tool arguments")
    if kind is float and value - value == 0:  # finite: repr is both str() and JSON
        return repr(value).encode()
    if isinstance(value, str):  # a subclass: read as the str it holds
        return _text(value, where)
    rendered = _json_text(value, where, "tool arguments")  # checks it is JSON (finite, ...)
    if style == XML_JSON or isinstance(value, (Mapping, list, tuple)):
        return rendered
    return utf8(str(value), where)


def _xml_arguments(value: Any, where: str, style: int) -> bytes:
    """The <parameter=KEY>\nVALUE\n</parameter>\n blocks of a call's arguments.
    A JSON-object string is parsed first (the templates fail on a string; vLLM
    parses it before rendering)."""
    if isinstance(value, str):
        value = _parsed_object(value, where)
    elif type(value) is not dict and not isinstance(value, Mapping):
        raise _not_an_object(value, where)
    blocks: list[bytes] = []
    for key, item in value.items():
        if not isinstance(key, str):
            raise ChatFormatError(
                f"{where}: malformed tool arguments (key {key!r} is not a string)"
            )
        blocks += (b"<parameter=", _text(key, where), b">\n", _xml_value(item, where, style),
                   b"\n</parameter>\n")
    return b"".join(blocks)


def _tool_calls(value: Any, i: int, style: int) -> tuple[tuple[bytes, bytes], ...]:
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
        name = _text(name, f"{cwhere}.name")
        if "arguments" not in fn:
            raise ChatFormatError(f"{cwhere}.arguments: malformed tool arguments (missing)")
        args = fn["arguments"]
        if style == JSON_CALLS:
            calls.append((name, _arguments(args, f"{cwhere}.arguments")))
        else:
            calls.append((name, _xml_arguments(args, f"{cwhere}.arguments", style)))
    return tuple(calls)


def _tools(tools: Any) -> tuple[bytes, ...]:
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


_EFFORTS = ("xhigh", "medium", "low")


def _options(rules: Rules, enable_thinking: Any, preserve_thinking: Any,
             reasoning_effort: Any) -> tuple[bool, bool | None, str | None]:
    """The request's options resolved against the format: None means the
    format's default; an option the format lacks is an error, not ignored."""
    name = rules.name
    if enable_thinking is None:
        enable_thinking = bool(rules.thinking)
    else:
        enable_thinking = _flag(enable_thinking, "enable_thinking")
        if enable_thinking and rules.thinking is None:  # False is what such a format always does
            raise ChatFormatError(
                f"enable_thinking: the {name} format has no thinking mode (leave it None or False)"
            )
    if preserve_thinking is None:
        preserve_thinking = rules.preserve
    elif rules.preserve is None:
        raise ChatFormatError(
            f"preserve_thinking: the {name} format has no such option (qwen3.6 and qwen3.8 have it)"
        )
    else:
        preserve_thinking = _flag(preserve_thinking, "preserve_thinking")
    if reasoning_effort is None:
        reasoning_effort = rules.effort
    elif rules.effort is None:
        raise ChatFormatError(
            f"reasoning_effort: the {name} format has no such option (qwen3.8 has it)"
        )
    elif not isinstance(reasoning_effort, str) or reasoning_effort not in _EFFORTS:
        raise ChatFormatError(
            f"reasoning_effort: expected 'xhigh', 'medium' or 'low', not {reasoning_effort!r}"
        )
    else:
        reasoning_effort = str(reasoning_effort)
    return enable_thinking, preserve_thinking, reasoning_effort


def _vision_id(rules: Rules, add_vision_id: Any) -> bool:
    """add_vision_id resolved: off by default; only formats with media have it."""
    if add_vision_id is None:
        return False
    if not rules.media:
        raise ChatFormatError(
            f"add_vision_id: the {rules.name} format has no such option (it has no media parts)"
        )
    return _flag(add_vision_id, "add_vision_id")


def validate_request(
    messages: Any, tools: Any, add_generation_prompt: Any, enable_thinking: Any,
    preserve_thinking: Any, reasoning_effort: Any, rules: Rules, add_vision_id: Any = None,
) -> Request:
    """Check a whole request against a format's rules and return it normalised, or raise.

    Raises ChatFormatError (role, order, content, media parts, tool calls,
    tools, options) or TextEncodingError (a lone surrogate), naming the
    message index and field.
    """
    add_generation_prompt = _flag(add_generation_prompt, "add_generation_prompt")
    enable_thinking, preserve_thinking, reasoning_effort = _options(
        rules, enable_thinking, preserve_thinking, reasoning_effort)
    vision_id = _vision_id(rules, add_vision_id)
    media = None  # made at the first content list: most requests have none
    if not isinstance(messages, list):
        raise ChatFormatError(f"messages: must be a list of messages, not {type(messages).__name__}")
    if not messages:
        raise ChatFormatError("messages: a conversation needs at least one message")

    out = []
    system = None
    roles = _ROLES
    trim, style = rules.trim, rules.calls
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
        content = msg.get("content")
        if media is None and isinstance(content, (list, tuple)):
            media = Numbering(rules.name, rules.media, vision_id)
        content = _content(content, i, role == ASSISTANT, trim, media, role == SYSTEM)
        if role == ASSISTANT:
            reasoning: Any = msg.get("reasoning_content")  # a str, checked here
            if reasoning is not None:
                if not isinstance(reasoning, str):
                    raise ChatFormatError(
                        f"messages[{i}].reasoning_content: must be a string or None, "
                        f"not {type(reasoning).__name__}"
                    )
                try:
                    reasoning = utf8_cached(str.strip(reasoning) if trim else reasoning)
                except UnicodeEncodeError:
                    utf8(reasoning, f"messages[{i}].reasoning_content")
            calls = msg.get("tool_calls")
            calls = () if calls is None else _tool_calls(calls, i, style)
            out.append(_new(Message, (role, content, reasoning, calls)))
        else:
            if role == SYSTEM:
                assert isinstance(content, bytes)  # a system message has no media parts
                system = content
            out.append(_new(Message, (role, content, None, ())))

    if rules.needs_query and not any(m.role == USER for m in out):
        raise ChatFormatError(
            f"messages: the {rules.name} format needs a user query (no message has role 'user')"
        )
    schemas = _tools(tools)
    texts = () if rules.tool_schema is None or not schemas else \
        tuple(rules.tool_schema(tool, f"tools[{k}]") for k, tool in enumerate(tools))
    return Request(tuple(out), system, schemas, add_generation_prompt, enable_thinking,
                   preserve_thinking, reasoning_effort, tuple(media.items) if media is not None else (),
                   texts)
