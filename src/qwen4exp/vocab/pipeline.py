"""Generic normalizers and pre-tokenizers of byte-level BPE tokenizer.json files.

The native core knows the Qwen split patterns (pyx/_pretokenize.pyx). Any
other byte-level BPE file (GPT-2, Llama 3, StarCoder, Falcon, DeepSeek...)
is normalized and pre-tokenized here, as Hugging Face `tokenizers` 0.22.1
does it, and only its pieces go to the native BPE (NativeTokenizer.encode_split).

What is supported (anything else is refused by name when the file is compiled):
* normalizers: NFC (the native core's, with HF's tables), NFKC, Lowercase,
  Sequence of these;
* pre-tokenizers: Split (a Regex or a String pattern; behaviours Removed,
  Isolated, MergedWithPrevious, MergedWithNext, Contiguous; invert), ByteLevel
  (add_prefix_space, use_regex), Digits (individual_digits), Punctuation,
  Sequence of these.

`tokenizers` matches regexes with Oniguruma; here the `regex` package runs
them, translated where the syntaxes differ: `.` matches a newline and `$`/`^`
match at every line end/start (Oniguruma's default syntax), `\\Z` matches
before a final newline, `\\z` at the very end, `\\h` is a hex digit.
Known gaps (docs/FORMAT.md, section 12, "Other vocabularies"): `regex` follows a newer
Unicode (17) than tokenizers 0.22.1's Oniguruma (16), so character classes
differ on code points assigned in Unicode 17; NFKC and Lowercase use
CPython's tables (Unicode 14 on 3.11) corrected to tokenizers' for every
single code point, so only sequences may differ; a scoped `(?i:...)` folds case one character at a time (Oniguruma
also matches multi-character folds such as `ss` for `ß`).
"""

from __future__ import annotations

import json
import unicodedata
from itertools import accumulate
from typing import TYPE_CHECKING, Any, Callable

import regex

if TYPE_CHECKING:
    import numpy as np

#: ByteLevel's own split (use_regex=True), as tokenizers writes it.
BYTE_LEVEL_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
BEHAVIORS = ("Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous")
# tokenizers' is_punc: Rust's char::is_ascii_punctuation, or general category P
# in the unicode_categories crate, whose tables are older (about Unicode 8):
# the P code points `regex` knows that it does not (assigned or made P since),
# and two it still counts (U+166D, U+111C9, since moved out of P). Found by
# comparing tokenizers 0.22.1's Punctuation with `regex` over every code point.
_PUNCTUATION_NEWER = (
    r"\u061d\u09fd\u0a76\u0c77\u0c84\u1b4e-\u1b4f\u1b7d-\u1b7f\u2e43-\u2e4f\u2e52-\u2e5d"
    r"\U00010d6e\U00010ead\U00010ed0\U00010f55-\U00010f59\U00010f86-\U00010f89\U000113d4-\U000113d5\U000113d7-\U000113d8"
    r"\U0001144b-\U0001144f\U0001145a-\U0001145b\U0001145d\U00011660-\U0001166c\U000116b9\U0001183b\U00011944-\U00011946"
    r"\U000119e2\U00011a3f-\U00011a46\U00011a9a-\U00011a9c\U00011a9e-\U00011aa2\U00011b00-\U00011b09\U00011be1"
    r"\U00011c41-\U00011c45\U00011c70-\U00011c71\U00011ef7-\U00011ef8\U00011f43-\U00011f4f\U00011fff\U00012ff1-\U00012ff2"
    r"\U00016d6d-\U00016d6f\U00016e97-\U00016e9a\U00016fe2\U0001e5ff\U0001e95e-\U0001e95f"
)
_PUNCTUATION = rf"(?:(?![{_PUNCTUATION_NEWER}])[\p{{P}}!-/:-@\[-`{{-~]|[\u166d\U000111c9])"
_FLAGS = regex.DOTALL | regex.MULTILINE | regex.FULLCASE


class PipelineError(ValueError):
    """A normalizer or pre-tokenizer this module does not implement."""


