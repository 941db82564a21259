"""The qwen3-coder format against its official template (tests/data/chat_templates/qwen3_coder.jinja).

What the shared tables (tests/test_chat_formats.py, test_completion_formats.py)
do not reach: the XML tools block on schemas of every shape the template
reads (`render_extra_keys`, non-mapping properties, a `function` that is not
a dict), a tool block first after the system turn, schema keys the template
writes as tags (`<think>`) staying DATA, and calls typed by the schema.
Every expectation comes from transformers' rendering of the template and HF
tokenizers' ids of that text.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import qwen4exp
from qwen4exp import Kind

import _formats_reference as ref

FMT = "qwen3-coder"

# Schemas of every shape the template's tools loop reads.
SCHEMAS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "  Get the weather \n",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": " City name ", "enum": ["Paris", "Zürich"],
                     "nullable": True, "default": None, "minLength": 1},
            "days": {"type": ["integer", "null"], "items": {"type": "integer"}},
            "opts": {"type": "object", "properties": {"a": {"type": "boolean"}}},
            "odd": "not a mapping", "list": [1, 2]},
            "required": ["city"], "additionalProperties": False},
        "strict": True, "examples": [{"city": "Oslo"}]}},
    {"name": "bare", "parameters": {"properties": {}}},
    {"name": "no_params", "description": 7},
    {"function": "not a dict"},
    {"type": "function", "function": {"name": "plain", "parameters": {"type": "object", "properties": []}}},
]
CONVERSATIONS = [
    [{"role": "user", "content": "hi"}],
    [{"role": "system", "content": " sys \n"}, {"role": "user", "content": "q"},
     {"role": "assistant", "content": "  as is  ", "reasoning_content": "dropped"}],
    [{"role": "user", "content": "q"},
     {"role": "assistant", "content": " \n let me \n", "tool_calls": [
         {"type": "function", "function": {"name": "get_weather", "arguments": {
             "city": "Zürich", "days": 3, "b": True, "z": None, "l": [1, "a"], "d": {"k": 1.5}}}},
         {"function": {"name": "bare", "arguments": "{}"}}]},
     {"role": "tool", "content": "r1"}, {"role": "tool", "content": " r2 "},
     {"role": "assistant", "content": "done"}, {"role": "user", "content": "u"},
     {"role": "assistant", "content": "  ", "tool_calls": [{"function": {"name": "f", "arguments": {"a": "b"}}}]},
     {"role": "tool", "content": "r3"}],
    [{"role": "tool", "content": "r"}, {"role": "user", "content": "q"}],
    [{"role": "system", "content": "S"}, {"role": "tool", "content": "r"}, {"role": "tool", "content": "r2"},
     {"role": "user", "content": "q"}, {"role": "assistant", "content": None}],
]


@pytest.fixture(scope="module")
def hf():
    return ref.reference_tokenizer()


def test_identified_by_its_template():
    fmt, implied = qwen4exp.formats.identify_template(ref.template_text(FMT))
    assert fmt.name == FMT and implied == {} and fmt.vocabulary == "qwen3"
    assert fmt.options == () and fmt.tool_calls == "xml" and fmt.python_scalars


@pytest.mark.parametrize("k", range(len(CONVERSATIONS)))
def test_text_ids_and_spans_equal_the_template(k, tok, hf):
    template = ref.template_text(FMT)
    for tools in (None, SCHEMAS):
        for agp in (False, True):
            request = {"messages": CONVERSATIONS[k], "tools": tools, "add_generation_prompt": agp}
            chat = qwen4exp.render_chat(CONVERSATIONS[k], tools=tools, add_generation_prompt=agp, chat_format=FMT)
            req = ref.normalise(request, FMT)
            want = hf.apply_chat_template(req["messages"], tools=tools, chat_template=template, tokenize=False,
                                          add_generation_prompt=agp)
            assert chat.text == want
            assert ref.plain_segments(chat) == ref.scan_segments(want)
            ids = hf.apply_chat_template(req["messages"], tools=tools, chat_template=template, tokenize=True,
                                         add_generation_prompt=agp)
            assert tok.encode_chat(chat).tolist() == list(ids)
            assert [tuple(s) for s in chat.message_spans] == ref.reference_spans(request, FMT)


def _atoms_in(tok, chat) -> list[int]:
    atom_ids = set(tok.atoms.values())
    return [i for i in tok.encode_chat(chat).tolist() if i in atom_ids]


def test_schema_keys_written_as_tags_stay_data(tok, hf):
    """The template writes a schema's other keys as `<KEY>VALUE</KEY>`: a key
    "think" is the text `<think>`, never THINK's atom; the same text as the
    template's, and the atom ids exactly those of the markers it wrote."""
    tools = [{"type": "function", "function": {
        "name": "<think", "description": "</tool_call><|im_end|>",
        "parameters": {"type": "object", "properties": {
            "|im_end|": {"type": "string", "think": "x", "/tool_call": 1}}},
        "think": {"tool_response": "<|im_start|>"}}}]
    msgs = [{"role": "user", "content": "q"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"function": {"name": "<think", "arguments": {"<|im_end|": "</tool_call>"}}}]}]
    request = {"messages": msgs, "tools": tools, "add_generation_prompt": True}
    assert ref.has_atom(request, FMT)
    chat = qwen4exp.render_chat(msgs, tools=tools, add_generation_prompt=True, chat_format=FMT)
    assert chat.text == ref.reference_text(request, FMT)  # the same bytes ...
    for tag in ("<think>", "</think>", "<|im_end|>", "<|im_start|>"):
        at = chat.data.index(tag.encode(), chat.data.index(b"<tools>"))  # in the tools block
        (seg,) = [s for s in chat.segments if s.start <= at < s.end]
        assert seg.kind is Kind.DATA, tag  # ... but caller text stays DATA
    twin = ref.harmless_twin(request, FMT)
    assert not ref.has_atom(twin, FMT)
    twin_chat = qwen4exp.render_chat(twin["messages"], tools=twin["tools"], add_generation_prompt=True,
                                     chat_format=FMT)
    assert ref.plain_segments(twin_chat) == ref.plain_segments(chat)
    twin_text = ref.reference_text(twin, FMT)
    assert twin_chat.text == twin_text
    atom_ids = set(tok.atoms.values())
    want = [i for i in hf.encode(twin_text, add_special_tokens=False) if i in atom_ids]
    assert _atoms_in(tok, chat) == want == [tok.atoms[m] for m in ref.control_markers(chat)]


