"""Shared real-text corpora for the parity tests and the benchmarks.

Deterministic and offline.  Every function is cached (one build per process)
and every corpus is NFC-normalised, so that tokenizers that do not normalise
(tiktoken) see the same input as those that do.

* ``code_corpus()``          ~3 MB: the running interpreter's stdlib ``.py`` files
                             (so it varies with the Python version: compare
                             against a reference computed in the same run).
* ``multilingual_corpus()``  ~1.5 MB: prose in many scripts, emoji (ZWJ
                             sequences, flags), mixed digits and punctuation.
                             Sources: ``tests/data/corpora/multilingual_sample.txt``
                             (written for this project), the stdlib's
                             ``test/cjkencodings/*-utf8.txt`` when installed,
                             and Faker (pinned in the ``test`` extra) locale
                             data with fixed seeds.
* ``whitespace_corpus()``    ~256 KB: synthetic whitespace/newline runs,
                             contractions in any case, digit and punctuation
                             runs, short words.
* ``long_word(n, script)``   one pre-token of ``n`` characters (no spaces).

``*_documents()`` give the same text as a tuple of documents (for batch
encoding); each ``*_corpus()`` is ``"".join`` of its documents.

Tests import it as ``import corpora`` (pytest puts ``tests/`` on ``sys.path``);
the benchmarks add ``tests/`` to ``sys.path`` themselves.
"""

from __future__ import annotations

import functools
import hashlib
import os
import random
import re
import sysconfig
import unicodedata
import zlib
from pathlib import Path

__all__ = [
    "code_corpus",
    "code_documents",
    "multilingual_corpus",
    "multilingual_documents",
    "whitespace_corpus",
    "whitespace_documents",
    "long_word",
    "CORPORA",
    "DOCUMENTS",
    "corpus_info",
]

DATA_DIR = Path(__file__).resolve().parent / "data" / "corpora"

CODE_TARGET_BYTES = 3_000_000
MULTILINGUAL_TARGET_BYTES = 1_500_000
WHITESPACE_TARGET_BYTES = 256 * 1024

# Spellings of the vocabulary's added tokens.  Corpora never contain them, so
# a reference with or without the added-token table gives the same ids.
_ATOM_RE = re.compile(r"<\|[a-z_]+\|>|</?(?:think|tool_call|tool_response)>")


def _nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


def _stdlib_dir() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


# --------------------------------------------------------------------------
# code
# --------------------------------------------------------------------------

_CODE_SKIP_DIRS = {
    "site-packages",
    "dist-packages",
    "__pycache__",
    "test",
    "tests",
    "idle_test",
    "lib-dynload",
}


@functools.lru_cache(maxsize=None)
def code_documents() -> tuple[str, ...]:
    """Stdlib ``.py`` files (tests and site-packages excluded), in a fixed
    order (sha1 of the relative path, so the sample spans the whole stdlib),
    until ~3 MB of UTF-8."""
    root = _stdlib_dir()
    rels = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(
            d for d in dirnames if d not in _CODE_SKIP_DIRS and not d.startswith("config-")
        )
        for name in filenames:
            if name.endswith(".py"):
                rels.append(Path(dirpath, name).relative_to(root).as_posix())
    rels.sort(key=lambda r: (hashlib.sha1(r.encode()).hexdigest(), r))
    docs = []
    total = 0
    for rel in rels:
        try:
            text = (root / rel).read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if not text or "\x00" in text or _ATOM_RE.search(text):
            continue
        text = _nfc(text)
        docs.append(text)
        total += len(text.encode("utf-8"))
        if total >= CODE_TARGET_BYTES:
            break
    return tuple(docs)


@functools.lru_cache(maxsize=None)
def code_corpus() -> str:
    return "".join(code_documents())


# --------------------------------------------------------------------------
# multilingual
# --------------------------------------------------------------------------

