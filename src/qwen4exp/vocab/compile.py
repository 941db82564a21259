"""Compile a Qwen-family tokenizer.json into the compact arrays the native core loads.

Used at build time (setup.py writes the bundled vocabulary's `.npz` into the
package, so `Tokenizer()` never parses 11 MB of JSON) and by
`Tokenizer.from_file` for other files. Pure Python + numpy: setup.py loads
this file by path before the package exists.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os

import numpy as np

FORMAT_VERSION = 5  # 5: atom_strip (added tokens' lstrip / rstrip); 4: ByteLevel's own split natively


def _load_descriptors():
    """qwen4exp.vocab.vocabulary, by relative import in the package or by path when
    setup.py loads this file before the package exists."""
    try:
        from . import vocabulary
    except ImportError:
        import importlib.util
        import sys

        spec = importlib.util.spec_from_file_location(
            "_qwen4exp_vocabulary", os.path.join(os.path.dirname(os.path.abspath(__file__)), "vocabulary.py"))
        assert spec is not None and spec.loader is not None  # a file path always has both
        vocabulary = importlib.util.module_from_spec(spec)
        # dataclasses resolves string annotations through sys.modules
        sys.modules.setdefault(spec.name, vocabulary)
        spec.loader.exec_module(vocabulary)
    return vocabulary


_VOCAB = _load_descriptors()
VOCABULARIES = _VOCAB.VOCABULARIES
MANIFEST = _VOCAB.MANIFEST
QWEN_PATTERN = _VOCAB.QWEN_PATTERN
QWEN35_PATTERN = _VOCAB.QWEN35_PATTERN
PATTERNS = {QWEN_PATTERN: False, QWEN35_PATTERN: True}  # pattern -> marks flag
#: Llama 3's split pattern: Qwen3's with numbers in runs of up to three, which
#: the native scanner also runs (pyx/_pretokenize.pyx, DIGIT_RUNS).
LLAMA3_PATTERN = QWEN_PATTERN.replace(r"\p{N}|", r"\p{N}{1,3}|", 1)
# pattern -> (marks, digits per number piece)
NATIVE_PATTERNS = {QWEN_PATTERN: (False, 1), QWEN35_PATTERN: (True, 1), LLAMA3_PATTERN: (False, 3)}
#: native_pattern's "digits" for ByteLevel's own split (GPT-2's pattern, numbers in
#: runs of any length): the native scanner's BYTE_LEVEL (pyx/_byte_level.pyx).
BYTE_LEVEL_DIGITS = 0
#: The Qwen3.5/3.6 added tokens (the tiktoken vocabulary's specials).
QWEN35_SPECIALS = next(v.specials for v in VOCABULARIES.values() if v.kind == "tiktoken")


def byte_level_alphabet() -> dict[str, int]:
    """GPT-2's printable stand-ins for the 256 byte values: char -> byte."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    codes = printable[:]
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            codes.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, codes)}


class VocabFormatError(ValueError):
    pass


# What other model types are (named in the refusal).
_OTHER_MODELS = {
    "Unigram": "a SentencePiece Unigram model",
    "WordPiece": "a WordPiece model",
    "WordLevel": "a word-level model",
}


