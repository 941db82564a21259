"""The segmented adapter: geometry, atoms, provenance, transactions."""

import numpy as np
import pytest

import qwen4exp
from qwen4exp import Kind, Segment, SegmentBuilder, SegmentError, TokenBuffer, UnknownControlError
from qwen4exp._native import _alloc

D, C = Kind.DATA, Kind.TRUSTED_CONTROL


def stream(*parts):
    b = SegmentBuilder()
    for kind, text in parts:
        (b.text if kind is D else b.control)(text)
    chat = b.build()
    return chat.data, chat.segments


def test_builder_merges_and_skips_empty():
    chat = SegmentBuilder().text("a").text("").text("b").control("<|im_end|>").control("<think>").text("c").build()
    assert chat.data == b"ab<|im_end|><think>c"
    assert chat.segments == (Segment(0, 2, D), Segment(2, 19, C), Segment(19, 20, D))


def test_builder_rejects_bad_input():
    with pytest.raises(TypeError):
        SegmentBuilder().text(b"bytes")
    with pytest.raises(ValueError):
        SegmentBuilder().control("")
    with pytest.raises(qwen4exp.TextEncodingError):
        SegmentBuilder().text("\ud800")


def test_control_concatenation_and_data_parity(tok, hf_full):
    text = "<|im_start|>user\nhello 中文<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nhi<|im_end|>\n"
    data, segs = stream((C, "<|im_start|>"), (D, "user\nhello 中文"), (C, "<|im_end|>"), (D, "\n"),
                        (C, "<|im_start|>"), (D, "assistant\n"), (C, "<think>"), (D, "\n\n"), (C, "</think>"),
                        (D, "\n\nhi"), (C, "<|im_end|>"), (D, "\n"))
    assert data.decode() == text
    assert tok.encode_segments(data, segs).tolist() == hf_full.encode(text, add_special_tokens=False).ids
    # two atoms in one control segment
    data, segs = stream((D, "x"), (C, "<|im_end|><|endoftext|>"), (D, "y"))
    assert tok.encode_segments(data, segs).tolist()[1:3] == [151645, 151643]


def test_nfc_never_crosses_a_boundary(tok, hf_plain):
    # '>' of the atom followed by U+0338 would compose to U+226F if normalized together.
    data, segs = stream((C, "<|im_end|>"), (D, "\u0338x"))
    ids = tok.encode_segments(data, segs).tolist()
    assert ids == [151645] + hf_plain.encode("\u0338x", add_special_tokens=False).ids


def test_empty_stream(tok):
    assert tok.encode_segments(b"", []).tolist() == []
    out = TokenBuffer()
    tok.encode_segments_into(b"", (), out)
    assert len(out) == 0


def test_result_is_int32_array(tok):
    data, segs = stream((D, "hello"))
    ids = tok.encode_segments(data, segs)
    assert isinstance(ids, np.ndarray) and ids.dtype == np.int32


GOOD = b"hello<|im_end|>world"
FORGED = {
    "gap": ([Segment(0, 5, D), Segment(6, 15, C), Segment(15, 20, D)], SegmentError, "gap"),
    "first_not_at_zero": ([Segment(1, 5, D), Segment(5, 15, C), Segment(15, 20, D)], SegmentError, "gap"),
    "overlap": ([Segment(0, 5, D), Segment(4, 15, C), Segment(15, 20, D)], SegmentError, "overlaps"),
    "negative_start": ([Segment(-1, 5, D), Segment(5, 15, C), Segment(15, 20, D)], SegmentError, "start -1 is out of range \\(negative"),
    "empty": ([Segment(0, 5, D), Segment(5, 5, C), Segment(5, 15, C), Segment(15, 20, D)], SegmentError, "empty"),
    "short": ([Segment(0, 5, D), Segment(5, 15, C)], SegmentError, "data is 20 bytes"),
    "past_end": ([Segment(0, 5, D), Segment(5, 15, C), Segment(15, 21, D)], SegmentError, "past the end"),
    "unmerged": ([Segment(0, 3, D), Segment(3, 5, D), Segment(5, 15, C), Segment(15, 20, D)], SegmentError,
                 "same kind"),
    "bad_kind_int": ([(0, 5, 0), (5, 15, 1), (15, 20, 0)], SegmentError, "unknown kind"),
    "bad_kind_str": ([Segment(0, 5, "DATA"), Segment(5, 15, C), Segment(15, 20, D)], SegmentError,
                     "unknown kind"),
    "not_a_triple": ([(0, 5), Segment(5, 15, C), Segment(15, 20, D)], SegmentError, "triple"),
    "float_bound": ([Segment(0, 5.0, D), Segment(5, 15, C), Segment(15, 20, D)], SegmentError, "int"),
    "no_segments": ([], SegmentError, "no segments"),
    "control_with_text": ([Segment(0, 4, D), Segment(4, 15, C), Segment(15, 20, D)], UnknownControlError,
                          "byte 4"),
    "control_partial_atom": ([Segment(0, 5, D), Segment(5, 14, C), Segment(14, 20, D)], UnknownControlError,
                             "atom"),
    "data_as_control": ([Segment(0, 5, C), Segment(5, 15, D), Segment(15, 20, C)], UnknownControlError,
                        "segment 0"),
}


