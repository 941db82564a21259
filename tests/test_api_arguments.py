"""numpy scalars and str subclasses given to every public function.

What a caller gets from numpy (`numpy.str_` from a string array, `numpy.int64`
counts, `numpy.bool_` flags) must work wherever the plain Python type does and
give exactly the same result; a str subclass that overrides methods
(`isascii`, `strip`, `encode`, `__str__`, ...) must be treated as its plain
text, never have its overrides run on the data path, and never surface a raw
UnicodeEncodeError or TypeError. The expected results are those of the plain
types, which the parity suites check against HF tokenizers and transformers.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import qwen4exp
from qwen4exp import Kind, Segment, SegmentBuilder, TextEncodingError, TokenBuffer, Tokenizer
from qwen4exp.render.chat import render_chat, render_chat_into


class Hostile(str):
    """A str subclass whose overrides all lie or raise."""

    def isascii(self):
        return True

    def strip(self, *a):
        raise TypeError("strip overridden")

    lstrip = rstrip = strip

    def encode(self, *a, **k):
        return b"forged"

    def __str__(self):
        return "forged"

    def __iter__(self):
        raise TypeError("iter overridden")


TEXT = "Grüße, e\u0301 \u4e2d\u6587 <|im_end|> 123\n\n"
STR_TYPES = [np.str_, Hostile]
INT_TYPES = [np.int8, np.int32, np.int64, np.uint16, np.uint64]


@pytest.mark.parametrize("cls", STR_TYPES)
def test_text_functions_take_str_subclasses(tok, cls):
    s = cls(TEXT)
    assert tok.encode(s) == tok.encode(TEXT)
    assert tok.count(s) == tok.count(TEXT)
    assert tok.encode_batch([s, cls("abc")], num_threads=2) == tok.encode_batch([TEXT, "abc"], num_threads=2)
    b = SegmentBuilder().control(cls("<|im_start|>")).text(s).build()
    assert b == SegmentBuilder().control("<|im_start|>").text(TEXT).build()


@pytest.mark.parametrize("cls", STR_TYPES)
def test_lone_surrogate_in_subclass_is_a_clear_error(tok, cls):
    bad = cls("ok \ud800 x")
    for call in (tok.encode, tok.count, lambda t: tok.encode_batch([t]), SegmentBuilder().text):
        with pytest.raises(TextEncodingError, match="surrogate"):
            call(bad)
    with pytest.raises(TextEncodingError, match=r"messages\[0\]\.content"):
        render_chat([{"role": "user", "content": bad}])


def test_numpy_string_array_as_batch(tok):
    arr = np.array([TEXT, "abc", ""])
    assert tok.encode_batch(arr, num_threads=np.int64(2)) == [tok.encode(TEXT), tok.encode("abc"), []]


def test_single_string_is_not_a_batch(tok):
    for bad in ("abc", np.str_("abc"), b"abc"):
        with pytest.raises(TypeError, match="not a single"):
            tok.encode_batch(bad)


@pytest.mark.parametrize("cls", STR_TYPES)
def test_chat_functions_take_str_subclasses(tok, cls):
    plain = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": TEXT},
        {"role": "assistant", "content": "\n\nok", "reasoning_content": "\nhm\n"},
        {"role": "user", "content": [{"type": "text", "text": TEXT}]},
    ]

    def wrap(x):
        if isinstance(x, str):
            return cls(x)
        if isinstance(x, dict):
            return {cls(k): wrap(v) for k, v in x.items()}
        return [wrap(v) for v in x]

    want = render_chat(plain, add_generation_prompt=True)
    got = render_chat(wrap(plain), add_generation_prompt=True)
    assert got == want and got.data == want.data
    out = render_chat([{"role": "user", "content": "x"}])
    render_chat_into(wrap(plain), out, add_generation_prompt=True)
    assert out == want
    assert np.array_equal(tok.encode_chat(got), tok.encode_chat(want))


@pytest.mark.parametrize("flag", [np.bool_(True), np.bool_(False)])
def test_numpy_bool_options(flag):
    msgs = [{"role": "user", "content": "hi"}]
    got = render_chat(msgs, add_generation_prompt=flag, enable_thinking=flag)
    assert got == render_chat(msgs, add_generation_prompt=bool(flag), enable_thinking=bool(flag))


def test_non_bool_option_names_its_type():
    with pytest.raises(qwen4exp.ChatFormatError, match=r"must be a bool, not numpy\.int64"):
        render_chat([{"role": "user", "content": "hi"}], enable_thinking=np.int64(1))
    with pytest.raises(qwen4exp.ChatFormatError, match="must be a bool, not int"):
        render_chat([{"role": "user", "content": "hi"}], add_generation_prompt=1)


@pytest.mark.parametrize("itype", INT_TYPES)
def test_numpy_integers_wherever_ints_go(tok, itype):
    texts = [TEXT, "abc"]
    assert tok.encode_batch(texts, num_threads=itype(2)) == tok.encode_batch(texts, num_threads=2)
    chats = [render_chat([{"role": "user", "content": t}]) for t in texts]
    got = tok.encode_chats(chats, num_threads=itype(3))
    assert [g.tolist() for g in got] == [tok.encode_chat(c).tolist() for c in chats]
    ids = tok.encode(TEXT)
    assert tok.decode([itype(i) for i in ids if i <= np.iinfo(itype).max]) == tok.decode(
        [i for i in ids if i <= np.iinfo(itype).max]
    )
    stream = SegmentBuilder().control("<|im_start|>").text("user\nhi").build()
    segs = [Segment(itype(s), itype(e), k) for s, e, k in stream.segments]
    assert np.array_equal(tok.encode_segments(stream.data, segs), tok.encode_chat(stream))
    buf = TokenBuffer(itype(4))
    tok.encode_segments_into(stream.data, segs, buf)
    assert buf.tolist() == tok.encode_chat(stream).tolist()
    assert Tokenizer(cache_size=itype(64)).encode(TEXT) == tok.encode(TEXT)


@pytest.mark.parametrize("bad", [np.bool_(True), np.float64(2.0), np.int64(0), np.int64(-3), "2"])
def test_bad_numpy_thread_counts_are_value_errors(tok, bad):
    with pytest.raises(ValueError, match="num_threads"):
        tok.encode_batch(["a"], num_threads=bad)


def test_negative_segment_bounds_are_named(tok):
    with pytest.raises(qwen4exp.SegmentError, match="start -1 is out of range"):
        tok.encode_segments(b"abc", [Segment(-1, 3, Kind.DATA)])
    with pytest.raises(qwen4exp.SegmentError, match="end -2 is out of range"):
        tok.encode_segments(b"abc", [Segment(0, np.int64(-2), Kind.DATA)])


def test_reprs(tok, hf_full):
    chat = render_chat([{"role": "user", "content": "hi"}], add_generation_prompt=True)
    assert repr(chat) == f"RenderedChat({len(chat.data)} bytes, {len(chat.segments)} segments)"
    n_atoms = len(hf_full.get_added_tokens_decoder())
    n_bpe = hf_full.get_vocab_size(with_added_tokens=False)
    assert repr(tok) == f"Tokenizer({n_bpe} BPE tokens, {n_atoms} atoms, vocab_size={n_bpe + n_atoms})"
    buf = TokenBuffer()
    assert repr(buf) == "TokenBuffer(0 tokens: [])"
    buf._append(np.arange(10, dtype=np.int32))
    assert repr(buf) == "TokenBuffer(10 tokens: [0, 1, 2, 3, 4, 5, 6, 7, ...])"


def test_token_buffer_shared_between_threads(tok):
    """Appends from several threads are all kept, each whole."""
    stream = SegmentBuilder().control("<|im_start|>").text("user\n" + TEXT).control("<|im_end|>").build()
    one = tok.encode_chat(stream).tolist()
    buf = TokenBuffer(1)
    n_threads, per_thread = 8, 300
    start = threading.Barrier(n_threads)

    def work():
        start.wait()
        for _ in range(per_thread):
            tok.encode_segments_into(stream.data, stream.segments, buf)

    threads = [threading.Thread(target=work) for _ in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = buf.tolist()
    assert len(got) == n_threads * per_thread * len(one)
    assert all(got[k : k + len(one)] == one for k in range(0, len(got), len(one)))
