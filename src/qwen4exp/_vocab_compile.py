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

# The Qwen pattern (SPEC.md). The native pre-tokenizer implements exactly this
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


def compile_tokenizer_json(raw: bytes, where: str = "tokenizer.json") -> dict[str, np.ndarray]:
    """Parse tokenizer.json bytes into the arrays the native core needs."""
    try:
        tok = json.loads(raw)
    except ValueError as exc:
        raise VocabFormatError(f"{where}: not valid JSON ({exc})") from None
    if not isinstance(tok, dict):
        raise VocabFormatError(f"{where}: top level must be a JSON object")
    _check_pipeline(tok, where)
    alphabet = byte_level_alphabet()
    vocab = tok["model"]["vocab"]
    n = len(vocab)
    token_bytes: list[bytes | None] = [None] * n
    for piece, idx in vocab.items():
        if not (isinstance(idx, int) and 0 <= idx < n) or token_bytes[idx] is not None:
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
    merges = np.empty((len(merges_raw), 3), dtype=np.int32)
    str_ids = vocab
    for rank, m in enumerate(merges_raw):
        left, right = m.split(" ", 1) if isinstance(m, str) else m
        try:
            a, b = str_ids[left], str_ids[right]
            new = str_ids[left + right]
        except KeyError:
            raise VocabFormatError(f"{where}: merge {rank} ({left!r}, {right!r}) names an unknown token") from None
        merges[rank] = (a, b, new)
    atoms = sorted(
        ((t["content"], t["id"], bool(t.get("special"))) for t in tok.get("added_tokens") or []),
        key=lambda x: x[1],
    )
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


def write_compiled(json_path: str, out_path: str) -> None:
    with open(json_path, "rb") as f:
        arrays = compile_tokenizer_json(f.read(), where=json_path)
    tmp = out_path + ".tmp"
    with open(tmp, "wb") as f:
        np.savez(f, **arrays)
    os.replace(tmp, out_path)