def _check_pipeline(tok: dict, where: str, generic) -> tuple[bool, bool, bytes | None, np.ndarray | None]:
    """Refuse anything but byte-level BPE; return (marks, ignore_merges,
    pipeline, native_pattern).

    pipeline is None for a pipeline the native core runs (NFC or no
    normalizer, the Split on a Qwen pattern or Llama 3's + ByteLevel without
    regex or prefix space, or ByteLevel alone with its regex and no prefix
    space: GPT-2's), else the normalizer and pre-tokenizer as JSON for
    qwen4exp.vocab.pipeline (`generic`: that module, None where it is not at hand,
    as in setup.py). native_pattern: None for the Qwen pipelines as
    bundled (NFC, one digit a piece), else uint8 [digits per number piece
    (BYTE_LEVEL_DIGITS: GPT-2's pattern), NFC on].
    Every setting that changes ids or decoded text is checked: plain
    byte-level BPE (ignore_merges either way) and the ByteLevel decoder.
    """
    model = tok.get("model") or {}
    kind = model.get("type")
    if kind != "BPE":
        what = _OTHER_MODELS.get(kind, f"model type {kind!r}") if isinstance(kind, str) else f"model type {kind!r}"
        raise VocabFormatError(f"{where}: {what} is not supported: qwen4exp loads byte-level BPE models only "
                               f"(model.type BPE with a ByteLevel pre-tokenizer)")
    if model.get("byte_fallback"):
        raise VocabFormatError(f"{where}: a SentencePiece-style BPE model (byte_fallback) is not supported: "
                               "qwen4exp loads byte-level BPE models only")
    for key, allowed in (
        ("dropout", (None, 0, 0.0)),
        ("unk_token", (None,)),
        ("continuing_subword_prefix", (None, "")),
        ("end_of_word_suffix", (None, "")),
        ("fuse_unk", (None, False)),
        ("ignore_merges", (None, False, True)),
    ):
        if model.get(key) not in allowed:
            raise VocabFormatError(
                f"{where}: model.{key}={model.get(key)!r} is not supported (byte-level BPE uses {allowed[0]!r})"
            )
    dec = tok.get("decoder") or {}
    if dec.get("type") != "ByteLevel":
        raise VocabFormatError(f"{where}: decoder must be ByteLevel, found {tok.get('decoder')!r:.200} "
                               "(qwen4exp loads byte-level BPE models only)")
    ignore_merges = bool(model.get("ignore_merges"))
    pre = tok.get("pre_tokenizer") or {}
    steps = pre.get("pretokenizers") if pre.get("type") == "Sequence" else None
    pattern = None
    ok = (
        tok.get("normalizer") in ({"type": "NFC"}, None)
        and isinstance(steps, list)
        and len(steps) == 2
        and steps[0].get("type") == "Split"
        and steps[0].get("behavior") == "Isolated"
        and not steps[0].get("invert")
        and steps[1].get("type") == "ByteLevel"
        and not steps[1].get("add_prefix_space")
        and not steps[1].get("use_regex")
    )
    if ok and steps is not None:
        pattern = (steps[0].get("pattern") or {}).get("Regex")
    if pattern in NATIVE_PATTERNS:
        marks, digits = NATIVE_PATTERNS[pattern]
        nfc = tok.get("normalizer") is not None
        native = None if (digits, nfc) == (1, True) else np.array([digits, nfc], dtype=np.uint8)
        return marks, ignore_merges, None, native
    if (tok.get("normalizer") in ({"type": "NFC"}, None) and pre.get("type") == "ByteLevel"
            and pre.get("use_regex", True) is not False and not pre.get("add_prefix_space")):
        nfc = tok.get("normalizer") is not None
        return False, ignore_merges, None, np.array([BYTE_LEVEL_DIGITS, nfc], dtype=np.uint8)
    if not _has_byte_level(tok.get("pre_tokenizer")):
        raise VocabFormatError(f"{where}: the pre-tokenizer has no ByteLevel step: qwen4exp loads byte-level "
                               "BPE models only")
    if generic is None:
        raise VocabFormatError(f"{where}: not a pipeline the native scanner runs (bundled vocabularies must be)")
    try:
        spec = generic.pipeline_spec(tok)
    except generic.PipelineError as exc:
        raise VocabFormatError(f"{where}: {exc}") from None
    return False, ignore_merges, json.dumps(spec, ensure_ascii=False, sort_keys=True).encode("utf-8"), None


def _has_byte_level(pre) -> bool:
    if not isinstance(pre, dict):
        return False
    if pre.get("type") == "Sequence":
        return any(_has_byte_level(p) for p in pre.get("pretokenizers") or [])
    return pre.get("type") == "ByteLevel"


ID_LIMIT = 1 << 20  # ids (BPE and added) the native core accepts


def _not_json(name: str):
    raise ValueError(f"{name} is not a JSON value")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"number {text[:24]} is out of range")
    return value


