"""Parse what a model generates into an assistant message (docs/FORMAT.md, section 11).

The ids a model writes after an assistant turn's header are parsed by their
ids, never by their text: only the atom ids of the markers THINK, THINK_END,
TOOL_CALL, TOOL_CALL_END, IM_END and END_OF_TEXT (markers.Marker) make
structure. The same spellings written as ordinary BPE ids are text, so a model
that explains the tool format does not call a tool.

The grammar is the one the renderer writes for a final assistant turn, in
marker names::

    [THINK "\\n" REASONING "\\n" THINK_END "\\n\\n"] CONTENT
    (NEWLINES TOOL_CALL "\\n" BODY "\\n" TOOL_CALL_END)* IM_END

where NEWLINES before the first call are the format's `newlines_before_calls`
(formats/_descriptor.py: "\\n" for the JSON-call formats, "\\n\\n" for the
XML ones) after content and nothing without content, and "\\n" between
calls. The newlines the template adds are removed exactly as it adds them:
one after THINK (none when the prompt itself wrote THINK and a newline, the
format's `prompt_think_newline`) and one before THINK_END, up to two after THINK_END, those before
each TOOL_CALL. Newlines before a first call with no content are
not the template's: they are dropped and reported. A call's BODY is read by
qwen4exp.parse.tool_calls (JSON or XML, typed by the tools' schemas).

The prompt (`RenderedChat`, rendered with `add_generation_prompt=True`) gives
the format, the tools, and whether its generation prompt opened THINK;
the keywords override it. Without either, the format is Qwen3's and nothing
is open.

Bad output never raises and never loses text (ids that are not in the
vocabulary raise `Qwen4ExpError`, and a failed `feed` changes nothing). With
`embedding_rows` (the model's embedding rows, often more than the tokenizer's
ids: Qwen3 has 151,936 for 151,669), an id from the tokenizer's `vocab_size`
up to that bound is the model's to write: it spells nothing, as in HF, and is
listed in the message's ``notes`` (``[{"position", "id", "note"}]``). The
message has the four OpenAI keys, ``notes`` when there are any, and only
when something was wrong:

* ``invalid_tool_calls``: ``[{"index", "text", "error"}]``, a tool call whose
  body cannot be read or is cut off; ``text`` is the whole body, ``index`` its
  place among the tool calls (as in `Delta.index`);
* ``errors``: ``[{"position", "error", "text"}]`` with ``position`` an index
  into the ids: an atom that has no place there (IM_START, TOOL_RESPONSE, a
  second THINK, ...; its spelling is ``text`` and
  it is not copied into content or reasoning), a tool call inside reasoning
  (kept as reasoning text unless ``calls_in_reasoning="call"``), each repair
  of a call body (at the call's TOOL_CALL), reasoning never closed, a
  completion without IM_END (truncated; text ``""``), or ids after
  the end (their decoded ``text``).

And, with a prompt, when the message has nothing of the above:

* ``notes``: ``[{"position", "note", "text"}]``, where rendering the message
  again would not write exactly the completion (an ordinary Qwen3 reply
  without reasoning gets the empty reasoning block the template adds):
  information for a caller that re-renders the history, not a fault of the
  output (docs/FORMAT.md, section 11).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from qwen4exp._native._stream import ATOM_ACTIONS, Delta, ParserCore
from qwen4exp.errors import Qwen4ExpError, id_error
from qwen4exp.markers import Marker
from qwen4exp.render.segments import Kind, RenderedChat
from qwen4exp.shapes import CompletionNote, ParsedCompletion, ToolLike
from qwen4exp.parse.tool_calls import CallContext
from qwen4exp.encode.core import HasCore

__all__ = ["CompletionParser", "Delta", "CALLS_IN_REASONING"]

_STRUCTURE = (
    (Marker.THINK, "open_think"), (Marker.THINK_END, "close_think"), (Marker.TOOL_CALL, "open_call"),
    (Marker.TOOL_CALL_END, "close_call"), (Marker.IM_END, "end"), (Marker.END_OF_TEXT, "end"),
)


#: The policies for a TOOL_CALL inside reasoning: "text" (the default) keeps
#: it as reasoning text and reports it; "call" parses it as a call.
CALLS_IN_REASONING = ("text", "call")

_IM_START = Marker.IM_START.data
_THINK = Marker.THINK.data
_THINK_END = Marker.THINK_END.data
_ASSISTANT = b"assistant\n"


class CompletionParser(ParserCore):
    """Streaming form of `Tokenizer.parse_completion`: `feed(ids)` returns the
    new `Delta`s, `finish()` the message (the same dict every call).

    Text is emitted as soon as its bytes form characters, except final
    newlines, held until the next id shows whether the template wrote them
    (released at IM_END; on a truncated completion they are only in
    `finish()`'s message), and, inside a tool call, text that could still be a
    closing tag. `copy.copy(parser)` is an independent parser in the same
    state. Work is linear in the number of ids; the per-id state machine is
    native (pyx/_stream.pyx).
    """

    __slots__ = ("_n_vocab", "_rerender")

    def __new__(cls, *args: Any, embedding_rows: int | None = None, **kwargs: Any) -> "CompletionParser":
        # The padded rows' bookkeeping is a subclass, so that the per-id feed()
        # of a parser without it stays the native one.
        if embedding_rows is not None and cls is CompletionParser:
            cls = PaddedRowsParser
        return super().__new__(cls)

    def __init__(self, tok: HasCore, prompt: RenderedChat | None = None, *, chat_format: str | None = None,
                 tools: Sequence[ToolLike] | None = None, in_reasoning: bool | None = None, calls_in_reasoning: str = "text",
                 embedding_rows: int | None = None) -> None:
        if prompt is not None and not isinstance(prompt, RenderedChat):
            raise TypeError(f"prompt must be a RenderedChat (render_chat(..., add_generation_prompt=True)), "
                            f"not {type(prompt).__name__}")
        if chat_format is None and prompt is not None:
            chat_format = prompt.chat_format
        # the tokenizer's own format by default; one of another vocabulary is refused
        fmt = tok.core.chat_format_of(chat_format, "completion_parser()")
        chat_format = fmt.name
        if in_reasoning is not None and not isinstance(in_reasoning, bool):
            raise TypeError(f"in_reasoning must be a bool or None, not {type(in_reasoning).__name__}")
        if calls_in_reasoning not in CALLS_IN_REASONING:
            raise ValueError(f"calls_in_reasoning must be one of {CALLS_IN_REASONING}, not {calls_in_reasoning!r}")
        opened, lead = False, 0
        if prompt is not None:
            opened, lead = _generation_prompt(prompt)
            if tools is None:
                tools = prompt.request_tools()
        if in_reasoning is None:
            in_reasoning = opened
        elif in_reasoning != opened:  # the caller knows better than the prompt
            lead = 0 if not in_reasoning or fmt.prompt_think_newline else 1
        call_id_key = hashlib.blake2b(chat_format.encode() + b"\0", digest_size=16)
        if prompt is not None:
            call_id_key.update(prompt.data)  # call ids differ from one prompt to the next
        context = CallContext(tools, fmt.python_scalars, call_id_key.digest(), fmt.call_syntax)
        # with a prompt, finish() checks that the message renders back to the completion
        self._rerender = None if prompt is None else (chat_format, tools, _generation_prompt_text(prompt))
        atoms = tok.atoms
        actions = {i: ATOM_ACTIONS["other"] for i in atoms.values()}
        for marker, action in _STRUCTURE:
            if marker.value in atoms:
                actions[atoms[marker.value]] = ATOM_ACTIONS[action]
        tables = tok.core.id_tables()
        super().__init__(
            tables, actions, tok.core.native.decode_bytes, tok.decode, context.reader,
            in_reasoning, lead, fmt.newlines_before_calls, calls_in_reasoning == "call",
        )
        self._n_vocab = tables.n_vocab
        if embedding_rows is not None:
            if isinstance(embedding_rows, bool) or not isinstance(embedding_rows, int):
                raise TypeError(f"embedding_rows must be an int or None, not {type(embedding_rows).__name__}")
            if not isinstance(self, PaddedRowsParser):  # a subclass of CompletionParser's own
                raise TypeError(f"{type(self).__name__} does not take embedding_rows")
            self._rows = (tok.vocab_size, max(embedding_rows, tok.vocab_size))

    def __copy__(self) -> "CompletionParser":
        copy = super().__copy__()
        copy._n_vocab = self._n_vocab
        copy._rerender = self._rerender
        return copy

    # The native feed() calls these to build its errors.
    def _bad_id(self, id, index: int) -> Exception:
        return id_error(id, index, self._where, self._n_vocab)

    def _finish_message(self, msg: dict, position: int) -> None:  # called once by the native finish()
        if self._rerender is not None:
            differs = rerender_difference(*self._rerender, self.written_bytes(), msg)
            if differs is not None:  # information, not a fault of the output: a note, not an error
                note, text = differs
                msg.setdefault("notes", []).append({"position": position, "note": note, "text": text})

    def _finished(self) -> Exception:
        return Qwen4ExpError(f"{self._where}: the parser has finished; make a new one")


class PaddedRowsParser(CompletionParser):
    """A CompletionParser with `embedding_rows`: ids from the tokenizer's
    vocab_size up to the model's rows spell nothing (HF decodes them to "")
    and are listed in the message's `notes`. The native parser is fed the
    other ids (the padded ones change none of its state), and the positions
    it reports are mapped back to the ids as given."""

    __slots__ = ("_rows", "_padded", "_padded_ids", "_fed", "_noted", "_pending")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._padded: list[int] = []  # positions (in the ids as given) of padded ids
        self._padded_ids: list[int] = []
        self._fed = 0  # ids given so far, padded ones included
        self._noted = False
        self._pending: Sequence[int] = ()  # a feed's padded positions, for its errors
        super().__init__(*args, **kwargs)

    def __copy__(self) -> "PaddedRowsParser":
        copy = super().__copy__()
        assert isinstance(copy, PaddedRowsParser)
        copy._rows, copy._fed, copy._noted, copy._pending = self._rows, self._fed, self._noted, ()
        copy._padded, copy._padded_ids = list(self._padded), list(self._padded_ids)
        return copy

    def _split(self, ids: Any) -> tuple[Any, list[int], list[int]]:
        """(the ids without padded ones, their positions in `ids`, the padded
        ids); anything that is not ints is passed on for the native checks."""
        low, high = self._rows
        if isinstance(ids, np.ndarray):
            if ids.ndim != 1 or ids.dtype.kind not in "iu" or not len(ids):
                return ids, [], []
            padded = (ids >= low) & (ids < high)
            if not padded.any():
                return ids, [], []
            where = np.flatnonzero(padded)
            return ids[~padded], where.tolist(), ids[where].tolist()
        if isinstance(ids, (int, np.integer)) and not isinstance(ids, (bool, np.bool_)):
            return ((), [0], [int(ids)]) if low <= ids < high else (ids, [], [])
        if isinstance(ids, (str, bytes)) or not hasattr(ids, "__iter__"):
            return ids, [], []
        ids = list(ids)
        at = [k for k, i in enumerate(ids)
              if type(i) is int and low <= i < high
              or isinstance(i, np.integer) and low <= int(i) < high]
        if not at:
            return ids, [], []
        skip = set(at)
        return [i for k, i in enumerate(ids) if k not in skip], at, [int(ids[k]) for k in at]

    def _given(self, position: int, pending: Sequence[int] = ()) -> int:
        """The position in the ids as given of the native parser's `position`."""
        for s in (*self._padded, *pending):  # sorted: padded positions only grow
            if s <= position:
                position += 1
            else:
                break
        return position

    def feed(self, ids: Any) -> list[Delta]:
        kept, at, padded = self._split(ids)
        if not at:
            out = CompletionParser.feed(self, kept)
            self._fed += 1 if isinstance(kept, (int, np.integer)) else len(kept)
            return out
        pending = [self._fed + k for k in at]
        self._pending = pending
        try:
            out = CompletionParser.feed(self, kept)  # raises, changing nothing, for a bad id
        finally:
            self._pending = ()
        self._padded += pending
        self._padded_ids += padded
        self._fed += len(kept) + len(at)
        return out

    def _bad_id(self, id, index: int) -> Exception:
        return id_error(id, self._given(index, self._pending), self._where, self._n_vocab)

    def finish(self) -> ParsedCompletion:
        msg = CompletionParser.finish(self)
        if not self._noted:
            self._noted = True
            for error in msg.get("errors", ()):
                error["position"] = self._given(error["position"])
            for note in msg.get("notes", ()):
                note["position"] = self._given(note["position"])
            if self._padded:
                padded: list[CompletionNote] = [
                    {"position": k, "id": i, "note": f"id {i} is a row of the model's embedding past the "
                                                     f"tokenizer's {self._rows[0]} ids: it spells nothing"}
                    for k, i in zip(self._padded, self._padded_ids)]
                msg["notes"] = [*msg.get("notes", ()), *padded]
        return msg


def parse_all(tok: HasCore, ids, prompt: RenderedChat | None = None, **options) -> ParsedCompletion:
    """`Tokenizer.parse_completion`: all the ids at once, errors named after it."""
    parser = CompletionParser(tok, prompt, **options)
    parser._where = "parse_completion()"
    parser.feed(ids)
    return parser.finish()


_TURN_START = Marker.IM_START.data + b"assistant\n"


def _generation_prompt_text(prompt: RenderedChat) -> bytes:
    """What the prompt's generation prompt wrote after IM_START "assistant\n"
    (an open THINK, an empty reasoning block): the start of the turn."""
    data = prompt.data
    at = data.rfind(_TURN_START)
    return data[at + len(_TURN_START):] if at >= 0 else b""


def rerender_difference(chat_format: str, tools, head: bytes, written: bytes, msg: dict) -> tuple[str, str] | None:
    """(note, text) when rendering `msg` as the chat's last turn does not write
    exactly the completion (`head`, the generation prompt's part of the turn,
    then the bytes of the ids `written`); None when it does.

    What a re-render cannot reproduce: whitespace the format trims or strips,
    newlines the template writes where the model wrote others, text between
    or after calls, an empty reasoning block the template adds, a value typed
    from another spelling, a call body not in the template's form."""
    from qwen4exp.render.chat import render_chat  # the renderer, only to check the promise

    turn = {key: msg[key] for key in ("role", "content", "reasoning_content", "tool_calls")}
    query = {"role": "user", "content": "?"}
    try:
        before = render_chat([query], tools=tools, chat_format=chat_format).data
        again = render_chat([query, turn], tools=tools, chat_format=chat_format).data[len(before):]
    except (Qwen4ExpError, TypeError, ValueError, RecursionError) as exc:  # a report, never a raise
        return f"the message cannot be rendered again ({exc})", ""
    expected = _TURN_START + head + written + b"\n"
    if again == expected:
        return None
    k = 0
    n = min(len(again), len(expected))
    while k < n and again[k] == expected[k]:
        k += 1
    where = k - len(_TURN_START) - len(head)
    model = expected[k : k + 24].decode("utf-8", "replace")
    rendered = again[k : k + 24].decode("utf-8", "replace")
    return (f"a re-render of this message differs from the completion from its byte {max(where, 0)}: "
            f"it writes {rendered!r} where the model wrote {model!r}"), model


_NOT_A_GENERATION_PROMPT = (
    f"prompt: the chat does not end with a generation prompt ({Marker.IM_START}assistant\\n, "
    f"optionally {Marker.THINK}); render it with add_generation_prompt=True"
)


def _generation_prompt(chat: RenderedChat) -> tuple[bool, int]:
    """(whether the prompt's generation prompt opened THINK, how many template
    newlines the completion still starts with). Raises Qwen4ExpError for a
    chat that does not end with a generation prompt.

    A rendered chat says so itself (recorded while rendering; its generation
    prompt always ends with the template's own newlines, so none is left)."""
    if chat.chat_format is None:
        return _built_generation_prompt(chat)
    if not chat.add_generation_prompt:
        raise Qwen4ExpError(_NOT_A_GENERATION_PROMPT)
    return chat.opens_reasoning, 0


def _built_generation_prompt(chat: RenderedChat) -> tuple[bool, int]:
    """_generation_prompt of a stream with no rendering record (SegmentBuilder,
    RenderedChat()): read from the markers its caller vouched for at its end
    (the last segments: IM_START "assistant\\n", then optionally THINK and
    newlines, or an empty THINK THINK_END block)."""
    data, bounds = chat.data, chat.boundaries
    parts = []  # the last segments, last first: (is_control, bytes)
    control = chat.segments[-1].kind is Kind.TRUSTED_CONTROL if len(bounds) > 1 else False
    for k in range(len(bounds) - 1, max(0, len(bounds) - 8), -1):
        parts.append((control, data[bounds[k - 1] : bounds[k]]))
        control = not control
    if parts and parts[0][0]:
        parts.insert(0, (False, b""))  # no text after the last marker
    tail = [p for _, p in parts]
    newlines = tail[0] if tail and tail[0].strip(b"\n") == b"" else None
    if len(tail) >= 3 and tail[1].endswith(_IM_START) and tail[0] == _ASSISTANT:
        return False, 0
    if newlines is not None and len(tail) >= 4 and tail[1] == _THINK and tail[2] == _ASSISTANT \
            and tail[3].endswith(_IM_START) and len(newlines) <= 1:
        return True, 1 - len(newlines)
    if newlines is not None and len(tail) >= 6 and tail[1] == _THINK_END and tail[3] == _THINK \
            and tail[4] == _ASSISTANT and tail[5].endswith(_IM_START) and len(newlines) <= 2:
        return False, 2 - len(newlines)
    raise Qwen4ExpError(_NOT_A_GENERATION_PROMPT)
