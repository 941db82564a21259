"""Tool-call bodies: the text between a TOOL_CALL and a TOOL_CALL_END atom
(docs/FORMAT.md, section 11).

The completion parser's state machine (pyx/_stream.pyx) finds the calls by
their atoms and hands each call's text, as it arrives, to a `CallReader`
made for it. The reader skips the body's leading whitespace, and its first
characters choose the form the body is read in: the chat format's own form
first (`CallContext.forms`), the other one too, since a model may write it:

* JSON (the formats whose call_syntax is "json"; tool_call_json.py):
  ``{"name": "NAME", "arguments": {...}}``, the arguments kept as written;
* XML (the formats whose call_syntax is "xml"; tool_call_xml.py):
  ``<function=NAME>`` and ``<parameter=KEY>`` blocks, each value typed by
  the tool's schema (qwen4exp.parse.tool_schemas).

A body in neither form, or empty, or cut off by the end of the completion,
goes to `invalid_tool_calls` with its text. While the text streams the
reader returns `Delta`s: the call's first delta (its name and id) once the
name is complete, then fragments of the arguments; the fragments of a call
concatenate to exactly its final `arguments`, because the message's
arguments are made of those very fragments. Every decision depends only on
the text, never on how it was split into feeds, and held text costs O(1) an
id (tool_call_body.py).

Call ids are "call_" + 24 letters and digits from BLAKE2b over the parser's
call-id key (the format and the prompt's bytes), the call's index and its name: the
same completion after the same prompt gets the same ids, streamed or parsed
at once; another prompt, other ids.
"""

from __future__ import annotations

from qwen4exp.markers import Marker
from qwen4exp.parse.tool_call_body import WS, CallBody, call_id, skip
from qwen4exp.parse.tool_call_json import JsonBody, json_call
from qwen4exp.parse.tool_call_xml import XmlBody
from qwen4exp.parse.tool_schemas import tool_schemas

__all__ = ["CallContext", "CallReader", "call_id", "json_call", "FORMS"]

#: The body readers by call syntax (a format's `call_syntax`): its own form first.
FORMS = {"json": (JsonBody, XmlBody), "xml": (XmlBody, JsonBody)}


class CallContext:
    """What every call of one completion is read with: the tools' parameter
    types, the format's call style and scalar dialect, the key the call ids are hashed from."""

    __slots__ = ("schemas", "tools_given", "python", "call_id_key", "forms")

    def __init__(self, tools, python: bool, call_id_key: bytes, style: str = "json") -> None:
        self.schemas = tool_schemas(tools)
        self.tools_given = tools is not None
        self.python = python
        self.call_id_key = call_id_key
        self.forms = FORMS[style]

    def reader(self, index: int, position: int) -> "CallReader":
        return CallReader(self, index, position)


class CallReader:
    """One call's text as it streams: `feed(text) -> [Delta]`, then
    `close(how, out) -> (call, invalid, errors)`. Until its first characters
    choose a form the text is kept in `head`; then a body reader of that form
    reads it (`body`)."""

    __slots__ = ("ctx", "index", "position", "raw", "head", "body", "unreadable", "unterminated")

    def __init__(self, ctx: CallContext, index: int, position: int) -> None:
        self.ctx, self.index, self.position = ctx, index, position
        self.raw: list[str] = []  # every text, for invalid_tool_calls
        self.head = ""  # text before the form is known (whitespace skipped)
        self.body: CallBody | None = None
        self.unreadable = False  # neither form: read no further
        self.unterminated = ""

    @property
    def scanned(self) -> int:
        """Characters the body's reader examined (tool_call_body.py)."""
        return self.body.scanned if self.body is not None else len(self.head)

    def copy(self) -> "CallReader":
        c = CallReader.__new__(CallReader)
        c.ctx, c.index, c.position, c.raw = self.ctx, self.index, self.position, list(self.raw)
        c.head, c.unreadable, c.unterminated = self.head, self.unreadable, self.unterminated
        c.body = None if self.body is None else self.body.copy()
        return c

    def feed(self, text: str) -> list:
        self.raw.append(text)
        if self.body is not None:
            return self.body.feed(text)
        out: list = []
        if not self.unreadable:
            self._open(text, False, out)
        return out

    def _open(self, text: str, final: bool, out: list) -> None:
        """Choose the form from the body's first characters, if they do."""
        head = self.head + text
        i = skip(head, 0)
        if i == len(head):
            self.head = ""
            return
        waiting = False
        for form in self.ctx.forms:
            start = form.opens(head, i, final)
            if start is not None and start >= 0:
                self.body = form(self.ctx, self.index, head[start:])
                self.head = ""
                self.body.run(final, out)
                return
            waiting = waiting or start == -1
        if waiting:
            self.head = head[i:]
        else:
            self.head, self.unreadable = "", True

    def close(self, how: str, out: list):
        """End the call: `how` is "closed" (by TOOL_CALL_END), "ended" (by the
        message's end), "reopened" (by the next TOOL_CALL) or "truncated".
        Returns (call or None, invalid_tool_calls entry or None, errors)."""
        text = "".join(self.raw)
        if text.startswith("\n"):
            text = text[1:]
        if how != "truncated" and text.endswith("\n"):
            text = text[:-1]
        if how == "truncated":
            return None, self._invalid(text, "unterminated tool call (the completion ends inside it)"), []
        body = self.body
        if body is None and not self.unreadable:
            self._open("", True, out)
            body = self.body
        else:
            if body is not None:
                body.unhold()
                body.run(True, out)
        if how != "closed":  # an invalid body says why it may be cut short
            self.unterminated = (f"unterminated tool call (no {Marker.TOOL_CALL_END} before "
                                 + ("the end); " if how == "ended" else f"the next {Marker.TOOL_CALL}); "))
        if body is None:
            why = ("the tool call is empty" if not text.strip(WS) else
                   "the tool call is not a JSON object or <function=NAME> XML")
            return None, self._invalid(text, why), []
        if how == "ended":
            body.problem(f"missing {Marker.TOOL_CALL_END} (the message ended inside the call)")
        elif how == "reopened":
            body.problem(f"missing {Marker.TOOL_CALL_END} before the next {Marker.TOOL_CALL}")
        arguments, why = body.finish(text, out)
        if arguments is None:
            return None, self._invalid(text, why), []
        call = {"id": body.id, "type": "function", "function": {"name": body.name, "arguments": arguments}}
        at, index = self.position, self.index
        errors = [{"position": at, "error": f"tool call {index}: {what}", "text": what_text}
                  for what, what_text in body.problems]
        return call, None, errors

    def _invalid(self, text: str, why: str) -> dict:
        return {"index": self.index, "text": text, "error": self.unterminated + why}
