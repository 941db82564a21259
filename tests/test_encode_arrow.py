"""Tokenizer.encode_arrow: Arrow string arrays in, list<int32> arrays out.

Every result is checked against HF tokenizers (the plain reference, both
vocabularies) row by row, and against `encode` where the input is an Arrow
shape the reference never sees (slices, chunks, nulls, large_string).
"""

import pytest

pa = pytest.importorskip("pyarrow")

import corpora  # noqa: E402
from qwen4exp import TextEncodingError  # noqa: E402

MIXED = [
    "hello world",
    "",
    "naïve café, déjà vu",
    "Привет, мир! 你好，世界。 こんにちは",
    "def f(x):\n    return x + 1\n",
    "e\u0301 not NFC, and the Kelvin sign \u212a",
    "  spaces   and\ttabs\r\n\r\n",
    "🙂👍🏽 emoji 🇫🇷",
    "a" * 3000,
    "<|im_start|>user hi <think>",
]


@pytest.fixture(scope="module")
def documents():
    docs = list(corpora.DOCUMENTS["multilingual"]())[:40] + list(corpora.DOCUMENTS["code"]())[:10]
    return MIXED + docs


def _hf_rows(vocab_hf, texts):
    present = [t for t in texts if t is not None]
    ids = iter(e.ids for e in vocab_hf.encode_batch(present, add_special_tokens=False))
    return [None if t is None else next(ids) for t in texts]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("large", [False, True])
def test_rows_match_the_reference(vocab_tok, vocab_hf, documents, threads, large):
    arr = pa.array(documents, type=pa.large_string() if large else pa.string())
    out = vocab_tok.encode_arrow(arr, num_threads=threads)
    assert out.type == pa.list_(pa.int32())
    assert len(out) == len(documents)
    assert out.to_pylist() == _hf_rows(vocab_hf, documents)


def test_list_of_str_with_nulls(vocab_tok, vocab_hf):
    texts = ["one", None, "", "two words", None]
    out = vocab_tok.encode_arrow(texts, num_threads=2)
    assert isinstance(out, pa.ListArray)
    assert out.null_count == 2
    assert out.to_pylist() == _hf_rows(vocab_hf, texts)


@pytest.mark.parametrize("large", [False, True])
def test_slices_and_nulls(vocab_tok, vocab_hf, documents, large):
    texts = [None if i % 7 == 3 else d for i, d in enumerate(documents)]
    arr = pa.array(texts, type=pa.large_string() if large else pa.string())
    want = _hf_rows(vocab_hf, texts)
    for start, stop in [(0, len(texts)), (1, 9), (3, 4), (5, 5), (11, len(texts)), (13, 30)]:
        part = arr.slice(start, stop - start)
        out = vocab_tok.encode_arrow(part, num_threads=2)
        assert out.null_count == part.null_count
        assert out.to_pylist() == want[start:stop], (start, stop)


def test_null_rows_whose_offsets_span_bytes(vocab_tok):
    # Arrow lets a null row's offsets cover bytes; they are not read.
    data = pa.py_buffer(b"abcGARBAGEdef")
    offsets = pa.py_buffer(pa.array([0, 3, 10, 13], type=pa.int32()).buffers()[1])
    validity = pa.py_buffer(bytes([0b101]))
    arr = pa.Array.from_buffers(pa.string(), 3, [validity, offsets, data], null_count=1)
    assert vocab_tok.encode_arrow(arr).to_pylist() == [vocab_tok.encode("abc"), None, vocab_tok.encode("def")]


@pytest.mark.parametrize("threads", [1, 2])
def test_chunked_arrays(vocab_tok, vocab_hf, documents, threads):
    chunks = [documents[:5], [], documents[5:6], [], [], documents[6:], []]
    for kind in (pa.string(), pa.large_string()):
        arr = pa.chunked_array([pa.array(c, type=kind) for c in chunks], type=kind)
        out = vocab_tok.encode_arrow(arr, num_threads=threads)
        assert isinstance(out, pa.ChunkedArray)
        assert out.type == pa.list_(pa.int32())
        assert [len(c) for c in out.chunks] == [len(c) for c in chunks]
        assert out.to_pylist() == _hf_rows(vocab_hf, documents)


