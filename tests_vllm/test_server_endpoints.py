"""The request fields docs/RUNTIMES.md documents, through every chat endpoint
of the real server (`/v1/chat/completions` streamed and not, `/tokenize`,
`/v1/responses` streamed and not): each is answered as documented (the
prompt ids qwen4exp renders, or the 400 that names the field), never with
an error for a valid request, and the server is alive (GET /health) after
each. vLLM hands the renderer different shapes per endpoint (`/tokenize`
and `/v1/responses` keep `tool_calls` and content lists as one-shot
iterators), which is what these catch."""

from __future__ import annotations

import json

import pytest
from _cases import CONVERSATIONS, HOSTILE, TOOLS, reference_messages
from conftest import SERVED_FORMAT

from qwen4exp.formats import chat_format

pytest.importorskip("vllm")


@pytest.fixture(scope="module")
def tok(server, qwen_tokenizers):
    return qwen_tokenizers[server.vocabulary]


def _reference(tok, messages, tools=None, add_generation_prompt=True, **options) -> list[int]:
    chat = tok.render_chat(reference_messages(messages), tools=tools,
                           add_generation_prompt=add_generation_prompt, **options)
    return tok.encode_chat(chat).tolist()


def _alive(server, what) -> None:
    assert server.alive(), f"the server died after {what}:\n{server.log_tail()}"


ROUND_TRIP = CONVERSATIONS["tool round trip"]
ENDS_WITH_ASSISTANT = CONVERSATIONS["history with reasoning_content"][:2]


def _chat_cases(server) -> list[tuple[str, dict, dict | None]]:
    """(name, request fields, render options of the reference; None: a 400)."""
    rules = chat_format(SERVED_FORMAT[server.vocabulary]).rules
    cases = [(f"messages: {name}", {"messages": m, "tools": TOOLS}, {"tools": TOOLS})
             for name, m in CONVERSATIONS.items()]
    cases += [
        ("add_generation_prompt false after tool_calls",
         {"messages": ROUND_TRIP, "tools": TOOLS, "add_generation_prompt": False},
         {"tools": TOOLS, "add_generation_prompt": False}),
        ("add_generation_prompt false after an assistant turn, echo",
         {"messages": ENDS_WITH_ASSISTANT, "add_generation_prompt": False, "echo": True},
         {"add_generation_prompt": False}),
        ("enable_thinking", {"messages": ROUND_TRIP, "tools": TOOLS,
                             "chat_template_kwargs": {"enable_thinking": not rules.thinking}},
         {"tools": TOOLS, "enable_thinking": not rules.thinking}),
        ("tool_choice none", {"messages": ROUND_TRIP, "tools": TOOLS, "tool_choice": "none"}, {"tools": TOOLS}),
        ("tool_choice required", {"messages": ROUND_TRIP, "tools": TOOLS, "tool_choice": "required"},
         {"tools": TOOLS}),
        ("named tool", {"messages": ROUND_TRIP, "tools": TOOLS,
                        "tool_choice": {"type": "function", "function": {"name": "lookup"}}}, {"tools": TOOLS}),
        ("include_reasoning false", {"messages": ROUND_TRIP, "include_reasoning": False}, {}),
        ("logprobs", {"messages": ROUND_TRIP, "logprobs": True, "top_logprobs": 5}, {}),
        ("empty content parts", {"messages": [{"role": "user", "content": []}]}, {}),
        ("tool message name and id", {"messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "a", "type": "function", "function": {
                "name": "lookup", "arguments": json.dumps({"q": "<|im_end|>"})}}]},
            {"role": "tool", "tool_call_id": "a", "name": "lookup", "content": [{"type": "text", "text": "r"}]}],
            "tools": TOOLS}, {"tools": TOOLS}),
        ("continue_final_message", {"messages": ENDS_WITH_ASSISTANT, "continue_final_message": True,
                                    "add_generation_prompt": False}, None),
        ("documents", {"messages": ROUND_TRIP, "documents": [{"title": "t", "text": "x"}]}, None),
        ("chat_template", {"messages": ROUND_TRIP, "chat_template": "{{ messages }}"}, None),
    ]
    if rules.effort is not None:
        cases.append(("reasoning_effort", {"messages": ROUND_TRIP, "reasoning_effort": "low"},
                      {"reasoning_effort": "low", "enable_thinking": True}))
    if rules.preserve is not None:
        cases.append(("preserve_thinking", {"messages": CONVERSATIONS["history with reasoning_content"],
                                            "chat_template_kwargs": {"preserve_thinking": not rules.preserve}},
                      {"preserve_thinking": not rules.preserve}))
    return cases


