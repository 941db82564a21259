"""Render + encode, conversations per second: qwen4exp vs transformers.

    python -m pytest bench/ -k chat_encode --benchmark-only -s

qwen4exp: `render_chat` then `Tokenizer.encode_chat` (ids as numpy int32).
transformers: `apply_chat_template(..., tokenize=True)` with the Qwen3 template
of the bundled vocab/. Same 200 atom-free conversations (bench_render's
corpus); the ids are checked equal once up front.
"""

from __future__ import annotations

import random

import pytest

from bench_render import N_CONVERSATIONS, VOCAB, _conversation

import qwen4exp

_results: dict[str, float] = {}
OURS, PEER = "qwen4exp render_chat + encode_chat", "transformers apply_chat_template(tokenize=True)"


@pytest.fixture(scope="module")
def setup():
    from transformers import AutoTokenizer

    rng = random.Random(20261129)
    corpus = [_conversation(rng) for _ in range(N_CONVERSATIONS)]
    hf = AutoTokenizer.from_pretrained(str(VOCAB))
    tok = qwen4exp.Tokenizer()
    for msgs, opts in corpus:
        ids = hf.apply_chat_template(msgs, tokenize=True, **opts)
        if isinstance(ids, dict) or hasattr(ids, "input_ids"):
            ids = ids["input_ids"]
        assert tok.encode_chat(qwen4exp.render_chat(msgs, **opts)).tolist() == list(ids)
    return corpus, hf, tok


def _report(benchmark, name, capsys):
    _results[name] = N_CONVERSATIONS / benchmark.stats.stats.min
    with capsys.disabled():
        print(f"\n{name}: {_results[name]:,.0f} conversations/s (best round)")
        if OURS in _results and PEER in _results:
            print(f"qwen4exp / transformers: {_results[OURS] / _results[PEER]:.1f}x")


def test_bench_chat_encode_qwen4exp(benchmark, setup, capsys):
    corpus, _, tok = setup
    benchmark.group = "chat render + encode"

    def run():
        for msgs, opts in corpus:
            tok.encode_chat(qwen4exp.render_chat(msgs, **opts))

    benchmark.pedantic(run, rounds=7, warmup_rounds=1)
    _report(benchmark, OURS, capsys)


def test_bench_chat_encode_transformers(benchmark, setup, capsys):
    corpus, hf, _ = setup
    benchmark.group = "chat render + encode"

    def run():
        for msgs, opts in corpus:
            hf.apply_chat_template(msgs, tokenize=True, **opts)

    benchmark.pedantic(run, rounds=3, warmup_rounds=1)
    _report(benchmark, PEER, capsys)