def compile_tokenizer_json(raw: bytes, where: str = "tokenizer.json", generic=None) -> dict[str, np.ndarray]:
    """Parse tokenizer.json bytes into the arrays the native core needs;
    `generic` is qwen4exp.vocab.pipeline, which checks any other byte-level
    pipeline (loading.py passes it; setup.py, loading this file by path, has
    only Qwen vocabularies to compile).

    Any malformed field (a wrong type, a missing key, an id out of range) is a
    VocabFormatError naming the file, never a KeyError or TypeError."""
    try:
        tok = json.loads(raw, parse_constant=_not_json, parse_float=_finite_float)
    except RecursionError:
        raise VocabFormatError(f"{where}: not valid JSON (nested too deeply)") from None
    except ValueError as exc:
        raise VocabFormatError(f"{where}: not valid JSON ({str(exc)[:200]})") from None
    if not isinstance(tok, dict):
        raise VocabFormatError(f"{where}: top level must be a JSON object")
    try:
        return _compile(tok, raw, where, generic)
    except (KeyError, TypeError, AttributeError, ValueError, IndexError) as exc:
        if isinstance(exc, VocabFormatError):
            raise
        raise VocabFormatError(
            f"{where}: malformed tokenizer.json ({type(exc).__name__}: {str(exc)[:200]})"
        ) from None


# atom_strip flags: the added token takes the whitespace on its left / right
# with it (HF AddedToken lstrip / rstrip), so that whitespace is not encoded.
STRIP_LEFT, STRIP_RIGHT = 1, 2


def _added_tokens(tok: dict, n: int, where: str) -> list[tuple[str, int, bool, int]]:
    """(content, id, special, strip flags) of the added tokens, sorted by id. Each has its own
    id above the BPE range, or is a BPE token DATA can never produce (checked
    by _arrays): an added id DATA could produce would break provenance
    (docs/RELIABILITY.md)."""
    added = tok.get("added_tokens")
    if added is None:
        added = []
    if not isinstance(added, list):  # an empty object too, as HF tokenizers refuses it
        raise VocabFormatError(f"{where}: added_tokens must be a list")
    atoms, ids, spellings = [], set(), set()
    for i, t in enumerate(added):
        content = t.get("content") if isinstance(t, dict) else None
        idx = t.get("id") if isinstance(t, dict) else None
        if not isinstance(content, str) or not content:
            raise VocabFormatError(f"{where}: added_tokens[{i}].content must be a non-empty string")
        if isinstance(idx, bool) or not isinstance(idx, int) or not 0 <= idx < ID_LIMIT:
            raise VocabFormatError(
                f"{where}: added_tokens[{i}] ({content[:40]!r}) has id {idx!r}; added tokens need "
                f"ids from 0 to {ID_LIMIT - 1}"
            )
        if idx in ids or content in spellings:
            raise VocabFormatError(f"{where}: added_tokens[{i}] repeats an id or a spelling ({content[:40]!r})")
        try:
            content.encode("utf-8")
        except UnicodeEncodeError:
            raise VocabFormatError(f"{where}: added_tokens[{i}].content is not valid Unicode "
                                   "(a lone surrogate)") from None
        ids.add(idx)
        spellings.add(content)
        strip = (STRIP_LEFT if t.get("lstrip") else 0) | (STRIP_RIGHT if t.get("rstrip") else 0)
        atoms.append((content, idx, bool(t.get("special")), strip))
    return sorted(atoms, key=lambda x: x[1])


