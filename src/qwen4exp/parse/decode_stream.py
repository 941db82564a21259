"""Streaming detokenization: text as soon as its bytes form characters.

Byte-level BPE ids do not stop at character boundaries: one character can be
spread over several ids. `DecodeStream.step(id)` returns exactly the text that
became complete with that id. The rules (docs/FORMAT.md, section 11):

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

from qwen4exp._native._stream import DecodeStreamCore
from qwen4exp.errors import id_error

__all__ = ["DecodeStream", "PaddedRowsDecodeStream"]


class DecodeStream(DecodeStreamCore):
    """Streaming decode of ids: `step(id) -> str`, then `flush() -> str`.

    Made by `Tokenizer.decode_stream(skip_special=False)`. With `skip_special`
    the special added tokens (those HF marks ``special``, e.g. the IM_END marker)
    spell nothing, as in `decode(ids, skip_special=True)`. `flush()` returns
    U+FFFD for a character the ids left unfinished (the stream can go on).
    `step` and the UTF-8 rules are native (pyx/_stream.pyx).
    """

    __slots__ = ("_n_vocab",)

    def __init__(self, table: list, *, n_vocab: int = 0, _internal: bool = False) -> None:
        if not _internal:
            raise TypeError("use Tokenizer.decode_stream() to make a DecodeStream")
        super().__init__(table)
        self._n_vocab = n_vocab

    def _bad_id(self, id, index: int) -> Exception:  # called by the native step()
        return id_error(id, index, "step()", self._n_vocab)


class PaddedRowsDecodeStream(DecodeStream):
    """`Tokenizer.decode_stream(embedding_rows=...)`: an id from the
    tokenizer's vocab_size up to the model's embedding rows (a padded row)
    spells nothing, as in HF's decode; `padded` counts them. A subclass, so
    that a plain stream's step() stays the native one."""

    __slots__ = ("_rows", "padded")

    def __init__(self, table: list, *, n_vocab: int = 0, rows: tuple[int, int] = (0, 0),
                 _internal: bool = False) -> None:
        super().__init__(table, n_vocab=n_vocab, _internal=_internal)
        self._rows = rows
        self.padded = 0  # padded-row ids stepped so far

    def step(self, id) -> str:
        low, high = self._rows
        if isinstance(id, (int, np.integer)) and not isinstance(id, (bool, np.bool_)) and low <= id < high:
            self.padded += 1
            return ""
        return DecodeStreamCore.step(self, id)

    def _bad_id(self, id, index: int) -> Exception:  # `index` counts the ids the native step saw
        return id_error(id, index + self.padded, "step()", self._n_vocab)


class IdTables:
    """Per-tokenizer lookup lists for the output side, built on first use.

    `text[id]`: the bytes the id spells (atoms their spelling; None: no such
    id). `skip`: the same with special atoms spelling b"". `parse[id]`: bytes
    for a BPE id, the id itself (an int) for an atom. `is_atom`: numpy bool
    per id, for the array path of the completion parser. `n_vocab`: the
    number of BPE ids (the atom ids come after them).
    """

    __slots__ = ("text", "skip", "parse", "is_atom", "special_ids", "has_gaps", "n_vocab")

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
        self.n_vocab = n_bpe