def translate_oniguruma(pattern: str) -> str:
    """An Oniguruma pattern (tokenizers' syntax) as a `regex` pattern; the flags
    _FLAGS supply what differs globally (`.` and the line anchors)."""
    out, i, n, depth = [], 0, len(pattern), 0
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            e = pattern[i + 1]
            if e == "z":
                out.append(r"\Z")
            elif e == "Z":
                out.append(r"(?=\n?\Z)" if depth == 0 else r"\Z")
            elif e in "hH":
                body = "0-9a-fA-F"
                out.append(body if depth else (f"[{body}]" if e == "h" else f"[^{body}]"))
            elif e in "RXKOyYg" and depth == 0:
                raise PipelineError(f"the Oniguruma escape \\{e} is not supported")
            else:
                out.append(pattern[i:i + 2])
            i += 2
            continue
        if c == "[":
            depth += 1
            # a ']' right after '[' or '[^' is a literal in both syntaxes
            out.append(c)
            i += 1
            if pattern.startswith("^", i):
                out.append("^")
                i += 1
            if pattern.startswith("]", i):
                out.append(r"\]")
                i += 1
            continue
        if c == "]" and depth:
            depth -= 1
        elif depth == 0 and pattern.startswith("(?~", i):
            raise PipelineError("Oniguruma's absent operator (?~...) is not supported")
        out.append(c)
        i += 1
    return "".join(out)


def compile_pattern(pattern: dict) -> "regex.Pattern[str]":
    """A Split's pattern ({"Regex": ...} or {"String": ...}) compiled."""
    if not isinstance(pattern, dict) or len(pattern) != 1:
        raise PipelineError(f"a Split pattern must be {{'Regex': ...}} or {{'String': ...}}, not {pattern!r:.80}")
    (kind, text), = pattern.items()
    if not isinstance(text, str):
        raise PipelineError(f"a Split pattern's {kind} must be a string")
    if kind == "String":
        return regex.compile(regex.escape(text) if text else r"(?!)", _FLAGS)
    if kind != "Regex":
        raise PipelineError(f"a Split pattern of kind {kind!r} is not supported (Regex or String)")
    try:
        return regex.compile(translate_oniguruma(text), _FLAGS)
    except regex.error as exc:
        raise PipelineError(f"the Split regex {text[:80]!r} does not compile ({exc})") from None


def _find_matches(rx: "regex.Pattern[str]", text: str) -> list[tuple[int, int, bool]]:
    """tokenizers' find_matches: (start, end, is_match) spans covering text,
    matches found as Oniguruma's iterator finds them (an empty match right
    where the previous match ended is skipped, and the search then moves one
    character on)."""
    spans = [m.span() for m in rx.finditer(text)]
    if any(a == b for a, b in spans):  # Python's and Oniguruma's iteration differ only around empty matches
        spans, pos, last = [], 0, -1
        while pos <= len(text):
            m = rx.search(text, pos)
            if m is None:
                break
            a, b = m.span()
            if a == b and b == last:
                pos = a + 1
                continue
            spans.append((a, b))
            pos = last = b
    out: list[tuple[int, int, bool]] = []
    prev = 0
    for a, b in spans:
        if a != prev:
            out.append((prev, a, False))
        out.append((a, b, True))
        prev = b
    if prev != len(text):
        out.append((prev, len(text), False))
    return out


def _apply_behavior(spans: list[tuple[int, int, bool]], behavior: str) -> list[tuple[int, int]]:
    """tokenizers' NormalizedString::split: the kept (start, end) slices."""
    if behavior == "Removed":
        return [(a, b) for a, b, is_match in spans if not is_match]
    if behavior == "Isolated":
        return [(a, b) for a, b, _ in spans]
    acc: list[list[int]] = []
    previous = False
    if behavior == "MergedWithNext":
        for a, b, is_match in reversed(spans):
            if is_match and not previous and acc:
                acc[-1][0] = a
            else:
                acc.append([a, b])
            previous = is_match
        acc.reverse()
    else:
        contiguous = behavior == "Contiguous"
        for a, b, is_match in spans:
            joins = (is_match == previous) if contiguous else (is_match and not previous)
            if joins and acc:
                acc[-1][1] = b
            else:
                acc.append([a, b])
            previous = is_match
    return [(a, b) for a, b in acc]


class _Split:
    def __init__(self, rx: "regex.Pattern[str]", behavior: str, invert: bool) -> None:
        self.rx, self.behavior, self.invert = rx, behavior, invert
        # the common case, Isolated: every non-empty slice between match boundaries
        self.plain = behavior == "Isolated"

    def __call__(self, pieces: list[str]) -> list[str]:
        out: list[str] = []
        for piece in pieces:
            if self.plain:
                spans = _find_matches(self.rx, piece)
                out.extend(piece[a:b] for a, b, _ in spans if a != b)
                continue
            spans = _find_matches(self.rx, piece)
            if self.invert:
                spans = [(a, b, not m) for a, b, m in spans]
            out.extend(piece[a:b] for a, b in _apply_behavior(spans, self.behavior) if a != b)
        return out


