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
`Utf8Stream` (native, pyx/_stream.pyx) decides by the Unicode table of
well-formed byte sequences.
"""

from __future__ import annotations

import numpy as np

from ._stream import DecodeStreamCore, Utf8Stream
from .errors import Qwen4ExpError

__all__ = ["DecodeStream", "Utf8Stream"]


class DecodeStream(DecodeStreamCore):
    """Streaming decode of ids: `step(id) -> str`, then `flush() -> str`.

    Made by `Tokenizer.decode_stream(skip_special=False)`. With `skip_special`
    the special added tokens (those HF marks ``special``, e.g. `<|im_end|>`)
    spell nothing, as in `decode(ids, skip_special=True)`. `flush()` returns
    U+FFFD for a character the ids left unfinished (the stream can go on).
    `step` and the UTF-8 rules are native (pyx/_stream.pyx).
    """

    __slots__ = ()

    def __init__(self, table: list, *, _internal: bool = False) -> None:
        if not _internal:
            raise TypeError("use Tokenizer.decode_stream() to make a DecodeStream")
        super().__init__(table)


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
        offs = offsets.tolist()
        n_bpe = len(offs) - 1
        size = max([n_bpe, *(i + 1 for i in atoms.values())])
        text: list = [blob[a:b] for a, b in zip(offs, offs[1:])]
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
