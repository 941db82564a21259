"""Tool-call values in the completion parser: values JSON cannot write back,
and the typing rule (src/qwen4exp/parse/tool_schemas.py, docs/FORMAT.md section 11).

* Values a JSON or Python parser accepts but JSON cannot write back (1e400,
  NaN, Infinity, ints past Python's int-to-text digit limit, lone surrogate
  escapes) in every place a value can stand (an XML value under every
  schema, inside objects and arrays, as a key, in a Python literal, a JSON
  call's arguments and name), parsed at once and one id at a time: nothing
  raises, the two agree, every call's arguments are JSON that can be written
  back, and the message renders again in its format; `qwen4exp parse` prints
  it (no traceback).
* Typing: a value is typed only when its text is the template's own spelling
  of a value of an allowed type; render -> parse -> render is the identity on
  every schema type and union (hypothesis), and a value that keeps its type's
  spelling comes back as that value.
* The renderer's side of the same limit: an XML-format argument int over the
  digit limit is a ChatFormatError, as in the JSON formats.
"""

from __future__ import annotations

import json
import math
import sys

import pytest
from hypothesis import strategies as st

import qwen4exp
from _formats_reference import FORMATS, VOCAB_OF, XML_FORMATS
from helpers import property_tests
from qwen4exp.errors import ChatFormatError

HISTORY = [{"role": "user", "content": "Go."}]


@pytest.fixture(scope="module")
def toks(tok, tok36):
    return {"qwen3": tok, "qwen3.6": tok36}


