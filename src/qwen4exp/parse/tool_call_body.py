"""What the readers of a tool call's body share, whatever its form
(qwen4exp.parse.tool_calls picks the form; tool_call_json.py and tool_call_xml.py
read one each): the call's name and id, the arguments fragments streamed so
far, the repairs to report, and text held until more text decides it.

Held text costs O(1) an id: while a reader waits for text of one kind (text
that is not whitespace after a closing tag, a '>' or newline after a tag's
name, a quote after a JSON name), a feed without it is only set aside, and
the held run is looked at again once, when text that can decide it comes.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
import json
from typing import Any, Callable, ClassVar, Sequence

from qwen4exp._native._stream import Delta

__all__ = ["CallBody", "call_id", "skip", "WS", "HOLD_NONE", "HOLD_SPACE", "HOLD_TAG_NAME", "HOLD_JSON_NAME"]

WS = " \t\r\n"
_ALNUM = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

# `text` as a JSON string, non-ASCII as it is (what `tojson` writes; json's C encoder)
json_string: Callable[[str], str] = json.encoder.encode_basestring

# What held text waits for (see _decides).
HOLD_NONE, HOLD_SPACE, HOLD_TAG_NAME, HOLD_JSON_NAME = range(4)


def call_id(call_id_key: bytes, index: int, name: str) -> str:
    """ "call_" + 24 letters and digits: a hash of the parser's call-id key (the prompt
    and format), the call's place among the message's calls and its name."""
    h = hashlib.blake2b(digest_size=18)
    h.update(call_id_key)
    h.update(f"\0{index}\0".encode())
    h.update(name.encode("utf-8", "surrogatepass"))
    n = int.from_bytes(h.digest(), "big")
    chars = []
    for _ in range(24):
        n, r = divmod(n, 62)
        chars.append(_ALNUM[r])
    return "call_" + "".join(chars)


def skip(s: str, i: int) -> int:
    """The index of the first character at or after `i` that is not whitespace."""
    n = len(s)
    while i < n and s[i] in WS:
        i += 1
    return i


def _decides(hold: int, text: str) -> bool:
    """Whether `text` can change what a reader holding `hold` decides."""
    if hold == HOLD_SPACE:
        return bool(text.strip(WS))
    if hold == HOLD_TAG_NAME:
        return ">" in text or "\n" in text
    return '"' in text or "\\" in text


class CallBody(ABC):
    """One call's body in one form as it streams. `buf` is the text not yet
    decided; `state` indexes the subclass's STEPS, each of which reads `buf`
    and returns whether to run again. `finish(body, out)` gives the
    arguments (or None and why the body is invalid) once the body ends."""

    __slots__ = ("ctx", "index", "buf", "state", "name", "id", "args", "problems", "hold", "held", "scanned")
    STEPS: ClassVar[Sequence[Callable[[Any, bool, list], bool]]] = ()

    @staticmethod
    @abstractmethod
    def opens(text: str, i: int, final: bool) -> int | None:
        """Where the body's text starts when `text[i:]` (not whitespace) opens a
        body of this form; -1 while it may still (more text decides), else None."""

    def __init__(self, ctx: Any, index: int, buf: str, state: int) -> None:
        self.ctx, self.index = ctx, index
        self.buf, self.state = buf, state
        self.name: str | None = None  # set with the id when the name is complete
        self.id: str | None = None
        self.args: list[str] = []  # the arguments fragments streamed so far
        self.problems: list[tuple[str, str]] = []  # repairs: (what, text)
        self.hold = HOLD_NONE  # what `buf` waits for
        self.held: list[str] = []  # text set aside while it cannot decide
        self.scanned = 0  # characters handed to the steps: a test's measure of rescans

    def copy(self) -> "CallBody":
        c = type(self).__new__(type(self))
        for cls in type(self).__mro__:
            for slot in getattr(cls, "__slots__", ()):
                value = getattr(self, slot)
                setattr(c, slot, value.copy() if isinstance(value, (list, set)) else value)
        return c

    def feed(self, text: str) -> list:
        if self.hold:
            if not _decides(self.hold, text):
                self.held.append(text)
                return []
            self.unhold()
        self.buf += text
        out: list = []
        self.run(False, out)
        return out

    def unhold(self) -> None:
        if self.held:
            self.buf += "".join(self.held)
            self.held = []
        self.hold = HOLD_NONE

    def run(self, final: bool, out: list) -> None:
        self.scanned += len(self.buf)
        self.hold = HOLD_NONE
        steps = self.STEPS
        while steps[self.state](self, final, out):
            pass

    def emit(self, fragment: str, out: list) -> None:
        self.args.append(fragment)
        out.append(Delta("tool_call", fragment, self.index))

    def problem(self, what: str, text: str = "") -> None:
        self.problems.append((what, text))

    def start_call(self, name: str, out: list) -> Any:
        """The name is complete: the call's first delta. Returns the tool's
        parameter types (None: no schema for them)."""
        self.name = name
        self.id = call_id(self.ctx.call_id_key, self.index, name)
        schemas = self.ctx.schemas
        if name not in schemas and self.ctx.tools_given:
            self.problem(f"{name!r} is not one of the request's tools (kept, typed without a schema)")
        out.append(Delta("tool_call", "", self.index, name=name, call_id=self.id))
        return schemas.get(name)

    @abstractmethod
    def finish(self, body: str, out: list) -> tuple[str | None, str]:
        """(the arguments, "") or (None, why the body is invalid); `body` is the
        call's whole text."""
