"""Public test vectors of another tool-call parser for the Qwen3-Coder XML
format, run through qwen4exp's completion parser.

The model outputs, tools and expected calls are vLLM's
tests/tool_parsers/test_qwen3coder_tool_parser.py (vLLM commit
c8e462c487ef33d25414e838b308e6f76bb01286) and the Qwen3 XML parser's
configuration of its common tests (tests/tool_parsers/test_qwen3xml_tool_parser.py
at bb3137d45805ebf82bd54c78ac941fce8074d81a, checks of common_tests.py at
cd20a5785d36d73795dc3e87088ca370f9efe807); Apache-2.0, Copyright
contributors to the vLLM project; ported as data. As there, each output is tokenized with
the model's tokenizer.json (HF `tokenizers`, special tokens recognised, so
`<tool_call>` is its atom id) and the ids are parsed at once and one id at a
time, the stream read the way an OpenAI client reads `choices[0].delta`.
Two differences follow from qwen4exp's rules and are tested as such: no
content is "" (vLLM: None), and a call written with no tool-call atom at all
is text (structure comes only from atom ids).
"""

from __future__ import annotations

import json

import pytest

from qwen4exp.formats import chat_format

WEATHER = {"type": "function", "function": {
    "name": "get_current_weather", "description": "Get the current weather",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "The city name"},
        "state": {"type": "string", "description": "The state code"},
        "unit": {"type": "string", "enum": ["fahrenheit", "celsius"]}},
        "required": ["city", "state"]}}}
AREA = {"type": "function", "function": {
    "name": "calculate_area", "description": "Calculate area of a shape",
    "parameters": {"type": "object", "properties": {
        "shape": {"type": "string"}, "dimensions": {"type": "object"}, "precision": {"type": "integer"}}}}}
SAMPLE_TOOLS = [WEATHER, AREA]
TYPED_TOOLS = [{"type": "function", "function": {"name": "test_types", "parameters": {
    "type": "object", "properties": {
        "int_param": {"type": "integer"}, "float_param": {"type": "float"}, "bool_param": {"type": "boolean"},
        "str_param": {"type": "string"}, "obj_param": {"type": "object"}}}}}]

DALLAS = ("<tool_call>\n<function=get_current_weather>\n<parameter=city>\nDallas\n</parameter>\n"
          "<parameter=state>\nTX\n</parameter>\n<parameter=unit>\nfahrenheit\n</parameter>\n</function>\n</tool_call>")
ORLANDO = ("<tool_call>\n<function=get_current_weather>\n<parameter=city>\nOrlando\n</parameter>\n"
           "<parameter=state>\nFL\n</parameter>\n<parameter=unit>\n{unit}\n</parameter>\n</function>\n</tool_call>")
RECTANGLE = ('<tool_call>\n<function=calculate_area>\n<parameter=shape>\nrectangle\n</parameter>\n'
             '<parameter=dimensions>\n{"width": 10, \n "height": 20}\n</parameter>\n<parameter=precision>\n2\n'
             '</parameter>\n</function>\n</tool_call>')
CIRCLE = ('Let me calculate that area for you.<tool_call>\n<function=calculate_area>\n<parameter=shape>\ncircle\n'
          '</parameter>\n<parameter=dimensions>\n{"radius": 15.5}\n</parameter>\n<parameter=precision>\n3\n'
          '</parameter>\n</function>\n</tool_call>')
DALLAS_ARGS = {"city": "Dallas", "state": "TX", "unit": "fahrenheit"}

# (id, model output, [(name, arguments)], content)
EXTRACT = [
    ("single_tool", DALLAS, [("get_current_weather", DALLAS_ARGS)], None),
    ("single_tool_with_content", "Sure! Let me check the weather for you." + DALLAS,
     [("get_current_weather", DALLAS_ARGS)], "Sure! Let me check the weather for you."),
    ("single_tool_multiline_param", RECTANGLE,
     [("calculate_area", {"shape": "rectangle", "dimensions": {"width": 10, "height": 20}, "precision": 2})], None),
    ("parallel_tools", DALLAS + "\n" + ORLANDO.format(unit="fahrenheit"),
     [("get_current_weather", DALLAS_ARGS),
      ("get_current_weather", {"city": "Orlando", "state": "FL", "unit": "fahrenheit"})], None),
    ("tool_with_typed_params", CIRCLE,
     [("calculate_area", {"shape": "circle", "dimensions": {"radius": 15.5}, "precision": 3})],
     "Let me calculate that area for you."),
]
STREAMING = [
    ("no_tools", "This is a test without tools", [], "This is a test without tools"),
    *EXTRACT[:3],
    ("parallel_tools", DALLAS + "\n" + ORLANDO.format(unit="celsius"),
     [("get_current_weather", DALLAS_ARGS),
      ("get_current_weather", {"city": "Orlando", "state": "FL", "unit": "celsius"})], None),
    EXTRACT[4],
]
MISSING_PARAMETER_END = ("Let me check the weather for you:\n<tool_call>\n<function=get_current_weather>\n"
                         "<parameter=city>\nDallas\n<parameter=state>\nTX\n</parameter>\n<parameter=unit>\n"
                         "fahrenheit\n</parameter>\n</function>\n</tool_call>")


