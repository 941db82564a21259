"""Compile a Qwen-family tokenizer.json into the compact arrays the native core loads.

Used at build time (setup.py writes the bundled vocabulary's `.npz` into the
package, so `Tokenizer()` never parses 11 MB of JSON) and by
`Tokenizer.from_file` for other files. Pure Python + numpy: setup.py loads
this file by path before the package exists.
"""

from __future__ import annotations

import hashlib
import json
import os

import numpy as np

FORMAT_VERSION = 2

# The Qwen pattern (docs/FORMAT.md, section 2). The native pre-tokenizer implements exactly this
# pattern; any other pattern in a tokenizer.json is refused.
QWEN_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


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


def _check_pipeline(tok: dict, where: str) -> None:
    model = tok.get("model") or {}
    if model.get("type") != "BPE":
        raise VocabFormatError(f"{where}: model.type must be BPE, found {model.get('type')!r}")
    if model.get("ignore_merges"):
        raise VocabFormatError(f"{where}: ignore_merges=true is not supported (Qwen uses false)")
    norm = tok.get("normalizer") or {}
    if norm.get("type") != "NFC":
        raise VocabFormatError(f"{where}: normalizer must be NFC, found {norm.get('type')!r}")
    pre = tok.get("pre_tokenizer") or {}
    steps = pre.get("pretokenizers") if pre.get("type") == "Sequence" else None
    ok = (
        steps is not None
        and len(steps) == 2
        and steps[0].get("type") == "Split"
        and (steps[0].get("pattern") or {}).get("Regex") == QWEN_PATTERN
        and steps[0].get("behavior") == "Isolated"
        and not steps[0].get("invert")
        and steps[1].get("type") == "ByteLevel"
        and not steps[1].get("add_prefix_space")
        and not steps[1].get("use_regex")
    )
    if not ok:
        raise VocabFormatError(
            f"{where}: pre_tokenizer is not the Qwen pattern + ByteLevel pipeline; "
            "qwen4exp only loads Qwen-family tokenizer.json files"
        )


ID_LIMIT = 1 << 20  # ids (BPE and added) the native core accepts


def compile_tokenizer_json(raw: bytes, where: str = "tokenizer.json") -> dict[str, np.ndarray]:
    """Parse tokenizer.json bytes into the arrays the native core needs.

    Any malformed field (a wrong type, a missing key, an id out of range) is a
    VocabFormatError naming the file, never a KeyError or TypeError."""
    try:
        tok = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise VocabFormatError(f"{where}: not valid JSON ({str(exc)[:200]})") from None
    if not isinstance(tok, dict):
        raise VocabFormatError(f"{where}: top level must be a JSON object")
    try:
        return _compile(tok, raw, where)
    except (KeyError, TypeError, AttributeError, ValueError, IndexError) as exc:
        if isinstance(exc, VocabFormatError):
            raise
        raise VocabFormatError(
            f"{where}: malformed tokenizer.json ({type(exc).__name__}: {str(exc)[:200]})"
        ) from None


def _added_tokens(tok: dict, n: int, where: str) -> list[tuple[str, int, bool]]:
    """(content, id, special) of the added tokens, sorted by id. Each must have its own id
    above the BPE range: an added id inside it would let DATA text produce an
    "atom" id, breaking provenance (docs/RELIABILITY.md)."""
    added = tok.get("added_tokens") or []
    if not isinstance(added, list):
        raise VocabFormatError(f"{where}: added_tokens must be a list")
    atoms, ids, spellings = [], set(), set()
    for i, t in enumerate(added):
        content = t.get("content") if isinstance(t, dict) else None
        idx = t.get("id") if isinstance(t, dict) else None
        if not isinstance(content, str) or not content:
            raise VocabFormatError(f"{where}: added_tokens[{i}].content must be a non-empty string")
        if isinstance(idx, bool) or not isinstance(idx, int) or not n <= idx < ID_LIMIT:
            raise VocabFormatError(
                f"{where}: added_tokens[{i}] ({content[:40]!r}) has id {idx!r}; added tokens need "
                f"ids from {n} (past the {n} BPE tokens) to {ID_LIMIT - 1}"
            )
        if idx in ids or content in spellings:
            raise VocabFormatError(f"{where}: added_tokens[{i}] repeats an id or a spelling ({content[:40]!r})")
        content.encode("utf-8")  # a lone surrogate is malformed (ValueError above)
        ids.add(idx)
        spellings.add(content)
        atoms.append((content, idx, bool(t.get("special"))))
    return sorted(atoms, key=lambda x: x[1])