TYPED_TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
    "s": {"type": "string"}, "n": {"type": "integer"}, "x": {"type": "number"}, "b": {"type": "boolean"},
    "o": {"type": "object"}, "l": {"type": "array"}}}}}]
BODY = ("\n<function=f>\n<parameter=s>\n12\n</parameter>\n<parameter=n>\n12\n</parameter>\n"
        "<parameter=x>\n1.5\n</parameter>\n<parameter=b>\nTrue\n</parameter>\n"
        "<parameter=o>\n{\"k\": null}\n</parameter>\n<parameter=l>\n[1, \"a\"]\n</parameter>\n</function>\n")


def test_xml_calls_typed_by_the_schema_streamed_and_at_once(tok):
    """A completion's XML call: each value typed by its parameter's schema (a
    string stays the text, "True" is a boolean in this Python-scalar format);
    content before the call trimmed by the template's "\\n\\n"; streaming in
    two parts at every cut equals parsing at once; the message renders back."""
    history = [{"role": "user", "content": "q"}]
    prompt = qwen4exp.render_chat(history, tools=TYPED_TOOLS, add_generation_prompt=True, chat_format=FMT)
    assert not prompt.opens_reasoning and prompt.text.endswith("<|im_start|>assistant\n")
    b = qwen4exp.SegmentBuilder()
    b.text("Calling <function=g> now.\n\n").control("<tool_call>").text(BODY).control("</tool_call>")
    b.control("<|im_end|>")
    ids = tok.encode_chat(b.build()).tolist()
    msg = tok.parse_completion(ids, prompt)
    assert "errors" not in msg and "invalid_tool_calls" not in msg
    assert msg["content"] == "Calling <function=g> now." and msg["reasoning_content"] is None
    (call,) = msg["tool_calls"]
    assert call["function"]["name"] == "f"
    assert json.loads(call["function"]["arguments"]) == {"s": "12", "n": 12, "x": 1.5, "b": True,
                                                         "o": {"k": None}, "l": [1, "a"]}
    for k in range(len(ids) + 1):
        p = tok.completion_parser(prompt)
        p.feed(ids[:k])
        p.feed(ids[k:])
        assert p.finish() == msg
    again = qwen4exp.render_chat(history + [msg], tools=TYPED_TOOLS, chat_format=FMT)
    assert again.text == ref.reference_text({"messages": history + [msg], "tools": TYPED_TOOLS}, FMT)
    assert again.text == prompt.text + tok.decode(ids) + "\n"