def tools_with(schema) -> list:
    props = {"v": schema} if schema is not None else {}
    return [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": props}}}]


def _no_constant(name):
    raise ValueError(f"{name} is not JSON")


def writable(arguments: str) -> bool:
    """Whether a call's arguments are a JSON object that JSON can write back."""
    try:
        value = json.loads(arguments, parse_constant=_no_constant)
        json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except ValueError:
        return False
    return isinstance(value, dict)


def parse_both(tok, ids, **kw) -> dict:
    """The one-shot message, checked equal to the one streamed id by id."""
    msg = tok.parse_completion(ids, **kw)
    parser = tok.completion_parser(**kw)
    for i in ids:
        parser.feed(i)
    assert parser.finish() == msg
    return msg


def call_ids(tok, body: str) -> list[int]:
    a = tok.atoms
    return [a["<tool_call>"], *tok.encode(body), a["</tool_call>"], a["<|im_end|>"]]


# --------------------------------------------------------------------------- values JSON cannot write back

HUGE = "9" * (sys.get_int_max_str_digits() + 1)
UNWRITABLE = ["1e400", "-1e400", "1e999999", "NaN", "Infinity", "-Infinity", HUGE, "-" + HUGE,
              '"\\ud800"', '"\\udfff"', '"a\\udc00b"']
# where a value stands in an XML parameter's text ({} is the value)
XML_PLACES = ["{}", "[{}]", '{{"a": {}}}', '[[{{"b": [1, {}]}}]]', "({},)", "{{'a': {}}}", "[1, {}, 3]"]
SCHEMAS = [None, {}, {"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"},
           {"type": "null"}, {"type": "object"}, {"type": "array"}, {"type": ["integer", "string"]},
           {"type": ["number", "null"]}, {"type": ["object", "array"]}, {"anyOf": [{"type": "array"}, {"type": "string"}]}]


def _check_message(msg, fmt, tools):
    for call in msg["tool_calls"]:
        assert writable(call["function"]["arguments"]), call
    json.dumps(msg, ensure_ascii=False, allow_nan=False).encode("utf-8")  # the CLI's output
    clean = {k: msg[k] for k in ("role", "content", "reasoning_content", "tool_calls")}
    qwen4exp.render_chat(HISTORY + [clean], tools=tools, chat_format=fmt)  # renders again


@pytest.mark.parametrize("fmt", XML_FORMATS)
@pytest.mark.parametrize("value", UNWRITABLE, ids=lambda v: v[:12])
def test_xml_values_json_cannot_write(toks, fmt, value):
    tok = toks[VOCAB_OF[fmt]]
    for place in XML_PLACES:
        text = place.format(value)
        body = f"\n<function=f>\n<parameter=v>\n{text}\n</parameter>\n</function>\n"
        ids = call_ids(tok, body)
        for schema in SCHEMAS:
            tools = tools_with(schema) if schema is not None else None
            msg = parse_both(tok, ids, chat_format=fmt, tools=tools)
            assert len(msg["tool_calls"]) == 1, (text, schema, msg)
            assert json.loads(msg["tool_calls"][0]["function"]["arguments"])["v"] == text  # a string
            _check_message(msg, fmt, tools)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("value", UNWRITABLE, ids=lambda v: v[:12])
def test_json_calls_with_values_json_cannot_write(toks, fmt, value):
    """A JSON call body whose arguments hold such a value is invalid (kept
    whole in invalid_tool_calls); a name with a lone surrogate escape too."""
    tok = toks[VOCAB_OF[fmt]]
    bodies = [f'\n{{"name": "f", "arguments": {{"a": {value}}}}}\n',
              f'\n{{"name": "f", "arguments": {{"a": [1, {{"b": {value}}}]}}}}\n',
              f'\n{{"arguments": {{"a": {value}}}, "name": "f"}}\n']
    if value.startswith('"'):  # a string: as a key too
        bodies.append(f'\n{{"name": "f", "arguments": {{{value}: 1}}}}\n')
    for body in bodies:
        msg = parse_both(tok, call_ids(tok, body), chat_format=fmt)
        _check_message(msg, fmt, None)
        assert msg["tool_calls"] == [] and len(msg["invalid_tool_calls"]) == 1, (body, msg)
    # the template writes a name verbatim: its own form names the call with the escape's text
    msg = parse_both(tok, call_ids(tok, '\n{"name": "\\ud800", "arguments": {}}\n'), chat_format=fmt)
    assert msg["tool_calls"][0]["function"]["name"] == "\\ud800"
    msg = parse_both(tok, call_ids(tok, '\n{"arguments": {}, "name": "\\ud800"}\n'), chat_format=fmt)
    assert msg["tool_calls"] == [] and "lone surrogate" in msg["invalid_tool_calls"][0]["error"]


def test_parse_command_prints_the_message(toks, capsys):
    """`qwen4exp parse` on such output prints the message as JSON (exit 0)."""
    from qwen4exp.cli.main import main

    tok = toks["qwen3.6"]
    ids = call_ids(tok, "\n<function=f>\n<parameter=v>\n[1e400]\n</parameter>\n</function>\n")
    assert main(["parse", "--vocab", "qwen3.6", *map(str, ids)]) == 0
    msg = json.loads(capsys.readouterr().out)
    assert json.loads(msg["tool_calls"][0]["function"]["arguments"]) == {"v": "[1e400]"}


@pytest.mark.parametrize("fmt", XML_FORMATS)
def test_renderer_refuses_an_int_it_cannot_write(fmt):
    """An XML-format argument int past the digit limit: ChatFormatError, as
    in the JSON formats (not a bare ValueError from str())."""
    huge = 10 ** (sys.get_int_max_str_digits() + 5)
    for arguments in ({"a": huge}, {"a": [huge]}, {"a": {"b": huge}}):
        turn = {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "f", "arguments": arguments}}]}
        with pytest.raises(ChatFormatError, match=r"tool_calls\[0\].*not JSON-serialisable"):
            qwen4exp.render_chat(HISTORY + [turn], chat_format=fmt)


# --------------------------------------------------------------------------- typing: the round trip

# Strings that look like another type, and values of every type the templates write.
LOOKALIKES = ["12", "12 ", " 12", "-0", "007", "1.50", "1e5", ".5", "1e400", "true", "True", "true\n",
              " null", "None", "null", "[1,2]", "[1, 2]", '{"a":1}', '{"a": 1}', "{'a': 1}", "NaN", ""]
_FLOATS = st.floats(allow_nan=False, allow_infinity=False)
_SCALAR = st.none() | st.booleans() | st.integers(-10**30, 10**30) | _FLOATS | st.sampled_from(LOOKALIKES)
_JSON = st.recursive(_SCALAR, lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.sampled_from(["a", "b", "c d"]), inner, max_size=3), max_leaves=5)
TYPES = ["string", "integer", "number", "boolean", "null", "object", "array"]
_SCHEMA = (st.just({}) | st.sampled_from(TYPES).map(lambda t: {"type": t})
           | st.lists(st.sampled_from(TYPES), min_size=2, max_size=3, unique=True).map(lambda ts: {"type": ts})
           | st.lists(st.sampled_from(TYPES), min_size=2, max_size=2, unique=True).map(
               lambda ts: {"anyOf": [{"type": t} for t in ts]}))


