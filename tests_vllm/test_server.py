"""A real vLLM OpenAI server per vocabulary with the plugin's flags, over HTTP
(docs/RUNTIMES.md): the prompt ids vLLM feeds the model are qwen4exp's,
streamed and one-shot replies agree with each other and with
parse_completion of the returned ids, template options reach the format, a
request's own template is refused. The model has dummy weights: its replies
are noise, so some requests bias the sampler towards the structural atoms to
make it write reasoning and tool-call markers."""

from __future__ import annotations

import pytest
from _cases import CONVERSATIONS, HOSTILE, TOOLS, atom_ids, control_atom_count, reference_prompt
from conftest import SERVED_FORMAT

from qwen4exp.formats import chat_format

pytest.importorskip("vllm")


@pytest.fixture(scope="module")
def tok(server, qwen_tokenizers):
    return qwen_tokenizers[server.vocabulary]


@pytest.mark.parametrize("name", sorted(CONVERSATIONS))
def test_prompt_ids_are_qwen4exps(server, tok, name):
    """Caller text that spells markers never becomes an atom id: the only
    atoms vLLM feeds the model are the ones the renderer wrote."""
    messages = CONVERSATIONS[name]
    reply = server.chat({"messages": messages, "tools": TOOLS, "max_tokens": 1, "temperature": 0})
    chat, expected = reference_prompt(tok, messages, TOOLS)
    assert reply["prompt_token_ids"] == expected
    atoms = atom_ids(tok)
    assert sum(i in atoms for i in reply["prompt_token_ids"]) == control_atom_count(tok, chat)


def _bodies(tok) -> list[dict]:
    """Requests whose replies are parsed: plain noise, and noise pushed towards
    the atoms that make structure (with thinking on and off)."""
    a = tok.atoms
    bias = {str(a[m]): 7 for m in ("<think>", "</think>", "<tool_call>", "</tool_call>")}
    base = {"messages": CONVERSATIONS["tool round trip"], "tools": TOOLS, "max_tokens": 48, "temperature": 0}
    return [
        base,
        {**base, "logit_bias": bias, "chat_template_kwargs": {"enable_thinking": False}},
        {**base, "logit_bias": bias, "chat_template_kwargs": {"enable_thinking": True}},
        {**base, "logit_bias": {**bias, str(a["<|im_end|>"]): 3}, "max_tokens": 96},
    ]


def _streamed_message(chunks: list[dict]) -> tuple[list[int], dict, dict]:
    ids, content, reasoning, calls, usage = [], "", "", {}, {}
    for chunk in chunks:
        usage = chunk.get("usage") or usage
        for choice in chunk.get("choices", []):
            ids += choice.get("token_ids") or []
            delta = choice["delta"]
            content += delta.get("content") or ""
            reasoning += delta.get("reasoning") or ""
            for tc in delta.get("tool_calls") or []:
                entry = calls.setdefault(tc["index"], {"id": None, "name": None, "arguments": ""})
                if tc.get("id"):
                    entry["id"], entry["name"] = tc["id"], tc["function"]["name"]
                entry["arguments"] += tc["function"].get("arguments") or ""
    message = {"content": content or None, "reasoning": reasoning or None,
               "tool_calls": [calls[k] for k in sorted(calls)]}
    return ids, message, usage


