"""A tool call's body in the JSON form (Qwen3, Qwen3-2507):
``{"name": "NAME", "arguments": {...}}`` (docs/FORMAT.md, section 11).

The template's own form streams: once `{"name": "NAME", "arguments": {` has
come, the name (quote-free, written verbatim by the template) makes the
call's first delta and the arguments stream as written, but for a final '}'
and whitespace, the call object's own brace. Any other JSON object with
exactly the keys "name" (a non-empty string) and "arguments" (an object) is
read whole when the body ends. The arguments are kept as written (the JSON
formats render a string verbatim), and must be an object JSON can write back.
"""

from __future__ import annotations

import json

from qwen4exp.render.requests import reject_constant
from qwen4exp.parse.tool_call_body import HOLD_JSON_NAME, HOLD_SPACE, WS, CallBody, skip
from qwen4exp.parse.tool_schemas import written

__all__ = ["JsonBody", "json_call"]

_PREFIX = '{"name": "'
_SEPARATOR = '", "arguments": '
_SEPARATOR_TRIES = 8  # a name or arguments that spell the separator: bounded work

_DECODER = json.JSONDecoder(parse_constant=reject_constant)  # strict: no NaN


def _json_object(text: str) -> bool:
    """Whether `text` is a JSON object, as render_chat requires of string
    arguments, whose values JSON can write back (no 1e400, no lone surrogate:
    a format that writes each value again must be able to)."""
    try:
        value = _DECODER.decode(text)
    except (ValueError, RecursionError):
        return False
    return isinstance(value, dict) and written(value) is not None


def json_call(body: str) -> tuple[str, str] | str:
    """(name, arguments JSON text) of a JSON tool call body, or why it is invalid.

    First the template's own form, `{"name": "NAME", "arguments": ARGS}` with
    the name verbatim (the template does not escape it), so that rendered
    calls come back exactly; then any JSON object with exactly the keys
    "name" (a non-empty string) and "arguments" (an object), whose arguments
    text is kept as written.
    """
    if body.startswith(_PREFIX) and body.endswith("}"):
        start = len(_PREFIX)
        at = body.find(_SEPARATOR, start)
        for _ in range(_SEPARATOR_TRIES):
            if at < 0:
                break
            if at > start:
                arguments = body[at + len(_SEPARATOR) : -1]
                if _json_object(arguments):
                    return body[start:at], arguments
            at = body.find(_SEPARATOR, at + 1)
    try:
        members = _members(body)
    except (ValueError, RecursionError) as exc:
        return f"the tool call is not a JSON object ({exc})"
    keys = [k for k, _, _ in members]
    for key in keys:
        if keys.count(key) > 1:
            return f"the tool call has the key {key!r} twice"
        if key not in ("name", "arguments"):
            return f"the tool call has an unexpected key {key!r} (only name and arguments)"
    values = {k: (v, raw) for k, v, raw in members}
    if "name" not in values or "arguments" not in values:
        return "the tool call needs both name and arguments"
    name = values["name"][0]
    if not isinstance(name, str) or not name:
        return "the tool call's name is not a non-empty string"
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return "the tool call's name is not valid Unicode (a lone surrogate escape)"
    if not isinstance(values["arguments"][0], dict):
        return f"the tool call's arguments are a JSON {type(values['arguments'][0]).__name__}, not an object"
    if written(values["arguments"][0]) is None:
        return ("the tool call's arguments hold a value JSON cannot write back "
                "(a number out of float range, a lone surrogate escape)")
    return name, values["arguments"][1]


