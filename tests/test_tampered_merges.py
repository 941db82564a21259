"""A tokenizer.json whose merges were tampered with (repeated, swapped,
moved, deleted) against HF `tokenizers` loading the same file, on real text.

A merge's rank is its place in the list. A merge listed twice used to keep
its first rank here while HF tokenizers 0.22 keeps the last (it builds its
merge map in list order, each entry replacing the one before), so the ids of
plain text differed. The vocabulary is a 1,000-token cut of Qwen3's
(tests/_small_vocab.py), its ~700 merges tampered with by a seeded random
generator; each tampering must change HF's ids somewhere in the texts (from
the file as it was, or, for repeated merges, from reading each at its first
place), else it would test nothing, and ours must follow.
"""

from __future__ import annotations

import json
import random

import pytest
from tokenizers import Tokenizer as HFTokenizer

import corpora
import qwen4exp
from _small_vocab import small_tokenizer_json


def _duplicate(merges, rnd):
    for _ in range(40):  # a copy later in the list, at the end, or a third time
        i = rnd.randrange(len(merges))
        merges.insert(rnd.randrange(i + 1, len(merges) + 1), merges[i])
    merges.append(merges[rnd.randrange(len(merges))])


def _duplicate_earlier(merges, rnd):
    for _ in range(40):  # a copy before the original: the later (original) place must win
        i = rnd.randrange(1, len(merges))
        merges.insert(rnd.randrange(i), merges[i])


def _swap(merges, rnd):
    for _ in range(40):
        i, j = rnd.randrange(len(merges)), rnd.randrange(len(merges))
        merges[i], merges[j] = merges[j], merges[i]


def _move(merges, rnd):
    for _ in range(40):
        merges.insert(rnd.randrange(len(merges)), merges.pop(rnd.randrange(len(merges))))


def _delete(merges, rnd):
    for _ in range(60):
        del merges[rnd.randrange(len(merges))]


def _all(merges, rnd):
    for tamper in (_duplicate, _swap, _delete, _duplicate_earlier):
        tamper(merges, rnd)


TAMPERINGS = {"duplicated": _duplicate, "duplicated earlier": _duplicate_earlier, "swapped": _swap,
              "moved": _move, "deleted": _delete, "all at once": _all}


@pytest.fixture(scope="module")
def texts():
    docs = corpora.multilingual_documents()[:12] + corpora.code_documents()[:6]
    return [d[:4000] for d in docs] + ["the then there these those", "in inn inside  ing"]


def _hf_plain(tok: dict) -> HFTokenizer:
    """HF tokenizers on the file without its added tokens: text is DATA."""
    return HFTokenizer.from_str(json.dumps({**tok, "added_tokens": []}))


def _ids(hf: HFTokenizer, texts) -> list[list[int]]:
    return [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]


@pytest.mark.parametrize("kind", sorted(TAMPERINGS))
@pytest.mark.parametrize("seed", [1, pytest.param(2, marks=pytest.mark.slow), pytest.param(3, marks=pytest.mark.slow)])
def test_tampered_merges_encode_as_hf(tmp_path, monkeypatch, texts, kind, seed):
    monkeypatch.setenv("QWEN4EXP_CACHE", str(tmp_path / "cache"))
    original = small_tokenizer_json()
    tampered = small_tokenizer_json()
    TAMPERINGS[kind](tampered["model"]["merges"], random.Random(f"{kind}-{seed}"))
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(tampered), encoding="utf-8")

    ours = qwen4exp.Tokenizer.from_file(str(path))
    want = _ids(_hf_plain(tampered), texts)
    # the tampering must matter on these texts: against the file as it was, and where
    # merges repeat, against reading each at its first place (what qwen4exp did)
    merges = tampered["model"]["merges"]
    first_places = [m for k, m in enumerate(merges) if m not in merges[:k]]
    if len(first_places) < len(merges):
        assert want != _ids(_hf_plain({**tampered, "model": {**tampered["model"], "merges": first_places}}), texts)
    else:
        assert want != _ids(_hf_plain(original), texts), "this tampering changes nothing on these texts"
    assert ours.encode_batch(texts) == want
    assert [ours.encode(t) for t in texts[:4]] == want[:4]
    assert [ours.count(t) for t in texts] == [len(ids) for ids in want]
