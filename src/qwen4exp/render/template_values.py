"""Strings that remember where each character came from (the template renderer's values).

`OriginStr` is a `str` whose characters each carry an origin: TRUSTED (the
template's own literals, the model folder's special tokens) or DATA (the
caller's values, and anything whose origin cannot be told). Its text is
always exactly what the plain `str` operation gives; only the origins are
added. Every operation a chat template applies to a string (concatenation
both ways, `%`, slicing, iteration, split, strip, replace, join, case
mapping, ...) returns an `OriginStr` again, so caller bytes stay DATA through
any transformation; a result whose mapping back to its inputs is not simple
is DATA as a whole (a wrong guess may cost exactness of ids, never trust).

A string built by anyone else (`OriginStr(text)`, a plain `str`) is DATA:
trust is only ever given by `trusted()`.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator, Mapping
from typing import Any, SupportsIndex, Union

__all__ = ["OriginStr", "DATA", "TRUSTED", "trusted", "data", "as_origin", "origins_of", "runs_of",
           "is_trusted_value", "derived", "wrap_caller"]

DATA = 0  # the values of Kind.DATA / Kind.TRUSTED_CONTROL (segments.Kind)
TRUSTED = 1
#: One origin for a whole string, or its (end, origin) runs.
Origins = Union[int, tuple]



class OriginStr(str):
    """A str with one origin per character: `_o` is DATA or TRUSTED for a
    uniform string, else its runs: a tuple of (end, origin) pairs, ends
    increasing to len(self), neighbouring origins different."""

    _o: Origins = DATA  # the class default: a str built from outside is DATA

    # -- conversions that must keep the object (str(), format(), "%s") ----------

    def __str__(self) -> "OriginStr":
        return self

    def __format__(self, spec: str) -> str:
        if not spec:
            return self
        return derived(str.__format__(self, spec), self)

    # -- indexing and iteration ---------------------------------------------

    def __getitem__(self, key: SupportsIndex | slice) -> "OriginStr":
        text = str.__getitem__(self, key)
        o = self._o
        if isinstance(o, int):
            return _make(text, o)
        if isinstance(key, slice):
            start, stop, step = key.indices(len(self))
            if step == 1:
                return _make(text, _slice_runs(o, start, stop))
            return _make(text, _from_list([_at(o, i) for i in range(start, stop, step)]))
        i = key.__index__()
        return _make(text, _at(o, i + len(self) if i < 0 else i))

    def __iter__(self) -> Iterator["OriginStr"]:
        o = self._o
        if isinstance(o, int):
            return (_make(c, o) for c in str.__iter__(self))
        return (_make(c, k) for c, k in zip(str.__iter__(self), _each(o)))

    # -- concatenation and repetition -----------------------------------------

    def __add__(self, other: str) -> "OriginStr":
        text = str.__add__(self, other)  # raises as str does for a non-str
        a, b = self._o, origins_of(other)
        if a == b and isinstance(a, int):  # the common case: one origin
            return _make(text, a)
        return _make(text, _cat(((len(self), a), (len(other), b))))

    def __radd__(self, other: str) -> "OriginStr":
        text = str.__add__(other, self)
        a, b = origins_of(other), self._o
        if a == b and isinstance(a, int):
            return _make(text, a)
        return _make(text, _cat(((len(other), a), (len(self), b))))

    def __mul__(self, n: SupportsIndex) -> "OriginStr":
        # how many copies may be the caller's to choose: unknown, so DATA unless trivial
        text = str.__mul__(self, n)
        return _make(text, self._o if text == self or not text else DATA)

    __rmul__ = __mul__

    def __mod__(self, args: Any) -> "OriginStr":
        return derived(str.__mod__(self, args), self, args)

    def __rmod__(self, other: str) -> "OriginStr":
        return derived(str.__mod__(other, self), other, self)

    def join(self, items: Any) -> "OriginStr":
        items = list(items)
        text = str.join(self, items)  # raises as str does for a non-str item
        parts: list[tuple[int, Origins]] = []
        sep = (len(self), self._o)
        for i, item in enumerate(items):
            if i:
                parts.append(sep)
            parts.append((len(item), origins_of(item)))
        return _make(text, _cat(parts))

    # -- substrings -------------------------------------------------------------

    def _sub(self, start: int, text: str) -> "OriginStr":
        """The substring `text` that starts at `start` in self."""
        o = self._o
        if isinstance(o, int):
            return _make(text, o)
        return _make(text, _slice_runs(o, start, start + len(text)))

    def strip(self, chars: str | None = None) -> "OriginStr":
        text = str.strip(self, chars)
        return self._sub(len(self) - len(str.lstrip(self, chars)), text)

    def lstrip(self, chars: str | None = None) -> "OriginStr":
        text = str.lstrip(self, chars)
        return self._sub(len(self) - len(text), text)

    def rstrip(self, chars: str | None = None) -> "OriginStr":
        return self._sub(0, str.rstrip(self, chars))

    def removeprefix(self, prefix: str) -> "OriginStr":
        text = str.removeprefix(self, prefix)
        return self._sub(len(self) - len(text), text)

    def removesuffix(self, suffix: str) -> "OriginStr":
        return self._sub(0, str.removesuffix(self, suffix))

    def _pieces(self, pieces: list[str], sep_len: int | None) -> list["OriginStr"]:
        """Pieces of a split, placed: contiguous with a separator of `sep_len`
        between them, or (sep_len None) each found from where the last ended."""
        out, pos = [], 0
        for p in pieces:
            if sep_len is None:
                pos = str.find(self, p, pos)
            out.append(self._sub(pos, p))
            pos += len(p) + (sep_len or 0)
        return out

    def split(self, sep: str | None = None, maxsplit: SupportsIndex = -1) -> list["OriginStr"]:  # type: ignore[override]
        pieces = str.split(self, sep, maxsplit)
        return self._pieces(pieces, None if sep is None else len(sep))

    def rsplit(self, sep: str | None = None, maxsplit: SupportsIndex = -1) -> list["OriginStr"]:  # type: ignore[override]
        pieces = str.rsplit(self, sep, maxsplit)
        return self._pieces(pieces, None if sep is None else len(sep))

    def splitlines(self, keepends: bool = False) -> list["OriginStr"]:  # type: ignore[override]
        out, pos = [], 0
        for line in str.splitlines(self, True):
            kept = line if keepends else str.splitlines(line)[0] if line else line
            out.append(self._sub(pos, kept))
            pos += len(line)
        return out

    def partition(self, sep: str) -> tuple["OriginStr", "OriginStr", "OriginStr"]:
        a, s, b = str.partition(self, sep)
        return self._sub(0, a), self._sub(len(a), s), self._sub(len(a) + len(s), b)

    def rpartition(self, sep: str) -> tuple["OriginStr", "OriginStr", "OriginStr"]:
        a, s, b = str.rpartition(self, sep)
        return self._sub(0, a), self._sub(len(a), s), self._sub(len(a) + len(s), b)

    def replace(self, old: str, new: str, count: SupportsIndex = -1) -> "OriginStr":
        text = str.replace(self, old, new, count)
        n = int(count)
        new_o = (len(new), origins_of(new))
        parts: list[tuple[int, Origins]] = []
        if old:
            pieces = self._pieces(str.split(self, old, n), len(old))
            for i, p in enumerate(pieces):
                if i:
                    parts.append(new_o)
                parts.append((len(p), p._o))
        else:  # new goes before each of the first `count` characters (and after the last)
            k = len(self) + 1 if n < 0 else min(n, len(self) + 1)
            for i in range(k):
                parts.append(new_o)
                if i < len(self):
                    parts.append((1, self[i]._o))
            if k < len(self):
                rest = self[k:]
                parts.append((len(rest), rest._o))
        origin = _cat(parts)
        if sum(n for n, _ in parts) != len(text):  # not the layout assumed: unknown
            origin = DATA
        return _make(text, origin)

    # -- case mapping and padding: characters stay in place or the result is DATA

    def _mapped(self, text: str) -> "OriginStr":
        o = self._o
        if isinstance(o, int) or len(text) == len(self):  # case maps never shorten a string
            return _make(text, o)
        return _make(text, DATA)

    # Case changes keep each character's origin (_mapped maps them back).
    def upper(self) -> "OriginStr": return self._mapped(str.upper(self))  # noqa: E704
    def lower(self) -> "OriginStr": return self._mapped(str.lower(self))  # noqa: E704
    def title(self) -> "OriginStr": return self._mapped(str.title(self))  # noqa: E704
    def capitalize(self) -> "OriginStr": return self._mapped(str.capitalize(self))  # noqa: E704
    def swapcase(self) -> "OriginStr": return self._mapped(str.swapcase(self))  # noqa: E704
    def casefold(self) -> "OriginStr": return self._mapped(str.casefold(self))  # noqa: E704

    def center(self, width: SupportsIndex, fillchar: str = " ") -> "OriginStr":
        return derived(str.center(self, width, fillchar), self, fillchar, width)

    def ljust(self, width: SupportsIndex, fillchar: str = " ") -> "OriginStr":
        return derived(str.ljust(self, width, fillchar), self, fillchar, width)

    def rjust(self, width: SupportsIndex, fillchar: str = " ") -> "OriginStr":
        return derived(str.rjust(self, width, fillchar), self, fillchar, width)

    def zfill(self, width: SupportsIndex) -> "OriginStr":
        return derived(str.zfill(self, width), self, width)

    def expandtabs(self, tabsize: SupportsIndex = 8) -> "OriginStr":
        return derived(str.expandtabs(self, tabsize), self, tabsize)

    def format(self, *args: Any, **kwargs: Any) -> "OriginStr":
        return derived(str.format(self, *args, **kwargs), self, args, kwargs)

    def format_map(self, mapping: Any) -> "OriginStr":
        return derived(str.format_map(self, mapping), self, mapping)

    def translate(self, table: Any) -> "OriginStr":
        return derived(str.translate(self, table), self, table)

    def __reduce__(self) -> Any:
        return (_make, (str(str.__str__(self)), self._o))


def _make(text: str, origin: Origins) -> OriginStr:
    s = str.__new__(OriginStr, text)
    if origin != DATA:  # DATA is the class default
        s._o = origin
    return s


def _cat(parts: Any) -> Origins:
    """The origins of a concatenation of (length, origins) parts."""
    out: list[tuple[int, int]] = []
    base = 0
    for n, o in parts:
        if not n:
            continue
        for end, k in ((n, o),) if isinstance(o, int) else o:
            if out and out[-1][1] == k:
                out[-1] = (base + end, k)
            else:
                out.append((base + end, k))
        base += n
    if not out:
        return DATA
    return out[0][1] if len(out) == 1 else tuple(out)


def _slice_runs(o: Origins, a: int, b: int) -> Origins:
    """The origins of characters [a, b)."""
    if isinstance(o, int) or a >= b:
        return o if isinstance(o, int) else DATA
    out = []
    prev = 0
    for end, k in o:
        if end > a and prev < b:
            out.append((min(end, b) - a, k))
        if end >= b:
            break
        prev = end
    return out[0][1] if len(out) == 1 else tuple(out)


def _at(o: Origins, i: int) -> int:
    """The origin of character i (0 <= i < len)."""
    if isinstance(o, int):
        return o
    return o[bisect_right(o, (i, 2))][1]


def _each(o: tuple) -> Iterator[int]:
    prev = 0
    for end, k in o:
        for _ in range(end - prev):
            yield k
        prev = end


def _from_list(origins: list[int]) -> Origins:
    return _cat((1, k) for k in origins)


def runs_of(value: str) -> tuple[tuple[int, int], ...]:
    """A string's origins as (end, origin) runs (any str: DATA)."""
    o = origins_of(value)
    if isinstance(o, int):
        return ((len(value), o),) if value else ()
    return o