def _members(s: str) -> list[tuple[str, object, str]]:
    """(key, value, value's text) of each member of the JSON object `s`."""
    i = skip(s, 0)
    if s[i : i + 1] != "{":
        raise ValueError("it does not start with '{'")
    i = skip(s, i + 1)
    out = []
    if s[i : i + 1] == "}":
        i += 1
    else:
        while True:
            if s[i : i + 1] != '"':
                raise ValueError(f"expected a key at character {i}")
            key, i = json.decoder.scanstring(s, i + 1)  # type: ignore[attr-defined]
            i = skip(s, i)
            if s[i : i + 1] != ":":
                raise ValueError(f"expected ':' at character {i}")
            i = skip(s, i + 1)
            value, end = _DECODER.raw_decode(s, i)
            out.append((key, value, s[i:end]))
            i = skip(s, end)
            c = s[i : i + 1]
            i += 1
            if c == "}":
                break
            if c != ",":
                raise ValueError(f"expected ',' or '}}' at character {i - 1}")
            i = skip(s, i)
    if skip(s, i) != len(s):
        raise ValueError(f"extra text after the object at character {i}")
    return out


# States: the head (up to the arguments), the streamed arguments, any other JSON.
_HEAD, _ARGS, _WHOLE = range(3)


class JsonBody(CallBody):
    """A JSON call body from its '{' on (see the module docstring)."""

    __slots__ = ()

    @staticmethod
    def opens(text: str, i: int, final: bool) -> int | None:
        """Where the body's text starts when `text[i:]` opens a JSON call, else None."""
        return i if text[i] == "{" else None

    def __init__(self, ctx, index: int, buf: str) -> None:
        super().__init__(ctx, index, buf, _HEAD)

    def feed(self, text: str) -> list:
        state = self.state
        if state == _WHOLE:  # read whole at the end
            return []
        if state == _ARGS and not self.buf and text and "}" not in text and text[-1] not in WS:
            # arguments text that cannot be the object's closing brace: streamed at once
            self.scanned += len(text)
            out: list = []
            self.emit(text, out)
            return out
        return super().feed(text)

    def _head(self, final: bool, out: list) -> bool:
        """The template's `{"name": "NAME", "arguments": {` commits the name
        (quote-free) and streams the arguments; any other JSON is read whole."""
        buf = self.buf
        if buf.startswith(_PREFIX):
            j = len(_PREFIX)
            q = j
            while q < len(buf) and buf[q] not in '"\\':
                q += 1
            if q == len(buf):
                if final:
                    self.state = _WHOLE
                else:
                    self.hold = HOLD_JSON_NAME
                return False
            if buf[q] == '"' and q > j:
                if buf.startswith(_SEPARATOR, q):
                    r = skip(buf, q + len(_SEPARATOR))
                    if r == len(buf) and not final:
                        self.hold = HOLD_SPACE
                        return False
                    if buf[r : r + 1] == "{":
                        self.start_call(buf[j:q], out)
                        self.buf, self.state = buf[q + len(_SEPARATOR) :], _ARGS
                        return True
                elif not final and _SEPARATOR.startswith(buf[q:]):
                    return False
        elif not final and _PREFIX.startswith(buf):
            return False
        self.buf, self.state = "", _WHOLE
        return False

    def _args(self, final: bool, out: list) -> bool:
        """Stream the arguments, holding back a final '}' and whitespace: the
        call object's own closing brace."""
        buf = self.buf
        t = buf.rstrip(WS)
        hold = len(t) - 1 if t.endswith("}") else len(t)
        if hold > 0:
            self.emit(buf[:hold], out)
            self.buf = buf[hold:]
        if self.buf:  # "}" and whitespace, or whitespace: only other text can decide
            self.hold = HOLD_SPACE
        return False

    def _whole(self, final: bool, out: list) -> bool:
        return False

    def finish(self, body: str, out: list) -> tuple[str | None, str]:
        if self.state == _ARGS:
            arguments = "".join(self.args)
            rest = self.buf.rstrip(WS)
            if rest == "}" and _json_object(arguments):
                return arguments, ""
            if rest == "}" and _json_object(arguments + "}"):  # the call object's brace is missing
                self.problem("missing '}' at the end of the call object")
                self.emit("}", out)
                return arguments + "}", ""
        got = json_call(body)
        if isinstance(got, str):
            return None, got
        if self.state == _ARGS:
            self.name = got[0]  # a name that spells the separator: the stream named it short (same id)
        else:
            self.start_call(got[0], out)
            self.emit(got[1], out)
        return got[1], ""


JsonBody.STEPS = (JsonBody._head, JsonBody._args, JsonBody._whole)