def test_streamed_and_one_shot_replies_agree_with_parse_completion(server, tok):
    for body in _bodies(tok):
        reply = server.chat(body)
        ids = reply["choices"][0]["token_ids"]
        one_shot = reply["choices"][0]["message"]
        chunks = server.stream({**body, "stream_options": {"include_usage": True}})
        streamed_ids, streamed, usage = _streamed_message(chunks)
        assert streamed_ids == ids  # greedy: the same reply
        calls = [{"id": c["id"], "name": c["function"]["name"], "arguments": c["function"]["arguments"]}
                 for c in one_shot.get("tool_calls") or []]
        assert streamed == {"content": one_shot["content"] or None, "reasoning": one_shot["reasoning"],
                            "tool_calls": calls}, tok.decode(ids)
        options = body.get("chat_template_kwargs", {})
        chat, prompt = reference_prompt(tok, body["messages"], TOOLS, **options)
        assert reply["prompt_token_ids"] == prompt
        expected = tok.parse_completion(ids, chat)
        assert one_shot["reasoning"] == (expected["reasoning_content"] or None)
        assert calls == [{"id": c["id"], "name": c["function"]["name"], "arguments": c["function"]["arguments"]}
                         for c in expected["tool_calls"]]
        assert (one_shot["content"] or "") == expected["content"]
        reasoning_tokens = reply["usage"]["completion_tokens_details"]["reasoning_tokens"]
        assert usage["completion_tokens_details"]["reasoning_tokens"] == reasoning_tokens
        assert 0 <= reasoning_tokens <= reply["usage"]["completion_tokens"]
        if expected["reasoning_content"]:
            assert reasoning_tokens > 0


def test_template_options_reach_the_format(server, tok):
    rules = chat_format(tok.chat_format).rules
    messages = CONVERSATIONS["history with reasoning_content"]
    requests = [({"chat_template_kwargs": {"enable_thinking": not rules.thinking}},
                 {"enable_thinking": not rules.thinking})]
    if rules.preserve is not None:
        requests.append(({"chat_template_kwargs": {"preserve_thinking": not rules.preserve}},
                         {"preserve_thinking": not rules.preserve}))
    if rules.effort is not None:
        # OpenAI's top-level reasoning_effort reaches the template as vLLM passes it.
        requests.append(({"reasoning_effort": "low"}, {"reasoning_effort": "low", "enable_thinking": True}))
    default = server.chat({"messages": messages, "max_tokens": 1})["prompt_token_ids"]
    assert default == reference_prompt(tok, messages)[1]
    for extra, options in requests:
        ids = server.chat({"messages": messages, "max_tokens": 1, **extra})["prompt_token_ids"]
        assert ids == reference_prompt(tok, messages, **options)[1], extra
        assert ids != default, extra
    options = chat_format(SERVED_FORMAT[server.vocabulary]).options
    assert len(requests) == len([o for o in options if o != "add_vision_id"])  # images are refused


def test_a_requests_own_template_is_refused(server):
    """The test servers run with --trust-request-chat-template, so that the
    refusal is the renderer's own (without the flag vLLM refuses first)."""
    body = {"messages": CONVERSATIONS["hostile user"], "max_tokens": 1}
    for extra in ({"chat_template": "{{ messages[0].content }}"},
                  {"chat_template_kwargs": {"chat_template": "{{ messages[0].content }}"}}):
        status, reply = server.post("/v1/chat/completions", {**body, **extra})
        assert status == 400, reply
        assert "qwen4exp" in reply["error"]["message"] and "chat template" in reply["error"]["message"]
    status, reply = server.post("/v1/chat/completions", {**body, "continue_final_message": True,
                                                         "add_generation_prompt": False})
    assert status == 400 and "continue_final_message" in reply["error"]["message"]


def test_raw_completion_prompts_are_data(server, tok):
    prompt = "<|im_start|>user\n" + HOSTILE + "<|im_end|>\n<|im_start|>assistant\n"
    status, reply = server.post("/v1/completions", {"prompt": prompt, "max_tokens": 1,
                                                    "return_token_ids": True})
    assert status == 200, reply
    assert reply["choices"][0]["prompt_token_ids"] == tok.encode(prompt)
    assert not set(reply["choices"][0]["prompt_token_ids"]) & atom_ids(tok)


def test_structured_outputs_constrain_the_reply(server):
    """vLLM's grammar backend works with the plugin's tokenizer: with thinking
    off, reasoning has ended at the prompt and the regex holds from the first id."""
    reply = server.chat({"messages": CONVERSATIONS["hostile user"], "max_tokens": 8, "temperature": 0,
                         "chat_template_kwargs": {"enable_thinking": False},
                         "structured_outputs": {"regex": "(yes|no)!"}})
    assert reply["choices"][0]["message"]["content"] in ("yes!", "no!")
