"""A tool call's body in the XML form (the formats whose call_syntax is "xml")
(docs/FORMAT.md, section 11)::

    <function=NAME>
    <parameter=KEY>
    VALUE
    </parameter>
    </function>

read as the templates write it: `<parameter=` counts only at the start of a
line; `</parameter>` only when the next line opens another parameter or is
`</function>`, or when only whitespace (or `</function>` and whitespace) is
left of the body, so a value may hold `</parameter>` or a call spelled on
one line; one leading and one trailing newline of a value are the
template's. A missing `</parameter>` (the next line opens a parameter, or
the body ends), a missing `</function>` or `>`, text outside any parameter,
a repeated parameter (the first is kept), an unknown tool or parameter are
repaired or kept, and reported. Each value is typed by the tool's schema
(qwen4exp.parse.tool_schemas.typed_json) and the arguments are the JSON text of
the mapping, in the order written. A string value streams as it arrives,
escaped; only text that could still be a closing tag is held back.
"""

from __future__ import annotations

import re
from typing import Any

from qwen4exp._native._stream import Delta
from qwen4exp.parse.tool_call_body import HOLD_SPACE, HOLD_TAG_NAME, WS, CallBody, json_string, skip
from qwen4exp.parse.tool_schemas import typed_json

__all__ = ["XmlBody"]

# The XML a call is written in: ordinary text, not atoms.
FUNCTION = "<function="
FUNCTION_END = "</function>"
PARAMETER = "<parameter="
PARAMETER_END = "</parameter>"
_NL_PARAMETER = "\n" + PARAMETER
_NL_FUNCTION_END = "\n" + FUNCTION_END
_NL_PARAMETER_END = "\n" + PARAMETER_END

# States: where the undecided text `buf` starts.
_NAME, _BETWEEN, _KEY, _VALUE_START, _VALUE, _JUNK, _AFTER, _UNREADABLE = range(8)
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


