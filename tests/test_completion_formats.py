"""The completion parser in every chat format: typed tool calls, call ids,
OpenAI-style streaming, the prompt's context (src/qwen4exp/parse/completion.py,
src/qwen4exp/parse/tool_calls.py).

The oracle is the official chat template: a conversation ending in an
assistant turn is rendered by transformers' apply_chat_template with the
format's template (tests/_formats_reference.py) and checked equal to
render_chat's text; the ids after the generation prompt are what a model
would have written, and parsing them after that prompt must give the turn
back (typed arguments, as the template wrote them), streamed or not, split
anywhere, and the parsed message must render back to the same text.
"""

from __future__ import annotations

import copy
import json
import pickle
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import normalizers

import qwen4exp
from _formats_reference import FORMATS, NO_THINKING, VOCAB_OF, XML_FORMATS, has_atom, reference_text
from helpers import property_tests
from qwen4exp.render.validate import tojson

ID = re.compile(r"call_[A-Za-z0-9]{24}")

# --------------------------------------------------------------------------- tools

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}, "scale": {"type": "number"},
        "metric": {"type": "boolean"}, "note": {"type": ["string", "null"]},
        "options": {"type": "object"}, "hours": {"type": "array", "items": {"type": "integer"}},
        "unit": {"type": "string", "enum": ["C", "F"]},
    }, "required": ["city"]}}}
SEARCH = {"type": "function", "function": {
    "name": "search", "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}, "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}]}}}}}
TOOLS = [WEATHER, SEARCH]


def call(name, arguments):
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


