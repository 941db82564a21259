"""What a parsed message promises about rendering it again (docs/FORMAT.md
section 11, README "what re-renders").

The promise, stated as it is: with the prompt given, a message that reports
nothing (no `errors`, no `invalid_tool_calls`, no `notes`) renders, as the
chat's last turn, to exactly the prompt's text then the completion's text;
whatever a re-render cannot reproduce (whitespace a format trims, newlines the
template writes otherwise, text after a call) is said in `notes` (a value
typed from another spelling is a repair of the call: `errors`). The ids of the re-render are the same text's ids: where
the prompt's last newlines and the model's first ones merge into one id they
differ (tokenization, not the message).
"""

from __future__ import annotations

import pytest
from hypothesis import strategies as st

import qwen4exp
from _formats_reference import FORMATS, NO_THINKING, QWEN35_FAMILY, VOCAB_OF, XML_FORMATS
from _parser_states import IM_END, THINK_END, TOOL_CALL, TOOL_CALL_END, ids_of
from helpers import property_tests

HISTORY = [{"role": "user", "content": "Weather?"}]
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
    "x": {"type": "string"}, "n": {"type": "integer"}, "o": {"type": "object"}}}}}]
WS = ["", "\n", "\n\n", "\n\n\n", " ", " \n", "\n ", "\t"]


@pytest.fixture(scope="module")
def toks(tok, tok36):
    return {"qwen3": tok, "qwen3.6": tok36}


def _options(fmt, thinking):
    return {} if fmt in NO_THINKING else {"enable_thinking": thinking}


def check_promise(tok, fmt, options, completion_ids):
    prompt = qwen4exp.render_chat(HISTORY, tools=TOOLS, add_generation_prompt=True, chat_format=fmt, **options)
    msg = tok.parse_completion(completion_ids, prompt)
    streamed = tok.completion_parser(prompt)
    for i in completion_ids:
        streamed.feed(i)
    assert streamed.finish() == msg
    if "errors" in msg or "invalid_tool_calls" in msg or "notes" in msg:
        assert "notes" not in msg or not ("errors" in msg or "invalid_tool_calls" in msg)
        return msg
    turn = {k: msg[k] for k in ("role", "content", "reasoning_content", "tool_calls")}
    again = qwen4exp.render_chat(HISTORY + [turn], tools=TOOLS, chat_format=fmt, **options)
    assert again.text == prompt.text + tok.decode(completion_ids) + "\n"
    return msg


@st.composite
def _completions(draw):
    fmt = draw(st.sampled_from(FORMATS))
    thinking = draw(st.booleans())
    xml = fmt in XML_FORMATS
    parts = []
    prompt_opens = qwen4exp.render_chat(HISTORY, tools=TOOLS, add_generation_prompt=True, chat_format=fmt,
                                        **_options(fmt, thinking)).opens_reasoning
    if prompt_opens:
        parts += [draw(st.sampled_from(WS)) + "why" + draw(st.sampled_from(WS)), THINK_END]
    parts.append(draw(st.sampled_from(WS)) + draw(st.sampled_from(["", "Hi.", "a\nb"])) + draw(st.sampled_from(WS)))
    for k in range(draw(st.integers(0, 2))):
        if k:
            parts.append(draw(st.sampled_from(["", "\n", "\n\n", " "])))
        value = draw(st.sampled_from(["v", "12", "12 ", "1.50", '{"a": 1}', '{"a":1}', "{'a': 1}"]))
        key = draw(st.sampled_from(["x", "n", "o"]))
        body = (f"\n<function=f>\n<parameter={key}>\n{value}\n</parameter>\n</function>\n" if xml
                else f'\n{{"name": "f", "arguments": {{"{key}": "{value}"}}}}\n')
        parts += [draw(st.sampled_from(["", "\n"])) + body if draw(st.booleans()) else body]
        parts = parts[:-1] + [TOOL_CALL, parts[-1], TOOL_CALL_END]
    parts.append(draw(st.sampled_from(["", "\n"])))
    parts.append(IM_END)
    return fmt, _options(fmt, thinking), parts


def _check_completion(toks, fmt, options, parts):
    tok = toks[VOCAB_OF[fmt]]
    check_promise(tok, fmt, options, ids_of(tok, parts))


test_a_message_without_reports_renders_back_to_the_completion, test_a_message_without_reports_renders_back_many = \
    property_tests(_check_completion, _completions(), 200, 2000)


def test_newlines_before_a_call_after_a_thinking_off_prompt(toks):
    """The reported case: Qwen3, thinking off, newlines then a call with no
    content. One newline is the message's content and renders back; two do not
    (the template strips the content's leading newlines): reported."""
    tok = toks["qwen3"]
    call = [TOOL_CALL, '\n{"name": "f", "arguments": {}}\n', TOOL_CALL_END, IM_END]
    assert "notes" not in check_promise(tok, "qwen3", {"enable_thinking": False}, ids_of(tok, ["\n", *call]))
    msg = check_promise(tok, "qwen3", {"enable_thinking": False}, ids_of(tok, ["\n\n", *call]))
    assert "errors" not in msg and any("re-render" in n["note"] for n in msg["notes"])


@pytest.mark.parametrize("fmt", XML_FORMATS)
def test_trimmed_whitespace_and_respelled_values_are_reported(toks, fmt):
    tok = toks[VOCAB_OF[fmt]]
    body = "\n<function=f>\n<parameter=o>\n{'a': 1}\n</parameter>\n</function>\n"
    # trimmed whitespace: a note; a value typed from another spelling: a repair of the call, an error
    plain = "\n<function=f>\n<parameter=o>\n1\n</parameter>\n</function>\n"
    cases = [([TOOL_CALL, body, TOOL_CALL_END, IM_END], "errors"),
             ([" Hi.", "\n\n", TOOL_CALL, plain, TOOL_CALL_END, IM_END], "errors")]
    if fmt in QWEN35_FAMILY:  # they trim every content; qwen3-coder only the content before calls
        cases += [(["Hi. ", IM_END], "notes"), ([" Hi.", IM_END], "notes")]
    for parts, key in cases:
        msg = check_promise(tok, fmt, {"enable_thinking": False}, ids_of(tok, parts))
        assert msg.get(key) and set(msg) & {"errors", "notes"} == {key}, parts


def test_same_text_not_always_the_same_ids(toks):
    """The prompt ends with "</think>\\n\\n"; the model's "\\n" before a call is
    its content. Re-rendered, the text is the same, but "\\n\\n" + "\\n" is
    one id in the chat's tokenization: the promise is about text."""
    tok = toks["qwen3"]
    prompt = qwen4exp.render_chat(HISTORY, tools=TOOLS, add_generation_prompt=True, enable_thinking=False)
    completion = ids_of(tok, ["\n", TOOL_CALL, '\n{"name": "f", "arguments": {}}\n', TOOL_CALL_END, IM_END])
    msg = check_promise(tok, "qwen3", {"enable_thinking": False}, completion)
    again = tok.encode_chat(qwen4exp.render_chat(HISTORY + [msg], tools=TOOLS, enable_thinking=False)).tolist()
    model = tok.encode_chat(prompt).tolist() + completion + tok.encode("\n")
    assert tok.decode(again) == tok.decode(model) and again != model