def _byte_level_tables() -> tuple[dict[int, str], dict[int, int]]:
    """GPT-2's stand-in characters: (Latin-1 code -> stand-in, stand-in code -> byte)."""
    from qwen4exp.vocab.compile import byte_level_alphabet

    to_byte = byte_level_alphabet()
    return {b: c for c, b in to_byte.items()}, {ord(c): b for c, b in to_byte.items()}


_STAND_IN, _BYTE_OF = _byte_level_tables()


class _ByteLevel:
    """tokenizers' ByteLevel pre-tokenizer: the prefix space, its own split, then
    every piece written in the byte stand-ins: the steps after it (Falcon's
    Digits and Split) see those characters, not the text's."""

    def __init__(self, add_prefix_space: bool, use_regex: bool) -> None:
        self.prefix = add_prefix_space
        self.use_regex = use_regex

    def __call__(self, pieces: list[str]) -> list[str]:
        if self.prefix:  # every split so far gets its own space (tokenizers' ByteLevel)
            pieces = [" " + p if p and not p.startswith(" ") else p for p in pieces]
        if not self.use_regex:
            return [p.encode("utf-8").decode("latin-1").translate(_STAND_IN) for p in pieces]
        from qwen4exp._native._byte_level import byte_level_ends  # BYTE_LEVEL_PATTERN, natively

        out: list[str] = []
        for piece in pieces:
            data, ends = byte_level_ends(piece)
            start = 0
            for end in ends.tolist():
                out.append(data[start:end].decode("latin-1").translate(_STAND_IN))
                start = end
        return out


def _steps(spec: dict, key: str, where: str) -> list[tuple[Any, str]]:
    """A Sequence's steps, each with where it is."""
    steps = spec.get(key)
    if not isinstance(steps, list):
        raise PipelineError(f"{where}.{key} must be a list")
    return [(s, f"{where}.{key}[{i}]") for i, s in enumerate(steps)]


def _chained(funcs: list[Callable[[Any], Any]]) -> Callable[[Any], Any]:
    """The steps one after another."""
    def run(value: Any) -> Any:
        for f in funcs:
            value = f(value)
        return value
    return run


def _pre_tokenizer(spec: Any, where: str) -> Callable[[list[str]], list[str]]:
    if not isinstance(spec, dict):
        raise PipelineError(f"{where} must be an object")
    kind = spec.get("type")
    if kind == "Sequence":
        return _chained([_pre_tokenizer(s, w) for s, w in _steps(spec, "pretokenizers", where)])
    if kind == "Split":
        behavior = spec.get("behavior")
        if behavior not in BEHAVIORS:
            raise PipelineError(f"{where}: Split behavior {behavior!r} is not one of {', '.join(BEHAVIORS)}")
        return _Split(compile_pattern(spec.get("pattern") or {}), behavior, bool(spec.get("invert")))
    if kind == "ByteLevel":
        return _ByteLevel(bool(spec.get("add_prefix_space")), spec.get("use_regex", True) is not False)
    if kind == "Digits":
        return _Split(regex.compile(r"\p{N}"), "Isolated" if spec.get("individual_digits") else "Contiguous", False)
    if kind == "Punctuation":
        behavior = spec.get("behavior", "Isolated")
        if behavior not in BEHAVIORS:
            raise PipelineError(f"{where}: Punctuation behavior {behavior!r} is not one of {', '.join(BEHAVIORS)}")
        return _Split(regex.compile(_PUNCTUATION), behavior, False)
    raise PipelineError(f"{where}: the {kind!r} pre-tokenizer is not supported (Split, ByteLevel, Digits, "
                        "Punctuation and Sequence are)")


def _nfc(text: str) -> str:
    from qwen4exp._native._normalize import nfc  # HF's NFC tables (pyx/_normalize.pyx)

    return nfc(text)


# Upper-case letters of Unicode 16 that CPython 3.11's tables (14) do not know,
# with the lower case tokenizers (Rust's char::to_lowercase) gives them.
_LOWER_NEWER = {0x1c89: 0x1c8a, 0xa7cb: 0x264, 0xa7cc: 0xa7cd, 0xa7da: 0xa7db, 0xa7dc: 0x19b,
                **{c: c + 0x20 for c in range(0x10d50, 0x10d66)}}


def _lowercase(text: str) -> str:
    # tokenizers lowercases one character at a time (no final-sigma rule)
    if text.isascii():
        return text.lower()
    return "".join(map(str.lower, text.translate(_LOWER_NEWER)))