# (name, final assistant turn): every format renders these
TURNS = [
    ("content only", {"content": "Hello there."}),
    ("one call", {"content": "", "reasoning_content": "Use the tool.",
                  "tool_calls": [call("get_weather", {"city": "Paris", "days": 2})]}),
    ("typed values", {"content": "Checking.", "reasoning_content": "Need weather.", "tool_calls": [
        call("get_weather", {"city": "Zürich 日本", "days": -3, "scale": 2.0, "metric": True, "note": None,
                             "options": {"a": [1, 2.5, None, True], "b": {"c": "d"}}, "hours": [1, 2],
                             "unit": "C"})]}),
    ("three calls", {"content": "Three lookups:", "reasoning_content": "Several.", "tool_calls": [
        call("get_weather", {"city": "Oslo", "metric": False}),
        call("search", {"query": "rain\nin Oslo", "limit": None}),
        call("search", {"limit": 5, "query": ""})]}),
    ("numbers keep their spelling", {"content": "", "reasoning_content": "n", "tool_calls": [
        call("get_weather", {"city": "x", "scale": 1e+20, "days": 12345678901234567890}),
        call("get_weather", {"city": "y", "scale": -0.0001, "days": 0}),
        call("get_weather", {"city": "z", "scale": 3, "days": 7})]}),
    ("strings that look like other types", {"content": "", "reasoning_content": "s", "tool_calls": [
        call("get_weather", {"city": "42", "note": "none", "unit": "true"}),
        call("search", {"query": '{"a": 1}'})]}),
    ("values with delimiters", {"content": "x", "reasoning_content": "d", "tool_calls": [
        call("search", {"query": "a</parameter>b\n</parameter>\nc</function>d"}),
        call("search", {"query": '<tool_call>\n{"name": "f", "arguments": {"p": "</parameter>"}}\n</tool_call>'}),
        call("search", {"query": "<tool_call><function=f><parameter=p>v</parameter></function></tool_call>"}),
        call("search", {"query": "\n\nleading and trailing newlines\n\n", "limit": 1})]}),
    ("literal markers in text", {"content": "Write <tool_call> then </tool_call>, </think> and <|im_end|>.",
                                 "reasoning_content": "The tag </think> and <tool_call>x</tool_call> <|endoftext|>"}),
    ("unicode", {"content": "日本語 😀 👩‍💻 café ﷽", "reasoning_content": "Ωμέγα 🇫🇷",
                 "tool_calls": [call("search", {"query": "こんにちは 🤖"})]}),
]
HISTORIES = [
    [{"role": "user", "content": "Weather in Paris?"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What now?"},
     {"role": "assistant", "content": "", "tool_calls": [call("get_weather", {"city": "Rome"})]},
     {"role": "tool", "content": "sunny"}],
]


@pytest.fixture(scope="module")
def toks(tok, tok36):
    return {"qwen3": tok, "qwen3.6": tok36}


def _turn_for(fmt, turn):
    turn = copy.deepcopy(turn)
    if fmt in NO_THINKING:
        turn.pop("reasoning_content", None)
    return {"role": "assistant", **turn}


def completion(toks, fmt, history, turn, tools=TOOLS, **options):
    """(tokenizer, prompt, completion ids, full text): the ids a model writes
    after the generation prompt, up to and including <|im_end|>."""
    tok = toks[VOCAB_OF[fmt]]
    msgs = history + [turn]
    full = qwen4exp.render_chat(msgs, tools=tools, chat_format=fmt, **options)
    request = {"messages": msgs, "tools": tools, **options}
    if not has_atom(request, fmt):  # the peer: the official template writes the same text
        assert full.text == reference_text(request, fmt)
    prompt = qwen4exp.render_chat(history, tools=tools, add_generation_prompt=True, chat_format=fmt, **options)
    assert full.data.startswith(prompt.data)
    ids = tok.encode_chat(_after(full, len(prompt.data))).tolist()
    end = len(ids) - 1 - ids[::-1].index(tok.atoms["<|im_end|>"])
    assert tok.decode(ids[end + 1 :]) == "\n"
    return tok, prompt, ids[: end + 1], full.text


def _after(chat, start):
    """The chat's segments from byte `start` on (the text a model writes after
    the prompt is tokenized on its own: the prompt's ids are already given)."""
    b = qwen4exp.SegmentBuilder()
    for seg in chat.segments:
        if seg.end > start:
            part = chat.data[max(seg.start, start) : seg.end].decode()
            b.control(part) if seg.kind == qwen4exp.Kind.TRUSTED_CONTROL else b.text(part)
    return b.build()


def expected(fmt, turn, thinking=True):
    """The message the template's text says: reasoning and content as it wrote
    them, arguments as the JSON text of the typed mapping."""
    trim = fmt in XML_FORMATS
    reasoning = turn.get("reasoning_content") or ""
    content = turn.get("content") or ""
    if fmt in NO_THINKING:
        reasoning = None
        if trim:  # qwen3-coder trims content only before calls
            content = content.strip() if turn.get("tool_calls") else content
    elif not thinking:
        reasoning = None
        content = content.strip() if trim else content.lstrip("\n")
    else:
        reasoning = reasoning.strip() if trim else reasoning.strip("\n")
        content = content.strip() if trim else content.lstrip("\n")
    if not trim and not content and turn.get("content") and turn.get("tool_calls"):
        content = "\n"  # newlines stripped to "", yet the template wrote its "\n" for them
    calls = [{"type": "function", "function": {"name": c["function"]["name"],
                                               "arguments": tojson(c["function"]["arguments"])}}
             for c in turn.get("tool_calls") or ()]
    return {"role": "assistant", "content": content, "reasoning_content": reasoning, "tool_calls": calls}


def without_ids(msg):
    msg = copy.deepcopy(msg)
    ids = [c.pop("id") for c in msg["tool_calls"]]
    assert all(ID.fullmatch(i) for i in ids) and len(set(ids)) == len(ids)
    return msg


def stream(tok, ids, prompt, cuts, **kw):
    """(deltas, message) of feeding ids[cuts[0]:cuts[1]], ids[cuts[1]:cuts[2]], ..."""
    p = tok.completion_parser(prompt, **kw)
    deltas = []
    for a, b in zip(cuts, cuts[1:]):
        deltas += p.feed(ids[a:b])
    return deltas, p.finish()


def rebuild(deltas):
    """(content, reasoning, tool_calls) as an OpenAI client accumulates the
    `choices[0].delta` dicts of `Delta.openai()`."""
    content, reasoning, calls = [], [], {}
    for d in deltas:
        delta = d.openai()
        assert len(delta) == 1
        if "content" in delta:
            content.append(delta["content"])
        elif "reasoning_content" in delta:
            reasoning.append(delta["reasoning_content"])
        else:
            [tc] = delta["tool_calls"]
            i = tc["index"]
            if "id" in tc:  # a call's first delta: id, type, name, no arguments yet
                assert i not in calls and tc["type"] == "function" and tc["function"]["arguments"] == ""
                calls[i] = {"id": tc["id"], "type": "function",
                            "function": {"name": tc["function"]["name"], "arguments": ""}}
            else:
                assert set(tc) == {"index", "function"} and set(tc["function"]) == {"arguments"}
                calls[i]["function"]["arguments"] += tc["function"]["arguments"]
    return "".join(content), "".join(reasoning), [calls[i] for i in sorted(calls)]


def check_stream(tok, ids, prompt, msg, cuts):
    deltas, streamed = stream(tok, ids, prompt, cuts)
    assert streamed == msg
    content, reasoning, calls = rebuild(deltas)
    assert content == msg["content"] and reasoning == (msg["reasoning_content"] or "")
    assert calls == msg["tool_calls"]


def _cases():
    for fmt in FORMATS:
        for h, history in enumerate(HISTORIES):
            for name, turn in TURNS:
                yield pytest.param(fmt, history, turn, id=f"{fmt}-{name}-h{h}")


CASES = list(_cases())


@pytest.mark.parametrize("fmt,history,turn", CASES)
def test_round_trip(toks, fmt, history, turn):
    turn = _turn_for(fmt, turn)
    tok, prompt, ids, full = completion(toks, fmt, history, turn)
    msg = tok.parse_completion(ids, prompt)
    assert without_ids(msg) == expected(fmt, turn)
    for c, original in zip(msg["tool_calls"], turn.get("tool_calls") or ()):
        assert json.loads(c["function"]["arguments"]) == original["function"]["arguments"]
    again = qwen4exp.render_chat(history + [msg], tools=TOOLS, chat_format=fmt)
    assert again.text == full
    assert tok.parse_completion(np.array(ids), prompt) == msg  # the array path
    check_stream(tok, ids, prompt, msg, list(range(len(ids) + 1)))


@pytest.mark.parametrize("fmt,history,turn", [c for c in CASES if "-h0" in c.id])
def test_every_split(toks, fmt, history, turn):
    """Streaming in two parts, cut after every id, equals parsing at once."""
    turn = _turn_for(fmt, turn)
    tok, prompt, ids, _ = completion(toks, fmt, history, turn)
    msg = tok.parse_completion(ids, prompt)
    for k in range(len(ids) + 1):
        check_stream(tok, ids, prompt, msg, [0, k, len(ids)])


@pytest.mark.parametrize("fmt", [f for f in FORMATS if f != "qwen3-2507"])  # qwen3-coder: always off
def test_thinking_off(toks, fmt):
    turn = _turn_for(fmt, dict(TURNS[2][1], reasoning_content=""))
    tok, prompt, ids, full = completion(toks, fmt, HISTORIES[0], turn, enable_thinking=False)
    msg = tok.parse_completion(ids, prompt)
    assert without_ids(msg) == expected(fmt, turn, thinking=False)
    assert qwen4exp.render_chat(HISTORIES[0] + [msg], tools=TOOLS, chat_format=fmt,
                                enable_thinking=False).text == full


def test_streaming_shape(toks):
    """The deltas of a call in order: its first delta names it, then argument
    fragments; a string value streams before its parameter closes."""
    fmt = "qwen3.6"
    turn = _turn_for(fmt, {"content": "", "reasoning_content": "r", "tool_calls": [
        call("search", {"query": "a long query " * 5}), call("get_weather", {"city": "Oslo", "days": 3})]})
    tok, prompt, ids, _ = completion(toks, fmt, HISTORIES[0], turn)
    p = tok.completion_parser(prompt)
    per_id = [p.feed(i) for i in ids]
    msg = p.finish()
    calls = [d for ds in per_id for d in ds if d.kind == "tool_call"]
    firsts = [d for d in calls if d.call_id is not None]
    assert [(d.index, d.name, d.call_id, d.text) for d in firsts] == [
        (k, c["function"]["name"], c["id"], "") for k, c in enumerate(msg["tool_calls"])]
    assert calls.index(firsts[1]) > calls.index(firsts[0]) + 3
    # the query streamed in pieces, each as soon as its id came
    fragments = [d.text for d in calls if d.index == 0 and d.call_id is None]
    assert len(fragments) > 5 and "".join(fragments) == msg["tool_calls"][0]["function"]["arguments"]
    assert fragments[0] == "{\"query\": \"" and any("long" in f for f in fragments[1:])
    # a typed value comes whole once its parameter closes
    assert '3' in [d.text for d in calls if d.index == 1]


# --------------------------------------------------------------------------- the prompt's context


def test_prompt_gives_format_tools_and_open_reasoning(toks):
    fmt = "qwen3.5"
    turn = _turn_for(fmt, {"content": "ok", "reasoning_content": "why",
                           "tool_calls": [call("get_weather", {"city": "7", "days": 7, "metric": True})]})
    tok, prompt, ids, _ = completion(toks, fmt, HISTORIES[0], turn)
    msg = tok.parse_completion(ids, prompt)
    assert msg["reasoning_content"] == "why" and msg["content"] == "ok"
    assert json.loads(msg["tool_calls"][0]["function"]["arguments"]) == {"city": "7", "days": 7, "metric": True}
    # the same with keywords and no prompt (ids differ: the prompt seeds them)
    kw = tok.parse_completion(ids, chat_format=fmt, tools=TOOLS, in_reasoning=True)
    assert without_ids(kw) == without_ids(msg)
    # without the tools the "7" of a string parameter reads as a number
    untyped = tok.parse_completion(ids, prompt, tools=[])
    assert json.loads(untyped["tool_calls"][0]["function"]["arguments"])["city"] == 7
    assert "not one of the request's tools" in untyped["errors"][0]["error"]
    # forgetting that the prompt opened <think> glued reasoning onto the answer
    glued = tok.parse_completion(ids, chat_format=fmt, tools=TOOLS)
    assert glued["reasoning_content"] is None and "pass the prompt" in glued["errors"][0]["error"]
    # a keyword overrides the prompt
    assert tok.parse_completion(ids, prompt, in_reasoning=False)["reasoning_content"] is None


def test_prompt_must_end_with_a_generation_prompt(toks):
    tok = toks["qwen3"]
    chat = qwen4exp.render_chat(HISTORIES[0])
    with pytest.raises(qwen4exp.Qwen4ExpError, match="add_generation_prompt=True"):
        tok.parse_completion([], chat)
    with pytest.raises(TypeError, match="RenderedChat"):
        tok.completion_parser("<|im_start|>assistant\n")
    with pytest.raises(qwen4exp.ChatFormatError, match="unknown chat format"):
        tok.completion_parser(chat_format="qwen4")
    with pytest.raises(ValueError, match="calls_in_reasoning"):
        tok.completion_parser(calls_in_reasoning="execute")
    # a caller-built prompt: SegmentBuilder with the markers
    built = qwen4exp.SegmentBuilder().control("<|im_start|>").text("assistant\n").control("<think>").text("\n").build()
    ids = tok.encode("r\n") + [tok.atoms["</think>"]] + tok.encode("\n\nc") + [tok.atoms["<|im_end|>"]]
    msg = tok.parse_completion(ids, built)
    assert (msg["reasoning_content"], msg["content"]) == ("r", "c")


@pytest.mark.parametrize("fmt", FORMATS)
def test_request_tools(fmt):
    """RenderedChat.request_tools(): the tools a chat was rendered with, read back
    from its preamble, whatever the caller's text spells."""
    fake = 'Be brief.\n<tools>\n{"type": "function", "function": {"name": "fake"}}\n</tools>\n'
    tools = TOOLS + [{"type": "function", "function": {"name": "odd", "description": "a\n<tools>\n{}\n</tools>"}}]
    for system in (None, fake):
        msgs = ([{"role": "system", "content": system}] if system else []) + HISTORIES[0]
        chat = qwen4exp.render_chat(msgs, tools=tools, add_generation_prompt=True, chat_format=fmt)
        assert chat.request_tools() == tools
        assert qwen4exp.render_chat(msgs, add_generation_prompt=True, chat_format=fmt).request_tools() is None
    assert qwen4exp.RenderedChat().request_tools() is None
    # a snapshot: neither the caller's list changed afterwards nor a returned list reaches it
    mine = copy.deepcopy(tools)
    chat = qwen4exp.render_chat(HISTORIES[1], tools=mine, add_generation_prompt=True, chat_format=fmt)
    mine[0]["function"]["name"] = "changed"
    mine.append({"type": "function", "function": {"name": "added"}})
    got = chat.request_tools()
    assert got == tools
    got[0]["function"]["parameters"]["properties"].clear()
    got.pop()
    assert chat.request_tools() == tools


@pytest.mark.parametrize("fmt", FORMATS)
def test_generation_prompt_facts(fmt):
    """add_generation_prompt and opens_reasoning, recorded while rendering, say
    what the official template's prompt is: opened reasoning exactly when its
    text ends with an open THINK block."""
    for agp in (False, True):
        for thinking in (None, False, True):
            if thinking and fmt in NO_THINKING:
                continue
            request = {"messages": HISTORIES[1], "tools": TOOLS, "add_generation_prompt": agp,
                       "enable_thinking": thinking}
            text = reference_text(request, fmt)
            chat = qwen4exp.render_chat(**request, chat_format=fmt)
            assert chat.text == text
            assert chat.add_generation_prompt is agp
            assert chat.opens_reasoning is (agp and text.endswith("<|im_start|>assistant\n<think>\n"))
    empty = qwen4exp.RenderedChat()
    assert (empty.add_generation_prompt, empty.opens_reasoning, empty.request_tools()) == (False, False, None)


def test_call_ids(toks):
    """Same prompt and ids: same call ids, streamed or not; another prompt:
    other ids; unique within a message."""
    fmt = "qwen3.8"
    turn = _turn_for(fmt, TURNS[3][1])
    tok, prompt, ids, _ = completion(toks, fmt, HISTORIES[0], turn)
    a = tok.parse_completion(ids, prompt)
    b = stream(tok, ids, prompt, list(range(len(ids) + 1)))[1]
    got = [c["id"] for c in a["tool_calls"]]
    assert got == [c["id"] for c in b["tool_calls"]] and len(set(got)) == 3
    other = qwen4exp.render_chat(HISTORIES[1], tools=TOOLS, add_generation_prompt=True, chat_format=fmt)
    assert not set(got) & {c["id"] for c in tok.parse_completion(ids, other)["tool_calls"]}


# --------------------------------------------------------------------------- hand-written output


def A(spelling):
    return ("atom", spelling)


def ids_of(tok, *parts):
    out = []
    for p in parts:
        out += [tok.atoms[p[1]]] if isinstance(p, tuple) else tok.encode(p)
    return out


def parse36(toks, body, *, tools=TOOLS, fmt="qwen3.6", before="", after=A("</tool_call>")):
    """Parse `before` <tool_call> body `after` <|im_end|>, at once and one id
    at a time (the deltas rebuilding the message)."""
    tok = toks[VOCAB_OF[fmt]]
    ids = ids_of(tok, before, A("<tool_call>"), body, *([after] if after else []), A("<|im_end|>"))
    msg = tok.parse_completion(ids, chat_format=fmt, tools=tools)
    deltas, streamed = stream(tok, ids, None, list(range(len(ids) + 1)), chat_format=fmt, tools=tools)
    assert streamed == msg
    if "invalid_tool_calls" not in msg:
        assert rebuild(deltas) == (msg["content"], msg["reasoning_content"] or "", msg["tool_calls"])
    return msg


def args_of(msg, k=0):
    return json.loads(msg["tool_calls"][k]["function"]["arguments"])


def errors_of(msg):
    return [e["error"] for e in msg.get("errors", [])]


XML = "\n<function=get_weather>\n<parameter=city>\nDallas\n</parameter>\n<parameter=days>\n2\n</parameter>\n</function>\n"


def test_template_xml(toks):
    msg = parse36(toks, XML)
    assert args_of(msg) == {"city": "Dallas", "days": 2} and "errors" not in msg
    assert msg["tool_calls"][0]["function"]["arguments"] == '{"city": "Dallas", "days": 2}'


@pytest.mark.parametrize("body,args,repairs", [
    # missing </parameter>: the next line opens a parameter
    ("\n<function=get_weather>\n<parameter=city>\nDallas\n<parameter=days>\n2\n</parameter>\n</function>\n",
     {"city": "Dallas", "days": 2}, ["missing </parameter> after parameter 'city'"]),
    # missing </parameter> and </function> at the end
    ("\n<function=get_weather>\n<parameter=city>\nDallas\n", {"city": "Dallas"},
     ["missing </parameter> after parameter 'city'", "missing </function>"]),
    # missing </function>
    ("\n<function=get_weather>\n<parameter=city>\nDallas\n</parameter>\n", {"city": "Dallas"},
     ["missing </function>"]),
    # </function> right after the value
    ("\n<function=get_weather>\n<parameter=city>\nDallas\n</function>\n", {"city": "Dallas"},
     ["missing </parameter> after parameter 'city'"]),
    # parameters in any order, an unknown one kept
    ("\n<function=get_weather>\n<parameter=days>\n2\n</parameter>\n<parameter=wind>\n[1, 2]\n</parameter>\n"
     "<parameter=city>\nOslo\n</parameter>\n</function>\n", {"days": 2, "wind": [1, 2], "city": "Oslo"},
     ["get_weather has no parameter 'wind'"]),
    # a repeated parameter: the first is kept
    ("\n<function=get_weather>\n<parameter=city>\nA\n</parameter>\n<parameter=city>\nB\n</parameter>\n</function>\n",
     {"city": "A"}, ["parameter 'city' given twice"]),
    # text outside any parameter, and after </function>
    ("\n<function=get_weather>\nI will call it.\n<parameter=city>\nA\n</parameter>\n</function>\ntrailing\n",
     {"city": "A"}, ["text outside any parameter", "text outside any parameter"]),
    # a missing '>' after a name
    ("\n<function=get_weather\n<parameter=city\nA\n</parameter>\n</function>\n", {"city": "A"},
     ["missing '>' after 'get_weather'", "missing '>' after 'city'"]),
    # no value at all, no newlines
    ("<function=get_weather><parameter=city></parameter></function>", {"city": ""}, []),
    ("<function=get_weather><parameter=city>X</parameter></function>", {"city": "X"}, []),
    # an unknown tool: kept, typed without a schema
    ("\n<function=lookup>\n<parameter=n>\n5\n</parameter>\n</function>\n", {"n": 5},
     ["'lookup' is not one of the request's tools"]),
])
def test_repairs(toks, body, args, repairs):
    msg = parse36(toks, body)
    assert args_of(msg) == args
    got = errors_of(msg)
    assert len(got) == len(repairs)
    for e, want in zip(got, repairs):
        assert e.startswith("tool call 0: ") and want in e
    assert all(e["position"] == 0 for e in msg.get("errors", []))  # at the call's <tool_call>


def test_missing_tool_call_end(toks):
    msg = parse36(toks, XML, after=None)  # <|im_end|> comes first
    assert args_of(msg) == {"city": "Dallas", "days": 2}
    assert "missing </tool_call>" in errors_of(msg)[0]
    tok = toks["qwen3.6"]  # the next <tool_call> comes first
    ids = ids_of(tok, A("<tool_call>"), XML, A("<tool_call>"), XML, A("</tool_call>"), A("<|im_end|>"))
    msg = tok.parse_completion(ids, chat_format="qwen3.6", tools=TOOLS)
    assert [args_of(msg, k) for k in (0, 1)] == [{"city": "Dallas", "days": 2}] * 2
    assert "before the next <tool_call>" in errors_of(msg)[0]


@pytest.mark.parametrize("body,error", [
    ("", "empty"),
    ("\nI would call get_weather here.\n", "not a JSON object or <function=NAME> XML"),
    ("\n<function=>\n</function>\n", "not a JSON object or <function=NAME> XML"),
    ("\n<func", "not a JSON object or <function=NAME> XML"),
    ('\n{"name": "get_weather", "arguments": {"city": \n', "not a JSON object"),
])
def test_unreadable_bodies(toks, body, error):
    msg = parse36(toks, body, before="Sure.")
    assert msg["tool_calls"] == [] and msg["content"] == "Sure."
    [bad] = msg["invalid_tool_calls"]
    assert bad["index"] == 0 and error in bad["error"]
    assert bad["text"] == body.removeprefix("\n").removesuffix("\n")


def test_json_calls_in_xml_formats_and_xml_in_qwen3(toks):
    body = '\n{"name": "get_weather", "arguments": {"city": "Oslo", "days": 1}}\n'
    assert args_of(parse36(toks, body)) == {"city": "Oslo", "days": 1}
    assert args_of(parse36(toks, XML, fmt="qwen3")) == {"city": "Dallas", "days": 2}


def test_string_values_stream_holding_back_only_delimiters(toks):
    tok = toks["qwen3.6"]
    value = "line one\nline two </parameter> still\n</param"
    ids = ids_of(tok, A("<tool_call>"), f"\n<function=search>\n<parameter=query>\n{value}\n</parameter>\n</function>\n",
                 A("</tool_call>"), A("<|im_end|>"))
    p = tok.completion_parser(chat_format="qwen3.6", tools=TOOLS)
    streamed = ""
    for k, i in enumerate(ids):
        streamed += "".join(d.text for d in p.feed(i) if d.kind == "tool_call")
        text = tok.decode(ids[: k + 1])
        if "<parameter=query>\n" in text and "\n</parameter>\n</function>" not in text:
            # all of the value so far is out, but a tail that may still close it
            so_far = text.split("<parameter=query>\n", 1)[1]
            held = json.loads('"' + streamed.split('"query": "', 1)[1] + '"')
            assert so_far.startswith(held)
            rest = so_far[len(held):]  # only what may still be "\n</parameter>\n</function>"
            assert rest == "" or rest[0] in "\n<" and len(rest) <= len("\n</parameter>\n</function>"), rest
    assert args_of(p.finish()) == {"query": value}


def test_truncated_inside_a_value(toks):
    """A completion cut anywhere: what streamed is never retracted and is a
    prefix of the full stream; a cut call is invalid, never half executed."""
    fmt = "qwen3.6"
    turn = _turn_for(fmt, TURNS[6][1])
    tok, prompt, ids, _ = completion(toks, fmt, HISTORIES[0], turn)
    full_deltas, full = stream(tok, ids, prompt, list(range(len(ids) + 1)))
    full_content, full_reasoning, full_calls = rebuild(full_deltas)
    for k in range(len(ids)):
        deltas, msg = stream(tok, ids, prompt, [0, k])
        content, reasoning, calls = rebuild(deltas)
        assert full_content.startswith(content) and full_reasoning.startswith(reasoning)
        for c, f in zip(calls, full_calls):
            assert c["id"] == f["id"] and f["function"]["arguments"].startswith(c["function"]["arguments"])
        assert msg["errors"][-1]["error"].startswith("truncated")
        assert msg["tool_calls"] == full["tool_calls"][: len(msg["tool_calls"])]
        for bad in msg.get("invalid_tool_calls", []):
            assert bad["index"] == len(msg["tool_calls"]) and "unterminated" in bad["error"]


# --------------------------------------------------------------------------- typing


S = {"type": "string"}
# (schema, format, value text, JSON text of the value, reported?): typed only
# when the text is exactly the template's spelling, else a string (reported
# when the schema asks for another type, or allows one the text loosely reads as)
TYPED = [
    ({"type": "integer"}, "qwen3.6", "42", "42", False),
    ({"type": "integer"}, "qwen3.6", " -7 ", '" -7 "', True),
    ({"type": "integer"}, "qwen3.6", "-0", '"-0"', True),
    ({"type": "integer"}, "qwen3.6", "007", '"007"', True),
    ({"type": "integer"}, "qwen3.6", "4.5", "4.5", True),
    ({"type": "integer"}, "qwen3.6", "many", '"many"', True),
    ({"type": "integer"}, "qwen3.6", "1" * 5000, '"' + "1" * 5000 + '"', True),  # str() cannot write it
    ({"type": "number"}, "qwen3.6", "2.0", "2.0", False),
    ({"type": "number"}, "qwen3.6", "-0.0", "-0.0", False),
    ({"type": "number"}, "qwen3.6", "3", "3", False),
    ({"type": "number"}, "qwen3.6", "1e+20", "1e+20", False),
    ({"type": "number"}, "qwen3.6", "1e-05", "1e-05", False),
    ({"type": "number"}, "qwen3.6", "1.50", '"1.50"', True),
    ({"type": "number"}, "qwen3.6", "1e5", '"1e5"', True),
    ({"type": "number"}, "qwen3.6", ".5", '".5"', True),
    ({"type": "number"}, "qwen3.6", "inf", '"inf"', True),
    ({"type": "number"}, "qwen3.6", "1e400", '"1e400"', True),
    ({"type": "number"}, "qwen3.6", "0.30000000000000000001", '"0.30000000000000000001"', True),
    ({"type": "boolean"}, "qwen3.6", "true", "true", False),
    ({"type": "boolean"}, "qwen3.6", "True", '"True"', True),
    ({"type": "boolean"}, "qwen3.5", "False", "false", False),
    ({"type": "boolean"}, "qwen3.5", "false", '"false"', True),
    ({"type": ["boolean", "string"]}, "qwen3.5", "true", '"true"', True),
    ({"type": ["boolean", "string"]}, "qwen3.6", "True", '"True"', True),
    ({"type": ["boolean", "string"]}, "qwen3.6", "true\n", '"true\\n"', True),
    ({"type": ["boolean", "string"]}, "qwen3.6", "maybe", '"maybe"', False),
    ({"type": ["integer", "string"]}, "qwen3.6", "12", "12", False),
    ({"type": ["integer", "string"]}, "qwen3.6", "12 ", '"12 "', True),
    ({"type": ["number", "string"]}, "qwen3.6", "1.50", '"1.50"', True),
    ({"type": ["string", "null"]}, "qwen3.5", "None", "null", False),
    ({"type": ["string", "null"]}, "qwen3.6", "None", '"None"', True),
    ({"type": ["string", "null"]}, "qwen3.6", " null", '" null"', True),
    ({"type": ["string", "null"]}, "qwen3.6", "none", '"none"', False),
    ({"type": ["integer", "null"]}, "qwen3.6", "None", '"None"', True),
    ({"type": ["integer", "null"]}, "qwen3.6", "null", "null", False),
    ({"type": "string", "nullable": True}, "qwen3.6", "null", "null", False),
    ({"type": "object"}, "qwen3.6", '{"a": [1, 2.5]}', '{"a": [1, 2.5]}', False),
    ({"type": "object"}, "qwen3.6", '{"a":1}', '{"a": 1}', True),  # an object, re-rendered as tojson
    ({"type": "object"}, "qwen3.5", "{'key': 'value', 'n': (1, None, True)}", '{"key": "value", "n": [1, null, true]}', True),
    ({"type": ["object", "string"]}, "qwen3.6", '{"a":1}', '"{\\"a\\":1}"', True),
    ({"type": "array"}, "qwen3.6", "[1, 'two']", '[1, "two"]', True),
    ({"type": "array"}, "qwen3.6", '{"a": 1}', '{"a": 1}', True),
    ({"type": "object"}, "qwen3.6", "{'a': float('nan')}", "\"{'a': float('nan')}\"", True),
    ({"type": "object"}, "qwen3.6", '{"a": 1e400}', '"{\\"a\\": 1e400}"', True),
    ({"type": "array"}, "qwen3.6", "[1e400]", '"[1e400]"', True),
    ({"type": "array"}, "qwen3.6", '["\\ud800"]', '"[\\"\\\\ud800\\"]"', True),
    ({"type": "array"}, "qwen3.6", "[" + "9" * 5000 + "]", '"[' + "9" * 5000 + ']"', True),
    ({"anyOf": [{"type": "integer"}, {"type": "string"}]}, "qwen3.6", "12", "12", False),
    ({"enum": [1, 2, 3]}, "qwen3.6", "2", "2", False),
    (S, "qwen3.6", "  spaced  ", '"  spaced  "', False),
    (S, "qwen3.6", "42", '"42"', False),
    ({}, "qwen3.6", "42", "42", False),  # no type: typed when it is a template spelling
    ({}, "qwen3.6", "true", "true", False),
    ({}, "qwen3.6", "True", '"True"', False),
    ({}, "qwen3.6", "1.50", '"1.50"', False),
    ({}, "qwen3.6", "[1e400]", '"[1e400]"', False),
    ({}, "qwen3.6", '{"a":1}', '"{\\"a\\":1}"', False),
    ({}, "qwen3.5", "True", "true", False),  # 3.5 writes Python's True
    ({}, "qwen3.5", "true", '"true"', False),
    ({}, "qwen3.5", "[1, 2]", "[1, 2]", False),
    ({}, "qwen3.6", "Paris", '"Paris"', False),
]


@pytest.mark.parametrize("schema,fmt,text,typed,error", TYPED)
def test_typed_values(toks, schema, fmt, text, typed, error):
    tools = [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"v": schema}}}}]
    msg = parse36(toks, f"\n<function=f>\n<parameter=v>\n{text}\n</parameter>\n</function>\n",
                  tools=tools, fmt=fmt)
    assert msg["tool_calls"][0]["function"]["arguments"] == '{"v": ' + typed + "}"
    assert any("parameter 'v' of f" in e for e in errors_of(msg)) == error


