"""Incremental chat encoding: `Tokenizer.chat_encoder()`.

Every result is compared with a full `encode_chat` of the same chat, over
random edit sequences of the kinds a server sees: a turn appended, a message
in the middle edited, the reasoning of an older turn dropped (as the template
does once a new query arrives), tools switched, the generation prompt
toggled, the tail cut off (regenerate).
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import qwen4exp
from qwen4exp import SegmentBuilder
from qwen4exp.encode.chat_encoder import ChatEncoder

from helpers import ATOM_FREE, ORACLE_CASES, atom_text, reference_ids, render_oracle

TOOLS_A = [{"type": "function", "function": {"name": "search", "parameters": {"q": "string"}}}]
TOOLS_B = TOOLS_A + [{"type": "function", "function": {"name": "fetch", "description": "get <url>"}}]


def _assistant(draw):
    msg = {"role": "assistant", "content": draw(atom_text)}
    if draw(st.booleans()):
        msg["reasoning_content"] = draw(atom_text)
    if draw(st.integers(0, 3)) == 0:
        msg["tool_calls"] = [{"name": draw(atom_text.filter(bool)), "arguments": {"q": draw(atom_text)}}]
    return msg


@st.composite
def _edit(draw):
    """One edit of a conversation state (messages, options), in place."""
    kind = draw(st.sampled_from(
        ["user", "user", "assistant", "assistant", "tool", "edit", "drop_reasoning", "tools",
         "prompt", "cut"]))

    def apply(msgs, opts):
        if kind == "user":
            msgs.append({"role": "user", "content": draw(atom_text)})
        elif kind == "assistant":
            msgs.append(_assistant(draw))
        elif kind == "tool":
            msgs.append({"role": "tool", "content": draw(atom_text)})
        elif kind == "edit" and len(msgs) > 1:
            i = draw(st.integers(1, len(msgs) - 1))
            msgs[i] = dict(msgs[i], content=draw(atom_text))
        elif kind == "drop_reasoning":
            for i, m in enumerate(msgs[:-1]):
                if m["role"] == "assistant" and "reasoning_content" in m:
                    msgs[i] = {k: v for k, v in m.items() if k != "reasoning_content"}
                    break
        elif kind == "tools":
            opts["tools"] = draw(st.sampled_from([None, TOOLS_A, TOOLS_B]))
        elif kind == "prompt":
            opts["add_generation_prompt"] = draw(st.booleans())
            opts["enable_thinking"] = draw(st.booleans())
        elif kind == "cut" and len(msgs) > 2:
            del msgs[draw(st.integers(2, len(msgs) - 1)):]

    return apply


def _same(a, b):
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and np.array_equal(a, b)
    return all(np.array_equal(x, y) and x.dtype == y.dtype for x, y in zip(a, b))


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.booleans(), st.lists(_edit(), min_size=1, max_size=12), st.data())
def test_random_edit_sequences_equal_encode_chat(tok, system, edits, data):
    msgs = [{"role": "system", "content": "You are terse."}] if system else []
    msgs.append({"role": "user", "content": data.draw(atom_text)})
    opts = {"tools": None, "add_generation_prompt": False, "enable_thinking": True}
    enc = tok.chat_encoder()
    prev = b""
    for apply in edits:
        apply(msgs, opts)
        chat = qwen4exp.render_chat(msgs, **opts)
        masks = data.draw(st.booleans())
        got = enc.encode(chat, return_masks=masks)
        assert _same(got, tok.encode_chat(chat, return_masks=masks))
        assert 0 <= enc.reused_bytes <= min(len(prev), len(chat.data))
        assert chat.data[: enc.reused_bytes] == prev[: enc.reused_bytes]
        prev = chat.data


def test_atom_free_oracle_through_one_encoder_equals_transformers(tok):
    """Each atom-free oracle case, then the same case grown by one user turn,
    through one encoder: ids equal transformers' apply_chat_template."""
    enc = tok.chat_encoder()
    for name in ATOM_FREE:
        request = ORACLE_CASES[name]["request"]
        grown = dict(request, messages=request["messages"] + [{"role": "user", "content": "and then?"}])
        for req in (request, grown):
            assert enc.encode(render_oracle(req)).tolist() == reference_ids(req)
        assert enc.reused_bytes > 0


def test_growing_conversation_reuses_the_history(tok):
    enc = tok.chat_encoder()
    msgs = [{"role": "system", "content": "Be brief."}]
    prev = b""
    for t in range(12):
        msgs.append({"role": "user", "content": f"question {t}: " + "why? " * t})
        chat = qwen4exp.render_chat(msgs)
        assert np.array_equal(enc.encode(chat), tok.encode_chat(chat))
        # every old segment is kept but the last turn's, whose empty think block
        # the template drops once it is no longer the last message
        last = prev.rfind(b"<|im_start|>assistant\n<think>")
        assert enc.reused_bytes == (len(prev) if last < 0 else last + len(b"<|im_start|>"))
        msgs.append({"role": "assistant", "content": f"answer {t} " * 5})
        chat = qwen4exp.render_chat(msgs)
        assert np.array_equal(enc.encode(chat), tok.encode_chat(chat))
        prev = chat.data