# Code points whose compatibility decomposition is newer than tokenizers' NFKC
# tables (unicode-normalization-alignments): tokenizers leaves them as they
# are, and they start and end a normalization segment of their own. Found by
# comparing its NFKC with CPython's over every code point.
_NFKC_KEPT = regex.compile(
    "([\u32ff\ua7f2-\ua7f4\uab69\U00010781-\U00010785\U00010787-\U000107b0\U000107b2-\U000107ba"
    "\U0001f16c\U0001fbf0-\U0001fbf9])")


def _nfkc(text: str) -> str:
    if text.isascii():
        return text
    if _NFKC_KEPT.search(text) is None:
        return unicodedata.normalize("NFKC", text)
    parts = _NFKC_KEPT.split(text)  # text, kept, text, ...
    return "".join(p if i % 2 else unicodedata.normalize("NFKC", p) for i, p in enumerate(parts))


def _normalizer(spec: Any, where: str) -> Callable[[str], str] | None:
    if spec is None:
        return None
    if not isinstance(spec, dict):
        raise PipelineError(f"{where} must be an object or null")
    kind = spec.get("type")
    if kind == "Sequence":
        funcs = [f for s, w in _steps(spec, "normalizers", where) if (f := _normalizer(s, w)) is not None]
        return None if not funcs else funcs[0] if len(funcs) == 1 else _chained(funcs)
    if kind == "NFC":
        return _nfc
    if kind == "NFKC":
        return _nfkc
    if kind == "Lowercase":
        return _lowercase
    raise PipelineError(f"{where}: the {kind!r} normalizer is not supported (NFC, NFKC, Lowercase and "
                        "Sequence are)")


def _byte_level_steps(pre: Any) -> int:
    if not isinstance(pre, dict):
        return 0
    if pre.get("type") == "Sequence" and isinstance(pre.get("pretokenizers"), list):
        return sum(_byte_level_steps(p) for p in pre["pretokenizers"])
    return int(pre.get("type") == "ByteLevel")


class Pipeline:
    """A file's normalizer and pre-tokenizer: text -> pieces, as tokenizers makes them."""

    def __init__(self, spec: dict) -> None:
        self.spec = spec
        self.normalize = _normalizer(spec.get("normalizer"), "normalizer")
        pre = spec.get("pre_tokenizer")
        if _byte_level_steps(pre) != 1:
            raise PipelineError("the pre-tokenizer must have exactly one ByteLevel step (byte-level BPE)")
        self.pre_tokenize = _pre_tokenizer(pre, "pre_tokenizer")
        missing = spec.get("missing_bytes") or []
        if not (isinstance(missing, list) and all(isinstance(b, int) and 0 <= b < 256 for b in missing)):
            raise PipelineError("missing_bytes must be a list of byte values")
        self.missing = bytes(missing)  # bytes without a token: BPE drops them (tokenizers does)
        # ByteLevel's own split alone (GPT-2, MPT): the pieces' bytes are the
        # text's, cut natively without making a str of each piece (split_array)
        self.byte_level_only = (isinstance(pre, dict) and pre.get("type") == "ByteLevel"
                                and pre.get("use_regex", True) is not False
                                and not pre.get("add_prefix_space") and not self.missing)

    @classmethod
    def from_json(cls, blob: bytes) -> "Pipeline":
        return cls(json.loads(blob))

    def pieces(self, text: str) -> list[str]:
        """The non-empty pieces BPE sees, in ByteLevel's stand-in characters."""
        if self.normalize is not None:
            text = self.normalize(text)
        # tokenizers starts from one split, even an empty one (an empty split takes no prefix space)
        return [p for p in self.pre_tokenize([text]) if p]

    def split_array(self, text: str) -> tuple[bytes, "np.ndarray"]:
        """split(), with the ends as an int64 numpy array."""
        if self.byte_level_only:
            from qwen4exp._native._byte_level import byte_level_ends

            return byte_level_ends(text if self.normalize is None else self.normalize(text))
        import numpy as np

        data, ends = self.split(text)
        return data, np.array(ends, dtype=np.int64)

    def split(self, text: str) -> tuple[bytes, list[int]]:
        """The pieces' bytes joined and each piece's end in them."""
        encoded = [p.translate(_BYTE_OF).encode("latin-1") for p in self.pieces(text)]
        if self.missing:
            encoded = [e for p in encoded if (e := p.translate(None, self.missing))]
        return b"".join(encoded), list(accumulate(map(len, encoded)))


def pipeline_spec(tok: dict) -> dict:
    """The parts of a tokenizer.json that decide DATA's pieces, checked: an
    unsupported step is a PipelineError naming it."""
    spec = {"normalizer": tok.get("normalizer"), "pre_tokenizer": tok.get("pre_tokenizer")}
    Pipeline(spec)  # refuses what is not supported, and any regex that does not compile
    return spec