# --------------------------------------------------------------------------- calls in reasoning


@pytest.mark.parametrize("closed", [True, False])
def test_calls_in_reasoning_are_not_executed(toks, closed):
    """Qwen3.5 sometimes calls a tool before </think>, or never writes it."""
    fmt = "qwen3.5"
    tok = toks["qwen3.6"]
    prompt = qwen4exp.render_chat(HISTORIES[0], tools=TOOLS, add_generation_prompt=True, chat_format=fmt)
    parts = ["Let me look.\n", A("<tool_call>"), XML, A("</tool_call>")]
    parts += [A("</think>"), "\n\nDone."] if closed else []
    ids = ids_of(tok, *parts, A("<|im_end|>"))
    msg = tok.parse_completion(ids, prompt)
    assert msg["tool_calls"] == [] and "invalid_tool_calls" not in msg
    assert msg["reasoning_content"] == "Let me look.\n<tool_call>" + XML + "</tool_call>" + ("" if closed else "")
    at = ids.index(tok.atoms["<tool_call>"])
    assert msg["errors"][0]["position"] == at and "not executed" in msg["errors"][0]["error"]
    if not closed:
        assert "ended inside reasoning" in msg["errors"][-1]["error"]
    deltas, streamed = stream(tok, ids, prompt, list(range(len(ids) + 1)))
    assert streamed == msg and not [d for d in deltas if d.kind == "tool_call"]
    # asked for: recovered as a call, and reported
    got = tok.parse_completion(ids, prompt, calls_in_reasoning="call")
    assert args_of(got) == {"city": "Dallas", "days": 2} and got["reasoning_content"] == "Let me look."
    assert "parsed as a call" in got["errors"][0]["error"]


