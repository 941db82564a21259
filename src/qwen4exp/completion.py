"""Parse what a model generates into an assistant message (README, "Completions").

The ids a model writes after `<|im_start|>assistant\\n` are parsed by their
ids, never by their text: only the atom ids `<think>`, `</think>`,
`<tool_call>`, `</tool_call>`, `<|im_end|>` and `<|endoftext|>` make
structure. The same spellings written as ordinary BPE ids are text, so a model
that explains the tool format does not call a tool.

The grammar is the one `render_chat` writes for a final assistant turn::

    [<think> "\\n" REASONING "\\n" </think> "\\n\\n"] CONTENT
    ("\\n" <tool_call> "\\n" BODY "\\n" </tool_call>)* <|im_end|>

and the newlines the template adds are removed exactly as it adds them: one
after `<think>` and one before `</think>`, up to two after `</think>`, one
before each `<tool_call>`, one on each side of a tool call body. So parsing
what `render_chat` + `encode_chat` wrote for a final assistant turn gives that
turn back (content with leading newlines stripped and reasoning stripped of
newlines, as the template renders them; dict arguments as their `tojson` text).

Bad output never raises and never loses text (ids that are not in the
vocabulary raise `Qwen4ExpError`, and a failed `feed` changes nothing). The
message has the four OpenAI keys, and only when something was wrong:

* ``invalid_tool_calls``: ``[{"index", "text", "error"}]``, a tool call whose
  body is not ``{"name": str, "arguments": {...}}`` JSON or is cut off;
  ``text`` is the whole body, ``index`` its place among the tool calls (as in
  `Delta.index`);
* ``errors``: ``[{"position", "error", "text"}]`` with ``position`` an index
  into the ids: an atom that has no place there (``<|im_start|>``,
  ``<tool_response>``, a second ``<think>``, ...; its spelling is ``text`` and
  it is not copied into content or reasoning, which only ever hold BPE text),
  reasoning never closed, a completion without ``<|im_end|>`` (truncated; text
  ``""``), or ids after the end (their decoded ``text``).
"""

from __future__ import annotations

import json
from json.decoder import scanstring
from typing import NamedTuple

import numpy as np

from .chat import IM_END, THINK, THINK_END, TOOL_CALL, TOOL_CALL_END
from .decode_stream import Utf8Stream, bad_id
from .errors import Qwen4ExpError

__all__ = ["CompletionParser", "Delta"]

END_OF_TEXT = "<|endoftext|>"

# Parser modes; the text channels.
_START, _REASONING, _CONTENT, _TOOL, _DONE = range(5)
REASONING, CONTENT, TOOL = "reasoning", "content", "tool_call"
_MODE_NAMES = {_START: "content", _REASONING: "reasoning", _CONTENT: "content", _TOOL: "a tool call"}
# Atom roles.
_OPEN_THINK, _CLOSE_THINK, _OPEN_CALL, _CLOSE_CALL, _END, _OTHER = range(6)

_ARRAY_PATH_MIN = 64  # from this many ids, feed() finds atoms and decodes runs with numpy


class Delta(NamedTuple):
    """New text of one channel: `kind` is "reasoning", "content" or "tool_call";
    `index` is the tool call's place (0, 1, ...) for "tool_call", else None."""

    kind: str
    text: str
    index: int | None = None


_new_delta = tuple.__new__  # Delta(...) without the Python-level __new__


