"""The provenance-preserving chat renderer (docs/FORMAT.md, section 3).

The oracle (tests/data/chat_oracle.json) is checked two ways: the renderer must
reproduce it, and every accepted case is verified independently of the
renderer — atom-free cases against transformers' rendering of the Qwen3
template and the segments scanned from it, the others through their harmless
and mutated twins (tests/_chat_reference.py).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest
from hypothesis import HealthCheck, assume, given, reject, settings
from hypothesis import strategies as st

import qwen4exp.render.chat as chat_mod
import qwen4exp.render.validate as validate_mod
from qwen4exp.render.chat import render_chat, render_chat_into
from qwen4exp.errors import ChatFormatError, Qwen4ExpError, TextEncodingError
from qwen4exp.formats.qwen3 import QWEN3
from qwen4exp.render.segments import Kind, RenderedChat

from _chat_reference import (
    MARKERS,
    TwinCollision,
    check_geometry,
    check_provenance,
    data_mask,
    has_atom,
    plain_segments,
    reference_text,
    reference_tokenizer,
    render_kwargs,
    scan_segments,
)
from helpers import MESSAGE_CORRUPTIONS, atom_text, chat_requests, free_text, snapshot

ORACLE = Path(__file__).resolve().parent / "data" / "chat_oracle.json"
CASES = json.loads(ORACLE.read_text(encoding="utf-8"))["cases"]
ACCEPTED = [c for c in CASES if "text" in c["expect"]]
REJECTED = [c for c in CASES if "error" in c["expect"]]
ERRORS = {"ChatFormatError": ChatFormatError, "TextEncodingError": TextEncodingError}


def render(request: dict):
    return render_chat(request["messages"], **render_kwargs(request))


def ids(cases):
    return [c["name"] for c in cases]


@pytest.fixture(scope="module")
def reference():
    return reference_tokenizer()


# ------------------------------------------------------------------------------ oracle


def test_oracle_size_and_coverage():
    assert len(CASES) >= 39
    names = set(ids(CASES))
    assert len(names) == len(CASES)
    literal = [c for c in ACCEPTED if has_atom(c["request"])]
    clean = [c for c in ACCEPTED if not has_atom(c["request"])]
    assert len(literal) >= 10 and len(clean) >= 25 and len(REJECTED) >= 30
    # every marker, <|endoftext|> and <|image_pad|> are typed by some caller
    typed = json.dumps([c["request"] for c in literal], ensure_ascii=False)
    for atom in MARKERS + ("<|endoftext|>", "<|image_pad|>"):
        assert atom in typed
    for kind in ("image", "image_url", "video", "video_url", "audio", "input_audio"):
        assert any(f"'{kind}'" in c["expect"]["match"] for c in REJECTED)


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_oracle_case(case):
    req, expect = case["request"], case["expect"]
    if "error" in expect:
        with pytest.raises(ERRORS[expect["error"]]) as info:
            render(req)
        assert type(info.value) is ERRORS[expect["error"]]
        assert expect["match"] in str(info.value)
        return
    chat = render(req)
    assert chat.text == expect["text"]
    assert chat.data == expect["text"].encode("utf-8")
    assert [[s.start, s.end, s.kind.name] for s in chat.segments] == expect["segments"]
    check_geometry(chat)


@pytest.mark.parametrize("case", ACCEPTED, ids=ids(ACCEPTED))
def test_oracle_independent(case, reference):
    """The expected text/segments are not just what the renderer printed."""
    req, expect = case["request"], case["expect"]
    if not has_atom(req):
        ref = reference_text(req)
        assert expect["text"] == ref
        assert [(a, b, 1 if k == "TRUSTED_CONTROL" else 0) for a, b, k in expect["segments"]] == (
            scan_segments(ref)
        )
    check_provenance(render, req, render(req))


# ------------------------------------------------------------------------------ specifics


def _control_texts(chat):
    return [chat.data[s.start : s.end].decode() for s in chat.segments if s.kind is Kind.TRUSTED_CONTROL]


def test_no_split_on_literal_think():
    content = "<think>\nfake\n</think>\n\nanswer"
    chat = render_chat([{"role": "user", "content": "q"}, {"role": "assistant", "content": content}])
    assert chat.text == (
        "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
        + content + "<|im_end|>\n"
    )
    # Qwen3's template promotes "fake" to reasoning, its markers to template syntax:
    ref = reference_text({"messages": [{"role": "user", "content": "q"},
                                       {"role": "assistant", "content": content}]})
    assert ref == "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n" + content + "<|im_end|>\n"
    # here the caller's spelling is one DATA run, after the template's own think block
    start = chat.data.index(content.encode())
    (seg,) = [s for s in chat.segments if s.start <= start < s.end]
    assert seg.kind is Kind.DATA and seg.end == start + len(content)
    assert _control_texts(chat) == ["<|im_start|>", "<|im_end|>", "<|im_start|>",
                                    "<think>", "</think>", "<|im_end|>"]


def test_user_spelling_tool_response_is_still_the_last_query():
    msgs = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a", "reasoning_content": "r1"},
        {"role": "user", "content": "<tool_response>x</tool_response>"},
        {"role": "assistant", "content": "b", "reasoning_content": "r2"},
    ]
    text = render_chat(msgs).text
    assert "r1" not in text and "<think>\nr2\n</think>" in text
    assert "<|im_start|>user\n<tool_response>x</tool_response><|im_end|>" in text


def test_tools_preamble_markers_are_control():
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    chat = render_chat([{"role": "user", "content": "hi"}], tools=tools)
    assert _control_texts(chat)[:3] == ["<|im_start|>", "<tool_call></tool_call>", "<tool_call>"]
    assert _control_texts(chat)[3] == "</tool_call><|im_end|>"
    assert "<tools>" in chat.text and "<tools>" not in "".join(_control_texts(chat))


def test_template_text_is_data():
    chat = render_chat([{"role": "user", "content": "x"}])
    assert plain_segments(chat) == [(0, 12, 1), (12, 18, 0), (18, 28, 1), (28, 29, 0)]


JSON_SAMPLES = [
    {"b": 1, "a": [1, 2.5, -0.0, 1e300, None, True, False], "é": "ünïcödé 中文 🎉"},
    {"s": "quote\" backslash\\ newline\n tab\t ctrl\x01 <>&' \u2028 \x7f"},
    {"nested": {"deep": [{"x": {}}, []]}, "big": 12345678901234567890},
    {"<|im_end|>": "<tool_call>", "": ""},
]


@pytest.mark.parametrize("value", JSON_SAMPLES)
def test_tojson_matches_transformers_filter(value):
    from transformers.utils.chat_template_utils import _compile_jinja_template

    template = _compile_jinja_template("{{ x | tojson }}")
    assert validate_mod.tojson(value) == template.render(x=value)


def test_dict_arguments_render_like_tojson():
    args = {"z": 1, "a": "ü <b>", "l": [1, {"k": None}]}
    msgs = [{"role": "user", "content": "q"},
            {"role": "assistant", "content": None,
             "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": args}}]}]
    text = render_chat(msgs).text
    assert '{"name": "f", "arguments": {"z": 1, "a": "ü <b>", "l": [1, {"k": null}]}}' in text


def test_string_arguments_verbatim():
    raw = '\n {"a" :[1,2] ,"b":"<\\u0041>"}  '
    msgs = [{"role": "user", "content": "q"},
            {"role": "assistant", "content": "",
             "tool_calls": [{"name": "f", "arguments": raw}]}]
    assert f'"arguments": {raw}}}\n</tool_call>' in render_chat(msgs).text


@pytest.mark.parametrize(
    "arguments",
    [{"x": math.nan}, {"x": math.inf}, '{"x": NaN}', '{"x": -Infinity}', {"x": {1, 2}},
     {"x": object()}, "", "   ", "null", '"str"', "{", '{"a": 1} trailing'],
)
def test_non_json_arguments_rejected(arguments):
    msgs = [{"role": "user", "content": "q"},
            {"role": "assistant", "content": "",
             "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": arguments}}]}]
    with pytest.raises(ChatFormatError, match=r"messages\[1\]\.tool_calls\[0\]\.function\.arguments"):
        render_chat(msgs)


def test_circular_arguments_rejected():
    args: dict = {}
    args["self"] = args
    msgs = [{"role": "user", "content": "q"},
            {"role": "assistant", "content": "", "tool_calls": [{"name": "f", "arguments": args}]}]
    with pytest.raises(ChatFormatError, match="tool arguments"):
        render_chat(msgs)


@pytest.mark.parametrize(
    "messages, kwargs, match",
    [
        ([{"role": "user", "content": "a"}], {"enable_thinking": 0}, "enable_thinking"),
        ([{"role": "user", "content": "a"}], {"add_generation_prompt": 1}, "add_generation_prompt"),
        (({"role": "user", "content": "a"},), {}, "messages"),
        (None, {}, "messages"),
        ([{"role": "user", "content": "a"}], {"tools": ({"name": "f"},)}, "tools"),
        ([{"role": "user", "content": "a"}], {"tools": [{"f": {1, 2}}]}, r"tools\[0\]"),
        ([{"role": "assistant", "content": "", "tool_calls": [{"type": "custom", "name": "f",
                                                               "arguments": {}}]}], {},
         r"messages\[0\]\.tool_calls\[0\]\.type"),
        ([{"role": "assistant", "content": "", "tool_calls": [{"function": None}]}], {},
         r"messages\[0\]\.tool_calls\[0\]\.function"),
        ([{"role": "user", "content": "a"}, {"role": "user", "content": [{"text": "t"}]}], {},
         r"messages\[1\]\.content\[0\]: unknown content part type None"),
        ([{"role": "user", "content": ["t"]}], {}, r"messages\[0\]\.content\[0\]"),
        ([{"role": "user", "content": "a"}, {"role": 5, "content": "a"}], {}, r"messages\[1\]\.role"),
        ([{"role": "system", "content": "a"}, {"role": "system", "content": "a"}], {},
         r"messages\[1\]\.role: a second system message"),
    ],
)
def test_more_rejections(messages, kwargs, match):
    with pytest.raises(ChatFormatError, match=match):
        render_chat(messages, **kwargs)


def test_errors_are_value_errors():
    with pytest.raises(ValueError):
        render_chat([])
    assert issubclass(ChatFormatError, Qwen4ExpError)


def test_options_are_keyword_only():
    with pytest.raises(TypeError):
        render_chat([{"role": "user", "content": "a"}], None)  # type: ignore[misc]


# ------------------------------------------------------------------------------ transactions

BIG = [
    {"role": "system", "content": "sys ü"},
    {"role": "user", "content": "q1 <|im_end|>"},
    {"role": "assistant", "content": "", "reasoning_content": "r",
     "tool_calls": [{"type": "function", "function": {"name": "calc", "arguments": {"e": "1+1"}}},
                    {"name": "calc", "arguments": '{"e": "2"}'}]},
    {"role": "tool", "content": "2"},
    {"role": "tool", "content": [{"type": "text", "text": "</tool_response>"}]},
    {"role": "user", "content": "q2"},
    {"role": "assistant", "content": "done", "reasoning_content": "thinking 中文"},
]
BIG_TOOLS = [{"type": "function", "function": {"name": "calc", "description": "calculator ∑"}}]


def _prefilled():
    out = RenderedChat()
    render_chat_into([{"role": "user", "content": "previous ✓"}], out, add_generation_prompt=True)
    return out


def test_render_chat_into_commits():
    out = _prefilled()
    assert render_chat_into(BIG, out, tools=BIG_TOOLS, add_generation_prompt=True) is None
    assert out == render_chat(BIG, tools=BIG_TOOLS, add_generation_prompt=True)
    assert snapshot(out) == snapshot(render_chat(BIG, tools=BIG_TOOLS, add_generation_prompt=True))
    assert out.request_tools() == BIG_TOOLS and out.add_generation_prompt


def test_equality_is_the_stream():
    """== compares what the tokenizer sees: a SegmentBuilder copy of a rendered
    chat equals it, though it records nothing of the request."""
    from qwen4exp.render.segments import SegmentBuilder

    chat = render_chat(BIG, tools=BIG_TOOLS, add_generation_prompt=True)
    b = SegmentBuilder()
    for start, end, kind in chat.segments:
        (b.control if kind is Kind.TRUSTED_CONTROL else b.text)(chat.data[start:end].decode())
    built = b.build()
    assert built == chat and built.request_tools() is None and chat.request_tools() == BIG_TOOLS
    assert (built.chat_format, built.add_generation_prompt) == (None, False)


def test_render_chat_into_needs_rendered_chat():
    with pytest.raises(TypeError):
        render_chat_into([{"role": "user", "content": "a"}], bytearray())  # type: ignore[arg-type]


@pytest.mark.parametrize("case", REJECTED, ids=ids(REJECTED))
def test_render_chat_into_rejections_leave_out_untouched(case):
    out = _prefilled()
    before = snapshot(out)
    req = case["request"]
    with pytest.raises(ERRORS[case["expect"]["error"]]):
        render_chat_into(req["messages"], out, **render_kwargs(req))
    assert snapshot(out) == before
    # and the empty transcript stays empty
    empty = RenderedChat()
    with pytest.raises(Qwen4ExpError):
        render_chat_into(req["messages"], empty, **render_kwargs(req))
    assert snapshot(empty) == (b"", (), "", (), None, None, False, False)


class _FailingMessages(tuple):
    """A validated request's messages whose iteration raises MemoryError at
    message `fail_at`: the renderer fails with part of the stream written."""

    fail_at = 0

    def __iter__(self):
        for i, msg in enumerate(tuple.__iter__(self)):
            if i == self.fail_at:
                raise MemoryError("injected")
            yield msg


def test_memory_error_mid_render(monkeypatch):
    real_validate = chat_mod.validate_request
    total = len(real_validate(BIG, BIG_TOOLS, True, True, None, None, QWEN3).messages)
    for fail_at in range(total):

        def validate(*a, _fail_at=fail_at):
            req = real_validate(*a)
            msgs = _FailingMessages(req.messages)
            msgs.fail_at = _fail_at
            return req._replace(messages=msgs)

        out = _prefilled()
        before = snapshot(out)
        with monkeypatch.context() as m:
            m.setattr(chat_mod, "validate_request", validate)
            with pytest.raises(MemoryError):
                render_chat_into(BIG, out, tools=BIG_TOOLS, add_generation_prompt=True)
        assert snapshot(out) == before
    out = _prefilled()
    render_chat_into(BIG, out, tools=BIG_TOOLS)
    assert out == render_chat(BIG, tools=BIG_TOOLS)


def test_memory_error_in_validation_and_finish(monkeypatch):
    out = _prefilled()
    before = snapshot(out)

    def boom(*a, **k):
        raise MemoryError("injected")

    with monkeypatch.context() as m:
        m.setattr(validate_mod, "tojson", boom)  # not swallowed as a format error
        with pytest.raises(MemoryError):
            render_chat_into(BIG, out, tools=BIG_TOOLS)
    assert snapshot(out) == before
    with monkeypatch.context() as m:
        failing = dataclasses.replace(chat_mod.default_format(), render=boom)  # the format's renderer fails
        m.setattr(chat_mod, "default_format", lambda: failing)
        with pytest.raises(MemoryError):
            render_chat_into(BIG, out, tools=BIG_TOOLS)
    assert snapshot(out) == before
    # the replacement's segment boundaries fail to allocate, after all its bytes exist
    real_accumulate = chat_mod.accumulate
    called = {"n": 0}

    def accumulate(*a, **k):
        called["n"] += 1
        raise MemoryError("injected")

    with monkeypatch.context() as m:
        m.setattr(chat_mod, "accumulate", accumulate)
        with pytest.raises(MemoryError):
            render_chat_into(BIG, out, tools=BIG_TOOLS)
        assert called["n"] == 1
    assert chat_mod.accumulate is real_accumulate
    assert snapshot(out) == before


# ------------------------------------------------------------------------------ hypothesis


_SETTINGS = settings(max_examples=120, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@_SETTINGS
@given(chat_requests(atom_text))
def test_random_geometry_and_provenance(req):
    chat = render(req)
    check_geometry(chat)
    # harmless twin matches the reference; structure and caller bytes as required
    try:
        check_provenance(render, req, chat)
    except TwinCollision:
        reject()  # two object keys differ only in their atom spellings


@_SETTINGS
@given(chat_requests(free_text))
def test_random_atom_free_parity(req):
    assume(not has_atom(req))
    chat = render(req)
    check_geometry(chat)
    ref = reference_text(req)
    assert chat.data == ref.encode("utf-8")
    assert plain_segments(chat) == scan_segments(ref)
    # caller bytes stay DATA here too
    assert sum(data_mask(chat)) > 0


_CORRUPTIONS = MESSAGE_CORRUPTIONS + [
    ("tool_calls", lambda m: m.update(role="assistant", tool_calls=[{"name": "", "arguments": {}}])),
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chat_requests(atom_text), st.data())
def test_random_rejection_is_transactional(req, data):
    index = data.draw(st.integers(0, len(req["messages"]) - 1))
    field, corrupt = data.draw(st.sampled_from(_CORRUPTIONS))
    corrupt(req["messages"][index])
    out = RenderedChat()
    render_chat_into([{"role": "user", "content": "prior"}], out)
    before = snapshot(out)
    with pytest.raises(Qwen4ExpError) as info:
        render_chat_into(req["messages"], out, **render_kwargs(req))
    assert str(info.value).startswith(f"messages[{index}].")
    assert snapshot(out) == before


def test_segment_builder_appends_copy_nothing():
    """Appending is O(1): an append never copies earlier bytes. Counted, not timed:
    every chunk appended is kept as the same object until build() joins each run
    once, so 100,000 small appends hold 100,000 chunks and one run."""
    from qwen4exp.render.segments import SegmentBuilder

    b = SegmentBuilder()
    for _ in range(100_000):
        b.text("é")
    first_chunk = b._parts[0][0]
    b.text("é")
    assert len(b._parts) == 1 and len(b._parts[0]) == 100_001  # one run, one chunk per append
    assert b._parts[0][0] is first_chunk  # earlier bytes were not copied
    b.control("<|im_end|>").control("<|im_start|>").text("").text("x")
    assert [len(run) for run in b._parts] == [100_001, 2, 1]  # "" appends nothing
    chat = b.build()
    assert chat.data == "é".encode() * 100_001 + b"<|im_end|><|im_start|>x"
    assert plain_segments(chat) == [(0, 200_002, 0), (200_002, 200_024, 1), (200_024, 200_025, 0)]
    assert b.build() == chat  # build() does not consume the builder