# Faker locales with a lorem word list in a non-English language.
_LOREM_LOCALES = (
    "ar_AA", "az_AZ", "bn_BD", "cs_CZ", "da_DK", "de_DE", "el_GR", "es_ES",
    "fa_IR", "fr_FR", "he_IL", "hy_AM", "it_IT", "ja_JP", "mk_MK", "nl_NL",
    "pl_PL", "ru_RU", "th_TH", "uk_UA", "vi_VN", "zh_CN", "zh_TW",
)
# Locales whose names/addresses/companies/jobs/dates are in their own script
# (Korean and the Indic scripts have no lorem list: they get a double share).
_RECORD_LOCALES = (
    ("ko_KR", 2), ("hi_IN", 2), ("ne_NP", 1), ("ta_IN", 1), ("ka_GE", 1),
    ("th_TH", 1), ("ja_JP", 1), ("zh_CN", 1), ("he_IL", 1), ("el_GR", 1),
    ("ru_RU", 1), ("bn_BD", 1), ("ar_SA", 1),
)
_RECORD_FIELDS = ("name", "address", "company", "job", "city", "phone_number")
# (no date fields: Faker draws dates up to "now", which would change the text over time)


def _seed(label: str) -> int:
    return zlib.crc32(label.encode("utf-8"))


def _faker():
    try:
        from faker import Faker  # noqa: F401
    except ImportError as exc:  # pragma: no cover - dependency of the test extra
        raise ImportError(
            "multilingual_corpus() needs Faker (pip install -e '.[test]'; pinned there)"
        ) from exc
    return Faker


def _emoji_list() -> tuple[str, ...]:
    from faker.providers.emoji.en_US import Provider

    return tuple(Provider.emojis)


def _numbers(rnd: random.Random) -> str:
    k = rnd.randrange(6)
    if k == 0:
        return f"{rnd.randrange(1, 10**7):,}"
    if k == 1:
        return f"{rnd.random() * 100:.1f}%"
    if k == 2:
        return f"{rnd.randrange(1900, 2100)}-{rnd.randrange(1, 13):02d}-{rnd.randrange(1, 29):02d}"
    if k == 3:
        return f"({rnd.randrange(100, 999)}) {rnd.randrange(100, 999)}-{rnd.randrange(1000, 9999)}"
    if k == 4:
        return f"#{rnd.randrange(1, 500)}: {rnd.randrange(0, 24):02d}:{rnd.randrange(0, 60):02d}"
    return f"{rnd.randrange(1, 1000)}.{rnd.randrange(0, 100):02d} €"


def _lorem_document(fake, rnd: random.Random, emojis) -> str:
    paragraphs = []
    for _ in range(rnd.randrange(1, 6)):
        sentences = []
        for _ in range(rnd.randrange(3, 11)):
            s = fake.sentence(nb_words=rnd.randrange(4, 16))
            r = rnd.random()
            if r < 0.10:
                s += " " + "".join(rnd.choice(emojis) for _ in range(rnd.randrange(1, 4)))
            elif r < 0.20:
                s += " " + _numbers(rnd)
            sentences.append(s)
        paragraphs.append(" ".join(sentences))
    return "\n\n".join(paragraphs) + "\n"


def _record_document(fake, rnd: random.Random, emojis) -> str:
    lines = []
    for _ in range(rnd.randrange(5, 30)):
        values = []
        for field in _RECORD_FIELDS:
            try:
                values.append(str(getattr(fake, field)()).replace("\n", ", "))
            except AttributeError:  # pragma: no cover - provider missing in a locale
                continue
        line = " — ".join(values[:2]) + ". " + ", ".join(values[2:])
        if rnd.random() < 0.15:
            line += " " + rnd.choice(emojis)
        lines.append(line)
    return "\n".join(lines) + "\n"


