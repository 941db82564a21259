"""Tool-call bodies: the text between a TOOL_CALL and a TOOL_CALL_END atom
(docs/FORMAT.md, section 11).

The completion parser's state machine (pyx/_stream.pyx) finds the calls by
their atoms and hands each call's text, as it arrives, to a `CallReader`
made for it. The reader reads either form a Qwen model writes:

* JSON (Qwen3, Qwen3-2507): ``{"name": "NAME", "arguments": {...}}``; the
  arguments are kept as written (JSON is already typed);
* XML (Qwen3.5, 3.6, 3.8, Qwen3-Coder)::

      <function=NAME>
      <parameter=KEY>
      VALUE
      </parameter>
      </function>

  read as the templates write it: `<parameter=` counts only at the start of
  a line; `</parameter>` only when the next line opens another parameter or
  is `</function>`, or when only whitespace (or `</function>` and
  whitespace) is left of the body, so a value may hold `</parameter>` or a
  call spelled on one line; one leading and one trailing newline of a value
  are the template's. A missing `</parameter>` (the next line opens a
  parameter, or the body ends), a missing `</function>`, text outside any
  parameter, a repeated parameter (the first is kept), an unknown tool or
  parameter are repaired or kept, and reported. Each value is typed by the
  tool's schema (qwen4exp.tool_schemas) and the `arguments` are the JSON
  text of the mapping, in the order written.

While the text streams the reader returns `Delta`s: the call's first delta
(its name and id) once the name is complete, then fragments of the
arguments; the fragments of a call concatenate to exactly its final
`arguments`, because the message's arguments are made of those very
fragments. A string value streams as it arrives, escaped; the reader holds
back only text that could still be a closing tag. Every decision depends
only on the text, never on how it was split into feeds.

Call ids are "call_" + 24 letters and digits from BLAKE2b over the parser's
seed (the format and the prompt's bytes), the call's index and its name: the
same completion after the same prompt gets the same ids, streamed or parsed
at once; another prompt, other ids.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from ._stream import Delta
from .markers import Marker
from .requests import reject_constant
from .tool_schemas import tool_schemas, typed_json, written

__all__ = ["CallContext", "CallReader", "call_id", "json_call"]

# The XML a 3.5+ call is written in: ordinary text, not atoms.
FUNCTION = "<function="
FUNCTION_END = "</function>"
PARAMETER = "<parameter="
PARAMETER_END = "</parameter>"
_NL_PARAMETER = "\n" + PARAMETER
_NL_FUNCTION_END = "\n" + FUNCTION_END
_NL_PARAMETER_END = "\n" + PARAMETER_END
_WS = " \t\r\n"

# JSON call bodies: the template's own form first.
_PREFIX = '{"name": "'
_SEPARATOR = '", "arguments": '
_SEPARATOR_TRIES = 8  # a name or arguments that spell the separator: bounded work

_ALNUM = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


# `text` as a JSON string, non-ASCII as it is (what `tojson` writes; json's C encoder)
_string = json.encoder.encode_basestring


def call_id(seed: bytes, index: int, name: str) -> str:
    """ "call_" + 24 letters and digits: a hash of the parser's seed (the prompt
    and format), the call's place among the message's calls and its name."""
    h = hashlib.blake2b(digest_size=18)
    h.update(seed)
    h.update(f"\0{index}\0".encode())
    h.update(name.encode("utf-8", "surrogatepass"))
    n = int.from_bytes(h.digest(), "big")
    chars = []
    for _ in range(24):
        n, r = divmod(n, 62)
        chars.append(_ALNUM[r])
    return "call_" + "".join(chars)


# -- JSON bodies -----------------------------------------------------------------

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
    i = _skip(s, 0)
    if s[i : i + 1] != "{":
        raise ValueError("it does not start with '{'")
    i = _skip(s, i + 1)
    out = []
    if s[i : i + 1] == "}":
        i += 1
    else:
        while True:
            if s[i : i + 1] != '"':
                raise ValueError(f"expected a key at character {i}")
            key, i = json.decoder.scanstring(s, i + 1)  # type: ignore[attr-defined]
            i = _skip(s, i)
            if s[i : i + 1] != ":":
                raise ValueError(f"expected ':' at character {i}")
            i = _skip(s, i + 1)
            value, end = _DECODER.raw_decode(s, i)
            out.append((key, value, s[i:end]))
            i = _skip(s, end)
            c = s[i : i + 1]
            i += 1
            if c == "}":
                break
            if c != ",":
                raise ValueError(f"expected ',' or '}}' at character {i - 1}")
            i = _skip(s, i)
    if _skip(s, i) != len(s):
        raise ValueError(f"extra text after the object at character {i}")
    return out


def _skip(s: str, i: int) -> int:
    n = len(s)
    while i < n and s[i] in _WS:
        i += 1
    return i


# -- reading one call as it streams ----------------------------------------------

# Reader states: where the undecided text `buf` starts.
(_HEAD, _NAME, _BETWEEN, _KEY, _VALUE_START, _VALUE, _JUNK, _AFTER,
 _JSON_HEAD, _JSON_ARGS, _JSON_ANY, _UNREADABLE) = range(12)
# How a value is written: streamed as a JSON string, typed at its end, or dropped.
_STREAM, _BUFFER, _DROP = range(3)
# What ends a value (_decide): a delimiter, or more text needed (any text, or only
# text that is not whitespace), or not a delimiter here.
_NO, _WAIT, _WAIT_SPACE, _CLOSED, _NEXT_PARAMETER, _FUNCTION_CLOSES, _BODY_ENDS = range(7)
_CANDIDATE = re.compile("[\n<]")  # where a closing delimiter can start
# The proper prefixes of the tags that can end a value, by where they start: a
# short undecided tail of a value is looked up here (_value_tail).
_TAG_PREFIXES_NL = frozenset(t[:k] for t in (_NL_PARAMETER_END, _NL_PARAMETER, _NL_FUNCTION_END)
                             for k in range(1, len(t)))
_TAG_PREFIXES_LT = frozenset(t[:k] for t in (PARAMETER_END, FUNCTION_END) for k in range(1, len(t)))
_TAG_PREFIXES_LINE = _TAG_PREFIXES_LT | frozenset(PARAMETER[:k] for k in range(1, len(PARAMETER)))
_TAIL_MAX = len(_NL_PARAMETER_END)

# Held text: what the undecided text waits for. While a feed cannot end the
# wait, its text is only set aside (O(1) an id, whatever is held): whitespace
# after a closing tag, the characters of a tag's name, of a JSON call's name.
_HOLD_NONE, _HOLD_SPACE, _HOLD_TAG_NAME, _HOLD_JSON_NAME = range(4)


def _decides(hold: int, text: str) -> bool:
    """Whether `text` can change what a reader holding `hold` decides."""
    if hold == _HOLD_SPACE:
        return bool(text.strip(_WS))
    if hold == _HOLD_TAG_NAME:
        return ">" in text or "\n" in text
    return '"' in text or "\\" in text


class CallContext:
    """What every call of one completion is read with: the tools' parameter
    types, the format's scalar dialect and the seed of the call ids."""

    __slots__ = ("schemas", "tools_given", "python", "seed")

    def __init__(self, tools, python: bool, seed: bytes) -> None:
        self.schemas = tool_schemas(tools)
        self.tools_given = tools is not None
        self.python = python
        self.seed = seed

    def reader(self, index: int, position: int) -> "CallReader":
        return CallReader(self, index, position)


