"""The reference for char starts (pyx/_char_starts.pyx), read from a tokenizer.json.

Nothing here imports qwen4exp. For a vocabulary it gives

* `start_chars(path)`: {code point: token id} for every 2- or 3-byte character c
  whose bytes are a token T_c that Hugging Face's BPE model (merges applied,
  ignore_merges off) makes from c's bytes alone, and where every merge taking
  T_c as an operand ranks above every merge used to make it (the ranks used
  are found by a tiny BPE over 2 or 3 symbols, checked against HF's result);
* `fragment_rules(path)`: ({P: sorted X}, {Q: sorted Y}) over the tokens
  X+P (X non-empty, P a lead byte 0xC2..0xEF alone, or a 0xE0..0xEF lead and
  one continuation byte) and Q+Y (Y non-empty, Q one or two continuation
  bytes);
* `spellings(path)`: every id's bytes.
"""

from __future__ import annotations

from functools import lru_cache

from _hf_reference import TOKENIZER_JSON, byte_decoder, tokenizer_json


@lru_cache(maxsize=None)
def spellings(path: str = TOKENIZER_JSON) -> tuple[bytes, ...]:
    dec = byte_decoder()
    vocab = tokenizer_json(path)["model"]["vocab"]
    spell = [b""] * len(vocab)
    for token, i in vocab.items():
        spell[i] = bytes(dec[ch] for ch in token)
    return tuple(spell)


def _merge_pairs(path: str) -> list[tuple[str, str]]:
    return [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m)
            for m in tokenizer_json(path)["model"]["merges"]]


def _cont(b: int) -> bool:
    return 0x80 <= b <= 0xBF


@lru_cache(maxsize=None)
def fragment_rules(path: str = TOKENIZER_JSON) -> tuple[dict[bytes, list[bytes]], dict[bytes, list[bytes]]]:
    prefix: dict[bytes, list[bytes]] = {}
    suffix: dict[bytes, list[bytes]] = {}
    for s in spellings(path):
        for i in range(1, len(s)):
            head, tail = s[:i], s[i:]
            # tail a proper prefix of a 2- or 3-byte character
            if len(tail) == 1 and 0xC2 <= tail[0] <= 0xEF or len(tail) == 2 and 0xE0 <= tail[0] <= 0xEF and _cont(
                    tail[1]):
                prefix.setdefault(tail, []).append(head)
            # head a proper suffix (one or two continuation bytes)
            if len(head) <= 2 and all(_cont(b) for b in head):
                suffix.setdefault(head, []).append(tail)
    return ({k: sorted(v) for k, v in prefix.items()}, {k: sorted(v) for k, v in suffix.items()})


def _tiny_bpe(ids: list[int], rank: dict, new_id: dict) -> tuple[list[int], int]:
    """Lowest rank first, leftmost among equals; (result, highest rank used)."""
    top = -1
    while len(ids) > 1:
        ranks = [rank.get((a, b), float("inf")) for a, b in zip(ids, ids[1:])]
        best = min(ranks)
        if best == float("inf"):
            break
        j = ranks.index(best)
        ids[j : j + 2] = [new_id[best]]
        top = max(top, best)
    return ids, top


@lru_cache(maxsize=None)
def start_chars(path: str = TOKENIZER_JSON) -> dict[int, int]:
    from tokenizers.models import BPE

    vocab = tokenizer_json(path)["model"]["vocab"]
    pairs = _merge_pairs(path)
    bpe = BPE(vocab=vocab, merges=pairs, ignore_merges=False)
    enc = {b: ch for ch, b in byte_decoder().items()}
    # Only merges of at most 3 bytes can apply inside a 2- or 3-byte character,
    # and only tokens of at most 3 bytes are asked for their first use as an
    # operand: the other merges (most of them) are passed over.
    rank: dict[tuple[int, int], int] = {}
    new_id: dict[int, int] = {}
    first_use: dict[int, int] = {}
    for r, (a, b) in enumerate(pairs):
        if len(a) + len(b) <= 3:
            key = (vocab[a], vocab[b])
            if key in rank:
                continue
            rank[key] = r
            new_id[r] = vocab[a + b]
        for t in (a, b):
            if len(t) <= 3:
                first_use.setdefault(vocab[t], r)
    byte_id = {s[0]: i for i, s in enumerate(spellings(path)) if len(s) == 1}
    found = {}
    for t, s in enumerate(spellings(path)):
        try:
            c = s.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if len(c) != 1 or len(s) not in (2, 3):
            continue
        ids, top = _tiny_bpe([byte_id[b] for b in s], rank, new_id)
        hf = [tok.id for tok in bpe.tokenize("".join(enc[b] for b in s))]
        assert ids == hf, f"tiny BPE disagrees with HF on {c!r}: {ids} != {hf}"
        if hf == [t] and top < first_use.get(t, float("inf")):
            found[ord(c)] = t
    return found
