"""Conversations per second: qwen4exp.render_chat vs transformers' apply_chat_template.

    PYTHONPATH=src python -m pytest bench/bench_render.py --benchmark-only -n 0 -s

Both render the same atom-free corpus of 200 conversations (so their text is
identical, checked once up front) with the Qwen3 template from the bundled
vocab/; the benchmarks print conversations/s and the throughput ratios, also
against the compiled Jinja template alone (no apply_chat_template overhead).
"""

from __future__ import annotations

import os
import random
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest

from common import chat_conversation

from qwen4exp.render.chat import render_chat

VOCAB = Path(__file__).resolve().parents[1] / "vocab"
N_CONVERSATIONS = 200
_results: dict[str, float] = {}

@pytest.fixture(scope="module")
def corpus():
    rng = random.Random(20261129)
    return [chat_conversation(rng) for _ in range(N_CONVERSATIONS)]


@pytest.fixture(scope="module")
def hf_tokenizer(corpus):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(VOCAB))
    for msgs, opts in corpus:  # same work on both sides
        assert render_chat(msgs, **opts).text == tok.apply_chat_template(msgs, tokenize=False, **opts)
    return tok


OURS = "qwen4exp.render_chat"
PEERS = ("transformers.apply_chat_template", "jinja2 compiled Qwen3 template (render only)")


def _report(benchmark, name: str, capsys) -> None:
    # median: the 2-core CI boxes are noisy, and the mean follows the noise
    per_sec = N_CONVERSATIONS / benchmark.stats.stats.median
    _results[name] = per_sec
    with capsys.disabled():
        print(f"\n{name}: {per_sec:,.0f} conversations/s (median round)")
        for peer in PEERS:
            if OURS in _results and peer in _results and name in (OURS, peer):
                print(f"render_chat / {peer}: {_results[OURS] / _results[peer]:.2f}x")


def test_bench_render_chat(benchmark, corpus, hf_tokenizer, capsys):
    benchmark.group = "chat render"

    def run():
        for msgs, opts in corpus:
            render_chat(msgs, **opts)

    benchmark(run)
    _report(benchmark, OURS, capsys)


def test_bench_apply_chat_template(benchmark, corpus, hf_tokenizer, capsys):
    benchmark.group = "chat render"

    def run():
        for msgs, opts in corpus:
            hf_tokenizer.apply_chat_template(msgs, tokenize=False, **opts)

    benchmark(run)
    _report(benchmark, PEERS[0], capsys)


def test_bench_jinja_render_only(benchmark, corpus, hf_tokenizer, capsys):
    """The template alone, as transformers compiles it, without apply_chat_template's overhead."""
    from transformers.utils.chat_template_utils import _compile_jinja_template

    template = _compile_jinja_template(hf_tokenizer.chat_template)
    benchmark.group = "chat render"

    def run():
        for msgs, opts in corpus:
            template.render(messages=msgs, **opts)

    assert template.render(messages=corpus[0][0], **corpus[0][1]) == render_chat(
        corpus[0][0], **corpus[0][1]).text
    benchmark(run)
    _report(benchmark, PEERS[1], capsys)