class CallReader:
    """One call's text as it streams: `feed(text) -> [Delta]`, then
    `close(how, out) -> (call, invalid, errors)` (see the module docstring)."""

    __slots__ = ("ctx", "index", "position", "raw", "buf", "state", "name", "id", "params",
                 "args", "problems", "seen", "count", "key", "types", "mode", "value",
                 "line_start", "has_text", "junk", "function_closed", "unterminated",
                 "hold", "held", "scanned")
    name: str | None  # these five are set when the name is complete
    id: str | None
    params: Any  # the tool's parameter schemas, None without a schema
    key: str | None
    types: Any

    def __init__(self, ctx: CallContext, index: int, position: int) -> None:
        self.ctx, self.index, self.position = ctx, index, position
        self.raw: list[str] = []  # every text, for invalid_tool_calls
        self.buf = ""
        self.state = _HEAD
        self.name = self.id = self.params = self.key = self.types = None
        self.args: list[str] = []  # the arguments fragments streamed so far
        self.problems: list[tuple[str, str]] = []  # repairs: (what, text)
        self.seen: set[str] = set()
        self.count = 0  # parameters written into the arguments
        self.mode = _BUFFER
        self.value: list[str] = []  # a typed value's text until its end
        self.line_start = self.has_text = self.function_closed = False
        self.junk: list[str] = []
        self.unterminated = ""
        self.hold = _HOLD_NONE  # what `buf` waits for
        self.held: list[str] = []  # text set aside while it cannot decide (see _decides)
        self.scanned = 0  # characters handed to the state machine: a test's measure of rescans

    def copy(self) -> "CallReader":
        c = CallReader.__new__(CallReader)
        for slot in CallReader.__slots__:
            value = getattr(self, slot)
            setattr(c, slot, value.copy() if isinstance(value, (list, set)) else value)
        return c

    # -- feeding ---------------------------------------------------------------

    def feed(self, text: str) -> list:
        self.raw.append(text)
        state = self.state
        if state == _VALUE and not self.buf and "\n" not in text and "<" not in text:
            # inside a value, nothing that could close it: the common case, taken at once
            self.has_text = True
            if self.mode != _STREAM:
                self.value.append(text)
                return []
            fragment = _string(text)[1:-1]
            self.args.append(fragment)
            return [Delta("tool_call", fragment, self.index)]
        if state >= _JSON_ANY:  # read whole at the end
            return []
        if state == _VALUE and not self.hold and len(self.buf) + len(text) <= _TAIL_MAX:
            tail = self.buf + text
            if ">" not in tail and "=" not in tail:
                return self._value_tail(tail)
        if self.hold:
            if not _decides(self.hold, text):
                self.held.append(text)
                return []
            self._unhold()
        self.buf += text
        out: list = []
        self._run(False, out)
        return out

    def _unhold(self) -> None:
        if self.held:
            self.buf += "".join(self.held)
            self.held = []
        self.hold = _HOLD_NONE

    def _run(self, final: bool, out: list) -> None:
        self.scanned += len(self.buf)
        self.hold = _HOLD_NONE
        step = _STEPS
        while step[self.state](self, final, out):
            pass

    def _emit(self, fragment: str, out: list) -> None:
        self.args.append(fragment)
        out.append(Delta("tool_call", fragment, self.index))

    def _problem(self, what: str, text: str = "") -> None:
        self.problems.append((what, text))

    def _start_call(self, name: str, out: list) -> None:
        """The name is complete: the call's first delta."""
        self.name = name
        self.id = call_id(self.ctx.seed, self.index, name)
        schemas = self.ctx.schemas
        if name in schemas:
            self.params = schemas[name]
        elif self.ctx.tools_given:
            self._problem(f"{name!r} is not one of the request's tools (kept, typed without a schema)")
        out.append(Delta("tool_call", "", self.index, name=name, call_id=self.id))

    # -- XML ---------------------------------------------------------------------

    def _head(self, final: bool, out: list) -> bool:
        buf = self.buf
        i = _skip(buf, 0)
        if i == len(buf):
            self.buf = ""
            return False
        if buf[i] == "{":
            self.buf, self.state = buf[i:], _JSON_HEAD
            return True
        if buf.startswith(FUNCTION, i):
            self.buf, self.state = buf[i + len(FUNCTION) :], _NAME
            return True
        if not final and FUNCTION.startswith(buf[i:]):
            self.buf = buf[i:]
            return False
        self.buf, self.state = "", _UNREADABLE
        return False

    def _tag_name(self, final: bool) -> tuple[str, int] | None:
        """(name, where its text resumes) of `<function=NAME>` / `<parameter=NAME>`;
        None while it is incomplete. A newline also ends it (a missing '>')."""
        buf = self.buf
        gt = buf.find(">")
        nl = buf.find("\n", 0, gt if gt >= 0 else len(buf))
        if gt >= 0 and nl < 0:
            return buf[:gt].strip(_WS), gt + 1
        if nl >= 0 or final:
            end = nl if nl >= 0 else len(buf)
            self._problem(f"missing '>' after {buf[:end].strip(_WS)!r}")
            return buf[:end].strip(_WS), end  # the newline is the value's leading one
        self.hold = _HOLD_TAG_NAME
        return None

    def _name(self, final: bool, out: list) -> bool:
        tag = self._tag_name(final)
        if tag is None:
            return False
        name, resume = tag
        if not name:
            self.buf, self.state = "", _UNREADABLE
            return False
        self.buf, self.state = self.buf[resume:], _BETWEEN
        self._start_call(name, out)
        return True

    def _between(self, final: bool, out: list) -> bool:
        buf = self.buf
        i = _skip(buf, 0)
        if i == len(buf):
            self.buf = ""
            return False
        if buf.startswith(PARAMETER, i):
            self._flush_junk()
            self.buf, self.state = buf[i + len(PARAMETER) :], _KEY
            return True
        if buf.startswith(FUNCTION_END, i):
            self._flush_junk()
            self.buf, self.state, self.function_closed = buf[i + len(FUNCTION_END) :], _AFTER, True
            return True
        rest = buf[i:]
        if not final and (PARAMETER.startswith(rest) or FUNCTION_END.startswith(rest)):
            self.buf = rest
            return False
        self.buf, self.state = rest, _JUNK
        return True

    def _junk(self, final: bool, out: list) -> bool:
        """A line outside any parameter: dropped up to its end, and reported with
        the lines that follow it up to the next tag (one report, not one a line)."""
        buf = self.buf
        nl = buf.find("\n")
        if nl < 0:
            self.junk.append(buf)
            self.buf = ""
            return False
        self.junk.append(buf[: nl + 1])
        self.buf, self.state = buf[nl:], _BETWEEN
        return True

    def _flush_junk(self) -> None:
        text = "".join(self.junk).strip(_WS)
        if text:
            self._problem("text outside any parameter (dropped)", text)
        self.junk = []

    def _after(self, final: bool, out: list) -> bool:
        """After </function>: only whitespace belongs here."""
        self.junk.append(self.buf)
        self.buf = ""
        return False

    def _key(self, final: bool, out: list) -> bool:
        tag = self._tag_name(final)
        if tag is None:
            return False
        key, resume = tag
        self.buf, self.state = self.buf[resume:], _VALUE_START
        self.key, self.value, self.has_text = key, [], False
        if not key or key in self.seen:
            self.mode = _DROP
            return True
        self.seen.add(key)
        params = self.params
        self.types = None
        if params is not None:
            if key in params:
                self.types = params[key]
            else:
                self._problem(f"{self.name} has no parameter {key!r} (kept, typed without a schema)")
        self.mode = _STREAM if self.types == {"string"} else _BUFFER
        head = ("{" if not self.count else ", ") + _string(key) + ": "
        self.count += 1
        self._emit(head + '"' if self.mode == _STREAM else head, out)
        return True

    def _value_start(self, final: bool, out: list) -> bool:
        buf = self.buf
        if not buf and not final:
            return False
        self.line_start = buf[:1] == "\n"  # the template's leading newline
        self.buf, self.state = buf[1:] if self.line_start else buf, _VALUE
        return True

    def _value(self, final: bool, out: list) -> bool:
        buf = self.buf
        m = _CANDIDATE.search(buf)
        while m is not None:
            p = m.start()
            kind, resume = self._decide(buf, p, final)
            if kind == _NO:
                m = _CANDIDATE.search(buf, p + 1)
                continue
            self._take(buf[:p], out)
            if kind == _WAIT or kind == _WAIT_SPACE:
                self.buf = buf[p:]
                if kind == _WAIT_SPACE:  # only text that is not whitespace can decide
                    self.hold = _HOLD_SPACE
                return False
            self.buf = buf[resume:]
            self._end_value(kind, out)
            return True
        if not final:
            self._take(buf, out)
            self.buf = ""
            return False
        self._take(buf[:-1] if buf.endswith("\n") else buf, out)  # the template's trailing newline
        self.buf = ""
        self._end_value(_BODY_ENDS, out)
        return True

    def _value_tail(self, buf: str) -> list:
        """_value for a short buffer without '>' or '=' (no whole tag can be in it,
        only the start of one): the newlines and '<' a value is full of, at the
        cost of a few look-ups. Takes the text before the first place where a tag
        can still start, holds the rest."""
        self.scanned += len(buf)
        line = self.line_start and not self.has_text
        n = len(buf)
        p = 0
        while p < n:
            c = buf[p]
            if c == "\n":
                if buf[p:] in _TAG_PREFIXES_NL:
                    break
            elif c == "<":
                if buf[p:] in (_TAG_PREFIXES_LINE if p == 0 and line else _TAG_PREFIXES_LT):
                    break
            p += 1
        out: list = []
        self._take(buf[:p], out)
        self.buf = buf[p:]
        return out

    def _decide(self, buf: str, p: int, final: bool) -> tuple[int, int]:
        """Whether a value ends at `p` (a newline or '<') and where the text resumes."""
        if buf[p] == "\n":
            if buf.startswith(_NL_PARAMETER_END, p):
                return self._after_parameter_end(buf, p + len(_NL_PARAMETER_END), final)
            if buf.startswith(_NL_PARAMETER, p):
                return _NEXT_PARAMETER, p + 1
            if buf.startswith(_NL_FUNCTION_END, p):
                return self._after_function_end(buf, p + 1, final)
            tags: tuple[str, ...] = (_NL_PARAMETER_END, _NL_PARAMETER, _NL_FUNCTION_END)
        else:
            if buf.startswith(PARAMETER_END, p):
                return self._after_parameter_end(buf, p + len(PARAMETER_END), final)
            if buf.startswith(FUNCTION_END, p):
                return self._after_function_end(buf, p, final)
            at_line_start = p == 0 and self.line_start and not self.has_text
            if at_line_start and buf.startswith(PARAMETER, p):
                return _NEXT_PARAMETER, p
            tags = (PARAMETER_END, FUNCTION_END, PARAMETER) if at_line_start else (PARAMETER_END, FUNCTION_END)
        if not final and len(buf) - p < 13:
            tail = buf[p:]
            if any(t.startswith(tail) for t in tags):
                return _WAIT, p
        return _NO, 0

    @classmethod
    def _after_parameter_end(cls, buf: str, q: int, final: bool) -> tuple[int, int]:
        """`</parameter>` ends the value when the next line opens another
        parameter or is `</function>`, or when only whitespace, or
        `</function>` and whitespace, follow it (the end of the body)."""
        r = _skip(buf, q)
        if r == len(buf):
            return (_CLOSED, q) if final else (_WAIT_SPACE, 0)
        new_line = "\n" in buf[q:r]
        if buf.startswith(FUNCTION_END, r):
            if new_line or cls._after_function_end(buf, r, final)[0] == _FUNCTION_CLOSES:
                return _CLOSED, q
            return (_WAIT_SPACE, 0) if not final and _skip(buf, r + len(FUNCTION_END)) == len(buf) else (_NO, 0)
        if new_line and buf.startswith(PARAMETER, r):
            return _CLOSED, q
        rest = buf[r:]
        if not final and ((new_line and PARAMETER.startswith(rest)) or FUNCTION_END.startswith(rest)):
            return _WAIT, 0
        return _NO, 0

    @staticmethod
    def _after_function_end(buf: str, tag: int, final: bool) -> tuple[int, int]:
        """`</function>` without `</parameter>` ends the value only at the end of the body."""
        r = _skip(buf, tag + len(FUNCTION_END))
        if r == len(buf):
            return (_FUNCTION_CLOSES, tag) if final else (_WAIT_SPACE, 0)
        return _NO, 0

    def _take(self, text: str, out: list) -> None:
        """Value text that is certainly the value's."""
        if not text:
            return
        self.has_text = True
        if self.mode == _STREAM:
            self._emit(_string(text)[1:-1], out)
        else:
            self.value.append(text)

    def _end_value(self, kind: int, out: list) -> None:
        key = self.key
        if kind != _CLOSED:
            self._problem(f"missing </parameter> after parameter {key!r}")
        if self.mode == _STREAM:
            self._emit('"', out)
        else:
            text = "".join(self.value)
            if self.mode == _DROP:
                what = "a parameter without a name" if not key else f"parameter {key!r} given twice (the first is kept)"
                self._problem(what + ": dropped", text)
            else:
                typed, why = typed_json(text, self.types, self.ctx.python)
                if why:
                    self._problem(f"parameter {key!r} of {self.name}: {text!r} {why}", text)
                self._emit(typed, out)
        self.value = []
        self.state = _BETWEEN

    # -- JSON --------------------------------------------------------------------

    def _json_head(self, final: bool, out: list) -> bool:
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
                    self.state = _JSON_ANY
                else:
                    self.hold = _HOLD_JSON_NAME
                return False
            if buf[q] == '"' and q > j:
                if buf.startswith(_SEPARATOR, q):
                    r = _skip(buf, q + len(_SEPARATOR))
                    if r == len(buf) and not final:
                        self.hold = _HOLD_SPACE
                        return False
                    if buf[r : r + 1] == "{":
                        self._start_call(buf[j:q], out)
                        self.buf, self.state = buf[q + len(_SEPARATOR) :], _JSON_ARGS
                        return True
                elif not final and _SEPARATOR.startswith(buf[q:]):
                    return False
        elif not final and _PREFIX.startswith(buf):
            return False
        self.buf, self.state = "", _JSON_ANY
        return False

    def _json_args(self, final: bool, out: list) -> bool:
        """Stream the arguments, holding back a final '}' and whitespace: the
        call object's own closing brace."""
        buf = self.buf
        t = buf.rstrip(_WS)
        hold = len(t) - 1 if t.endswith("}") else len(t)
        if hold > 0:
            self._emit(buf[:hold], out)
            self.buf = buf[hold:]
        if self.buf:  # "}" and whitespace, or whitespace: only other text can decide
            self.hold = _HOLD_SPACE
        return False

    def _stop(self, final: bool, out: list) -> bool:
        return False

    # -- the end ------------------------------------------------------------------

    def close(self, how: str, out: list):
        """End the call: `how` is "closed" (by TOOL_CALL_END), "ended" (by the
        message's end), "reopened" (by the next TOOL_CALL) or "truncated".
        Returns (call or None, invalid_tool_calls entry or None, errors)."""
        body = "".join(self.raw)
        if body.startswith("\n"):
            body = body[1:]
        if how != "truncated" and body.endswith("\n"):
            body = body[:-1]
        if how == "truncated":
            return None, self._invalid(body, "unterminated tool call (the completion ends inside it)"), []
        self._unhold()
        self._run(True, out)
        if how == "ended":
            self._problem(f"missing {Marker.TOOL_CALL_END} (the message ended inside the call)")
        elif how == "reopened":
            self._problem(f"missing {Marker.TOOL_CALL_END} before the next {Marker.TOOL_CALL}")
        if how != "closed":  # an invalid body says why it may be cut short
            self.unterminated = (f"unterminated tool call (no {Marker.TOOL_CALL_END} before "
                                 + ("the end); " if how == "ended" else f"the next {Marker.TOOL_CALL}); "))
        state = self.state
        if state == _JSON_ARGS:
            arguments, why = self._json_arguments(body, out)
            if arguments is None:
                return None, self._invalid(body, why), []
        elif state == _JSON_ANY:
            got = json_call(body)
            if isinstance(got, str):
                return None, self._invalid(body, got), []
            self._start_call(got[0], out)
            self._emit(got[1], out)
            arguments = got[1]
        elif self.name is None:  # _HEAD, _NAME, _UNREADABLE: no function name
            why = ("the tool call is empty" if not body.strip(_WS) else
                   "the tool call is not a JSON object or <function=NAME> XML")
            return None, self._invalid(body, why), []
        else:
            self._flush_junk()
            if not self.function_closed:
                self._problem("missing </function>")
            self._emit("}" if self.count else "{}", out)
            arguments = "".join(self.args)
        call = {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": arguments}}
        at, index = self.position, self.index
        errors = [{"position": at, "error": f"tool call {index}: {what}", "text": text}
                  for what, text in self.problems]
        return call, None, errors

    def _json_arguments(self, body: str, out: list) -> tuple[str | None, str]:
        """(the streamed JSON arguments, "") or (None, why the body is invalid)."""
        arguments = "".join(self.args)
        rest = self.buf.rstrip(_WS)
        if rest == "}" and _json_object(arguments):
            return arguments, ""
        if rest == "}" and _json_object(arguments + "}"):  # the call object's brace is missing
            self._problem("missing '}' at the end of the call object")
            self._emit("}", out)
            return arguments + "}", ""
        got = json_call(body)
        if isinstance(got, str):
            return None, got
        self.name = got[0]  # a name that spells the separator: the stream named it short (same id)
        return got[1], ""

    def _invalid(self, body: str, why: str) -> dict:
        return {"index": self.index, "text": body, "error": self.unterminated + why}


_STEP_OF = {
    _HEAD: CallReader._head, _NAME: CallReader._name, _BETWEEN: CallReader._between,
    _KEY: CallReader._key, _VALUE_START: CallReader._value_start, _VALUE: CallReader._value,
    _JUNK: CallReader._junk, _AFTER: CallReader._after, _JSON_HEAD: CallReader._json_head,
    _JSON_ARGS: CallReader._json_args, _JSON_ANY: CallReader._stop, _UNREADABLE: CallReader._stop,
}
_STEPS = tuple(_STEP_OF[k] for k in range(len(_STEP_OF)))