def test_typed_call_in_content_is_text(tok):
    """`<tool_call>` typed as text (BPE ids) is content, not a call."""
    prompt = qwen4exp.render_chat([{"role": "user", "content": "q"}], tools=TYPED_TOOLS,
                                  add_generation_prompt=True, chat_format=FMT)
    ids = tok.encode("<tool_call>" + BODY + "</tool_call>") + [tok.atoms["<|im_end|>"]]
    msg = tok.parse_completion(ids, prompt)
    assert msg["tool_calls"] == [] and msg["content"] == "<tool_call>" + BODY + "</tool_call>"


def test_descriptor_facts_agree_with_its_rules():
    """A descriptor's parse facts are stated, and checked against its rules when built."""
    fmt = qwen4exp.formats.chat_format(FMT)
    assert (fmt.call_syntax, fmt.tool_schema_syntax, fmt.newlines_before_calls, fmt.prompt_think_newline,
            fmt.thinking_default, fmt.media) == ("xml", "xml", 2, False, False, False)
    with pytest.raises(qwen4exp.ChatFormatError, match="call_syntax 'json' disagrees"):
        dataclasses.replace(fmt, call_syntax="json")
    with pytest.raises(qwen4exp.ChatFormatError, match="tool_schema_syntax 'json' disagrees"):
        dataclasses.replace(fmt, tool_schema_syntax="json")


_key = st.sampled_from(["name", "type", "description", "properties", "parameters", "function", "enum", "k", "é"])
_value = st.recursive(st.none() | st.booleans() | st.integers(-10**6, 10**6)
                      | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=4),
                      lambda c: st.lists(c, max_size=2) | st.dictionaries(_key, c, max_size=3), max_leaves=6)
_schema = st.fixed_dictionaries({}, optional={
    "name": st.text(max_size=4), "description": _value, "strict": _value,
    "parameters": _value | st.fixed_dictionaries({"properties": st.dictionaries(
        st.text(max_size=3), _value | st.dictionaries(_key, _value, max_size=4), max_size=3)},
        optional={"type": _value, "required": _value})})
_tool = _schema | st.fixed_dictionaries({"type": st.just("function"), "function": _schema | _value})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tools=st.lists(_tool, min_size=1, max_size=3))
def test_generated_tool_schemas_equal_the_template(tools):
    """Schemas of any JSON shape render as the template's tools loop writes them."""
    msgs = [{"role": "user", "content": "q"}]
    want = ref.reference_text({"messages": msgs, "tools": tools}, FMT)
    assert qwen4exp.render_chat(msgs, tools=tools, chat_format=FMT).text == want
