"""Parse what a model generates into an assistant message (docs/FORMAT.md, section 11).

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

`in_reasoning=True` is for prompts that end inside an opened `<think>` (the
ids start with reasoning; one leading newline is the template's, as after a
generated `<think>`).

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

from ._stream import ROLES, Delta, ParserCore
from .chat import IM_END, THINK, THINK_END, TOOL_CALL, TOOL_CALL_END
from .errors import Qwen4ExpError, id_error
from .requests import reject_constant

__all__ = ["CompletionParser", "Delta"]

END_OF_TEXT = "<|endoftext|>"

_STRUCTURE = (
    (THINK, "open_think"), (THINK_END, "close_think"), (TOOL_CALL, "open_call"),
    (TOOL_CALL_END, "close_call"), (IM_END, "end"), (END_OF_TEXT, "end"),
)


class CompletionParser(ParserCore):
    """Streaming form of `Tokenizer.parse_completion`: `feed(ids)` returns the
    new `Delta`s, `finish()` the message (the same dict every call).

    Text is emitted as soon as its bytes form characters, except a final
    newline, held until the next id shows whether the template wrote it (it is
    released at `<|im_end|>`; on a truncated completion it is only in
    `finish()`'s message). Work is linear in the number of ids; the per-id
    state machine is native (pyx/_stream.pyx).
    """

    __slots__ = ("_n_vocab",)

    def __init__(self, tok, *, in_reasoning: bool = False) -> None:
        if not isinstance(in_reasoning, bool):
            raise TypeError(f"in_reasoning must be a bool, not {type(in_reasoning).__name__}")
        atoms = tok.atoms
        roles = {i: ROLES["other"] for i in atoms.values()}
        for spelling, role in _STRUCTURE:
            if spelling in atoms:
                roles[atoms[spelling]] = ROLES[role]
        tables = tok._id_tables()
        super().__init__(tables, roles, tok._native.decode_bytes, tok.decode, tool_call, in_reasoning)
        self._n_vocab = tables.n_vocab

    # The native feed() calls these to build its errors.
    def _bad_id(self, id, index: int) -> Exception:
        return id_error(id, index, self._where, self._n_vocab)

    def _finished(self) -> Exception:
        return Qwen4ExpError(f"{self._where}: the parser has finished; make a new one")


# -- tool call bodies ----------------------------------------------------------

_PREFIX = '{"name": "'
_SEPARATOR = '", "arguments": '
_SEPARATOR_TRIES = 8  # a name or arguments that spell the separator: bounded work
_WS = " \t\n\r"



_DECODER = json.JSONDecoder(parse_constant=reject_constant)


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
