"""Streaming detokenization: text as soon as its bytes form characters.

Byte-level BPE ids do not stop at character boundaries: one character can be
spread over several ids. `DecodeStream.step(id)` returns exactly the text that
became complete with that id. The rules (README, "Streaming"):

* a character is returned by the first step that completes it, never later,
  and never split;
* bytes that can no longer become a character (an invalid byte, or a valid
  prefix followed by a byte that cannot continue it) become U+FFFD at once,
  one per maximal invalid subpart, as `bytes.decode("utf-8", "replace")` and
  HF `tokenizers` write them;
* nothing returned is ever retracted, so the concatenation of every `step`
  and a final `flush` equals `Tokenizer.decode(ids)`.

CPython's incremental UTF-8 decoder is not enough: it holds a surrogate
prefix such as ``b"\\xed\\xa0"`` until the end although it can never complete.
`Utf8Stream` decides by the Unicode table of well-formed byte sequences.
"""

from __future__ import annotations

from .errors import Qwen4ExpError

__all__ = ["DecodeStream", "Utf8Stream"]


def _second_byte_ok(lead: int, b: int) -> bool:
    """Whether `b` may follow `lead` in a well-formed sequence (Unicode table 3-7)."""
    if lead == 0xE0:
        return 0xA0 <= b <= 0xBF
    if lead == 0xED:
        return 0x80 <= b <= 0x9F
    if lead == 0xF0:
        return 0x90 <= b <= 0xBF
    if lead == 0xF4:
        return 0x80 <= b <= 0x8F
    return 0x80 <= b <= 0xBF


def _held_from(data: bytes) -> int:
    """Where the unfinished character at the end of `data` starts (len(data): none).

    Only a proper prefix of a well-formed sequence is held; anything else at
    the end is already decidable (complete, or U+FFFD now).
    """
    n = len(data)
    if data[-1] < 0x80:
        return n
    i = n - 1
    stop = max(n - 4, -1)
    while i > stop and 0x80 <= data[i] <= 0xBF:
        i -= 1
    if i == stop:  # only continuation bytes: nothing can start here
        return n
    lead = data[i]
    need = 2 if 0xC2 <= lead <= 0xDF else 3 if 0xE0 <= lead <= 0xEF else 4 if 0xF0 <= lead <= 0xF4 else 0
    have = n - i
    if have >= need:
        return n
    if have >= 2 and not _second_byte_ok(lead, data[i + 1]):
        return n
    return i


class Utf8Stream:
    """Incremental UTF-8 decoding that holds only bytes that can still complete."""

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending = b""

    def decode(self, data: bytes) -> str:
        """The text that `data` (after what came before) completes."""
        if self._pending:
            data = self._pending + data
            self._pending = b""
        try:
            return data.decode("utf-8")  # complete characters: the usual case, in C
        except UnicodeDecodeError:
            pass
        cut = _held_from(data)
        if cut < len(data):
            self._pending = data[cut:]
            data = data[:cut]
        return data.decode("utf-8", "replace")

    def flush(self) -> str:
        """U+FFFD for an unfinished character (bytes end here), else ""."""
        pending, self._pending = self._pending, b""
        return pending.decode("utf-8", "replace")


class DecodeStream:
    """Streaming decode of ids: `step(id) -> str`, then `flush() -> str`.

    Made by `Tokenizer.decode_stream(skip_special=False)`. With `skip_special`
    the special added tokens (those HF marks ``special``, e.g. `<|im_end|>`)
    spell nothing, as in `decode(ids, skip_special=True)`.
    """

    __slots__ = ("_table", "_utf8", "_count")

    def __init__(self, table: list, *, _internal: bool = False) -> None:
        if not _internal:
            raise TypeError("use Tokenizer.decode_stream() to make a DecodeStream")
        self._table = table
        self._utf8 = Utf8Stream()
        self._count = 0

    def step(self, id: int) -> str:
        """The text that became complete with `id` ("" while a character is unfinished)."""
        table = self._table
        data = None
        if type(id) is int and id >= 0:
            try:
                data = table[id]
            except IndexError:
                pass
        elif not isinstance(id, bool) and hasattr(id, "__index__") and 0 <= id < len(table):
            data = table[id.__index__()]
        if data is None:
            raise bad_id(id, self._count, len(table), "step()")
        self._count += 1
        return self._utf8.decode(data)

    def flush(self) -> str:
        """The rest: U+FFFD for a character the ids left unfinished. The stream can go on."""
        return self._utf8.flush()


def bad_id(id, index: int, n: int, where: str) -> Exception:
    """The error for an id that is not a vocabulary id (TypeError for a non-int)."""
    if isinstance(id, bool) or not hasattr(id, "__index__"):
        return TypeError(f"{where}: ids must be ints, not {type(id).__name__} (at index {index})")
    return Qwen4ExpError(
        f"{where}: id {id} at index {index} is not in the vocabulary (valid: 0..{n - 1})"
    )


class IdTables:
    """Per-tokenizer lookup lists for the output side, built on first use.

    `text[id]`: the bytes the id spells (atoms their spelling; None: no such
    id). `skip`: the same with special atoms spelling b"". `parse[id]`: bytes
    for a BPE id, the id itself (an int) for an atom. `is_atom`: numpy bool
    per id, for the array path of the completion parser.
    """

    __slots__ = ("text", "skip", "parse", "is_atom", "special_ids", "has_gaps")

    def __init__(self, blob: bytes, offsets, atoms: dict, special: frozenset) -> None:
        import numpy as np

        offs = offsets.tolist()
        n_bpe = len(offs) - 1
        size = max([n_bpe, *(i + 1 for i in atoms.values())])
        text: list = [blob[offs[i] : offs[i + 1]] for i in range(n_bpe)]
        text.extend([None] * (size - n_bpe))
        parse = list(text)
        skip = list(text)
        is_atom = np.zeros(size, dtype=bool)
        for spelling, i in atoms.items():
            text[i] = spelling.encode("utf-8")
            skip[i] = b"" if i in special else text[i]
            parse[i] = i
            is_atom[i] = True
        self.text, self.skip, self.parse, self.is_atom = text, skip, parse, is_atom
        self.special_ids = special
        self.has_gaps = None in text
