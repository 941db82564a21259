"""Provenance-carrying byte streams: Kind, Segment, RenderedChat and the builder.

A rendered chat is one UTF-8 byte stream plus a gap-free sequence of segments
over it, each DATA (caller bytes) or TRUSTED_CONTROL (markers the renderer, or
a caller through the explicit `SegmentBuilder.control`, vouched for).
"""

from __future__ import annotations

import enum
import json
from functools import partial
from itertools import accumulate, cycle
from typing import Any, NamedTuple

from qwen4exp.errors import surrogate_error

__all__ = ["Kind", "Segment", "MessageSpan", "RenderedChat", "SegmentBuilder", "utf8"]


class Kind(enum.IntEnum):
    DATA = 0
    TRUSTED_CONTROL = 1


class Segment(NamedTuple):
    start: int
    end: int
    kind: Kind


class MessageSpan(NamedTuple):
    """The bytes one message produced: `chat.data[start:end]`.

    A span is the message's turn, from its IM_START marker through the
    newline after its IM_END marker (markers.Marker). The tools preamble is
    part of the system turn, so it lies in the system message's span (and in
    no span when there is no system message). Consecutive tool messages share
    one `user` turn: each has its own span, its TOOL_RESPONSE block with the
    newline before it (the first also holds the turn's opening, the last its
    IM_END marker and newline). The generation prompt belongs to no message.
    Spans are ordered, do not overlap, and start and end on segment
    boundaries.
    """

    start: int
    end: int
    index: int  # type: ignore[assignment]  # position in `messages` (shadows tuple.index)
    role: str  # "system", "user", "assistant" or "tool"


_make_segment = partial(tuple.__new__, Segment)  # Segment(*t) without the Python-level __new__
_ROLE_NAMES = ("system", "user", "assistant", "tool")  # by render/validate.py's role codes
_ALTERNATING = {False: (Kind.DATA, Kind.TRUSTED_CONTROL), True: (Kind.TRUSTED_CONTROL, Kind.DATA)}


def utf8(text: str, where: str) -> bytes:
    """Encode `text` strictly, naming `where` when it holds a lone surrogate."""
    try:
        return str.encode(text, "utf-8")  # never a subclass's override
    except UnicodeEncodeError as exc:
        raise surrogate_error(text, where, exc.start) from None


class ChatRecord(NamedTuple):
    """Everything a RenderedChat holds, committed whole (RenderedChat._commit)."""

    data: bytes
    bounds: tuple[int, ...]  # segment boundaries: 0 first, len(data) last
    first_control: bool  # the kind of the first segment (kinds alternate)
    text: str | None = None  # data decoded, when already known
    spans: Any = ()  # message spans: flat (start, end, start, end, ...) indices into bounds
    roles: tuple[int, ...] = ()  # each message's role code (render/validate.py)
    chat_format: str | None = None  # None: a caller-built stream
    tools: tuple[bytes, ...] = ()  # the request's tools as their validated JSON texts
    add_generation_prompt: bool = False
    opens_reasoning: bool = False  # the generation prompt left a THINK block open
    media: tuple = ()  # the media parts' places (media.MediaPart)
    generation: tuple = ()  # a template's {% generation %} output: flat (start, end) byte offsets


