"""Chat requests from JSON text or Arrow rows, strictly.

One decoder for every place that reads a request: the command line (`render`,
`encode --chat`, `batch`) and `qwen4exp.runtimes.ray.tokenize_dataset`, which also read
a table's rows the same way (`request_of_row`). A request is a
JSON object {"messages": [...], "tools": [...], "add_generation_prompt": bool,
"enable_thinking": bool, "preserve_thinking": bool, "reasoning_effort": str,
"chat_format": str} or a bare list of messages.

The chat format is the run's (`--chat-format`, tokenize_dataset's
`chat_format=`), since it fixes the vocabulary the ids are in: a request may
name it in "chat_format", and one that names another format is a RecordError.
"""

from __future__ import annotations

import json
import math

from qwen4exp.errors import JsonError, Qwen4ExpError, RecordError

__all__ = ["REQUEST_KEYS", "loads_json", "request_from_json", "request_of_row", "strip_none", "failure_name"]

# The keys of a request object; the others are ignored. Those between
# "messages" and "chat_format" are render_chat's options, passed as given.
REQUEST_KEYS = ("messages", "tools", "add_generation_prompt", "enable_thinking", "preserve_thinking",
                "reasoning_effort", "chat_format")
_OPTION_KEYS = REQUEST_KEYS[1:-1]


def reject_constant(name: str):
    """json's parse_constant hook: NaN, Infinity and -Infinity are not JSON."""
    raise ValueError(f"{name} is not a JSON value")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:24]} is out of range")
    return value


def _unique_keys(pairs):
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen = set()
        for dup, _ in pairs:
            if dup in seen:
                raise ValueError(f"duplicate key {dup[:40]!r} in an object")
            seen.add(dup)
    return obj


def loads_json(text):
    """Strict JSON: no NaN or Infinity, no out-of-range numbers, no duplicate
    keys (parsers disagree on which one wins), and a one-line JsonError for
    anything else that fails (bad syntax, integers past Python's digit limit,
    nesting too deep)."""
    try:
        return json.loads(text, parse_constant=reject_constant, parse_float=_finite_float,
                          object_pairs_hook=_unique_keys)
    except RecursionError:
        raise JsonError("nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError, the int digit limit, the hooks above
        raise JsonError(str(exc).split("; use sys.set_int_max_str_digits")[0]) from None


def request_from_json(obj, where: str, chat_format: str | None = None):
    """(messages, options) of a decoded chat request: an object or a bare
    message list; `where` names it in a RecordError. `options` are
    render_chat's keywords: the request's options that are not null, and
    `chat_format`, the run's format. A request's own "chat_format" must be
    that one: naming another is a RecordError. With chat_format=None the
    request's "chat_format" is passed on unchecked, for a caller that reads a
    request in two steps (request_of_row) and checks it at the end."""
    if isinstance(obj, list):
        return obj, {} if chat_format is None else {"chat_format": chat_format}
    if not isinstance(obj, dict):
        raise RecordError(
            f"{where}: a chat request must be a JSON object with \"messages\" or a list of "
            f"messages, not {type(obj).__name__}"
        )
    if "messages" not in obj:
        raise RecordError(f'{where}: a chat request needs a "messages" list')
    options = {k: obj[k] for k in _OPTION_KEYS if k in obj and obj[k] is not None}
    named = obj.get("chat_format")
    if chat_format is None:
        if named is not None:
            options["chat_format"] = named
    else:
        if named is not None and named != chat_format:
            raise RecordError(
                f'{where}: "chat_format" is {named!r}, but this run renders every request as '
                f"{chat_format!r}, whose vocabulary the ids are in; leave the key out or run with "
                f"that format"
            )
        options["chat_format"] = chat_format
    return obj["messages"], options


def request_of_row(columns, r: int, messages: str = "messages") -> dict:
    """The chat request of row r of a table of requests held as Python lists by
    column name (`qwen4exp batch`'s Parquet input, `tokenize_dataset`).

    Column `messages` holds the messages: a message list or a whole request
    object, as JSON text or as decoded Arrow structs. Each other request key
    (REQUEST_KEYS: "tools", "add_generation_prompt", ..., "chat_format") is read
    from the column of that name, where there is one and the row's value is not
    null, over the request's own; "chat_format" is left for the caller to check
    (request_from_json with the run's format). The value must not be null (the caller names
    that); JsonError for bad JSON text, RecordError for a request of the wrong
    shape (as request_from_json)."""
    listed, options = request_from_json(_decoded(columns[messages][r]), "record")
    request = {"messages": listed, **options}
    for key in REQUEST_KEYS[1:]:
        if key != messages and key in columns and columns[key][r] is not None:
            request[key] = _decoded(columns[key][r]) if key == "tools" else columns[key][r]
    return request


def _decoded(value):
    """A column's value: JSON text decoded, Arrow structs without their nulls."""
    return loads_json(value) if isinstance(value, (str, bytes)) else strip_none(value)


def strip_none(obj):
    """Drop None-valued keys of a message / tool call / content part decoded from
    an Arrow struct (a struct column has every field of the union in every row)."""
    if isinstance(obj, dict):
        return {k: _strip_none_field(k, v) for k, v in obj.items() if v is not None}
    if isinstance(obj, list):
        return [strip_none(x) for x in obj]
    return obj


def _strip_none_field(key, value):
    # Tool arguments and tool schemas are caller JSON: keep them exactly.
    if key in ("arguments", "parameters"):
        return value
    return strip_none(value)


def failure_name(exc: BaseException) -> tuple[str, str]:
    """(error name, message) of a request or record that could not be used, as
    `qwen4exp batch` and tokenize_dataset report it. Anything else is not a bad
    row but a bug: it is raised again."""
    if isinstance(exc, JsonError):
        return "JSONDecodeError", f"invalid JSON: {exc}"
    if isinstance(exc, UnicodeDecodeError):
        return "UnicodeDecodeError", f"not valid UTF-8 (byte {exc.start})"
    if isinstance(exc, Qwen4ExpError):
        return type(exc).__name__, str(exc)
    if isinstance(exc, RecursionError):
        return "RecordError", "record is nested too deeply"
    raise exc