def test_dropped_reasoning_is_encoded_again(tok):
    """A new query drops the previous turn's reasoning: everything from there is new."""
    enc = tok.chat_encoder()
    msgs = [{"role": "user", "content": "q1"},
            {"role": "assistant", "content": "a1", "reasoning_content": "because"}]
    first = qwen4exp.render_chat(msgs)
    enc.encode(first)
    msgs.append({"role": "user", "content": "q2"})
    second = qwen4exp.render_chat(msgs)
    assert np.array_equal(enc.encode(second), tok.encode_chat(second))
    assert enc.reused_bytes == first.data.index(b"<think>") - len(b"assistant\n")


def test_same_bytes_other_segments_are_not_reused(tok):
    """Reuse needs the same boundaries and kinds, not just the same bytes."""
    as_data = SegmentBuilder().text("<|im_end|>").control("<|im_start|>").text("x").build()
    as_control = SegmentBuilder().control("<|im_end|>").text("<|im_start|>").text("x").build()
    other_cut = SegmentBuilder().text("<|im_end|><|im_start|>").control("<|im_end|>").build()
    enc = tok.chat_encoder()
    for chat in (as_data, as_control, as_data, other_cut, as_data, as_data):
        assert as_data.data[:22] == chat.data[:22]
        assert np.array_equal(enc.encode(chat), tok.encode_chat(chat))
    assert enc.reused_bytes == len(as_data.data)


def test_errors_leave_the_encoder_as_it_was(tok):
    enc = tok.chat_encoder()
    good = qwen4exp.render_chat([{"role": "user", "content": "hello"}])
    enc.encode(good)
    bad = SegmentBuilder().control("<|im_start|>").text("user\nhello").control("<|not_an_atom|>").build()
    with pytest.raises(qwen4exp.UnknownControlError):
        enc.encode(bad)
    with pytest.raises(TypeError):
        enc.encode(good.data)  # type: ignore[arg-type]
    assert enc.reused_bytes == 0
    assert np.array_equal(enc.encode(good), tok.encode_chat(good))
    assert enc.reused_bytes == len(good.data)
    enc.reset()
    enc.encode(good)
    assert enc.reused_bytes == 0


def test_returned_ids_are_the_callers(tok):
    enc = tok.chat_encoder()
    chat = qwen4exp.render_chat([{"role": "user", "content": "hello there"}])
    ids = enc.encode(chat)
    ids[:] = 0  # the caller owns its array: the encoder's copy is untouched
    assert np.array_equal(enc.encode(chat), tok.encode_chat(chat))


class _HeldNative:
    """The tokenizer's native core, except that encode_bounds waits until the
    test lets it go: the encoder stays busy for exactly as long as the test
    wants, however fast the machine."""

    def __init__(self, native):
        self._inner = native
        self.entered = threading.Event()
        self.release = threading.Event()

    def encode_bounds(self, *args):
        self.entered.set()
        assert self.release.wait(120), "the test never let the call go"
        return self._inner.encode_bounds(*args)


class _Overriding:
    """`inner` with some attributes replaced (the others read through)."""

    def __init__(self, inner, **replaced):
        self._inner = inner
        self.__dict__.update(replaced)

    def __getattr__(self, name):
        return getattr(self._inner, name)


def _HeldTokenizer(tok):
    """A Tokenizer whose native core is held (see _HeldNative)."""
    return _Overriding(tok, core=_Overriding(tok.core, native=_HeldNative(tok.core.native)))


def test_two_threads_on_one_encoder_get_an_error(tok):
    held = _HeldTokenizer(tok)
    enc = ChatEncoder(held)
    first = qwen4exp.render_chat([{"role": "user", "content": "ünïcode wörds " * 200}])
    second = qwen4exp.render_chat([{"role": "user", "content": "hi"}])
    results, errors = [], []

    def run():
        try:
            results.append(enc.encode(first))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    busy = threading.Thread(target=run)
    busy.start()
    try:
        assert held.core.native.entered.wait(120), "the first call never reached native code"
        # the first thread is inside the native call, holding the encoder
        with pytest.raises(RuntimeError, match="one ChatEncoder per conversation"):
            enc.encode(second)
        with pytest.raises(RuntimeError, match="one ChatEncoder per conversation"):
            enc.reset()
    finally:
        held.core.native.release.set()
        busy.join()
    assert not errors, errors
    assert np.array_equal(results[0], tok.encode_chat(first))
    # the refused calls changed nothing: the first call's state is kept whole
    assert np.array_equal(enc.encode(first), tok.encode_chat(first))
    assert enc.reused_bytes == len(first.data)
    assert np.array_equal(enc.encode(second), tok.encode_chat(second))
