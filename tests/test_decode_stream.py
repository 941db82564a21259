"""Streaming decode (src/qwen4exp/parse/decode_stream.py) against HF `tokenizers`:
its `decode` and its `DecodeStream`, on the corpora with atoms interleaved,
and per step against CPython's strict UTF-8 decoder."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import corpora
import qwen4exp

IDS_PER_CORPUS = 40_000


def _interleaved(tok, name):
    """Corpus ids with atom ids dropped in at random places (often inside a
    character whose bytes span several ids)."""
    rng = random.Random(name)
    ids = []
    for doc in corpora.DOCUMENTS[name]():
        ids += tok.encode(doc)
        if len(ids) >= IDS_PER_CORPUS:
            break
    ids = ids[:IDS_PER_CORPUS]
    atoms = sorted(tok.atoms.values())
    spelled = tok.core.id_tables().text
    split = [k for k in range(1, len(ids)) if 0x80 <= spelled[ids[k]][0] <= 0xBF]  # starts mid-character
    for k in sorted(rng.sample(range(len(ids)), 300) + rng.sample(split, min(100, len(split))), reverse=True):
        ids.insert(k, rng.choice(atoms))
    return ids


def _stream(tok, ids, **kw):
    ds = tok.decode_stream(**kw)
    steps = [ds.step(i) for i in ids]
    return steps, ds.flush()


@pytest.mark.parametrize("name", sorted(corpora.CORPORA))
@pytest.mark.parametrize("skip", [False, True])
def test_corpora_with_atoms(tok, hf_full, name, skip):
    from tokenizers.decoders import DecodeStream

    ids = _interleaved(tok, name)
    steps, rest = _stream(tok, ids, skip_special=skip)
    expected = hf_full.decode(ids, skip_special_tokens=skip)
    assert "".join(steps) + rest == expected == tok.decode(ids, skip_special=skip)
    assert rest in ("", "\ufffd")
    # HF's DecodeStream never gets ahead of ours (it holds text back while its
    # window ends in U+FFFD; we return a character the moment it is complete)
    hf = DecodeStream(skip_special_tokens=skip)
    ours, theirs = "", ""
    for i, text in zip(ids, steps):
        ours += text
        theirs += hf.step(hf_full, i) or ""
        assert ours.startswith(theirs)
    assert ours.startswith(theirs) and (theirs == ours or ours.endswith("\ufffd"))


def test_skip_special_matches_hf_on_a_chat(tok, hf_full):
    chat = qwen4exp.render_chat([{"role": "user", "content": "a <|im_end|> b"},
                                 {"role": "assistant", "content": "ok", "reasoning_content": "r"}])
    ids = tok.encode_chat(chat).tolist()
    for skip in (False, True):
        assert tok.decode(ids, skip_special=skip) == hf_full.decode(ids, skip_special_tokens=skip)
        steps, rest = _stream(tok, ids, skip_special=skip)
        assert "".join(steps) + rest == tok.decode(ids, skip_special=skip)
    assert "<think>" in tok.decode(ids, skip_special=True)  # not special in Qwen3's table


def _expected_step_texts(tok, ids):
    """What each step must return, from CPython's strict decoder alone: all of
    the text except an unfinished character at the end ("unexpected end of
    data"), which is all that may be held."""
    out, done = [], ""
    for k in range(1, len(ids) + 1):
        data = tok.decode_bytes(ids[:k])
        cut = len(data)
        for j in range(1, 4):
            try:
                data[-j:].decode("utf-8")
            except UnicodeDecodeError as exc:
                if exc.reason == "unexpected end of data" and exc.start == 0 and j <= len(data):
                    cut = len(data) - j
                    break
        text = data[:cut].decode("utf-8", "replace")
        assert text.startswith(done)
        out.append(text[len(done) :])
        done = text
    return out


@pytest.fixture(scope="module")
def byte_pieces(tok):
    """Ids whose bytes are pieces of characters (lead bytes, continuations, both), plus atoms."""
    pieces = []
    spelled = tok.core.id_tables().text
    for i in range(tok.vocab_size - len(tok.atoms)):
        b = spelled[i]
        if b[:1] >= b"\x80" or b[-1:] >= b"\x80":
            try:
                b.decode("utf-8")
            except UnicodeDecodeError:
                pieces.append(i)
    return pieces[::5] + tok.encode("a😀é") + list(tok.atoms.values())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_each_step_returns_exactly_what_became_complete(tok, byte_pieces, data):
    ids = data.draw(st.lists(st.sampled_from(byte_pieces), max_size=30))
    steps, rest = _stream(tok, ids)
    assert steps == _expected_step_texts(tok, ids)
    assert "".join(steps) + rest == tok.decode(ids)


def test_invalid_bytes_are_replaced_at_once(tok):
    table = tok.core.id_tables().text
    by_bytes = {b: i for i, b in enumerate(table) if b is not None and len(b) == 1}
    ds = tok.decode_stream()
    # a surrogate prefix can never complete: CPython's incremental decoder waits, we do not
    assert ds.step(by_bytes[b"\xed"]) == ""
    assert ds.step(by_bytes[b"\xa0"]) == "\ufffd\ufffd"
    assert ds.step(by_bytes[b"\xf0"]) == ""
    assert ds.step(by_bytes[b"\x9f"]) == ""
    assert ds.flush() == "\ufffd"
    assert ds.step(by_bytes[b"a"]) == "a"  # the stream goes on after a flush


def test_bad_ids(tok):
    ds = tok.decode_stream()
    for bad in (-1, tok.vocab_size, 2**70):
        with pytest.raises(qwen4exp.Qwen4ExpError, match="not in the vocabulary"):
            ds.step(bad)
    for bad in ("1", 1.0, True, None):
        with pytest.raises(TypeError):
            ds.step(bad)
    import numpy as np

    assert ds.step(np.int64(tok.encode("x")[0])) == "x"
    with pytest.raises(TypeError):
        qwen4exp.DecodeStream([])