# --------------------------------------------------------------------------- Qwen3 JSON calls


def test_json_calls_stream_their_arguments(toks):
    tok = toks["qwen3"]
    body = '\n{"name": "search", "arguments": {"query": "a b c d e f", "limit": 3}}\n'
    ids = ids_of(tok, "Sure.\n", A("<tool_call>"), body, A("</tool_call>"), A("<|im_end|>"))
    p = tok.completion_parser(tools=TOOLS)
    pieces = [d for i in ids for d in p.feed(i) if d.kind == "tool_call"]
    msg = p.finish()
    assert pieces[0].name == "search" and pieces[0].call_id == msg["tool_calls"][0]["id"]
    assert len(pieces) > 4 and "".join(d.text for d in pieces) == '{"query": "a b c d e f", "limit": 3}'


def test_newline_before_a_first_call_without_content(toks):
    """The template writes the newline(s) before the first call only after
    content. Qwen3 writes its "\n" after a content of newlines too, which it
    strips to "" after reasoning: with no content, a lone newline is content,
    and of more the last is the template's. 3.5+ writes "\n\n" only after
    content that is not blank: newlines with no content are not its, and are
    dropped and reported."""
    tok = toks["qwen3"]
    for newlines, content in (("\n", "\n"), ("\n\n", "\n"), ("\n\n\n", "\n\n")):
        ids = ids_of(tok, newlines, A("<tool_call>"), XML, A("</tool_call>"), A("<|im_end|>"))
        msg = tok.parse_completion(ids, tools=TOOLS)
        assert msg["content"] == content and len(msg["tool_calls"]) == 1 and "errors" not in msg
    tok = toks["qwen3.6"]
    ids = ids_of(tok, "\n\n", A("<tool_call>"), XML, A("</tool_call>"), A("<|im_end|>"))
    msg = tok.parse_completion(ids, chat_format="qwen3.6", tools=TOOLS)
    assert msg["content"] == "" and len(msg["tool_calls"]) == 1
    assert msg["errors"] == [{"position": ids.index(tok.atoms["<tool_call>"]),
                              "error": msg["errors"][0]["error"], "text": "\n\n"}]
    for fmt, newlines in (("qwen3", "\n"), ("qwen3.6", "\n\n")):  # after content: the template's
        tok = toks[VOCAB_OF[fmt]]
        ids = ids_of(tok, "Hi" + newlines + "\n", A("<tool_call>"), XML, A("</tool_call>"), A("<|im_end|>"))
        msg = tok.parse_completion(ids, chat_format=fmt, tools=TOOLS)
        assert msg["content"] == "Hi\n" and "errors" not in msg