def test_chat_completions_fields(server, tok):
    for name, fields, options in _chat_cases(server):
        body = {"max_tokens": 6, "temperature": 0, "return_token_ids": True, **fields}
        status, reply = server.post("/v1/chat/completions", body)
        _alive(server, name)
        if options is None:
            assert status == 400, (name, reply)
            continue
        assert status == 200, (name, reply)
        options = dict(options)
        expected = _reference(tok, fields["messages"], options.pop("tools", None), **options)
        assert reply["prompt_token_ids"] == expected, name
        status, events = server.events("/v1/chat/completions", body)
        _alive(server, f"{name} (streamed)")
        assert status == 200 and not [e for e in events if "error" in e], (name, events[-1])
        assert events[0]["prompt_token_ids"] == expected, name
        ids = [i for e in events for c in e.get("choices", []) for i in c.get("token_ids") or []]
        assert ids == (reply["choices"][0]["token_ids"] or []), name  # greedy: the same reply


def test_tokenize_fields(server, tok):
    cases = [(name, {"messages": m, "tools": TOOLS}, {"tools": TOOLS}) for name, m in CONVERSATIONS.items()]
    cases += [
        ("add_generation_prompt false", {"messages": ROUND_TRIP, "tools": TOOLS, "add_generation_prompt": False},
         {"tools": TOOLS, "add_generation_prompt": False}),
        ("chat_template_kwargs", {"messages": ROUND_TRIP, "chat_template_kwargs": {"enable_thinking": False}},
         {"enable_thinking": False}),
        ("empty content parts", {"messages": [{"role": "user", "content": []}]}, {}),
        ("assistant content parts and tool_calls", {"messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": [{"type": "text", "text": "a"}], "tool_calls": [
                {"id": "x", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]},
            {"role": "user", "content": "more"}]}, {}),
        ("continue_final_message", {"messages": ENDS_WITH_ASSISTANT, "continue_final_message": True,
                                    "add_generation_prompt": False}, None),
        ("malformed part", {"messages": [{"role": "user", "content": [{"type": "text"}]}]}, None),
    ]
    for name, fields, options in cases:
        status, reply = server.post("/tokenize", {**fields, "return_token_strs": True})
        _alive(server, f"/tokenize {name}")
        if options is None:
            assert status == 400, (name, reply)
            assert "ValidatorIterator" not in reply["error"]["message"], reply
            continue
        assert status == 200, (name, reply)
        options = dict(options)
        expected = _reference(tok, fields["messages"], options.pop("tools", None), **options)
        assert reply["tokens"] == expected, name
        assert reply["token_strs"] == [tok.id_to_token(i) for i in expected], name


def test_responses_fields(server, tok):
    """/v1/responses: the input as a string, as message items with text parts,
    and with a function call and its output; instructions; tools."""
    flat_tools = [{"type": "function", **t["function"]} for t in TOOLS]
    call = {"type": "function_call", "call_id": "c1", "name": "get_weather",
            "arguments": json.dumps({"city": "Paris <|im_end|>"})}
    cases = [
        ("string input", {"input": HOSTILE, "instructions": "Be brief. <|im_end|>"},
         [{"role": "system", "content": "Be brief. <|im_end|>"}, {"role": "user", "content": HOSTILE}]),
        ("message items", {"input": [{"role": "user", "content": [{"type": "input_text", "text": HOSTILE}]}]},
         [{"role": "user", "content": HOSTILE}]),
        ("function call and output", {"input": [
            {"role": "user", "content": "Weather?"}, call,
            {"type": "function_call_output", "call_id": "c1", "output": "sunny <|im_start|>"}],
            "tools": flat_tools}, None),
    ]
    for name, fields, messages in cases:
        body = {"max_output_tokens": 6, "temperature": 0, **fields}
        status, reply = server.post("/v1/responses", body)
        _alive(server, f"/v1/responses {name}")
        assert status == 200, (name, reply)
        assert reply["status"] in ("completed", "incomplete"), reply
        if messages is not None:
            assert reply["usage"]["input_tokens"] == len(_reference(tok, messages)), name
        status, events = server.events("/v1/responses", body)
        _alive(server, f"/v1/responses {name} (streamed)")
        assert status == 200 and not [e for e in events if e.get("type") == "error" or "error" in e
                                      and e["error"]], (name, events[-1])
        assert events[-1]["type"] == "response.completed" or events[-1]["response"]["status"] == "incomplete"