@pytest.fixture(scope="module", params=["qwen3", "qwen3.6"])
def model(request, tok, tok36):
    """(our tokenizer, the reference tokenizer.json with its special tokens), for
    the format of that vocabulary (an XML body is read in a JSON-call format too)."""
    if request.param == "qwen3.6":
        return tok36, request.getfixturevalue("hf_full36")
    return tok, request.getfixturevalue("hf_full")


def template_newlines(model):
    """The newlines "\n\n" before a first call leaves as content in the
    tokenizer's format: the JSON-call formats write one there, the XML ones two."""
    return "\n" if chat_format(model[0].chat_format).tool_calls == "json" else ""


def ids_of(model, output):
    tok, hf = model
    return hf.encode(output, add_special_tokens=False).ids + [tok.atoms["<|im_end|>"]]


def parse(model, output, tools):
    tok, _ = model
    return tok.parse_completion(ids_of(model, output), tools=tools)


def stream(model, output, tools):
    """(deltas as OpenAI-style dicts, one per id fed, the final message)."""
    tok, _ = model
    ids = ids_of(model, output)
    p = tok.completion_parser(tools=tools)
    chunks = [[d.openai() for d in p.feed(i)] for i in ids]
    msg = p.finish()
    assert msg == tok.parse_completion(ids, tools=tools)
    return [c for per_id in chunks for c in per_id], msg


def accumulate(deltas):
    """vLLM's test client: content, and per call index its id, type, name, arguments."""
    content, states = "", {}
    for delta in deltas:
        assert "role" not in delta
        content += delta.get("content") or ""
        for call in delta.get("tool_calls") or ():
            state = states.setdefault(call["index"], {"id": None, "name": None, "arguments": "", "type": None})
            if call.get("id"):
                state["id"] = call["id"]
            if call.get("type"):
                assert call["type"] == "function"
                state["type"] = call["type"]
            function = call.get("function") or {}
            if function.get("name"):
                assert state["name"] is None  # set once
                state["name"] = function["name"]
            if function.get("arguments") is not None:
                state["arguments"] += function["arguments"]
    return content, states


def assert_calls(calls, expected):
    assert len(calls) == len(expected)
    for call, (name, arguments) in zip(calls, expected):
        assert call["type"] == "function" and call["function"]["name"] == name
        assert json.loads(call["function"]["arguments"]) == arguments


def test_extract_tool_calls_no_tools(model):
    output = "This is a test response without any tool calls"
    msg = parse(model, output, None)
    assert msg["tool_calls"] == [] and msg["content"] == output


@pytest.mark.parametrize("output,expected,content", [c[1:] for c in EXTRACT], ids=[c[0] for c in EXTRACT])
def test_extract_tool_calls(model, output, expected, content):
    msg = parse(model, output, SAMPLE_TOOLS)
    assert_calls(msg["tool_calls"], expected)
    assert msg["content"] == (content or "")


def test_extract_tool_calls_fallback_no_tags(model):
    """vLLM reads a call from `<function=...>` text with no tool-call atom at
    all; here that is text (structure comes only from atom ids)."""
    output = ("<function=get_current_weather>\n<parameter=city>\nDallas\n</parameter>\n<parameter=state>\nTX\n"
              "</parameter>\n</function>")
    msg = parse(model, output, SAMPLE_TOOLS)
    assert msg["tool_calls"] == [] and msg["content"] == output


def test_extract_tool_calls_type_conversion(model):
    output = ('<tool_call>\n<function=test_types>\n<parameter=int_param>\n42\n</parameter>\n'
              '<parameter=float_param>\n3.14\n</parameter>\n<parameter=bool_param>\ntrue\n</parameter>\n'
              '<parameter=str_param>\nhello world\n</parameter>\n<parameter=obj_param>\n{"key": "value"}\n'
              '</parameter>\n</function>\n</tool_call>')
    args = json.loads(parse(model, output, TYPED_TOOLS)["tool_calls"][0]["function"]["arguments"])
    assert args == {"int_param": 42, "float_param": 3.14, "bool_param": True, "str_param": "hello world",
                    "obj_param": {"key": "value"}}


