"""encode() of a text from a few KB cuts it into parts and encodes them on the
crew's threads (pyx/_encoder.pyx encode_parts, pyx/_crew.pyx;
docs/ARCHITECTURE.md, "Texts across threads"). The ids must be the reference's.

Checked against Hugging Face `tokenizers` on both vocabularies: every cut the
rule allows is a piece start of the reference pre-tokenizer and leaves NFC
parts, over every scalar value in contexts and over the corpora; texts split
on purpose (the threshold lowered to 2 bytes) give the reference ids;
concurrent callers and a forked child still get them.
"""

import contextlib
import multiprocessing
import os
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import corpora
from _hf_reference import hf_split
from helpers import SCALAR_SAMPLE, SCALARS




@pytest.fixture(scope="module")
def split(vocab):
    return hf_split(qwen35=vocab == "qwen3.6")


@contextlib.contextmanager
def splitting_everything():
    """encode() splits every text of 2 bytes or more."""
    from qwen4exp._native import _encoder

    old = _encoder._set_split_min(2)
    try:
        yield
    finally:
        _encoder._set_split_min(*old)


@pytest.fixture
def split_everything():
    with splitting_everything():
        yield


def byte_starts(split, text: str) -> np.ndarray:
    """UTF-8 byte offsets where the reference pre-tokenizer starts a piece."""
    cps = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    widths = 1 + (cps >= 0x80) + (cps >= 0x800) + (cps >= 0x10000)
    offsets = np.concatenate(([0], np.cumsum(widths)))
    chars = np.fromiter((start for _, (start, _) in split.pre_tokenize_str(text)), dtype=np.int64)
    return offsets[chars]


def check_cuts(vocab_tok, split, hf_nfc, text: str) -> int:
    """Every cut the rule allows in NFC(text) starts a reference piece, and the
    parts it makes are NFC; returns the number of cuts."""
    norm = hf_nfc(text)
    data = norm.encode()
    cuts = np.array(vocab_tok.core.native.part_bounds(data, len(data)), dtype=np.int64)[1:-1]
    if not len(cuts):
        return 0
    starts = byte_starts(split, norm)
    bad = cuts[~np.isin(cuts, starts)]
    assert not len(bad), f"{len(bad)} cuts inside a piece, first at {bad[0]}: {data[bad[0] - 8:bad[0] + 8]!r}"
    bounds = [0, *cuts.tolist(), len(data)]
    parts = [data[a:b].decode() for a, b in zip(bounds, bounds[1:])]
    assert "".join(hf_nfc(p) for p in parts) == norm
    return len(cuts)


# Around each scalar value: after a letter, before a space, a letter and a
# newline, after a newline and an apostrophe, doubled, with a mark after it.
CONTEXT = "a{c} {c}b\n{c}'{c}{c}\u0301 "


def _check_scalars(vocab_tok, split, hf_nfc, scalars):
    total = 0
    for k in range(0, len(scalars), 1 << 16):
        text = "".join(CONTEXT.format(c=chr(cp)) for cp in scalars[k:k + (1 << 16)])
        total += check_cuts(vocab_tok, split, hf_nfc, text)
    assert total > len(scalars)  # the rule cuts often: the test is not vacuous


def _marks() -> list[int]:
    from qwen4exp._native._pretokenize import char_class

    return [cp for cp in SCALARS if char_class(cp) & 16]  # 16: \p{M}, where Qwen3.6's pattern differs


def test_cuts_around_sampled_scalars_and_every_mark(vocab_tok, split, hf_nfc):
    """The default run's share of the two exhaustive tests below."""
    _check_scalars(vocab_tok, split, hf_nfc, sorted(set(SCALAR_SAMPLE) | set(_marks())))


@pytest.mark.slow
def test_cuts_around_every_scalar_value(vocab_tok, split, hf_nfc):
    _check_scalars(vocab_tok, split, hf_nfc, SCALARS)