def test_chunked_array_without_chunks(vocab_tok):
    out = vocab_tok.encode_arrow(pa.chunked_array([], type=pa.large_string()))
    assert isinstance(out, pa.ChunkedArray) and len(out) == 0 and out.type == pa.list_(pa.int32())


def test_empty_inputs(vocab_tok):
    assert len(vocab_tok.encode_arrow([])) == 0
    assert vocab_tok.encode_arrow(pa.array([], type=pa.string())).to_pylist() == []
    assert vocab_tok.encode_arrow(pa.array(["", ""], type=pa.string())).to_pylist() == [[], []]
    assert vocab_tok.encode_arrow(pa.array([None, None], type=pa.large_string())).to_pylist() == [None, None]


def test_same_as_encode_on_many_rows(vocab_tok):
    # Enough rows for many tasks on both threads, in one array and sliced.
    docs = list(corpora.DOCUMENTS["multilingual"]()) + list(corpora.DOCUMENTS["code"]())
    rows = [line for d in docs[:300] for line in d.split("\n")]
    arr = pa.array(rows, type=pa.large_string())
    want = [vocab_tok.encode(r) for r in rows]
    assert vocab_tok.encode_arrow(arr, num_threads=2).to_pylist() == want
    assert vocab_tok.encode_arrow(arr.slice(777), num_threads=2).to_pylist() == want[777:]


def _with_bad_row(good_rows, bad: bytes, at: int, large=False):
    raw = [r.encode() for r in good_rows]
    raw.insert(at, bad)
    width = 8 if large else 4
    offsets = [0]
    for r in raw:
        offsets.append(offsets[-1] + len(r))
    off = pa.array(offsets, type=pa.int64() if large else pa.int32()).buffers()[1]
    assert off.size >= width * len(offsets)
    kind = pa.large_string() if large else pa.string()
    return pa.Array.from_buffers(kind, len(raw), [None, off, pa.py_buffer(b"".join(raw))], null_count=0)


@pytest.mark.parametrize("bad", [b"\xff", b"ok \xc3", b"\xed\xa0\x80 surrogate", b"\xc0\xaf overlong"])
@pytest.mark.parametrize("large", [False, True])
def test_invalid_utf8_row_is_named_and_nothing_returned(vocab_tok, bad, large):
    good = ["first", "second row", "third"] * 40
    arr = _with_bad_row(good, bad, 57, large)
    with pytest.raises(TextEncodingError, match=r"strings\[57\] is not valid UTF-8"):
        vocab_tok.encode_arrow(arr, num_threads=2)
    # in a chunked array the row is counted over the whole array
    chunked = pa.chunked_array([pa.array(good[:10], type=arr.type), arr])
    with pytest.raises(TextEncodingError, match=r"strings\[67\]"):
        vocab_tok.encode_arrow(chunked, num_threads=2)
    # the same rows without the bad one encode
    assert vocab_tok.encode_arrow(arr.slice(58), num_threads=2).to_pylist() == [vocab_tok.encode(t) for t in good[57:]]


def test_lone_surrogate_in_a_list(vocab_tok):
    with pytest.raises(TextEncodingError, match=r"strings\[1\]: not valid Unicode \(lone surrogate U\+D800"):
        vocab_tok.encode_arrow(["fine", "bad \ud800"])


def test_wrong_types(vocab_tok):
    with pytest.raises(TypeError, match="strings"):
        vocab_tok.encode_arrow(pa.array([1, 2, 3]))
    with pytest.raises(TypeError, match=r"strings\[1\] is int, not str"):
        vocab_tok.encode_arrow(["a", 3])
    with pytest.raises(TypeError):
        vocab_tok.encode_arrow("just one text")
    with pytest.raises(ValueError):
        vocab_tok.encode_arrow(["a"], num_threads=0)


def test_offsets_outside_the_data_are_refused(vocab_tok):
    # (pyarrow checks the last offset only: the first row ends past the data)
    off = pa.array([0, 50, 2], type=pa.int32()).buffers()[1]
    arr = pa.Array.from_buffers(pa.string(), 2, [None, off, pa.py_buffer(b"abcd")], null_count=0)
    with pytest.raises(ValueError, match="outside its data"):
        vocab_tok.encode_arrow(arr)