class CompletionParser:
    """Streaming form of `Tokenizer.parse_completion`: `feed(ids)` returns the
    new `Delta`s, `finish()` the message.

    Text is emitted as soon as its bytes form characters, except a final
    newline, held until the next id shows whether the template wrote it (it is
    released at `<|im_end|>`; on a truncated completion it is only in
    `finish()`'s message). Work is linear in the number of ids.
    """

    __slots__ = (
        "_tok", "_tables", "_roles", "_utf8", "_mode", "_lead", "_held", "_parts", "_kind",
        "_index", "_reasoning", "_content", "_body", "_calls", "_invalid", "_errors",
        "_ncalls", "_count", "_trailing", "_result", "_where", "_parse",
    )

    def __init__(self, tok, *, in_reasoning: bool = False) -> None:
        if not isinstance(in_reasoning, bool):
            raise TypeError(f"in_reasoning must be a bool, not {type(in_reasoning).__name__}")
        self._tok = tok
        self._tables = tok._id_tables()
        self._parse = self._tables.parse
        atoms = tok.atoms
        roles = {i: _OTHER for i in atoms.values()}
        for spelling, role in (
            (THINK, _OPEN_THINK), (THINK_END, _CLOSE_THINK), (TOOL_CALL, _OPEN_CALL),
            (TOOL_CALL_END, _CLOSE_CALL), (IM_END, _END), (END_OF_TEXT, _END),
        ):
            if spelling in atoms:
                roles[atoms[spelling]] = role
        self._roles = roles
        self._utf8 = Utf8Stream()
        self._reasoning: list[str] | None = None
        self._content: list[str] = []
        self._body: list[str] = []
        self._calls: list[dict] = []
        self._invalid: list[dict] = []
        self._errors: list[dict] = []
        self._ncalls = 0
        self._count = 0  # ids fed so far
        self._trailing: list[int] = []
        self._result: dict | None = None
        self._where = "feed()"  # names the caller in errors
        self._held = False
        if in_reasoning:
            self._enter(_REASONING, 1)
        else:
            self._enter(_START, 0)

    # -- feeding -------------------------------------------------------------

    def feed(self, ids) -> list[Delta]:
        """Parse the next ids (an int, a sequence of ints or a 1-D int array);
        return the new deltas. Raises Qwen4ExpError, changing nothing, for an id
        that is not in the vocabulary."""
        if type(ids) is int and 0 <= ids < len(self._parse) and self._mode != _DONE and self._result is None:
            data = self._parse[ids]  # one id: the generate loop's case, kept short
            if data.__class__ is bytes:
                out: list[Delta] = []
                text = self._utf8.decode(data)
                if text:
                    self._route(text, out)
                self._count += 1
                return out
        if self._result is not None:
            raise Qwen4ExpError(f"{self._where}: the parser has finished; make a new one")
        ids = self._checked(ids)
        out: list[Delta] = []
        if self._mode == _DONE:
            self._trailing.extend(ids.tolist() if isinstance(ids, np.ndarray) else ids)
        elif isinstance(ids, np.ndarray):
            self._feed_array(ids, out)
        else:
            self._feed_list(ids, out)
        self._count += len(ids)
        return out

    def _checked(self, ids):
        """`ids` as a list of ints (short) or an int64 array (long), all valid."""
        n = len(self._tables.parse)
        if type(ids) is int:
            ids = [ids]
        elif isinstance(ids, np.ndarray):
            if ids.ndim != 1 or ids.dtype.kind not in "iu":
                raise TypeError(f"{self._where} takes a 1-D array of integer ids")
            ids = ids.astype(np.int64, copy=False)
        else:
            if isinstance(ids, (str, bytes)) or not hasattr(ids, "__iter__"):
                raise TypeError(f"{self._where} takes ids (an int or a sequence of ints), not {type(ids).__name__}")
            ids = list(ids)
            if set(map(type, ids)) - {int}:
                for k, i in enumerate(ids):
                    if isinstance(i, bool) or not hasattr(i, "__index__"):
                        raise bad_id(i, self._count + k, n, self._where)
                ids = [i.__index__() for i in ids]
            if len(ids) >= _ARRAY_PATH_MIN:
                ids = np.array(ids, dtype=np.int64)
        if len(ids):
            if isinstance(ids, np.ndarray):
                bad = (ids < 0) | (ids >= n)
                if self._tables.has_gaps and not bad.any():
                    bad = np.array([self._tables.parse[i] is None for i in ids.tolist()])
                if bad.any():
                    k = int(np.flatnonzero(bad)[0])
                    raise bad_id(int(ids[k]), self._count + k, n, self._where)
            elif min(ids) < 0 or max(ids) >= n or (self._tables.has_gaps and None in map(self._tables.parse.__getitem__, ids)):
                k = next(k for k, i in enumerate(ids) if not 0 <= i < n or self._tables.parse[i] is None)
                raise bad_id(ids[k], self._count + k, n, self._where)
        return ids

    def _feed_list(self, ids: list, out: list) -> None:
        table = self._tables.parse
        run: list[bytes] = []
        for k, i in enumerate(ids):
            data = table[i]
            if data.__class__ is bytes:
                run.append(data)
                continue
            if run:
                self._text(b"".join(run), out)
                run.clear()
            self._atom(i, self._count + k, out)
            if self._mode == _DONE:
                self._trailing.extend(ids[k + 1 :])
                return
        if run:
            self._text(b"".join(run), out)

    def _feed_array(self, ids: np.ndarray, out: list) -> None:
        decode = self._tok._native.decode_bytes
        at = np.flatnonzero(self._tables.is_atom[ids]).tolist()
        start = 0
        for k in at + [len(ids)]:
            if k > start:
                data, _ = decode(ids[start:k].astype(np.int32))
                self._text(data, out)
            if k == len(ids):
                return
            self._atom(int(ids[k]), self._count + k, out)
            start = k + 1
            if self._mode == _DONE:
                self._trailing.extend(ids[start:].tolist())
                return

    # -- channels ------------------------------------------------------------

    def _enter(self, mode: int, lead: int) -> None:
        """Switch channel; `lead`: how many leading newlines the template wrote."""
        self._mode = mode
        self._lead = lead
        self._held = False
        if mode == _REASONING:
            if self._reasoning is None:
                self._reasoning = []
            self._parts, self._kind, self._index = self._reasoning, REASONING, None
        elif mode == _TOOL:
            self._body = []
            self._parts, self._kind, self._index = self._body, TOOL, self._ncalls
        else:
            self._parts, self._kind, self._index = self._content, CONTENT, None

    def _text(self, data: bytes, out: list) -> None:
        text = self._utf8.decode(data)
        if text:
            self._route(text, out)

    def _route(self, text: str, out: list) -> None:
        """Append decoded text to the current channel, minus template newlines."""
        if self._mode == _START:  # text first: no reasoning block can open now
            self._mode = _CONTENT
        lead = self._lead
        if lead:
            k, n = 0, len(text)
            while k < lead and k < n and text[k] == "\n":
                k += 1
            self._lead = 0 if k < n else lead - k
            text = text[k:]
            if not text:
                return
        if self._held:
            text = "\n" + text
            self._held = False
        if text[-1] == "\n":  # may be the newline the template writes before an atom
            self._held = True
            text = text[:-1]
            if not text:
                return
        self._parts.append(text)
        out.append(_new_delta(Delta, (self._kind, text, self._index)))

    def _release(self, out: list) -> None:
        """The held newline is text after all."""
        if self._held:
            self._held = False
            self._parts.append("\n")
            out.append(_new_delta(Delta, (self._kind, "\n", self._index)))

    # -- atoms ---------------------------------------------------------------

    def _atom(self, i: int, position: int, out: list) -> None:
        tail = self._utf8.flush()  # an unfinished character ends at any atom
        if tail:
            self._route(tail, out)
        role = self._roles[i]
        mode = self._mode
        if role == _END:
            self._release(out)
            if mode == _TOOL:
                self._close_call("unterminated tool call (no </tool_call> before the end)")
            elif mode == _REASONING:
                self._error(position, "the message ended inside reasoning (no </think>)", "")
            self._mode = _DONE
        elif role == _OPEN_THINK and mode == _START:
            self._enter(_REASONING, 1)
        elif role == _CLOSE_THINK and mode == _REASONING:
            self._enter(_CONTENT, 2)
        elif role == _OPEN_CALL and mode in (_START, _CONTENT):
            self._enter(_TOOL, 1)
            self._ncalls += 1
        elif role == _CLOSE_CALL and mode == _TOOL:
            self._held = False
            self._close_call(None)
            self._enter(_CONTENT, 0)
        else:
            spelling = self._tables.text[i].decode("utf-8")
            hint = ""
            if role == _CLOSE_THINK and self._reasoning is None:
                hint = " (if the prompt opened <think>, parse with in_reasoning=True)"
            self._error(position, f"unexpected {spelling} in {_MODE_NAMES[mode]}{hint}", spelling)

    def _error(self, position: int, message: str, text: str) -> None:
        self._errors.append({"position": position, "error": message, "text": text})

    def _close_call(self, unterminated: str | None) -> None:
        body = "".join(self._body)
        index = self._ncalls - 1
        if unterminated is None:
            call = tool_call(body)
            if isinstance(call, tuple):
                name, arguments = call
                self._calls.append({"type": "function", "function": {"name": name, "arguments": arguments}})
                return
            unterminated = call
        self._invalid.append({"index": index, "text": body, "error": unterminated})

    # -- the end -------------------------------------------------------------

    def finish(self) -> dict:
        """The message: role, content, reasoning_content (None when no reasoning
        was opened), tool_calls, and invalid_tool_calls / errors when needed."""
        if self._result is not None:
            return self._result
        sink: list[Delta] = []
        tail = self._utf8.flush()
        if tail:
            self._route(tail, sink)
        if self._mode != _DONE:
            self._release(sink)
            if self._mode == _TOOL:
                self._close_call("unterminated tool call (the completion ends inside it)")
            self._error(self._count, "truncated: the completion ends without <|im_end|>", "")
        elif self._trailing:
            first = self._count - len(self._trailing)
            self._error(first, "ids after the end of the message", self._tok.decode(self._trailing))
        msg = {
            "role": "assistant",
            "content": "".join(self._content),
            "reasoning_content": None if self._reasoning is None else "".join(self._reasoning),
            "tool_calls": self._calls,
        }
        if self._invalid:
            msg["invalid_tool_calls"] = self._invalid
        if self._errors:
            msg["errors"] = self._errors
        self._result = msg
        return msg


# -- tool call bodies ----------------------------------------------------------

_PREFIX = '{"name": "'
_SEPARATOR = '", "arguments": '
_SEPARATOR_TRIES = 8  # a name or arguments that spell the separator: bounded work
_WS = " \t\n\r"


def _reject_constant(name: str):
    raise ValueError(f"{name} is not JSON")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def _json_object(text: str) -> bool:
    """Whether `text` is a JSON object, as render_chat requires of string arguments."""
    try:
        return isinstance(_DECODER.decode(text), dict)
    except (ValueError, RecursionError):
        return False


def tool_call(body: str) -> tuple[str, str] | str:
    """(name, arguments JSON text) of a tool call body, or why it is invalid.

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
            key, i = scanstring(s, i + 1)
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