@pytest.mark.slow
def test_cuts_around_every_mark_and_non_ascii_bmp_letter(vocab_tok, split, hf_nfc):
    """Every scalar value of the BMP from U+0300 (Qwen3.6's pattern differs in marks)."""
    _check_scalars(vocab_tok, split, hf_nfc, [cp for cp in SCALARS if 0x300 <= cp < 0x10000])


def check_raw_cuts(vocab_tok, hf_nfc, text: str) -> int:
    """The cuts the rule allows in text as it is (not normalized) that are
    before a stable starter (what encode_parts checks before encoding parts
    it has not normalized) leave parts whose NFCs joined are NFC(text), and
    a text whose parts NFC leaves unchanged is NFC itself; returns how many
    such cuts there are."""
    from qwen4exp._native import _normalize

    data = text.encode()
    cuts = np.array(vocab_tok.core.native.part_bounds(data, len(data)), dtype=np.int64)[1:-1]
    cuts = cuts[_normalize.stable_at(data, cuts)]
    bounds = [0, *cuts.tolist(), len(data)]
    parts = [data[a:b].decode() for a, b in zip(bounds, bounds[1:])]
    normal = [hf_nfc(p) for p in parts]
    assert "".join(normal) == hf_nfc(text)
    if normal == parts:
        assert hf_nfc(text) == text
    return len(cuts)


def test_stable_cuts_around_sampled_scalars_and_every_mark(vocab_tok, hf_nfc):
    """The default run's share of the exhaustive test below."""
    _check_raw_scalars(vocab_tok, hf_nfc, sorted(set(SCALAR_SAMPLE) | set(_marks())))


@pytest.mark.slow
def test_stable_cuts_around_every_non_ascii_bmp_scalar(vocab_tok, hf_nfc):
    """Every scalar value of the BMP from U+0300 in the contexts above, text
    not normalized first."""
    _check_raw_scalars(vocab_tok, hf_nfc, [cp for cp in SCALARS if 0x300 <= cp < 0x10000])


def _check_raw_scalars(vocab_tok, hf_nfc, scalars):
    total = 0
    for k in range(0, len(scalars), 1 << 16):
        total += check_raw_cuts(vocab_tok, hf_nfc, "".join(CONTEXT.format(c=chr(cp)) for cp in scalars[k:k + (1 << 16)]))
    assert total > len(scalars)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(st.characters(blacklist_categories=("Cs",)), max_size=80))
def test_stable_cuts_hypothesis(vocab_tok, hf_nfc, text):
    check_raw_cuts(vocab_tok, hf_nfc, text)


def test_parts_are_checked_for_nfc_in_parallel(vocab_tok, vocab_hf):
    """An NFC text is cut as it is and each thread checks its own part; a text
    NFC would change, or cut before a character that is not a stable
    starter, is normalized whole first (parts_redone counts those)."""
    import unicodedata

    docs = list(corpora.DOCUMENTS["multilingual"]())
    text = "".join(docs[:40])
    assert len(text.encode()) > 8 * 2048
    before = vocab_tok.core.native.parts_redone
    assert vocab_tok.encode(text) == vocab_hf.encode(text, add_special_tokens=False).ids
    assert vocab_tok.core.native.parts_redone == before
    late = len(text) * 7 // 8
    for changed in (text[:late] + "e\u0301" + text[late:],            # a part NFC changes
                    unicodedata.normalize("NFD", text),
                    ("word\u2000" * 4000)):                            # cuts before U+2000 (NFC: U+2002)
        assert vocab_tok.encode(changed) == vocab_hf.encode(changed, add_special_tokens=False).ids
        assert vocab_tok.core.native.parts_redone == before + 1
        before += 1