class RenderedChat:
    """A rendered transcript: `.data` (bytes), `.text` (str), `.segments`.

    `RenderedChat()` is the empty transcript. `render_chat_into` replaces the
    contents only after a request has been fully validated and rendered.

    A chat from `render_chat` also keeps what it was rendered from that a
    completion parser needs: `chat_format`, `request_tools()`,
    `add_generation_prompt` and `opens_reasoning`; and its image and video
    parts, `media`. They are recorded while
    rendering, never read back from the text. Equality (`==`) is the stream
    the tokenizer sees, the bytes and the segments; those facts do not take
    part, so a SegmentBuilder stream equals the rendered chat it copies.

    Segments are stored compactly, as their boundary offsets and the kind of
    the first one (kinds alternate, since neighbours of one kind are merged);
    the Segment tuples and the tokenizer's arrays are derived on demand.
    """

    __slots__ = ("_data", "_bounds", "_first_control", "_text", "_segments", "_marks", "_spans",
                 "_format", "_tools", "_generation_prompt", "_opens_reasoning", "_media", "_generation")
    _text: str | None  # decoded on first use
    _segments: tuple[Segment, ...] | None  # built on first use
    _spans: tuple[MessageSpan, ...] | None  # built on first use
    _marks: tuple[Any, Any]  # (span indices into bounds, role codes)

    def __init__(self) -> None:
        self._commit(ChatRecord(b"", (0,), False, ""))

    @property
    def data(self) -> bytes:
        return self._data

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = self._data.decode("utf-8")
        return self._text

    @property
    def segments(self) -> tuple[Segment, ...]:
        if self._segments is None:
            b = self._bounds
            kinds = cycle(_ALTERNATING[self._first_control])
            self._segments = tuple(map(_make_segment, zip(b, b[1:], kinds)))
        return self._segments

    @property
    def boundaries(self) -> tuple[int, ...]:
        """The segments' boundary offsets into `data`: 0, then each segment's
        end. With `first_is_control` this is the whole segmentation (kinds
        alternate), the form the tokenizer hands the native core."""
        return self._bounds

    @property
    def first_is_control(self) -> bool:
        """True when the first segment is TRUSTED_CONTROL."""
        return self._first_control

    @property
    def chat_format(self) -> str | None:
        """The chat format the transcript was rendered in (a name of `chat_formats()`);
        None for the empty transcript and a stream built with SegmentBuilder."""
        return self._format

    @property
    def message_spans(self) -> tuple[MessageSpan, ...]:
        """One MessageSpan per message, in order (see MessageSpan); () for a
        stream built with SegmentBuilder."""
        if self._spans is None:
            marks, roles = self._marks
            b = self._bounds
            self._spans = tuple(
                MessageSpan(b[marks[2 * k]], b[marks[2 * k + 1]], k, _ROLE_NAMES[r])
                for k, r in enumerate(roles)
            )
        return self._spans

    @property
    def add_generation_prompt(self) -> bool:
        """True when the chat was rendered with add_generation_prompt=True (it
        ends with the prompt a completion continues); False for `RenderedChat()`
        and a stream built with SegmentBuilder."""
        return self._generation_prompt

    @property
    def opens_reasoning(self) -> bool:
        """True when the chat's generation prompt opened a THINK block that the
        completion continues (qwen3.5 / 3.6 / 3.8 with thinking on), as the
        format decided while rendering; False otherwise."""
        return self._opens_reasoning

    @property
    def media(self) -> tuple:
        """The image and video parts, in order: one `media.MediaPart` each
        (message and part index, kind, the byte range of its placeholder, the
        sizes it gave), so a runtime attaches pixel data in this order and
        `encode_chat(expand_media=...)` counts its pads. () without media."""
        return self._media

    @property
    def generation_ranges(self) -> tuple[tuple[int, int], ...]:
        """The byte ranges a chat template's `{% generation %}` blocks wrote
        (what transformers' return_assistant_tokens_mask marks), in order; ()
        for the native formats and a template without such blocks."""
        g = self._generation
        return tuple(zip(g[::2], g[1::2]))

    def request_tools(self) -> list | None:
        """The tool schemas the chat was rendered with, as a new list of new
        dicts on every call; None without tools (and for `RenderedChat()` and
        SegmentBuilder streams). Kept as the validated request's JSON text when
        it was rendered: changing the caller's list afterwards changes nothing
        here, and neither does anything the rendered text spells."""
        return [json.loads(tool) for tool in self._tools] if self._tools else None

    def _commit(self, record: "ChatRecord") -> None:
        """Replace the contents with `record`'s. Plain attribute stores only:
        nothing here can fail half-way."""
        self._data, self._bounds, self._first_control, self._text = record[:4]
        self._marks, self._format = (record.spans, record.roles), record.chat_format
        self._tools, self._generation_prompt = record.tools, record.add_generation_prompt
        self._opens_reasoning = record.opens_reasoning
        self._media = record.media
        self._generation = record.generation
        self._segments = self._spans = None

    def _take(self, other: "RenderedChat") -> None:
        """Replace the contents with another chat's (attribute stores only)."""
        for name in self.__slots__:
            setattr(self, name, getattr(other, name))

    def __len__(self) -> int:
        return len(self._data)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RenderedChat):
            return NotImplemented
        return self._data == other._data and self.segments == other.segments

    __hash__ = None  # type: ignore[assignment]  # mutable through render_chat_into

    def __repr__(self) -> str:
        return f"RenderedChat({len(self._data)} bytes, {len(self._bounds) - 1} segments)"


class SegmentBuilder:
    """Explicit trust promotion for caller-built streams.

    `.text(s)` appends DATA; `.control(atom)` appends a TRUSTED_CONTROL marker
    (checked against the atom table when tokenized). Neighbours of one kind
    merge; empty text adds nothing. No method ever scans text for markers.
    """

    __slots__ = ("_parts", "_kinds")

    def __init__(self) -> None:
        # One list of chunks per same-kind run, joined once in build(): appending
        # stays linear however many small pieces a caller adds.
        self._parts: list[list[bytes]] = []
        self._kinds: list[Kind] = []

    def text(self, text: str) -> "SegmentBuilder":
        if not isinstance(text, str):
            raise TypeError(f"text() takes a str, not {type(text).__name__}")
        self._append(utf8(text, "text()"), Kind.DATA)
        return self

    def control(self, atom: str) -> "SegmentBuilder":
        if not isinstance(atom, str):
            raise TypeError(f"control() takes a str, not {type(atom).__name__}")
        if not atom:
            raise ValueError("control() needs a non-empty atom spelling")
        self._append(utf8(atom, "control()"), Kind.TRUSTED_CONTROL)
        return self

    def _append(self, data: bytes, kind: Kind) -> None:
        if not data:
            return
        if self._kinds and self._kinds[-1] is kind:
            self._parts[-1].append(data)
        else:
            self._parts.append([data])
            self._kinds.append(kind)

    def build(self) -> RenderedChat:
        runs = [chunks[0] if len(chunks) == 1 else b"".join(chunks) for chunks in self._parts]
        chat = RenderedChat()
        chat._commit(ChatRecord(
            b"".join(runs),
            tuple(accumulate(map(len, runs), initial=0)),
            bool(self._kinds) and self._kinds[0] is Kind.TRUSTED_CONTROL,
        ))
        return chat