def _compile(tok: dict, raw: bytes, where: str, generic) -> dict[str, np.ndarray]:
    marks, ignore_merges, pipeline, native = _check_pipeline(tok, where, generic)
    alphabet = byte_level_alphabet()
    vocab = tok["model"]["vocab"]
    if not isinstance(vocab, dict) or not 256 <= len(vocab) < ID_LIMIT:
        raise VocabFormatError(f"{where}: model.vocab must be an object of 256 to {ID_LIMIT - 1} tokens")
    n = len(vocab)
    token_bytes: list[bytes | None] = [None] * n
    dead: set[int] = set()
    for piece, idx in vocab.items():
        if isinstance(idx, bool) or not (isinstance(idx, int) and 0 <= idx < n) or token_bytes[idx] is not None:
            raise VocabFormatError(f"{where}: vocabulary ids must be dense 0..{n - 1} (bad id {idx!r})")
        try:
            token_bytes[idx] = bytes(alphabet[c] for c in piece)
        except KeyError:
            # Not byte-level text (Command-R has 1,403 such): no byte-level piece is
            # ever spelled so, so BPE never makes it; the ByteLevel decoder writes
            # it as its UTF-8, as here.
            if not isinstance(piece, str) or len(piece.encode("utf-8", "surrogatepass")) < 2:
                raise VocabFormatError(f"{where}: token {piece!r} is not byte-level text") from None
            try:
                token_bytes[idx] = piece.encode("utf-8")
            except UnicodeEncodeError:
                raise VocabFormatError(f"{where}: token {piece!r} is not valid Unicode") from None
            dead.add(idx)
    if dead and ignore_merges:
        raise VocabFormatError(f"{where}: tokens that are not byte-level text with ignore_merges "
                               "are not supported")
    merges_raw = tok["model"].get("merges") or []
    if not isinstance(merges_raw, list) or len(merges_raw) >= ID_LIMIT:
        raise VocabFormatError(f"{where}: model.merges must be a list of fewer than {ID_LIMIT} merges")
    merges = np.empty((len(merges_raw), 3), dtype=np.int32)
    live = np.ones(len(merges_raw), dtype=bool)
    str_ids = vocab
    last_rank: dict[tuple[int, int], int] = {}
    for rank, m in enumerate(merges_raw):
        pair = m.split(" ", 1) if isinstance(m, str) else m
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(x, str) for x in pair)):
            raise VocabFormatError(f"{where}: merge {rank} is not two tokens ({str(m)[:60]!r})")
        left, right = pair
        try:
            a, b = str_ids[left], str_ids[right]
            new = str_ids[left + right]
        except KeyError:
            raise VocabFormatError(f"{where}: merge {rank} ({left!r}, {right!r}) names an unknown token") from None
        merges[rank] = (a, b, new)
        last_rank[a, b] = rank
        if dead and (a in dead or b in dead or new in dead):
            live[rank] = False  # never applies: no piece holds a token that is not byte-level text
    if len(last_rank) < len(merges):  # a repeated merge ranks where it last appears, as HF tokenizers reads it
        latest = np.zeros(len(merges), dtype=bool)
        latest[list(last_rank.values())] = True
        live &= latest
    if not live.all():
        merges = merges[live]
    present = {t[0] for t in token_bytes if t is not None and len(t) == 1}
    missing = [b for b in range(256) if b not in present]
    if missing or dead:
        # tokenizers drops a byte that has no token: the generic pipeline does it
        if generic is None:
            raise VocabFormatError(f"{where}: byte 0x{missing[0]:02x} has no token")
        spec = json.loads(pipeline) if pipeline is not None else generic.pipeline_spec(tok)
        spec["missing_bytes"] = missing  # (also the pipeline's flag that token spellings may repeat)
        pipeline = json.dumps(spec, ensure_ascii=False, sort_keys=True).encode("utf-8")
        native = None
    arrays = _arrays(raw, token_bytes, merges, _added_tokens(tok, n, where), marks, ignore_merges, where,
                     missing_ok=bool(missing), dead=dead)
    if pipeline is not None:
        arrays["pipeline"] = np.frombuffer(pipeline, dtype=np.uint8)
    if native is not None:
        arrays["native_pattern"] = native
    return arrays


def tiktoken_merges(ranks: dict[bytes, int]) -> np.ndarray:
    """The merges transformers' TikTokenConverter writes for tiktoken ranks.

    Every split of a token into two tokens is a merge; merges are ordered by
    the rank of the token they make, then by the rank of the left part (two
    splits of one token never share a left part). Rows (left, right, new).
    """
    rows = []
    for tok, rank in sorted(ranks.items(), key=lambda kv: kv[1]):
        local = []
        for i in range(1, len(tok)):
            left = ranks.get(tok[:i])
            if left is not None:
                right = ranks.get(tok[i:])
                if right is not None:
                    local.append((left, right, rank))
        local.sort()
        rows.extend(local)
    return np.array(rows, dtype=np.int32).reshape(-1, 3)