@pytest.mark.parametrize("vocab", ["qwen3", pytest.param("qwen3.6", marks=pytest.mark.slow)], indirect=True)
@pytest.mark.parametrize("name", ["code", "multilingual", "whitespace"])
def test_cuts_in_corpora(vocab_tok, split, hf_nfc, name):
    """(Qwen3.6 under slow: its pattern differs in marks only, which the
    default run checks in every context. Of the 3 MB code corpus, every
    other document; all of it under slow.)"""
    docs = corpora.DOCUMENTS[name]()
    assert check_cuts(vocab_tok, split, hf_nfc, "".join(docs[::2] if name == "code" else docs)) > 100


@pytest.mark.slow
def test_cuts_in_the_whole_code_corpus(vocab_tok, split, hf_nfc):
    assert check_cuts(vocab_tok, split, hf_nfc, corpora.code_corpus()) > 100


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(st.characters(blacklist_categories=("Cs",)), max_size=80))
def test_cuts_hypothesis(vocab_tok, split, hf_nfc, text):
    check_cuts(vocab_tok, split, hf_nfc, text)


@pytest.mark.parametrize("every", [3, pytest.param(1, marks=pytest.mark.slow)])
def test_split_corpus_documents(vocab_tok, vocab_hf, split_everything, every):
    """Every document of the corpora (every third in the default run), each
    split (threshold 2 bytes), NFC or not."""
    import unicodedata

    docs = (list(corpora.DOCUMENTS["code"]()) + list(corpora.DOCUMENTS["multilingual"]()))[::every]
    ref = [e.ids for e in vocab_hf.encode_batch(docs, add_special_tokens=False)]
    assert [vocab_tok.encode(d) for d in docs] == ref
    nfd = [unicodedata.normalize("NFD", d) for d in docs[-200:]]
    ref = [e.ids for e in vocab_hf.encode_batch(nfd, add_special_tokens=False)]
    assert [vocab_tok.encode(d) for d in nfd] == ref


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(st.characters(blacklist_categories=("Cs",)), max_size=80))
def test_split_hypothesis(vocab_tok, vocab_hf, text):
    with splitting_everything():
        assert vocab_tok.encode(text) == vocab_hf.encode(text, add_special_tokens=False).ids


def test_default_threshold_splits_documents(vocab_tok, vocab_hf):
    """With the default threshold the larger documents take the split path."""
    docs = [d for d in corpora.DOCUMENTS["code"]() if len(d.encode()) >= 2048][:40]
    assert len(docs) >= 20
    assert [vocab_tok.encode(d) for d in docs] == [e.ids for e in vocab_hf.encode_batch(docs, add_special_tokens=False)]