def _compile(tok: dict, raw: bytes, where: str) -> dict[str, np.ndarray]:
    _check_pipeline(tok, where)
    alphabet = byte_level_alphabet()
    vocab = tok["model"]["vocab"]
    if not isinstance(vocab, dict) or not 256 <= len(vocab) < ID_LIMIT:
        raise VocabFormatError(f"{where}: model.vocab must be an object of 256 to {ID_LIMIT - 1} tokens")
    n = len(vocab)
    token_bytes: list[bytes | None] = [None] * n
    for piece, idx in vocab.items():
        if isinstance(idx, bool) or not (isinstance(idx, int) and 0 <= idx < n) or token_bytes[idx] is not None:
            raise VocabFormatError(f"{where}: vocabulary ids must be dense 0..{n - 1} (bad id {idx!r})")
        try:
            token_bytes[idx] = bytes(alphabet[c] for c in piece)
        except KeyError:
            raise VocabFormatError(f"{where}: token {piece!r} is not byte-level text") from None
    by_bytes = {b: i for i, b in enumerate(token_bytes)}
    if len(by_bytes) != n:
        raise VocabFormatError(f"{where}: two vocabulary tokens spell the same bytes")
    for b in range(256):
        if bytes([b]) not in by_bytes:
            raise VocabFormatError(f"{where}: byte 0x{b:02x} has no token")
    merges_raw = tok["model"].get("merges") or []
    if not isinstance(merges_raw, list) or len(merges_raw) >= ID_LIMIT:
        raise VocabFormatError(f"{where}: model.merges must be a list of fewer than {ID_LIMIT} merges")
    merges = np.empty((len(merges_raw), 3), dtype=np.int32)
    str_ids = vocab
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
    atoms = _added_tokens(tok, n, where)
    atom_blob = [a.encode("utf-8") for a, _, _ in atoms]
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
        "atom_ids": np.array([i for _, i, _ in atoms], dtype=np.int32),
        # skip_special in decode drops exactly these, as HF's skip_special_tokens does
        "atom_special": np.array([s for _, _, s in atoms], dtype=np.uint8),
        "atom_bytes": np.frombuffer(b"".join(atom_blob), dtype=np.uint8),
        "atom_offsets": atom_offsets,
    }


def check_compiled(arrays) -> None:
    """Refuse compiled arrays (a cache entry) that are not self-consistent, so a
    tampered or damaged file cannot make the native core read out of bounds."""
    need = {"format_version": "i", "source_sha256": "u", "token_bytes": "u", "token_offsets": "i",
            "merges": "i", "atom_ids": "i", "atom_bytes": "u", "atom_offsets": "i"}
    for name, kind in need.items():
        if name not in arrays or arrays[name].dtype.kind != kind:
            raise ValueError(f"compiled vocabulary: {name} is missing or has the wrong type")
    tb, to, mg = arrays["token_bytes"], arrays["token_offsets"], arrays["merges"]
    ai, ab, ao = arrays["atom_ids"], arrays["atom_bytes"], arrays["atom_offsets"]
    n = len(to) - 1
    ok = (
        tb.ndim == to.ndim == ai.ndim == ab.ndim == ao.ndim == 1
        and 256 <= n < ID_LIMIT
        and to[0] == 0 and to[-1] == len(tb) and bool(np.all(np.diff(to) >= 1))
        and mg.ndim == 2 and mg.shape[1] == 3 and len(mg) < ID_LIMIT
        and (mg.size == 0 or (int(mg.min()) >= 0 and int(mg.max()) < n))
        and len(ao) == len(ai) + 1 and ao[0] == 0 and ao[-1] == len(ab)
        and bool(np.all(np.diff(ao) >= 1))
        and (ai.size == 0 or (int(ai.min()) >= n and int(ai.max()) < ID_LIMIT))
        and len(np.unique(ai)) == len(ai)
    )
    if not ok:
        raise ValueError("compiled vocabulary: arrays are not consistent")


def write_compiled(json_path: str, out_path: str) -> None:
    with open(json_path, "rb") as f:
        arrays = compile_tokenizer_json(f.read(), where=json_path)
    tmp = out_path + ".tmp"
    with open(tmp, "wb") as f:
        np.savez(f, **arrays)
    os.replace(tmp, out_path)