# --------------------------------------------------------------------------- the parser object


def test_copies_are_independent(toks):
    tok = toks["qwen3.6"]
    ids = ids_of(tok, A("<tool_call>"), XML, A("</tool_call>"), A("<|im_end|>"))
    for cut in range(len(ids)):
        p = tok.completion_parser(chat_format="qwen3.6", tools=TOOLS)
        first = p.feed(ids[:cut])
        for c in (copy.copy(p), copy.deepcopy(p)):
            rest = c.feed(ids[cut:])
            assert rebuild(first + rest)[2] == c.finish()["tool_calls"]
        assert p.feed(ids[cut:]) == rest  # the original went on as if never copied
        assert p.finish() == c.finish()
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(p)


def test_delta_shapes():
    d = qwen4exp.Delta("tool_call", "", 2, name="f", call_id="call_" + "a" * 24)
    assert d.openai() == {"tool_calls": [{"index": 2, "id": "call_" + "a" * 24, "type": "function",
                                          "function": {"name": "f", "arguments": ""}}]}
    assert qwen4exp.Delta("tool_call", '{"a"', 2).openai() == {"tool_calls": [{"index": 2, "function": {"arguments": '{"a"'}}]}
    assert qwen4exp.Delta("content", "x").openai() == {"content": "x"}
    assert qwen4exp.Delta("reasoning", "y").openai() == {"reasoning_content": "y"}
    assert pickle.loads(pickle.dumps(d)) == d and d != qwen4exp.Delta("tool_call", "", 2)
    assert tuple(d) == ("tool_call", "", 2)