def test_concurrent_callers(vocab_tok, vocab_hf):
    """Python threads splitting texts at once share the crew (a caller that
    finds every member busy encodes its parts itself)."""
    docs = [d for d in corpora.DOCUMENTS["code"]() if len(d.encode()) >= 4096][:24]
    ref = [e.ids for e in vocab_hf.encode_batch(docs, add_special_tokens=False)]
    results = {}

    def run(k):
        results[k] = [vocab_tok.encode(d) for d in docs[k::4]]

    threads = [threading.Thread(target=run, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    for k in range(4):
        assert results[k] == ref[k::4]


def _child_encode(args):
    vocab, docs = args
    import qwen4exp

    return [qwen4exp.Tokenizer(vocab).encode(d) for d in docs]


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
@pytest.mark.parametrize("vocab", ["qwen3", pytest.param("qwen3.6", marks=pytest.mark.slow)], indirect=True)
def test_forked_child_has_a_crew(vocab_tok, vocab_hf, vocab):
    """The crew's threads do not survive fork: a child forked after the parent
    used them starts its own, and neither hangs."""
    docs = [d for d in corpora.DOCUMENTS["code"]() if len(d.encode()) >= 8192][:6]
    assert vocab_tok.encode(docs[0])  # the parent's crew is running
    ref = [e.ids for e in vocab_hf.encode_batch(docs, add_special_tokens=False)]
    with multiprocessing.get_context("fork").Pool(1) as pool:
        got = pool.apply_async(_child_encode, ((vocab, docs),)).get(timeout=120)
    assert got == ref
    assert os.getpid()  # the parent still splits after the fork
    assert [vocab_tok.encode(d) for d in docs] == ref


def test_encode_threads_option(vocab_hf, vocab):
    """encode_threads=1 keeps encode() on the calling thread; other values are
    used as given, survive pickling, and bad ones are refused by name."""
    import pickle

    import qwen4exp

    one = qwen4exp.Tokenizer(vocab, encode_threads=1)
    assert one.core.native.encode_threads == 1
    three = pickle.loads(pickle.dumps(qwen4exp.Tokenizer(vocab, encode_threads=3)))
    assert three.core.native.encode_threads == 3
    assert qwen4exp.Tokenizer(vocab).core.native.encode_threads == len(os.sched_getaffinity(0))
    docs = [d for d in corpora.DOCUMENTS["multilingual"]() if len(d.encode()) >= 2048][:30]
    ref = [e.ids for e in vocab_hf.encode_batch(docs, add_special_tokens=False)]
    assert [one.encode(d) for d in docs] == ref
    assert [three.encode(d) for d in docs] == ref
    for bad in (0, -1, True, 1.5, "2"):
        with pytest.raises(ValueError, match="encode_threads"):
            qwen4exp.Tokenizer(vocab, encode_threads=bad)


def test_result_items_are_the_static_ints(vocab_tok):
    """Every list (one call, a split text joined from its parts, a batch) holds
    the process's static int object of each id: the same object for the same
    id everywhere, an exact int of the right value, with a refcount that no
    number of dropped lists brings near zero (docs/ARCHITECTURE.md, "Lists of
    ids"). After thousands of lists die, the objects are intact."""
    import gc
    import sys

    docs = [d for d in corpora.DOCUMENTS["code"]() if len(d.encode()) >= 600][:40]
    probe = vocab_tok.encode("def return self the , (")
    lists = vocab_tok.encode_batch(docs, num_threads=2) + [vocab_tok.encode(docs[0] * 3), vocab_tok.encode(docs[1])]
    seen = {}
    for ids in lists + [probe]:
        for x in ids:
            assert type(x) is int
            assert seen.setdefault(x, x) is x
    assert all(sys.getrefcount(x) > 2**40 for x in seen.values())
    dropped = sum(len(ids) for ids in lists)
    for _ in range(20):  # each list dies as the next replaces it (lists of ints hold no cycles)
        lists = vocab_tok.encode_batch(docs, num_threads=2)
    del lists
    gc.collect()
    assert dropped * 20 > 10**6
    again = vocab_tok.encode("def return self the , (")
    assert again == probe and all(a is b for a, b in zip(again, probe))
    assert [x + 0 for x in probe] == [int(str(x)) for x in probe]
    assert all(sys.getrefcount(x) > 2**40 for x in probe)


def test_lists_without_static_ints():
    """Ids past the static block, and every id in builds without static
    objects, become new ints of the right value that the list owns."""
    import sys

    from qwen4exp._native import _pylist

    import qwen4exp

    qwen4exp.Tokenizer()  # the block exists
    ids = [0, 1, 255, 256, 151642, 2**20, 2**31 - 1, 7, 0]
    static = _pylist.list_of(ids)
    assert static == ids and static[0] is static[-1]
    assert sys.getrefcount(static[0]) > 2**40
    assert sys.getrefcount(static[5]) == sys.getrefcount(static[6]) < 10  # beyond the block
    fresh = _pylist.list_of(ids, static=False)
    assert fresh == ids and all(type(x) is int for x in fresh)
    assert all(sys.getrefcount(x) < 2**40 for x in fresh)
    assert _pylist.list_of([]) == [] and _pylist.list_of([], static=False) == []