def origins_of(value: str) -> Origins:
    """A string's origins: an OriginStr's own; any other str is DATA."""
    return value._o if type(value) is OriginStr else DATA


def trusted(text: str) -> OriginStr:
    """`text` as TRUSTED: only for the template's literals and the folder's own tokens."""
    return _make(str(str.__str__(text)), TRUSTED)


def data(text: str) -> OriginStr:
    """`text` as DATA."""
    return str.__new__(OriginStr, text)


def as_origin(value: Any) -> OriginStr:
    """An output piece: an OriginStr as it is, anything else str()-ed and DATA."""
    if type(value) is OriginStr:
        return value
    return str.__new__(OriginStr, str(value))


def is_trusted_value(value: Any, depth: int = 0) -> bool:
    """True when every string in `value` is wholly TRUSTED and nothing else in it
    could have come from the caller (numbers could: their origin is not kept)."""
    if type(value) is OriginStr:
        return not value or value._o == TRUSTED
    if value is None or isinstance(value, bool):
        return True
    if depth > 64:
        return False
    if isinstance(value, (list, tuple)):
        return all(is_trusted_value(v, depth + 1) for v in value)
    if isinstance(value, Mapping):
        return all(is_trusted_value(k, depth + 1) and is_trusted_value(v, depth + 1) for k, v in value.items())
    return False