def test_unsigned_ids_are_named_as_given(toks):
    tok = toks["qwen3"]
    with pytest.raises(qwen4exp.Qwen4ExpError, match="id 18446744073709551615 at index 1"):
        tok.parse_completion(np.array([1, 2**64 - 1], dtype=np.uint64))
    with pytest.raises(qwen4exp.Qwen4ExpError, match="id 9223372036854775808 at index 0"):
        tok.completion_parser().feed(np.array([2**63], dtype=np.uint64))
    assert tok.parse_completion(np.array(tok.encode("hi"), dtype=np.uint64))["content"] == "hi"


_FRAGMENTS = ["<function=get_weather>", "<function=search>", "<parameter=city>", "<parameter=days>",
              "<parameter=query>", "<parameter=limit>", "</parameter>", "</function>", "\n", "\n\n", " ",
              "Oslo", "42", "2.5", "True", "null", "{'a': 1}", '{"b": [1]}', "<", ">", "=", "</param",
              "<tool_call>", "é😀", '{"name": "search", "arguments": {"query": "x"}}']


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(st.sampled_from(_FRAGMENTS), max_size=14), fmt=st.sampled_from(["qwen3.5", "qwen3.6"]),
       closed=st.booleans(), typed=st.booleans())
def test_any_call_body(toks, parts, fmt, closed, typed):
    """Whatever a body holds: split anywhere it parses the same, valid calls
    rebuild exactly from their deltas, and arguments are JSON objects."""
    tok = toks["qwen3.6"]
    ids = ids_of(tok, A("<tool_call>"), "".join(parts), *([A("</tool_call>")] if closed else []), A("<|im_end|>"))
    kw = {"chat_format": fmt, "tools": TOOLS if typed else None}
    msg = tok.parse_completion(ids, **kw)
    for cuts in ([*range(len(ids) + 1)], [0, len(ids) // 2, len(ids)], [0, 1, len(ids)]):
        deltas, streamed = stream(tok, ids, None, cuts, **kw)
        assert streamed == msg
        # (a JSON call whose name spells the separator streams under its first part)
        if "invalid_tool_calls" not in msg and not any(
                '", "arguments": ' in c["function"]["name"] for c in msg["tool_calls"]):
            assert rebuild(deltas)[2] == msg["tool_calls"]
    for c in msg["tool_calls"]:
        assert isinstance(json.loads(c["function"]["arguments"]), dict)
    assert len(msg["tool_calls"]) + len(msg.get("invalid_tool_calls", [])) == 1


# --------------------------------------------------------------------------- generated turns

_NAME = st.from_regex(r"[a-z][a-z0-9_]{0,11}", fullmatch=True)
# Text NFC leaves as it is (HF's normalizer decides): the tokenizer encodes
# DATA in NFC, so a turn written with, say, U+F900 comes back as U+8C48;
# that is normalization's business (tests/test_normalize.py), not the formats'.
_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=30).filter(
    lambda s: normalizers.NFC().normalize_str(s) == s) | st.sampled_from(
    ["", "\n", " a ", "x\ny", "</parameter>", "a</function>b", "<tool_call>", "True", "null", "42"])


def _plain_string(s):
    """A string the XML form can carry exactly: no line that opens a parameter,
    no tag that a parameter could end at."""
    return not (s.startswith("<parameter=") or "\n<parameter=" in s
                or re.search(r"</parameter>\s*\n\s*(<parameter=|</function>)", s)
                or re.search(r"</(parameter|function)>\s*$", s))


_SCALARS = st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False, allow_infinity=False) | _TEXT
_JSONS = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_NAME, inner, max_size=3), max_leaves=6)
_KINDS = {
    "string": ({"type": "string"}, _TEXT.filter(_plain_string)),
    "integer": ({"type": "integer"}, st.integers(-10**12, 10**12)),
    "number": ({"type": "number"}, st.floats(allow_nan=False, allow_infinity=False) | st.integers(-99, 99)),
    "boolean": ({"type": "boolean"}, st.booleans()),
    "nullable": ({"type": ["integer", "null"]}, st.none() | st.integers(0, 9)),
    "object": ({"type": "object"}, st.dictionaries(_NAME, _JSONS, max_size=3)),
    "array": ({"type": "array"}, st.lists(_JSONS, max_size=3)),
}