def compile_tiktoken(raw: bytes, specials: tuple[str, ...], marks: bool,
                     where: str = "ranks.tiktoken") -> dict[str, np.ndarray]:
    """Compile tiktoken ranks ("<base64 token> <rank>" lines) as TikTokenConverter
    converts them: vocabulary = ranks, every split a merge, ignore_merges on,
    and the specials as added tokens from the first id after the ranks."""
    ranks: dict[bytes, int] = {}
    for lineno, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        try:
            tok64, rank_text = line.split()
            ranks[base64.b64decode(tok64, validate=True)] = int(rank_text)
        except ValueError:
            raise VocabFormatError(f"{where}:{lineno}: not a '<base64 token> <rank>' line") from None
    n = len(ranks)
    token_bytes: list[bytes | None] = [None] * n
    for tok, rank in ranks.items():
        if not 0 <= rank < n or token_bytes[rank] is not None:
            raise VocabFormatError(f"{where}: ranks must be dense 0..{n - 1} (bad rank {rank})")
        token_bytes[rank] = tok
    atoms = [(sp, n + i, True, 0) for i, sp in enumerate(specials)]  # TikTokenConverter: special=True
    return _arrays(raw, token_bytes, tiktoken_merges(ranks), atoms, marks, True, where)


def _arrays(raw: bytes, token_bytes: list, merges: np.ndarray, atoms: list[tuple[str, int, bool, int]],
            marks: bool, ignore_merges: bool, where: str, missing_ok: bool = False,
            dead: set[int] = frozenset()) -> dict[str, np.ndarray]:  # type: ignore[assignment]
    """The compiled arrays; atoms are (spelling, id, special, strip flags). missing_ok:
    some bytes have no token (the generic pipeline drops them); dead: tokens
    BPE never makes, whose spelling may repeat a live one's."""
    n = len(token_bytes)
    by_bytes = {b: i for i, b in enumerate(token_bytes) if i not in dead}
    if len(by_bytes) != n - len(dead):
        raise VocabFormatError(f"{where}: two vocabulary tokens spell the same bytes")
    for b in range(256):
        if bytes([b]) not in by_bytes and not missing_ok:
            raise VocabFormatError(f"{where}: byte 0x{b:02x} has no token")
    atoms = sorted(atoms, key=lambda x: x[1])
    atom_blob = [a.encode("utf-8") for a, _, _, _ in atoms]
    made = set(merges[:, 2].tolist()) if any(i < n for _, i, _, _ in atoms) else set()
    for (content, i, _, _), spelled in zip(atoms, atom_blob):
        if i < n:
            why = _reachable_atom(token_bytes[i], spelled, i in made, ignore_merges)
            if why:
                raise VocabFormatError(f"{where}: the added token {content[:40]!r} is BPE token {i}, which {why}")
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum([len(b) for b in token_bytes], out=offsets[1:])
    atom_offsets = np.zeros(len(atoms) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in atom_blob], out=atom_offsets[1:])
    return {
        "format_version": np.array([FORMAT_VERSION], dtype=np.int64),
        "source_sha256": np.frombuffer(hashlib.sha256(raw).digest(), dtype=np.uint8),
        "token_bytes": np.frombuffer(b"".join(token_bytes), dtype=np.uint8),
        "token_offsets": offsets,
        "merges": merges,
        "atom_ids": np.array([i for _, i, _, _ in atoms], dtype=np.int32),
        # skip_special in decode drops exactly these, as HF's skip_special_tokens does
        "atom_special": np.array([s for _, _, s, _ in atoms], dtype=np.uint8),
        "atom_strip": np.array([f for _, _, _, f in atoms], dtype=np.uint8),
        "atom_bytes": np.frombuffer(b"".join(atom_blob), dtype=np.uint8),
        "atom_offsets": atom_offsets,
        "marks": np.array([marks], dtype=np.bool_),
        "ignore_merges": np.array([ignore_merges], dtype=np.bool_),
    }


def _reachable_atom(token: bytes, spelled: bytes, made_by_merge: bool, ignore_merges: bool) -> str | None:
    """Why an added token that is also BPE token could come out of DATA (or
    decode otherwise than it is spelled), or None when it cannot: a token of
    two or more bytes, spelled as the added token, that no merge makes and
    (ignore_merges off) no piece is looked up as whole. GPT-2, StarCoder and
    Falcon files keep their special tokens inside the vocabulary that way."""
    if token != spelled:
        return "is spelled otherwise"
    if len(token) < 2:
        return "is a single byte, which DATA produces"
    if made_by_merge:
        return "a merge makes, so DATA could produce it"
    if ignore_merges:
        return "ignore_merges would give a piece spelled so"
    return None