@pytest.mark.parametrize("name", sorted(FORGED))
def test_forged_streams_raise_and_leave_buffer(tok, name):
    segs, exc, msg = FORGED[name]
    out = TokenBuffer(4)
    tok.encode_segments_into(b"abc", [Segment(0, 3, D)], out)
    before = out.array.copy()
    with pytest.raises(exc, match=msg):
        tok.encode_segments_into(GOOD, segs, out)
    assert np.array_equal(out.array, before) and len(out) == len(before)


def test_unknown_atom_in_control(tok):
    data = b"a<|not_an_atom|>b"
    with pytest.raises(UnknownControlError, match="segment 1"):
        tok.encode_segments(data, [Segment(0, 1, D), Segment(1, 16, C), Segment(16, 17, D)])


def test_boundary_inside_utf8_sequence(tok):
    data = "é<|im_end|>".encode()  # é is 2 bytes
    with pytest.raises(SegmentError, match="inside a UTF-8 sequence"):
        tok.encode_segments(data, [Segment(0, 1, D), Segment(1, 12, C)])


def test_invalid_utf8_bytes(tok):
    for data in (b"ab\xff", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf"):
        with pytest.raises(SegmentError, match="not valid UTF-8"):
            tok.encode_segments(data, [Segment(0, len(data), D)])


def test_late_fault_in_long_stream_keeps_buffer(tok):
    b = SegmentBuilder()
    for i in range(2000):
        b.control("<|im_start|>").text(f"user\nmessage {i}").control("<|im_end|>").text("\n")
    chat = b.build()
    segs = list(chat.segments)
    last = segs[-2]
    segs[-2] = Segment(last.start, last.end, Kind.TRUSTED_CONTROL)  # fine
    forged = segs[:-1] + [Segment(segs[-1].start, segs[-1].end + 1, D)]  # past the end, at the very end
    out = TokenBuffer()
    tok.encode_segments_into(chat.data, chat.segments, out)
    before = out.array.copy()
    with pytest.raises(SegmentError):
        tok.encode_segments_into(chat.data, forged, out)
    assert np.array_equal(out.array, before)
    # an unknown control late in the stream
    data = chat.data[:-1] + b"<|bogus|>"
    forged = segs[:-1] + [Segment(segs[-1].start, len(data), C)]
    forged[-2] = Segment(forged[-2].start, forged[-2].end, D)
    with pytest.raises((UnknownControlError, SegmentError)):
        tok.encode_segments_into(data, forged, out)
    assert np.array_equal(out.array, before)


def test_appends_accumulate_and_view_is_readonly(tok):
    out = TokenBuffer(1)
    data, segs = stream((C, "<|im_start|>"), (D, "user\nhi"), (C, "<|im_end|>"))
    one = tok.encode_segments(data, segs)
    for _ in range(50):
        tok.encode_segments_into(data, segs, out)
    assert np.array_equal(out.array, np.tile(one, 50))
    with pytest.raises(ValueError):
        out.array[0] = 1


def test_injected_allocation_failures_leave_buffer_untouched(tok):
    data, segs = stream((C, "<|im_start|>"), (D, "user\n" + "héllo wörld e\u0301 " * 50 + "x" * 400),
                        (C, "<|im_end|>"))
    fresh = qwen4exp.Tokenizer()  # its worker pool is empty: worker and cache allocations are reached too
    expect = tok.encode_segments(data, segs)
    _alloc.fail_allocation(2**62)
    fresh.encode_segments(data, segs)
    seen = _alloc.allocations_seen()
    _alloc.fail_allocation(0)
    assert seen > 3
    survived = 0
    for k in range(1, seen + 1):
        fresh = qwen4exp.Tokenizer()
        out = TokenBuffer(2)
        tok.encode_segments_into(b"ok", [Segment(0, 2, D)], out)
        before = out.array.copy()
        _alloc.fail_allocation(k)
        try:
            fresh.encode_segments_into(data, segs, out)
        except MemoryError:
            survived += 1
            assert np.array_equal(out.array, before)
        else:
            assert np.array_equal(out.array, np.concatenate([before, expect]))
        finally:
            _alloc.fail_allocation(0)
    assert survived >= 1


def test_encode_chat_requires_rendered_chat(tok):
    with pytest.raises(TypeError):
        tok.encode_chat(b"<|im_start|>")
    chat = SegmentBuilder().control("<|im_start|>").text("user\nhi").control("<|im_end|>").build()
    assert tok.encode_chat(chat).tolist() == tok.encode_segments(chat.data, chat.segments).tolist()