@pytest.mark.parametrize("output,expected,content", [c[1:] for c in STREAMING], ids=[c[0] for c in STREAMING])
def test_extract_tool_calls_streaming(model, output, expected, content):
    deltas, msg = stream(model, output, SAMPLE_TOOLS)
    got, states = accumulate(deltas)
    assert got == (content or "")
    assert len(states) == len(expected) == len(msg["tool_calls"])
    for k, (name, arguments) in enumerate(expected):
        state = states[k]
        assert state["id"] == msg["tool_calls"][k]["id"] and state["type"] == "function"
        assert state["name"] == name and json.loads(state["arguments"]) == arguments
        assert state["arguments"] == msg["tool_calls"][k]["function"]["arguments"]


def test_extract_tool_calls_missing_closing_parameter_tag(model):
    msg = parse(model, MISSING_PARAMETER_END, SAMPLE_TOOLS)
    assert_calls(msg["tool_calls"], [("get_current_weather", DALLAS_ARGS)])
    assert "Let me check the weather for you:" in msg["content"]
    assert any("missing </parameter>" in e["error"] for e in msg["errors"])


def test_extract_tool_calls_streaming_missing_closing_tag(model):
    deltas, _ = stream(model, MISSING_PARAMETER_END, SAMPLE_TOOLS)
    content, states = accumulate(deltas)
    assert "Let me check the weather for you:" in content
    assert len(states) == 1 and states[0]["id"] is not None and states[0]["type"] == "function"
    assert states[0]["name"] == "get_current_weather" and json.loads(states[0]["arguments"]) == DALLAS_ARGS


def test_extract_tool_calls_streaming_incremental(model):
    output = ("I'll check the weather.<tool_call>\n<function=get_current_weather>\n<parameter=city>\nDallas\n"
              "</parameter>\n<parameter=state>\nTX\n</parameter>\n</function>\n</tool_call>")
    chunks, _ = stream(model, output, SAMPLE_TOOLS)
    assert len(chunks) > 3
    assert chunks[0].get("content") is not None and not chunks[0].get("tool_calls")
    header = next(c["tool_calls"][0] for c in chunks if c.get("tool_calls") and c["tool_calls"][0].get("id"))
    assert header["function"] == {"name": "get_current_weather", "arguments": ""} and header["type"] == "function"
    arg_chunks = [c["tool_calls"][0]["function"]["arguments"] for c in chunks
                  if c.get("tool_calls") and c["tool_calls"][0]["function"].get("arguments")]
    assert len(arg_chunks) > 1
    assert json.loads("".join(arg_chunks)) == {"city": "Dallas", "state": "TX"}


def test_extract_tool_calls_complex_type_with_single_quote(model):
    output = ("<tool_call>\n<function=test_types>\n<parameter=obj_param>\n{'key': 'value'}\n</parameter>\n"
              "</function>\n</tool_call>")
    args = json.loads(parse(model, output, TYPED_TOOLS)["tool_calls"][0]["function"]["arguments"])
    assert args["obj_param"] == {"key": "value"}


def test_extract_tool_calls_streaming_missing_opening_tag(model):
    """No <tool_call> atom, but its </tool_call>: the `<function=` line opens the
    call (reported as a repair)."""
    output = ("I'll check the weather for you.\n\n<function=get_current_weather>\n<parameter=city>\nDallas\n"
              "</parameter>\n<parameter=state>\nTX\n</parameter>\n<parameter=unit>\nfahrenheit\n</parameter>\n"
              "</function>\n</tool_call>")
    deltas, msg = stream(model, output, SAMPLE_TOOLS)
    content, states = accumulate(deltas)
    assert "I'll check the weather for you." in content
    assert len(states) == 1 and states[0]["id"] is not None and states[0]["type"] == "function"
    assert states[0]["name"] == "get_current_weather" and json.loads(states[0]["arguments"]) == DALLAS_ARGS
    assert any("without <tool_call>" in e["error"] for e in msg["errors"])


def test_streaming_no_whitespace_content_before_tool_call(model):
    output = ("\n\n<tool_call>\n<function=get_current_weather>\n<parameter=city>\nDallas\n</parameter>\n"
              "<parameter=state>\nTX\n</parameter>\n</function>\n</tool_call>")
    deltas, msg = stream(model, output, SAMPLE_TOOLS)
    content, states = accumulate(deltas)
    assert content == msg["content"] == template_newlines(model)
    assert len(states) == 1 and states[0]["name"] == "get_current_weather"
    assert json.loads(states[0]["arguments"]) == {"city": "Dallas", "state": "TX"}