# The compiled arrays, as _arrays writes them: name -> (dtype, shape; None: any length).
# A bundled vocabulary also has "self_encoding" (uint8 per token).
COMPILED_ARRAYS: dict[str, tuple[np.dtype, tuple]] = {
    "format_version": (np.dtype(np.int64), (1,)),
    "source_sha256": (np.dtype(np.uint8), (32,)),
    "token_bytes": (np.dtype(np.uint8), (None,)),
    "token_offsets": (np.dtype(np.int64), (None,)),
    "merges": (np.dtype(np.int32), (None, 3)),
    "atom_ids": (np.dtype(np.int32), (None,)),
    "atom_special": (np.dtype(np.uint8), (None,)),
    "atom_strip": (np.dtype(np.uint8), (None,)),
    "atom_bytes": (np.dtype(np.uint8), (None,)),
    "atom_offsets": (np.dtype(np.int64), (None,)),
    "marks": (np.dtype(np.bool_), (1,)),
    "ignore_merges": (np.dtype(np.bool_), (1,)),
}


def check_compiled(arrays, *, self_encoding: bool = True, deep: bool = False) -> None:
    """Refuse compiled arrays that are not self-consistent (VocabFormatError
    naming the first fault), so that damaged or forged arrays never reach the
    native core.

    Always: exactly the arrays _arrays writes (plus self_encoding when allowed),
    each of its exact dtype and shape; offsets from 0, increasing, ending at
    their blob's end; every id in range (merges inside the vocabulary, added
    ids past it and below ID_LIMIT, distinct); a token for every byte. That
    keeps every read of the native core in bounds and DATA away from atom ids.
    deep (arrays from outside the process: a pickle) also checks what compiling
    a tokenizer.json guarantees by construction: distinct token spellings, each
    merge making exactly its two parts' bytes, atom spellings distinct UTF-8.
    """
    if not isinstance(arrays, dict):
        raise VocabFormatError(f"compiled vocabulary: a dict of arrays, not {type(arrays).__name__}")
    expected = dict(COMPILED_ARRAYS)
    expected["pipeline"] = (np.dtype(np.uint8), (None,))  # a generic pipeline's JSON (optional)
    expected["native_pattern"] = (np.dtype(np.uint8), (2,))  # [digits a number piece, NFC] (optional)
    if self_encoding:
        expected["self_encoding"] = (np.dtype(np.uint8), (None,))
    unknown = sorted(map(str, set(arrays) - set(expected)))
    if unknown:
        raise VocabFormatError(f"compiled vocabulary: unexpected array {unknown[0]!r}")
    for name, (dtype, shape) in COMPILED_ARRAYS.items():
        _check_array(arrays, name, dtype, shape)
    if arrays["format_version"][0] != FORMAT_VERSION:
        raise VocabFormatError(f"compiled vocabulary: format version {int(arrays['format_version'][0])}, "
                               f"expected {FORMAT_VERSION}")
    tb, to, mg = arrays["token_bytes"], arrays["token_offsets"], arrays["merges"]
    ai, ab, ao = arrays["atom_ids"], arrays["atom_bytes"], arrays["atom_offsets"]
    n = len(to) - 1
    if not 256 <= n < ID_LIMIT:
        raise VocabFormatError(f"compiled vocabulary: {n} tokens, expected 256 to {ID_LIMIT - 1}")
    _check_offsets("token", to, len(tb))
    if len(mg) >= ID_LIMIT or (mg.size and not (int(mg.min()) >= 0 and int(mg.max()) < n)):
        raise VocabFormatError(f"compiled vocabulary: a merge names an id outside 0..{n - 1}")
    if len(ao) != len(ai) + 1:
        raise VocabFormatError("compiled vocabulary: atom_offsets and atom_ids differ in length")
    _check_offsets("atom", ao, len(ab))
    if ai.size and not (int(ai.min()) >= 0 and int(ai.max()) < ID_LIMIT):
        raise VocabFormatError(f"compiled vocabulary: an added token's id is outside 0..{ID_LIMIT - 1}")
    if "pipeline" in arrays:
        _check_array(arrays, "pipeline", np.dtype(np.uint8), (None,))
    if "native_pattern" in arrays:
        _check_array(arrays, "native_pattern", np.dtype(np.uint8), (2,))
        digits, nfc = arrays["native_pattern"].tolist()
        if digits not in (1, 3, BYTE_LEVEL_DIGITS) or nfc not in (0, 1) or arrays["marks"][0] and digits != 1:
            raise VocabFormatError("compiled vocabulary: native_pattern is not [0, 1 or 3 digits, NFC 0 or 1]")
    inside = np.flatnonzero(ai < n)
    for a in inside.tolist():
        t = int(ai[a])
        why = _reachable_atom(tb[to[t]:to[t + 1]].tobytes(), ab[ao[a]:ao[a + 1]].tobytes(),
                              bool(np.any(mg[:, 2] == t)), bool(arrays["ignore_merges"][0]))
        if why:
            raise VocabFormatError(f"compiled vocabulary: added token {t} is a BPE token, which {why}")
    if len(set(ai.tolist())) != len(ai):  # not np.unique: it imports numpy.ma (10 ms at load)
        raise VocabFormatError("compiled vocabulary: two added tokens share an id")
    special = arrays["atom_special"]
    if special.shape != ai.shape or (special.size and int(special.max()) > 1):
        raise VocabFormatError("compiled vocabulary: atom_special is not one 0/1 flag per added token")
    strip = arrays["atom_strip"]
    if strip.shape != ai.shape or (strip.size and int(strip.max()) > STRIP_LEFT | STRIP_RIGHT):
        raise VocabFormatError("compiled vocabulary: atom_strip is not one lstrip/rstrip flag set per added token")
    lengths = np.diff(to)
    singles = tb[to[:-1][lengths == 1]]
    if len(set(singles.tolist())) != 256 and "pipeline" not in arrays:  # the generic pipeline drops them
        raise VocabFormatError("compiled vocabulary: some byte has no token of its own")
    if len(singles) != len(set(singles.tolist())):
        raise VocabFormatError("compiled vocabulary: two tokens spell one byte")
    if "self_encoding" in arrays:
        flags = arrays["self_encoding"]
        if flags.shape != (n,) or int(flags.max()) > 1:
            raise VocabFormatError("compiled vocabulary: self_encoding is not one 0/1 flag per token")
    if deep:
        # a generic pipeline's file may hold tokens that are not byte-level text,
        # spelled as their UTF-8 (see _compile), repeating a live token's bytes
        _check_spellings(tb, to, mg, ab, ao, repeats_ok="pipeline" in arrays)