def derived(text: str, *inputs: Any) -> OriginStr:
    """A string computed from `inputs` in a way whose character mapping is not
    followed: TRUSTED when every input is trusted, else DATA as a whole."""
    return _make(text, TRUSTED if all(is_trusted_value(v) for v in inputs) else DATA)


def wrap_caller(value: Any, depth: int = 0) -> Any:
    """A caller value with every str in it (keys too) made a DATA OriginStr;
    dicts and lists are copied, other objects passed as they are."""
    t = type(value)
    if t is str:
        return str.__new__(OriginStr, value)
    if t is dict and depth < 256:  # the common shapes first: isinstance on ABCs is slow
        return {wrap_caller(k, depth + 1): wrap_caller(v, depth + 1) for k, v in value.items()}
    if t is list and depth < 256:
        return [wrap_caller(v, depth + 1) for v in value]
    if t is int or t is bool or value is None or t is float:
        return value
    if isinstance(value, str):
        return str.__new__(OriginStr, str.__str__(value))  # the text itself, whatever the class
    if depth > 256:
        return value
    if isinstance(value, Mapping):
        return {wrap_caller(k, depth + 1): wrap_caller(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [wrap_caller(v, depth + 1) for v in value]
    if isinstance(value, tuple):
        return tuple(wrap_caller(v, depth + 1) for v in value)
    return value
