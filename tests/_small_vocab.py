"""A small Qwen-family tokenizer.json cut from the real one, for tests that
tamper with a vocabulary (recompiling the full 11 MB file would take seconds
per case)."""

from __future__ import annotations

import functools
import json

from _hf_reference import TOKENIZER_JSON

SMALL_N = 1000


def small_tokenizer_json(n: int = SMALL_N) -> dict:
    """The real tokenizer.json's first n tokens (all 256 bytes among them), the
    merges among them, and the added tokens renumbered to follow (a fresh
    object each call)."""
    return json.loads(_small_tokenizer_text(n))


@functools.lru_cache(maxsize=None)
def _small_tokenizer_text(n: int) -> str:
    with open(TOKENIZER_JSON, encoding="utf-8") as f:
        raw = json.load(f)
    vocab = {t: i for t, i in raw["model"]["vocab"].items() if i < n}
    merges = []
    for m in raw["model"]["merges"]:
        a, b = m.split(" ", 1) if isinstance(m, str) else m
        if a in vocab and b in vocab and a + b in vocab:
            merges.append(m)
    raw["model"]["vocab"], raw["model"]["merges"] = vocab, merges
    for k, t in enumerate(raw["added_tokens"]):
        t["id"] = n + k
    return json.dumps(raw)
