"""Every kind of id through the real server (docs/RUNTIMES.md, "vLLM"):
token-id prompts of ordinary ids, atoms and every row of the model's padded
embedding (Qwen3: 151,936 rows for the tokenizer's 151,669 ids), with echo
and logprobs, and sampled replies whose ids and top-k logprobs meet those
rows. A failure in vLLM's output handler (the tokenizer's decode, the
parser) stops the whole server, so each request is followed by GET /health.
The reference for text is qwen4exp's decode of the ids the tokenizer has,
which the plugin tests hold to transformers' (padded rows spell nothing)."""

from __future__ import annotations

import pytest
from _cases import CONVERSATIONS, TOOLS, reference_prompt
from _model_folders import MODEL_VOCAB_SIZE

pytest.importorskip("vllm")

#: Ids per token-id prompt: a few requests cover every padded row.
CHUNK = 96


@pytest.fixture(scope="module")
def tok(server, qwen_tokenizers):
    return qwen_tokenizers[server.vocabulary]


def _rows(server) -> int:
    return MODEL_VOCAB_SIZE[server.vocabulary]


def _every_kind(tok, rows: int) -> list[int]:
    """Ordinary ids (the first, a spread, the last BPE id), every atom, and
    every padded row up to the model's last one."""
    atoms = sorted(tok.atoms.values())
    last_bpe = atoms[0] - 1
    return [0, 1, 198, 9707, 85 * 1000, last_bpe, *atoms, *range(tok.vocab_size, rows)]


def _text(tok, ids, skip_special: bool) -> str:
    """What the ids spell: padded rows nothing (as transformers decodes them)."""
    return tok.decode([i for i in ids if i < tok.vocab_size], skip_special=skip_special)


def _alive(server, what) -> None:
    assert server.alive(), f"the server died after {what}:\n{server.log_tail()}"


def test_token_id_prompts_of_every_kind_with_echo_and_logprobs(server, tok):
    rows = _rows(server)
    ids = _every_kind(tok, rows)
    assert ids[-1] == rows - 1
    for k in range(0, len(ids), CHUNK):
        prompt = ids[k:k + CHUNK]
        body = {"prompt": prompt, "max_tokens": 2, "echo": True, "logprobs": 5, "temperature": 0,
                "return_token_ids": True}
        status, reply = server.post("/v1/completions", body)
        assert status == 200, reply
        _alive(server, f"/v1/completions echo+logprobs of ids {prompt[0]}..{prompt[-1]}")
        choice = reply["choices"][0]
        out = choice["token_ids"]
        assert choice["prompt_token_ids"] == prompt
        # the reply's text, atoms left out (vLLM's default skip_special_tokens); vLLM
        # echoes a token-id prompt's text only when it has one
        assert choice["text"] in (_text(tok, prompt, True) + _text(tok, out, True), _text(tok, out, True))
        tokens = choice["logprobs"]["tokens"]
        assert len(tokens) == len(prompt) + len(out)
        assert [t for t, i in zip(tokens, prompt + out) if i >= tok.vocab_size] == \
            [""] * sum(i >= tok.vocab_size for i in prompt + out)
        status, reply = server.post("/v1/completions", {**body, "echo": False, "prompt_logprobs": 3})
        assert status == 200, reply
        _alive(server, "the request with prompt_logprobs")
        assert len(reply["choices"][0]["prompt_logprobs"]) == len(prompt)
        status, events = server.events("/v1/completions", body)
        assert status == 200 and not [e for e in events if "error" in e], events[-1]
        _alive(server, "the streamed request")
    status, reply = server.post("/detokenize", {"tokens": ids})
    assert status == 200, reply
    assert reply["prompt"] == _text(tok, ids, False)
    _alive(server, "/detokenize")


def _sampled(server, tok, chat, body: dict) -> list[list[int]]:
    """The output ids of each choice of `body` (one-shot and streamed, which
    must agree), each choice's message checked against parse_completion."""
    rows = _rows(server)
    reply = server.chat(body)
    _alive(server, "a sampled chat completion with logprobs")
    outputs = []
    for choice in reply["choices"]:
        ids = choice["token_ids"]
        expected = tok.parse_completion(ids, chat, embedding_rows=rows)
        message = choice["message"]
        assert (message["content"] or "") == expected["content"]
        assert message.get("reasoning") == (expected["reasoning_content"] or None)
        assert len(choice["logprobs"]["content"]) == len(ids)
        outputs.append(ids)
    chunks = server.stream(body)
    _alive(server, "a streamed sampled chat completion with logprobs")
    streamed: dict[int, list[int]] = {}
    for chunk in chunks:
        assert "error" not in chunk, chunk
        for choice in chunk.get("choices", []):
            streamed.setdefault(choice["index"], []).extend(choice.get("token_ids") or [])
    assert [streamed[k] for k in sorted(streamed)] == outputs  # seeded: the same replies
    return outputs


def test_sampled_padded_rows_and_their_logprobs(server, tok):
    """Replies that write padded rows (allowed_token_ids, which vLLM bounds by
    the model's rows, makes the dummy model write them) are parsed, not
    refused, and their logprobs decoded; so are a natural reply's top-20
    logprobs, where the dummy model ranks such rows."""
    rows = _rows(server)
    messages = CONVERSATIONS["tool round trip"]
    chat, _ = reference_prompt(tok, messages, TOOLS)
    padded = list(range(tok.vocab_size, rows))
    a = tok.atoms
    allowed = [*padded[::len(padded) // 6], padded[-1], *tok.encode(" sunny, 20°C 晴れ"),
               a["<think>"], a["</think>"], a["<tool_call>"], a["</tool_call>"], a["<|im_end|>"]]
    base = {"messages": messages, "tools": TOOLS, "max_tokens": 32, "seed": 0, "logprobs": True}
    outputs = _sampled(server, tok, chat, {**base, "n": 2, "temperature": 1.0, "top_logprobs": 5,
                                           "allowed_token_ids": allowed})
    assert any(i in padded for ids in outputs for i in ids)
    _sampled(server, tok, chat, {**base, "temperature": 1.5, "top_logprobs": 20})
    status, reply = server.post("/v1/completions", {"prompt": [*padded[:3], *tok.encode("Hi")], "max_tokens": 16,
                                                    "seed": 0, "logprobs": 5, "echo": True,
                                                    "allowed_token_ids": allowed, "return_token_ids": True})
    assert status == 200, reply
    _alive(server, "a completion of padded rows")
    out = reply["choices"][0]["token_ids"]
    assert reply["choices"][0]["text"].endswith(_text(tok, out, True))