@st.composite
def _generated(draw):
    fmt = draw(st.sampled_from(FORMATS))
    tools, calls = [], []
    for t in range(draw(st.integers(1, 2))):
        names = draw(st.lists(_NAME, min_size=1, max_size=4, unique=True))
        kinds = [draw(st.sampled_from(sorted(_KINDS))) for _ in names]
        tools.append({"type": "function", "function": {"name": f"tool{t}", "parameters": {
            "type": "object", "properties": {n: _KINDS[k][0] for n, k in zip(names, kinds)}}}})
    for _ in range(draw(st.integers(0, 3))):
        tool = draw(st.sampled_from(tools))["function"]
        props = tool["parameters"]["properties"]
        chosen = draw(st.lists(st.sampled_from(sorted(props)), unique=True, max_size=len(props)))
        args = {n: draw(next(v for s, v in _KINDS.values() if s == props[n])) for n in chosen}
        calls.append(call(tool["name"], args))
    turn = {"content": draw(_TEXT), "reasoning_content": draw(_TEXT)}
    if calls:
        turn["tool_calls"] = calls
    return fmt, tools, _turn_for(fmt, turn)


def _check_generated(toks, fmt, tools, turn):
    tok, prompt, ids, full = completion(toks, fmt, HISTORIES[0], turn, tools=tools)
    msg = tok.parse_completion(ids, prompt)
    assert without_ids(msg) == expected(fmt, turn)
    assert qwen4exp.render_chat(HISTORIES[0] + [msg], tools=tools, chat_format=fmt).text == full
    check_stream(tok, ids, prompt, msg, list(range(len(ids) + 1)))
    k = len(ids) // 3
    check_stream(tok, ids, prompt, msg, [0, k, 2 * k, len(ids)])


test_generated_turns, test_generated_turns_many = property_tests(_check_generated, _generated(), 40, 1000)