class XmlBody(CallBody):
    """An XML call body from after its `<function=` on (see the module docstring)."""

    __slots__ = ("params", "seen", "count", "key", "types", "mode", "value", "line_start", "has_text",
                 "junk", "function_closed")
    params: Any  # the tool's parameter types, None without a schema
    key: str | None
    types: Any

    @staticmethod
    def opens(text: str, i: int, final: bool) -> int | None:
        """Where the body's text starts when `text[i:]` opens an XML call (after
        `<function=`), -1 while it may still, else None."""
        if text.startswith(FUNCTION, i):
            return i + len(FUNCTION)
        return -1 if not final and FUNCTION.startswith(text[i:]) else None

    def __init__(self, ctx, index: int, buf: str) -> None:
        super().__init__(ctx, index, buf, _NAME)
        self.params = self.key = self.types = None
        self.seen: set[str] = set()
        self.count = 0  # parameters written into the arguments
        self.mode = _BUFFER
        self.value: list[str] = []  # a typed value's text until its end
        self.line_start = self.has_text = self.function_closed = False
        self.junk: list[str] = []

    def feed(self, text: str) -> list:
        state = self.state
        if state == _VALUE and not self.buf and "\n" not in text and "<" not in text:
            # inside a value, nothing that could close it: the common case, taken at once
            self.has_text = True
            if self.mode != _STREAM:
                self.value.append(text)
                return []
            fragment = json_string(text)[1:-1]
            self.args.append(fragment)
            return [Delta("tool_call", fragment, self.index)]
        if state == _UNREADABLE:
            return []
        if not self.buf and (state == _BETWEEN or state == _JUNK):
            # between tags, the common texts decided at once (as _between and _junk do)
            self.scanned += len(text)
            if state == _JUNK:
                if "\n" not in text:
                    self.junk.append(text)
                    return []
            else:
                rest = text.lstrip(WS)
                if not rest:
                    return []  # whitespace between tags: skipped
                if PARAMETER.startswith(rest) or FUNCTION_END.startswith(rest):
                    self.buf = rest  # the start of a tag
                    return []
        if state == _VALUE and not self.hold and len(self.buf) + len(text) <= _TAIL_MAX:
            tail = self.buf + text
            if ">" not in tail and "=" not in tail:
                return self._value_tail(tail)
        return super().feed(text)

    def _take_tag_name(self, final: bool) -> str | None:
        """The NAME of `<function=NAME>` / `<parameter=NAME>`, its text taken
        from the buffer; None while it is incomplete. A newline also ends it (a
        missing '>'), and stays: it is the value's leading one."""
        buf = self.buf
        gt = buf.find(">")
        nl = buf.find("\n", 0, gt if gt >= 0 else len(buf))
        if gt >= 0 and nl < 0:
            self.buf = buf[gt + 1:]
            return buf[:gt].strip(WS)
        if nl >= 0 or final:
            end = nl if nl >= 0 else len(buf)
            self.problem(f"missing '>' after {buf[:end].strip(WS)!r}")
            self.buf = buf[end:]
            return buf[:end].strip(WS)
        self.hold = HOLD_TAG_NAME
        return None

    def _name(self, final: bool, out: list) -> bool:
        name = self._take_tag_name(final)
        if name is None:
            return False
        if not name:
            self.buf, self.state = "", _UNREADABLE
            return False
        self.state = _BETWEEN
        self.params = self.start_call(name, out)
        return True

    def _between(self, final: bool, out: list) -> bool:
        buf = self.buf
        i = skip(buf, 0)
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
        text = "".join(self.junk).strip(WS)
        if text:
            self.problem("text outside any parameter (dropped)", text)
        self.junk = []

    def _after(self, final: bool, out: list) -> bool:
        """After </function>: only whitespace belongs here."""
        self.junk.append(self.buf)
        self.buf = ""
        return False

    def _key(self, final: bool, out: list) -> bool:
        key = self._take_tag_name(final)
        if key is None:
            return False
        self.state = _VALUE_START
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
                self.problem(f"{self.name} has no parameter {key!r} (kept, typed without a schema)")
        self.mode = _STREAM if self.types == {"string"} else _BUFFER
        head = ("{" if not self.count else ", ") + json_string(key) + ": "
        self.count += 1
        self.emit(head + '"' if self.mode == _STREAM else head, out)
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
                    self.hold = HOLD_SPACE
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
        r = skip(buf, q)
        if r == len(buf):
            return (_CLOSED, q) if final else (_WAIT_SPACE, 0)
        new_line = "\n" in buf[q:r]
        if buf.startswith(FUNCTION_END, r):
            if new_line or cls._after_function_end(buf, r, final)[0] == _FUNCTION_CLOSES:
                return _CLOSED, q
            return (_WAIT_SPACE, 0) if not final and skip(buf, r + len(FUNCTION_END)) == len(buf) else (_NO, 0)
        if new_line and buf.startswith(PARAMETER, r):
            return _CLOSED, q
        rest = buf[r:]
        if not final and ((new_line and PARAMETER.startswith(rest)) or FUNCTION_END.startswith(rest)):
            return _WAIT, 0
        return _NO, 0

    @staticmethod
    def _after_function_end(buf: str, tag: int, final: bool) -> tuple[int, int]:
        """`</function>` without `</parameter>` ends the value only at the end of the body."""
        r = skip(buf, tag + len(FUNCTION_END))
        if r == len(buf):
            return (_FUNCTION_CLOSES, tag) if final else (_WAIT_SPACE, 0)
        return _NO, 0

    def _take(self, text: str, out: list) -> None:
        """Value text that is certainly the value's."""
        if not text:
            return
        self.has_text = True
        if self.mode == _STREAM:
            self.emit(json_string(text)[1:-1], out)
        else:
            self.value.append(text)

    def _end_value(self, kind: int, out: list) -> None:
        key = self.key
        if kind != _CLOSED:
            self.problem(f"missing </parameter> after parameter {key!r}")
        if self.mode == _STREAM:
            self.emit('"', out)
        else:
            text = "".join(self.value)
            if self.mode == _DROP:
                what = "a parameter without a name" if not key else f"parameter {key!r} given twice (the first is kept)"
                self.problem(what + ": dropped", text)
            else:
                typed, why = typed_json(text, self.types, self.ctx.python)
                if why:
                    self.problem(f"parameter {key!r} of {self.name}: {text!r} {why}", text)
                self.emit(typed, out)
        self.value = []
        self.state = _BETWEEN

    def _stop(self, final: bool, out: list) -> bool:
        return False

    def finish(self, body: str, out: list) -> tuple[str | None, str]:
        if self.name is None:  # no function name
            return None, "the tool call is not a JSON object or <function=NAME> XML"
        self._flush_junk()
        if not self.function_closed:
            self.problem("missing </function>")
        self.emit("}" if self.count else "{}", out)
        return "".join(self.args), ""


XmlBody.STEPS = (XmlBody._name, XmlBody._between, XmlBody._key, XmlBody._value_start, XmlBody._value,
                 XmlBody._junk, XmlBody._after, XmlBody._stop)