def _check_array(arrays, name: str, dtype: np.dtype, shape: tuple) -> None:
    a = arrays.get(name)
    if a is None:
        raise VocabFormatError(f"compiled vocabulary: {name} is missing")
    if type(a) is not np.ndarray:
        raise VocabFormatError(f"compiled vocabulary: {name} is a {type(a).__name__}, not a numpy array")
    if a.dtype != dtype or a.ndim != len(shape) or any(w is not None and w != h for w, h in zip(shape, a.shape)):
        want = ", ".join("n" if w is None else str(w) for w in shape) + ("," if len(shape) == 1 else "")
        raise VocabFormatError(f"compiled vocabulary: {name} is {a.dtype} of shape {a.shape}, "
                               f"expected {dtype} of shape ({want})")


def _check_offsets(what: str, offsets: np.ndarray, blob_len: int) -> None:
    """offsets[0] == 0, each spelling at least one byte, the last one ending the blob."""
    if not (len(offsets) >= 1 and offsets[0] == 0 and offsets[-1] == blob_len
            and bool(np.all(offsets[1:] > offsets[:-1]))):
        raise VocabFormatError(f"compiled vocabulary: {what} offsets do not cut their bytes "
                               "into non-empty spellings from the first byte to the last")


def _check_spellings(tb, to, mg, ab, ao, repeats_ok: bool = False) -> None:
    """What compiling a tokenizer.json guarantees by construction (see check_compiled)."""
    blob, offs = tb.tobytes(), to.tolist()
    spelled = [blob[offs[i]:offs[i + 1]] for i in range(len(offs) - 1)]
    if len(set(spelled)) != len(spelled) and not repeats_ok:
        raise VocabFormatError("compiled vocabulary: two tokens spell the same bytes")
    parts = map(bytes.__add__, map(spelled.__getitem__, mg[:, 0].tolist()),
                map(spelled.__getitem__, mg[:, 1].tolist()))
    made = map(spelled.__getitem__, mg[:, 2].tolist())
    if not all(map(bytes.__eq__, parts, made)):  # one pass in C: 150,000 merges in ~0.1 s
        rank = next(r for r, (a, b, new) in enumerate(mg.tolist()) if spelled[a] + spelled[b] != spelled[new])
        a, b, new = mg[rank].tolist()
        raise VocabFormatError(f"compiled vocabulary: merge {rank} makes token {new}, "
                               f"which does not spell tokens {a} and {b}")
    blob, offs = ab.tobytes(), ao.tolist()
    try:
        atoms = [blob[offs[i]:offs[i + 1]].decode("utf-8") for i in range(len(offs) - 1)]
    except UnicodeDecodeError:
        raise VocabFormatError("compiled vocabulary: an added token's spelling is not UTF-8") from None
    if len(set(atoms)) != len(atoms):
        raise VocabFormatError("compiled vocabulary: two added tokens have one spelling")