def test_result_owns_its_buffers(vocab_tok):
    arr = pa.array(["some text", "more text"])
    out = vocab_tok.encode_arrow(arr)
    del arr
    assert out.to_pylist() == [vocab_tok.encode("some text"), vocab_tok.encode("more text")]
    out.validate(full=True)


def test_invalid_rows_are_listed_over_chunks():
    from qwen4exp.encode.arrow import invalid_rows

    good = ["a", "b c", ""] * 5
    bad = _with_bad_row(good, b"x\xfe", 4)
    chunked = pa.chunked_array([pa.array(["ok", None]), bad, _with_bad_row(good[:3], b"\xc3", 0)])
    assert invalid_rows(chunked).tolist() == [2 + 4, 2 + len(bad)]
    assert invalid_rows(pa.array(["fine", None])).tolist() == []


def test_buffer_helpers_match_pyarrow():
    """The buffer readers the batch job uses instead of pa.array / to_numpy
    (arrow.py) agree with pyarrow's own conversions, on sliced arrays whose
    bitmaps start mid-byte and on chunked arrays with an empty chunk."""
    import numpy as np

    from qwen4exp.encode.arrow import bool_array, int_array, list_array, list_numpy, offsets_numpy, valid_numpy

    a = pa.array(["a", None, "b", None, "c", "d", None, "e", "f", "g"] * 3)
    for off in range(12):
        s = a.slice(off, 13)
        assert valid_numpy(s).tolist() == [x is not None for x in s.to_pylist()]
    ch = pa.chunked_array([a.slice(3, 5), a.slice(1, 9), pa.array([], pa.string())])
    assert valid_numpy(ch).tolist() == [x is not None for x in ch.to_pylist()]
    mask = np.arange(37) % 3 == 1
    assert bool_array(pa, mask).to_pylist() == mask.tolist()
    assert int_array(pa, np.arange(5)[::2], pa.int64()).to_pylist() == [0, 2, 4]
    lists = list_array(pa, np.array([0, 2, 2, 5]), np.array([7, 8, 9, 10, 11]))
    assert lists.to_pylist() == [[7, 8], [], [9, 10, 11]]
    for piece in (lists, lists.slice(1), lists.slice(2, 1), pa.array([[1], [2, 3], [4, 5, 6]], pa.list_(pa.int32())).slice(1)):
        offsets, values = list_numpy(piece)
        assert [values[offsets[k]:offsets[k + 1]].tolist() for k in range(len(piece))] == piece.to_pylist()
    texts = ["", "é", "abc", "中文", "", "x" * 40]
    for kind in (pa.string(), pa.large_string()):
        whole = pa.array(texts, kind)
        for off in range(len(texts)):
            piece = whole.slice(off)
            ends = offsets_numpy(piece)
            assert ends.dtype.itemsize == (8 if kind == pa.large_string() else 4)
            assert (ends[1:] - ends[:-1]).tolist() == [len(t.encode()) for t in texts[off:]]


def test_utf8_check_agrees_with_the_strict_codec_on_every_lead_and_second_byte():
    """The native UTF-8 check (rows refused by encode_arrow) against Python's
    strict decoder: every 1- and 2-byte string, every 3- and 4-byte lead with
    every second byte and the later bytes from each byte class, each between
    runs of ASCII of varied lengths, so sequences fall at every position of
    the 32- and 8-byte ASCII scans."""
    import itertools

    import numpy as np

    from qwen4exp.encode.arrow import invalid_rows

    edges = (0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xF0, 0xFF)
    seqs = [bytes([a]) for a in range(256)] + [bytes([a, b]) for a in range(256) for b in range(256)]
    seqs += [bytes([a, b, c]) for a in range(0xE0, 0x100) for b in range(256) for c in edges]
    seqs += [bytes([a, b, c, d]) for a in range(0xF0, 0x100) for b in range(256) for c, d in
             itertools.product(edges, repeat=2)]
    rows = [b"a" * (k % 41) + s + b"b" * ((7 * k) % 37) for k, s in enumerate(seqs)]
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(r) for r in rows])
    array = pa.Array.from_buffers(pa.large_string(), len(rows),
                                  [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(rows))])
    want = []
    for k, r in enumerate(rows):
        try:
            r.decode("utf-8")
        except UnicodeDecodeError:
            want.append(k)
    assert invalid_rows(array).tolist() == want