def _cjkencodings_documents() -> list[str]:
    folder = _stdlib_dir() / "test" / "cjkencodings"
    seen = set()
    docs = []
    if folder.is_dir():
        for p in sorted(folder.glob("*-utf8.txt")):
            try:
                text = p.read_bytes().decode("utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            if text and text not in seen:
                seen.add(text)
                docs.append(text)
    return docs


@functools.lru_cache(maxsize=None)
def multilingual_documents() -> tuple[str, ...]:
    """~1.5 MB of multilingual documents (1-20 KB each)."""
    Faker = _faker()
    emojis = _emoji_list()
    docs = [(DATA_DIR / "multilingual_sample.txt").read_text(encoding="utf-8")]
    docs += _cjkencodings_documents()
    fixed = sum(len(d.encode("utf-8")) for d in docs)

    shares = [(loc, "lorem", 1) for loc in _LOREM_LOCALES]
    shares += [(loc, "record", w) for loc, w in _RECORD_LOCALES]
    unit = (MULTILINGUAL_TARGET_BYTES - fixed) / sum(w for _, _, w in shares)

    per_locale = []
    for loc, kind, weight in shares:
        fake = Faker(loc)
        fake.seed_instance(_seed(f"{loc}/{kind}"))
        rnd = random.Random(_seed(f"{loc}/{kind}/mix"))
        make = _lorem_document if kind == "lorem" else _record_document
        budget = unit * weight
        out = []
        size = 0
        while size < budget:
            d = make(fake, rnd, emojis)
            out.append(d)
            size += len(d.encode("utf-8"))
        per_locale.append(out)

    # Interleave the locales (round robin) so that any prefix is mixed.
    for i in range(max(len(b) for b in per_locale)):
        docs.extend(b[i] for b in per_locale if i < len(b))
    docs = [_nfc(d) for d in docs]
    docs = [d if not _ATOM_RE.search(d) else _ATOM_RE.sub("", d) for d in docs]
    return tuple(d if d.endswith("\n") else d + "\n" for d in docs)


@functools.lru_cache(maxsize=None)
def multilingual_corpus() -> str:
    return "".join(multilingual_documents())


# --------------------------------------------------------------------------
# whitespace, contractions, digits, punctuation
# --------------------------------------------------------------------------

_WS_CHARS = (
    " ", " ", " ", "\t", "\n", "\n", "\r\n", "\r", "\x0b", "\x0c", "\x85",
    "\u2028", "\u2029", "\xa0", "\u1680", "\u2000", "\u2003", "\u2009",
    "\u202f", "\u205f", "\u3000",
    # not \s for the pattern, although str.isspace() says so (U+001C..U+001F)
    "\x1c", "\x1d", "\x1e", "\x1f",
    # format characters: neither \s nor letters
    "\u200b", "\u200d", "\ufeff",
)
_CONTRACTIONS = (
    "s", "t", "re", "ve", "m", "ll", "d",
    "S", "T", "RE", "Re", "rE", "VE", "vE", "M", "LL", "Ll", "lL", "D",
    "\u017f",  # long s: folds to s
    "\u017ft", "x", "K", "ST",
)
_APOSTROPHES = ("'", "'", "'", "\u2019", "\u02bc")
_WORDS = (
    "it", "I", "we", "they", "You", "DON", "can", "shan", "o", "rock", "n",
    "roll", "café", "naïve", "straße", "Ωμέγα", "мир", "שלום", "سلام",
    "हिन्दी", "ไทย", "中文", "日本語", "한국어", "x", "_", "foo_bar", "CamelCase",
)
_DIGITS = "0123456789" + "٠١٢٣٤٥٦٧٨٩" + "०१२३४५६७८९" + "０１２３４５６７８９" + "²³¹½¼¾ⅫⅣ①②⑩"
_PUNCT = "!\"#$%&()*+,-./:;<=>?@[\\]^_`{|}~…—–«»“”„‘’¡¿·•§¶†‡※。、！？：；（）【】「」"


def _ws_run(rnd: random.Random) -> str:
    return "".join(rnd.choice(_WS_CHARS) for _ in range(rnd.randrange(1, 13)))


def _whitespace_document(rnd: random.Random) -> str:
    parts = []
    for _ in range(rnd.randrange(50, 400)):
        k = rnd.randrange(10)
        if k < 3:
            parts.append(_ws_run(rnd))
        elif k < 5:
            parts.append(rnd.choice(_WORDS))
            parts.append(rnd.choice(_APOSTROPHES) + rnd.choice(_CONTRACTIONS))
        elif k < 6:
            parts.append("".join(rnd.choice(_DIGITS[:10]) for _ in range(rnd.randrange(1, 41))))
        elif k < 7:
            parts.append("".join(rnd.choice(_DIGITS) for _ in range(rnd.randrange(1, 12))))
        elif k < 9:
            p = "".join(rnd.choice(_PUNCT) for _ in range(rnd.randrange(1, 31)))
            if rnd.random() < 0.3:
                p += rnd.choice(("\n", "\r\n", "\n\n", "\r", "\n\r\n"))
            parts.append(p)
        else:
            parts.append(rnd.choice(_WORDS))
        if rnd.random() < 0.5:
            parts.append(rnd.choice((" ", "  ", "\n", "\t")))
    return "".join(parts)


@functools.lru_cache(maxsize=None)
def whitespace_documents() -> tuple[str, ...]:
    rnd = random.Random(_seed("whitespace"))
    docs = []
    total = 0
    while total < WHITESPACE_TARGET_BYTES:
        d = _nfc(_whitespace_document(rnd))
        docs.append(d)
        total += len(d.encode("utf-8"))
    return tuple(docs)


@functools.lru_cache(maxsize=None)
def whitespace_corpus() -> str:
    return "".join(whitespace_documents())


# --------------------------------------------------------------------------
# long words
# --------------------------------------------------------------------------

_LATIN_LETTERS = "abcdefghijklmnopqrstuvwxyz" * 4 + "éèàüöäßçñøå"


@functools.lru_cache(maxsize=32)
def long_word(n: int, script: str = "latin") -> str:
    """One pre-token of ``n`` characters and no spaces.

    ``script``: ``"latin"`` (pseudo-random lowercase letters, a few accented),
    ``"cjk"`` (pseudo-random CJK ideographs U+4E00..U+9FA5, 3 UTF-8 bytes each)
    or ``"repeat"`` (``"x" * n``).  The same ``(n, script)`` always gives the
    same word, and a longer word extends a shorter one's prefix.
    """
    if n < 0:
        raise ValueError("n must be >= 0")
    if script == "repeat":
        return "x" * n
    rnd = random.Random(_seed(f"long_word/{script}"))
    if script == "latin":
        return "".join(rnd.choices(_LATIN_LETTERS, k=n))
    if script == "cjk":
        return "".join(chr(rnd.randrange(0x4E00, 0x9FA6)) for _ in range(n))
    raise ValueError(f"unknown script {script!r}: use 'latin', 'cjk' or 'repeat'")


CORPORA = {
    "code": code_corpus,
    "multilingual": multilingual_corpus,
    "whitespace": whitespace_corpus,
}
DOCUMENTS = {
    "code": code_documents,
    "multilingual": multilingual_documents,
    "whitespace": whitespace_documents,
}


def corpus_info() -> dict[str, dict[str, int]]:
    """Sizes of each corpus: characters, UTF-8 bytes, documents."""
    return {
        name: {
            "chars": len(CORPORA[name]()),
            "bytes": len(CORPORA[name]().encode("utf-8")),
            "documents": len(DOCUMENTS[name]()),
        }
        for name in CORPORA
    }


if __name__ == "__main__":  # pragma: no cover
    import time

    t = time.perf_counter()
    for k, v in corpus_info().items():
        print(k, v)
    print(f"built in {time.perf_counter() - t:.2f} s")