def _value_for(types):
    """Values of the schema's types (any JSON value without a type)."""
    kinds = {"string": st.sampled_from(LOOKALIKES) | st.text(max_size=8).filter(lambda s: "<" not in s),
             "integer": st.integers(-10**30, 10**30), "number": _FLOATS | st.integers(-99, 99),
             "boolean": st.booleans(), "null": st.none(),
             "object": st.dictionaries(st.sampled_from(["a", "b"]), _JSON, max_size=2),
             "array": st.lists(_JSON, max_size=3)}
    return st.one_of([kinds[t] for t in types]) if types else _JSON


@st.composite
def _typed_turn(draw):
    fmt = draw(st.sampled_from(XML_FORMATS))
    schema = draw(_SCHEMA)
    types = schema.get("type") or [s["type"] for s in schema.get("anyOf", [])]
    types = [types] if isinstance(types, str) else types
    value = draw(_value_for(types))
    return fmt, schema, value


def _spelled_as(value, types) -> bool:
    """Whether the parser must give `value` back as it is: its type is allowed
    and its text is no earlier allowed type's spelling (the templates write
    "12" and 12 alike; the schema's order decides)."""
    if isinstance(value, str):
        return set(types) == {"string"}
    if isinstance(value, float) and value.is_integer() and "integer" in types and "number" not in types:
        return False
    return True




def _check_round_trip(toks, fmt, schema, value):
    tok, tools = toks[VOCAB_OF[fmt]], tools_with(schema)
    turn = {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "f", "arguments": {"v": value}}}]}
    full = qwen4exp.render_chat(HISTORY + [turn], tools=tools, chat_format=fmt)
    prompt = qwen4exp.render_chat(HISTORY, tools=tools, add_generation_prompt=True, chat_format=fmt)
    ids = tok.encode_chat(full).tolist()[len(tok.encode_chat(prompt)):]
    ids = ids[: ids.index(tok.atoms["<|im_end|>"]) + 1]
    msg = tok.parse_completion(ids, prompt)
    assert len(msg["tool_calls"]) == 1 and "invalid_tool_calls" not in msg
    clean = {k: msg[k] for k in ("role", "content", "reasoning_content", "tool_calls")}
    assert qwen4exp.render_chat(HISTORY + [clean], tools=tools, chat_format=fmt).text == full.text
    parsed = json.loads(msg["tool_calls"][0]["function"]["arguments"])["v"]
    types = schema.get("type") or [s["type"] for s in schema.get("anyOf", [])] or TYPES
    types = [types] if isinstance(types, str) else types
    if _spelled_as(value, types) and not isinstance(value, str) and value == value:
        assert parsed == value and type(parsed) is type(value) or (
            isinstance(value, (int, float)) and not isinstance(value, bool) and parsed == value), (value, parsed)
    elif isinstance(value, str) and set(types) == {"string"}:
        assert parsed == value


@pytest.mark.parametrize("fmt", XML_FORMATS)
@pytest.mark.parametrize("text", LOOKALIKES)
def test_a_string_in_a_union_stays_the_string_written(toks, fmt, text):
    """["integer", "string"] (and every union with a string): a string the
    renderer wrote comes back as that string unless its text is exactly the
    other type's spelling, in which case the text is the same either way."""
    tok = toks[VOCAB_OF[fmt]]
    for types in (["integer", "string"], ["number", "string"], ["boolean", "string"], ["null", "string"],
                  ["object", "string"], ["array", "string"]):
        tools = tools_with({"type": types})
        body = f"\n<function=f>\n<parameter=v>\n{text}\n</parameter>\n</function>\n"
        msg = parse_both(tok, call_ids(tok, body), chat_format=fmt, tools=tools)
        arguments = msg["tool_calls"][0]["function"]["arguments"]
        parsed = json.loads(arguments)["v"]
        if not isinstance(parsed, str):  # typed: only from the exact spelling, written back the same
            again = {"role": "assistant", "content": "", "tool_calls": [msg["tool_calls"][0]]}
            assert f"<parameter=v>\n{text}\n</parameter>" in qwen4exp.render_chat(
                HISTORY + [again], tools=tools, chat_format=fmt).text
            assert not (isinstance(parsed, float) and not math.isfinite(parsed))
        else:
            assert parsed == text


test_render_parse_render_is_the_identity, test_render_parse_render_many = property_tests(
    _check_round_trip, _typed_turn(), 150, 2000)
