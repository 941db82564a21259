"""Token budgets and token spellings against the references.

`fit_chat` is checked against a brute force written here: every way of
dropping the oldest whole turns, each rendered by the format's official
template (transformers' `apply_chat_template`, tests/_formats_reference.py)
and tokenized by HF `tokenizers`, the fewest dropped turns that fit being
the answer. `count_chat` is checked against the same reference ids,
`token_to_id` / `id_to_token` against HF's vocabulary for every id of both
vocabularies.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

import qwen4exp
import qwen4exp.encode.budget

import _chat_reference as ref
import _formats_reference as formats
from helpers import ATOM_FREE, ORACLE_CASES

TOOLS = [
    {"type": "function", "function": {"name": "search", "description": "web search",
                                      "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}},
]
WORDS = "alpha beta gamma δέλτα 数据 значение return x = f(y) — naïve café 🙂 \n".split(" ")


VOCABULARIES = ("qwen3", "qwen3.6")


def tokenizers_of(request, vocab):
    """(our tokenizer, HF tokenizers with the added tokens) of a vocabulary."""
    if vocab == "qwen3.6":
        return request.getfixturevalue("tok36"), request.getfixturevalue("hf_full36")
    return request.getfixturevalue("tok"), request.getfixturevalue("hf_full")


def reference_ids(hf, messages, tools, fmt="qwen3", add_generation_prompt=True, **options):
    text = formats.reference_text({"messages": messages, "tools": tools,
                                   "add_generation_prompt": add_generation_prompt, **options}, fmt)
    return hf.encode(text, add_special_tokens=False).ids


def kept_after(messages, k):
    """The messages left when the k oldest turns are dropped (None: no such k).
    A turn starts at each user message; messages before the first user
    message (after the system message) form the oldest turn."""
    head = 1 if messages and messages[0]["role"] == "system" else 0
    starts = sorted({head} | {i for i, m in enumerate(messages) if m["role"] == "user" and i > head})
    if head == len(messages) or k >= len(starts):
        return None
    return messages[:head] + messages[starts[k]:]


def _text(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n)).strip() or "ok"


def conversation(seed, reasoning=True):
    """A random agent conversation: reasoning (unless not `reasoning`), tool
    calls with one or more results, plain replies, sometimes no system
    message or an opening assistant message."""
    rng = random.Random(seed)
    messages = []
    if rng.random() < 0.7:
        messages.append({"role": "system", "content": _text(rng, rng.randint(1, 30))})
    if rng.random() < 0.2:
        messages.append({"role": "assistant", "content": _text(rng, 5)})
    for _ in range(rng.randint(1, 7)):
        messages.append({"role": "user", "content": _text(rng, rng.randint(1, 40))})
        for _ in range(rng.randint(0, 2)):
            calls = [{"type": "function", "function": {"name": rng.choice(["search", "read"]),
                                                       "arguments": {"q": _text(rng, 3)}}}
                     for _ in range(rng.randint(1, 2))]
            msg = {"role": "assistant", "content": _text(rng, 4) if rng.random() < 0.5 else "",
                   "tool_calls": calls}
            if reasoning and rng.random() < 0.5:
                msg["reasoning_content"] = _text(rng, rng.randint(1, 20))
            messages.append(msg)
            messages.extend({"role": "tool", "content": _text(rng, rng.randint(1, 25))} for _ in calls)
        if rng.random() < 0.8:
            msg = {"role": "assistant", "content": _text(rng, rng.randint(1, 30))}
            if reasoning and rng.random() < 0.5:
                msg["reasoning_content"] = _text(rng, rng.randint(1, 20))
            messages.append(msg)
    return messages, (TOOLS if rng.random() < 0.5 else None)


def check_fit_chat(tok, hf, fmt, seed):
    messages, tools = conversation(seed, reasoning=fmt != "qwen3-2507")
    counts = []  # reference token count with k turns dropped, k = 0, 1, ...
    while (kept := kept_after(messages, len(counts))) is not None:
        counts.append(len(reference_ids(hf, kept, tools, fmt)))
    assert counts == sorted(counts, reverse=True)
    budgets = sorted({0, counts[0] + 5} | {c + d for c in counts for d in (-1, 0, 1)})
    for budget in budgets:
        k = next((k for k, c in enumerate(counts) if c <= budget), None)
        if k is None:
            with pytest.raises(qwen4exp.BudgetError, match=f"budget of {budget}"):
                tok.fit_chat(messages, budget, tools=tools, chat_format=fmt)
            continue
        fit = tok.fit_chat(messages, budget, tools=tools, chat_format=fmt)
        kept = kept_after(messages, k)
        assert fit.messages == kept, (budget, k)
        assert fit.dropped == len(messages) - len(kept)
        assert fit.ids.tolist() == reference_ids(hf, kept, tools, fmt)
        assert len(fit.ids) <= budget
        assert fit.chat == qwen4exp.render_chat(kept, tools=tools, add_generation_prompt=True, chat_format=fmt)


@pytest.mark.parametrize("fmt", formats.FORMATS)
@pytest.mark.parametrize("seed", [0, 1] + [pytest.param(s, marks=pytest.mark.slow) for s in range(2, 6)])
def test_fit_chat_is_the_longest_suffix_of_whole_turns(request, fmt, seed):
    tok, hf = tokenizers_of(request, formats.VOCAB_OF[fmt])
    check_fit_chat(tok, hf, fmt, seed)


@pytest.mark.parametrize("fmt", ["qwen3", "qwen3.8"])
def test_fit_chat_exact_when_every_candidate_is_encoded(request, monkeypatch, fmt):
    """The search alone is exact: with no candidate's ids cut from the full
    encoding, each one is encoded."""
    monkeypatch.setattr(qwen4exp.encode.budget._Full, "cut", lambda self, chat, start, stop: None)
    tok, hf = tokenizers_of(request, formats.VOCAB_OF[fmt])
    for seed in (1, 4):
        check_fit_chat(tok, hf, fmt, seed)


def test_fit_chat_keeps_tool_results_with_their_call(tok):
    messages, tools = conversation(3)
    for budget in range(0, 2000, 37):
        try:
            fit = tok.fit_chat(messages, budget, tools=tools)
        except qwen4exp.BudgetError:
            continue
        rest = [m for m in fit.messages if m["role"] != "system"]
        if fit.dropped:
            assert rest[0]["role"] == "user"
        assert fit.messages[-len(rest):] == messages[len(messages) - len(rest):]


def test_fit_chat_render_options(tok, hf_full):
    hf = hf_full
    messages, _ = conversation(5)
    fit = tok.fit_chat(messages, 10**6, enable_thinking=False)
    assert fit.dropped == 0 and fit.messages == messages
    assert fit.ids.tolist() == reference_ids(hf, messages, None, enable_thinking=False)
    short = tok.fit_chat(messages, len(fit.ids) - 1, add_generation_prompt=False)
    assert short.ids.tolist() == reference_ids(hf, short.messages, None, add_generation_prompt=False)


def test_fit_chat_errors(tok):
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "word " * 200}]
    with pytest.raises(qwen4exp.BudgetError, match="system message and the last user turn.*budget of 50"):
        tok.fit_chat(messages, 50)
    with pytest.raises(qwen4exp.BudgetError, match="no turn to drop"):
        tok.fit_chat(messages[:1], 2)
    for bad in (-1, np.int64(-5), -(2**70)):
        with pytest.raises(qwen4exp.BudgetError, match="budget must be 0 or more tokens"):
            tok.fit_chat(messages, bad)
    for bad in (1.5, 100.0, np.float64(100), None, "10", b"10", True, False, np.bool_(True), [100]):
        with pytest.raises(TypeError, match=r"budget must be an int \(a number of tokens\), not"):
            tok.fit_chat(messages, bad)
    for good in (np.int32(5000), np.uint64(5000), 2**70):  # any integer type, however large
        assert tok.fit_chat(messages, good).dropped == 0
    with pytest.raises(qwen4exp.ChatFormatError):
        tok.fit_chat([{"role": "narrator", "content": "x"}], 10)
    assert issubclass(qwen4exp.BudgetError, qwen4exp.Qwen4ExpError)


@pytest.mark.parametrize("vocab", VOCABULARIES)
def test_count_chat(request, vocab):
    """count_chat in each vocabulary's own format equals the official template's
    token count on every atom-free oracle case that format renders (3.5+ refuse
    a conversation with no user query, as their templates do)."""
    tok, hf = tokenizers_of(request, vocab)
    fmt = tok.chat_format
    counted = 0
    for name in ATOM_FREE:
        case = ORACLE_CASES[name]["request"]
        try:
            chat = tok.render_chat(case["messages"], **formats.render_kwargs(case, fmt))
        except qwen4exp.ChatFormatError:
            with pytest.raises(Exception, match="No user query"):
                formats.reference_text(case, fmt)
            continue
        text = formats.reference_text(case, fmt)
        assert tok.count_chat(chat) == len(hf.encode(text, add_special_tokens=False).ids), name
        counted += 1
    assert counted > len(ATOM_FREE) // 2


def test_chat_of_another_vocabulary_is_refused(request):
    """A chat rendered for one vocabulary's models never gets the other's ids."""
    for vocab in VOCABULARIES:
        tok, _ = tokenizers_of(request, vocab)
        for fmt in qwen4exp.chat_formats():
            chat = qwen4exp.render_chat([{"role": "user", "content": "hi"}], chat_format=fmt)
            if fmt in tok.chat_formats():
                assert tok.count_chat(chat) == len(tok.encode_chat(chat)) > 0
                continue
            for call in (tok.encode_chat, tok.count_chat, lambda c: tok.encode_chats([c]),
                         lambda c: tok.chat_encoder().encode(c), lambda c: tok.completion_parser(c)):
                with pytest.raises(qwen4exp.ChatFormatError, match=f"{fmt} chat format is for"):
                    call(chat)
            with pytest.raises(qwen4exp.ChatFormatError, match="is for the"):
                tok.fit_chat([{"role": "user", "content": "hi"}], 100, chat_format=fmt)


def test_count_chat_types(tok):
    with pytest.raises(TypeError, match="RenderedChat"):
        tok.count_chat([{"role": "user", "content": "hi"}])
    assert tok.count_chat(qwen4exp.RenderedChat()) == 0


@pytest.mark.parametrize("vocab", VOCABULARIES)
def test_token_spellings_equal_hf_for_every_id(request, vocab):
    tok, hf = tokenizers_of(request, vocab)
    by_id = [None] * (max(hf.get_vocab().values()) + 1)
    for token, i in hf.get_vocab().items():
        by_id[i] = token
    assert tok.vocab_size == len(by_id)
    assert [tok.id_to_token(i) for i in range(len(by_id))] == by_id
    assert all(tok.token_to_id(t) == i for i, t in enumerate(by_id))
    for i in (len(by_id), len(by_id) + 1000):
        assert tok.id_to_token(i) is None and hf.id_to_token(i) is None
    assert tok.id_to_token(-1) is None
    assert tok.token_to_id("no such token spelling") is None
    assert tok.token_to_id("Ġworld") == hf.token_to_id("Ġworld")
    assert tok.token_to_id("<|im_end|>") == tok.atoms["<|im_end|>"]
    with pytest.raises(TypeError):
        tok.token_to_id(5)
    with pytest.raises(TypeError):
        tok.id_to_token("5")