def self_encoding(token_bytes: np.ndarray, token_offsets: np.ndarray, merges: np.ndarray,
                  ignore_merges: bool) -> np.ndarray:
    """uint8 per token: 1 when BPE over the token's own bytes gives back exactly
    that token (lowest rank first, leftmost among equals; under ignore_merges
    every token does). The native core seeds its piece caches with these
    tokens without merging each one at load time (pyx/_encoder.pyx, build_seed);
    computed once, when a bundled vocabulary is compiled at build time (a few
    seconds in Python)."""
    n = len(token_offsets) - 1
    if ignore_merges:
        return np.ones(n, dtype=np.uint8)
    blob = token_bytes.tobytes()
    spelled = [blob[token_offsets[t]:token_offsets[t + 1]] for t in range(n)]
    byte_id = {b: t for t, b in enumerate(spelled) if len(b) == 1}
    rank: dict[tuple[int, int], tuple[int, int]] = {}
    for r, (a, b, new) in enumerate(merges.tolist()):
        rank.setdefault((a, b), (r, new))  # (compiled merges repeat none: _compile keeps the last)
    absent = (1 << 62, -1)
    out = np.zeros(n, dtype=np.uint8)
    for t, word in enumerate(spelled):
        sym = [byte_id[word[j:j + 1]] for j in range(len(word))]
        while len(sym) > 1:
            (r, new), j = min((rank.get((sym[i], sym[i + 1]), absent), i) for i in range(len(sym) - 1))
            if new < 0:
                break
            sym[j:j + 2] = [new]
        out[t] = sym == [t]
    return out


def compile_bundled(name: str, vocab_dir: str) -> dict[str, np.ndarray]:
    """Compile the bundled vocabulary `name` from its source under vocab_dir,
    with its self_encoding flags (a from_file vocabulary has none: the native
    core finds them at load)."""
    vocab = VOCABULARIES[name]
    source = os.path.join(vocab_dir, vocab.source)
    with open(source, "rb") as f:
        raw = f.read()
    if vocab.kind == "tiktoken":
        arrays = compile_tiktoken(raw, vocab.specials, marks=vocab.marks, where=source)
    else:
        arrays = compile_tokenizer_json(raw, where=source)
    arrays["self_encoding"] = self_encoding(arrays["token_bytes"], arrays["token_offsets"], arrays["merges"],
                                            bool(arrays["ignore_merges"][0]))
    return arrays


def write_arrays(arrays: dict[str, np.ndarray], out_path: str) -> None:
    tmp = out_path + ".tmp"
    with open(tmp, "wb") as f:
        np.savez(f, **arrays)  # type: ignore[arg-type]  # numpy's stub: a key could be allow_pickle
    os.replace(tmp, out_path)