# --------------------------------------------------------------------------- the common tests' vectors

XML_SINGLE = "<tool_call>\n<function=get_weather>\n<parameter=city>Tokyo</parameter>\n</function>\n</tool_call>"
XML_OUTPUTS = {
    "single": XML_SINGLE,
    "parallel": XML_SINGLE + "<tool_call>\n<function=get_time>\n<parameter=timezone>Asia/Tokyo</parameter>\n"
                             "</function>\n</tool_call>",
    "various_data_types": (
        "<tool_call>\n<function=test_function>\n<parameter=string_field>hello</parameter>\n"
        "<parameter=int_field>42</parameter>\n<parameter=float_field>3.14</parameter>\n"
        "<parameter=bool_field>true</parameter>\n<parameter=null_field>null</parameter>\n"
        '<parameter=array_field>["a", "b", "c"]</parameter>\n<parameter=object_field>{"nested": "value"}</parameter>\n'
        "</function>\n</tool_call>"),
    "empty_arguments": "<tool_call>\n<function=refresh>\n</function>\n</tool_call>",
    "surrounding_text": ("Let me check the weather for you.\n\n<tool_call>\n<function=get_weather>\n"
                         "<parameter=city>Tokyo</parameter>\n</function>\n</tool_call>\n\nI will get that information."),
    "escaped_strings": ("<tool_call>\n<function=test_function>\n<parameter=quoted>He said \"hello\"</parameter>\n"
                        "<parameter=path>C:\\Users\\file.txt</parameter>\n<parameter=newline>line1\nline2</parameter>\n"
                        "</function>\n</tool_call>"),
}


@pytest.mark.parametrize("streaming", [False, True])
def test_common_vectors(model, streaming):
    """The common tests' checks, without tools (values typed as JSON when they are JSON)."""
    def run(output):
        deltas, msg = stream(model, output, None)
        if not streaming:
            return msg["content"], msg["tool_calls"]
        content, states = accumulate(deltas)
        return content, [{"id": st["id"], "type": st["type"], "function": {"name": st["name"], "arguments": st["arguments"]}}
                         for _, st in sorted(states.items())]

    content, calls = run("This is a regular response without any tool calls.")
    assert content == "This is a regular response without any tool calls." and calls == []
    content, calls = run(XML_OUTPUTS["single"])
    assert len(calls) == 1 and calls[0]["type"] == "function" and calls[0]["function"]["name"] == "get_weather"
    assert json.loads(calls[0]["function"]["arguments"]) == {"city": "Tokyo"}
    content, calls = run(XML_OUTPUTS["parallel"])
    assert [c["function"]["name"] for c in calls] == ["get_weather", "get_time"]
    assert len({c["id"] for c in calls}) == 2
    _, calls = run(XML_OUTPUTS["various_data_types"])
    args = json.loads(calls[0]["function"]["arguments"])
    assert args == {"string_field": "hello", "int_field": 42, "float_field": 3.14, "bool_field": True,
                    "null_field": None, "array_field": ["a", "b", "c"], "object_field": {"nested": "value"}}
    _, calls = run(XML_OUTPUTS["empty_arguments"])
    assert len(calls) == 1 and calls[0]["function"]["arguments"] == "{}"
    content, calls = run(XML_OUTPUTS["surrounding_text"])
    assert len(calls) == 1
    assert content == "Let me check the weather for you." + template_newlines(model) + "\n\nI will get that information."
    _, calls = run(XML_OUTPUTS["escaped_strings"])
    assert json.loads(calls[0]["function"]["arguments"]) == {
        "quoted": 'He said "hello"', "path": "C:\\Users\\file.txt", "newline": "line1\nline2"}
    for malformed in ("<tool_call><function=func>", "<tool_call><function=></function></tool_call>"):
        run(malformed)  # no exception


@pytest.mark.parametrize("name", sorted(XML_OUTPUTS))
def test_streaming_reconstruction(model, name):
    deltas, msg = stream(model, XML_OUTPUTS[name], None)
    content, states = accumulate(deltas)
    assert content == msg["content"]
    assert [{"id": st["id"], "type": "function", "function": {"name": st["name"], "arguments": st["arguments"]}}
            for _, st in sorted(states.items())] == msg["tool_calls"]
