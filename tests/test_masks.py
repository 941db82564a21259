"""Training masks: `RenderedChat.message_spans` and
`encode_chat(chat, return_masks=True)`.

The expectations are computed independently of the renderer and the mask
code: message turns are found in transformers' rendering of the Qwen3
template (tests/_chat_reference.py), and each token is placed by the byte
lengths of its own spelling (`decode_bytes` of one id at a time).
"""

from __future__ import annotations

import unicodedata

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings

import qwen4exp
from qwen4exp import MessageSpan, SegmentBuilder

import _chat_reference as ref
import _formats_reference as formats_ref
from helpers import ATOM_FREE, ORACLE_CASES, WITH_ATOMS, chat_requests, check_encoded, free_text, render_oracle

def reference_spans(request: dict) -> list[tuple[int, int, int, str]]:
    """Message spans of an atom-free request, read off the reference text (the
    template of the bundled vocab/) as the formats reference reads them."""
    return formats_ref.spans_in_text(ref.reference_text(request).encode("utf-8"),
                                     ref.normalise(request)["messages"], "qwen3")


@pytest.mark.parametrize("name", ATOM_FREE)
def test_masks_on_atom_free_oracle(tok, hf_nfc, name):
    request = ORACLE_CASES[name]["request"]
    chat = render_oracle(request)
    spans = reference_spans(request)
    assert [tuple(s) for s in chat.message_spans] == spans
    assert all(type(s) is MessageSpan for s in chat.message_spans)
    enc = check_encoded(tok, chat, spans, ref.scan_segments(ref.reference_text(request)), hf_nfc)
    # in an atom-free chat the control tokens are exactly the atom ids
    assert np.array_equal(enc.control_mask, np.isin(enc.ids, list(tok.atoms.values())))
    # every message's span holds at least its own <|im_start|> or <tool_response> token
    assert set(enc.message_index[enc.message_index >= 0]) == set(range(len(request["messages"])))


@pytest.mark.parametrize("name", WITH_ATOMS)
def test_masks_on_oracle_with_typed_atoms(tok, hf_nfc, name):
    """Typed atom spellings are DATA: same spans as the harmless twin (same
    byte lengths), and the control bytes are the twin's scanned markers."""
    request = ORACLE_CASES[name]["request"]
    twin = ref.harmless_twin(request)
    chat = render_oracle(request)
    assert [tuple(s) for s in chat.message_spans] == reference_spans(twin)
    check_encoded(tok, chat, reference_spans(twin), ref.scan_segments(ref.reference_text(twin)), hf_nfc)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(chat_requests(free_text))
def test_masks_random_atom_free(tok, hf_nfc, request_):
    assume(not ref.has_atom(request_))
    chat = render_oracle(request_)
    spans = reference_spans(request_)
    assert [tuple(s) for s in chat.message_spans] == spans
    check_encoded(tok, chat, spans, ref.scan_segments(ref.reference_text(request_)), hf_nfc)


def test_plain_encode_chat_unchanged(tok):
    chat = render_oracle(ORACLE_CASES[ATOM_FREE[0]]["request"])
    ids = tok.encode_chat(chat)
    assert type(ids) is np.ndarray and ids.dtype == np.int32
    assert np.array_equal(ids, tok.encode_chat(chat, return_masks=False))


def test_non_nfc_content_keeps_its_masks(tok):
    """A token is placed within its NFC-normalized segment: the masks equal
    those of the same conversation written in NFC (whose ids are the same)."""
    raw = "cafe\u0301 \u0958\u0958 Ω K e\u0301"
    msgs = [{"role": "system", "content": raw}, {"role": "user", "content": raw},
            {"role": "assistant", "content": raw, "reasoning_content": raw},
            {"role": "tool", "content": raw}, {"role": "user", "content": raw}]
    nfc = [{k: unicodedata.normalize("NFC", v) if k != "role" else v for k, v in m.items()} for m in msgs]
    got = tok.encode_chat(qwen4exp.render_chat(msgs, add_generation_prompt=True), return_masks=True)
    want = tok.encode_chat(qwen4exp.render_chat(nfc, add_generation_prompt=True), return_masks=True)
    for a, b in zip(got, want):
        assert np.array_equal(a, b)
    assert got.assistant_mask.any() and (got.message_index == 4).any()


def test_streams_without_messages(tok):
    chat = SegmentBuilder().control("<|im_start|>").text("user\nhi").control("<|im_end|>").build()
    assert chat.message_spans == ()
    enc = tok.encode_chat(chat, return_masks=True)
    assert enc.control_mask.tolist() == [True, False, False, False, True]
    assert (enc.message_index == -1).all() and not enc.assistant_mask.any()
    empty = tok.encode_chat(qwen4exp.RenderedChat(), return_masks=True)
    assert [len(a) for a in empty] == [0, 0, 0, 0] and qwen4exp.RenderedChat().message_spans == ()


def test_generation_prompt_and_preamble_belong_to_no_message(tok):
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    chat = qwen4exp.render_chat([{"role": "user", "content": "hi"}], tools=tools,
                                add_generation_prompt=True, enable_thinking=False)
    (span,) = chat.message_spans
    assert chat.data[span.start : span.end] == b"<|im_start|>user\nhi<|im_end|>\n"
    enc = tok.encode_chat(chat, return_masks=True)
    off = np.cumsum([0] + [len(tok.decode_bytes([int(i)])) for i in enc.ids[:-1]])
    assert (enc.message_index[off < span.start] == -1).all()
    assert (enc.message_index[off >= span.end] == -1).all()
    assert not enc.assistant_mask.any()


def test_spans_follow_render_chat_into():
    """The spans are part of the transcript: replaced by a successful
    render_chat_into, untouched by a failing one."""
    first = [{"role": "user", "content": "one"}, {"role": "assistant", "content": "two"}]
    out = qwen4exp.RenderedChat()
    qwen4exp.render_chat_into(first, out)
    before = out.message_spans
    assert before == qwen4exp.render_chat(first).message_spans and len(before) == 2
    with pytest.raises(qwen4exp.ChatFormatError):
        qwen4exp.render_chat_into([{"role": "user", "content": "a"}, {"role": "nobody"}], out)
    assert out.message_spans == before
    qwen4exp.render_chat_into([{"role": "system", "content": "s"}], out)
    assert out.message_spans == (MessageSpan(0, len(out.data), 0, "system"),)
