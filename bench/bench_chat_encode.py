"""Render + encode, conversations per second: qwen4exp vs transformers.

    python -m pytest bench/ -k chat_encode --benchmark-only -n 0 -s
    python bench/bench_chat_encode.py          # the chat hot path table only

qwen4exp: `render_chat` then `Tokenizer.encode_chat` (ids as numpy int32).
transformers: `apply_chat_template(..., tokenize=True)` with the Qwen3 template
of the bundled vocab/. Same 200 atom-free conversations (bench_render's
corpus, common.chat_conversation); the ids are checked equal once up front.

The chat hot path (`test_bench_chat_hot_path`), in one run:

* a fresh ~4 KB conversation (system prompt, tools, 3 user turns, a tool
  call and its result), render + encode: qwen4exp, transformers, and
  transformers with `fastokens.patch_transformers()` applied (a second
  AutoTokenizer loaded after the patch; the first stays plain);
* a growing 60-turn agent transcript (~200 KB at the end): at each of turns
  41-60 the server renders the whole history plus the new user message with
  the generation prompt and tokenizes it. Per turn: a full `encode_chat`,
  `ChatEncoder.encode` (the encoder having seen the previous turn), both
  with the render included, and the two transformers variants.

Every id sequence is checked equal to transformers' before timing. Times are
the best of several rounds with the GC off (bench/common.best_of).
"""

from __future__ import annotations

import gc
import os
import random
import sys
import time
from pathlib import Path

if __name__ == "__main__":  # run as a script: the same imports bench/conftest.py arranges
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import pytest

from bench_render import N_CONVERSATIONS, VOCAB
from common import CHAT_TOOLS, CHAT_WORDS, best_of, chat_conversation

import qwen4exp

_results: dict[str, float] = {}
OURS, PEER = "qwen4exp render_chat + encode_chat", "transformers apply_chat_template(tokenize=True)"


@pytest.fixture(scope="module")
def setup():
    from transformers import AutoTokenizer

    rng = random.Random(20261129)
    corpus = [chat_conversation(rng) for _ in range(N_CONVERSATIONS)]
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


# --------------------------------------------------------------------------- the chat hot path


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(CHAT_WORDS) for _ in range(n))


def fresh_conversation():
    """~4 KB: system prompt, tools, 3 user turns, a tool call and its result."""
    rng = random.Random(4096)
    msgs = [
        {"role": "system", "content": _words(rng, 60)},
        {"role": "user", "content": _words(rng, 70)},
        {"role": "assistant", "content": _words(rng, 80), "reasoning_content": _words(rng, 30)},
        {"role": "user", "content": _words(rng, 60)},
        {"role": "assistant", "content": "", "reasoning_content": _words(rng, 25),
         "tool_calls": [{"type": "function", "function": {
             "name": "tool_1", "arguments": {"city": "paris", "days": 3}}}]},
        {"role": "tool", "content": '{"result": "%s"}' % _words(rng, 40)},
        {"role": "assistant", "content": _words(rng, 60)},
        {"role": "user", "content": _words(rng, 40)},
    ]
    return msgs, {"tools": CHAT_TOOLS, "add_generation_prompt": True}


def growing_transcript(turns: int = 60):
    """The requests of a growing agent transcript: turn t's request is the
    history of turns 1..t-1 plus turn t's user message, with the generation
    prompt. Each turn adds ~3.3 KB (every third one a tool call and result)."""
    rng = random.Random(60)
    history = [{"role": "system", "content": _words(rng, 80)}]
    requests = []
    for t in range(turns):
        history.append({"role": "user", "content": _words(rng, 120)})
        requests.append((list(history), {"tools": CHAT_TOOLS, "add_generation_prompt": True}))
        if t % 3 == 2:
            history.append({"role": "assistant", "content": "", "reasoning_content": _words(rng, 60),
                            "tool_calls": [{"type": "function", "function": {
                                "name": "tool_2",
                                "arguments": {"city": rng.choice(CHAT_WORDS), "days": t}}}]})
            history.append({"role": "tool", "content": '{"result": "%s"}' % _words(rng, 150)})
        history.append({"role": "assistant", "content": _words(rng, 250),
                        "reasoning_content": _words(rng, 80)})
    return requests


def _hf_ids(hf, msgs, opts):
    ids = hf.apply_chat_template(msgs, tokenize=True, **opts)
    if isinstance(ids, dict) or hasattr(ids, "input_ids"):
        ids = ids["input_ids"]
    return list(ids)


def load_peers():
    """(transformers, transformers + fastokens): the plain one is loaded
    before fastokens patches `tokenizers.Tokenizer` for later loads."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from transformers import AutoTokenizer
    import tokenizers

    plain = AutoTokenizer.from_pretrained(str(VOCAB))
    import fastokens

    fastokens.patch_transformers()
    fast = AutoTokenizer.from_pretrained(str(VOCAB))
    assert type(plain._tokenizer) is tokenizers.Tokenizer, "the plain peer must not be patched"
    assert type(fast._tokenizer) is not tokenizers.Tokenizer, "fastokens did not patch the second load"
    return plain, fast


def measure_hot_path(tok, plain, fast, rounds: int = 30, peer_rounds: int = 5) -> dict:
    """All figures of the chat hot path (seconds), ids checked first."""
    out = {}
    msgs, opts = fresh_conversation()
    chat = qwen4exp.render_chat(msgs, **opts)
    ours = tok.encode_chat(chat).tolist()
    assert ours == _hf_ids(plain, msgs, opts) == _hf_ids(fast, msgs, opts)
    out["fresh_bytes"] = len(chat.data)
    reps = 50

    def fresh_ours(_):
        for _ in range(reps):
            tok.encode_chat(qwen4exp.render_chat(msgs, **opts))

    def fresh_render(_):
        for _ in range(reps):
            qwen4exp.render_chat(msgs, **opts)

    def fresh_peer(hf):
        for _ in range(reps):
            hf.apply_chat_template(msgs, tokenize=True, **opts)

    out["fresh qwen4exp"] = best_of(fresh_ours, None, rounds)[0] / reps
    out["fresh qwen4exp render only"] = best_of(fresh_render, None, rounds)[0] / reps
    out["fresh transformers"] = best_of(fresh_peer, plain, peer_rounds)[0] / reps
    out["fresh transformers+fastokens"] = best_of(fresh_peer, fast, peer_rounds)[0] / reps

    requests = growing_transcript()
    chats = [qwen4exp.render_chat(m, **o) for m, o in requests]
    late = range(40, 60)  # turns 41-60
    for t in late:
        assert tok.encode_chat(chats[t]).tolist() == _hf_ids(fast, *requests[t])
    assert tok.encode_chat(chats[late[0]]).tolist() == _hf_ids(plain, *requests[late[0]])
    out["transcript_bytes"] = len(chats[-1].data)

    def full(_):
        for t in late:
            tok.encode_chat(chats[t])

    def full_render(_):
        for t in late:
            tok.encode_chat(qwen4exp.render_chat(*requests[t][:1], **requests[t][1]))

    def incremental(render: bool, n_rounds: int) -> tuple[float, int]:
        """(best total seconds over turns 41-60, bytes reused): each round a
        fresh encoder sees turn 40 untimed, then turns 41-60 are timed."""
        best, reused = float("inf"), 0
        for _ in range(n_rounds):
            enc = tok.chat_encoder()
            enc.encode(chats[late[0] - 1])
            gc.collect()
            gc.disable()
            try:
                total, reused = 0.0, 0
                for t in late:
                    t0 = time.perf_counter()
                    enc.encode(qwen4exp.render_chat(requests[t][0], **requests[t][1]) if render else chats[t])
                    total += time.perf_counter() - t0
                    reused += enc.reused_bytes
            finally:
                gc.enable()
            best = min(best, total)
        return best, reused

    def peer_turns(hf):
        for t in late:
            hf.apply_chat_template(requests[t][0], tokenize=True, **requests[t][1])

    out["turn encode_chat"] = best_of(full, None, rounds)[0] / len(late)
    best, reused = incremental(False, rounds)
    out["turn chat_encoder"] = best / len(late)
    out["turn reused share"] = reused / sum(len(chats[t].data) for t in late)
    out["turn render + encode_chat"] = best_of(full_render, None, max(3, rounds // 3))[0] / len(late)
    out["turn render + chat_encoder"] = incremental(True, max(3, rounds // 3))[0] / len(late)
    out["turn transformers"] = best_of(peer_turns, plain, 2)[0] / len(late)
    out["turn transformers+fastokens"] = best_of(peer_turns, fast, peer_rounds)[0] / len(late)
    return out


def format_hot_path(r: dict) -> str:
    us = lambda k: f"{r[k] * 1e6:,.1f} µs"  # noqa: E731
    f = r["fresh qwen4exp"]
    turn = r["turn chat_encoder"]
    lines = [
        f"fresh conversation ({r['fresh_bytes']:,} bytes), render + encode:",
        f"  qwen4exp                      {us('fresh qwen4exp')}  ({1 / f:,.0f} conversations/s;"
        f" render alone {us('fresh qwen4exp render only')})",
        f"  transformers                  {us('fresh transformers')}  -> qwen4exp is "
        f"{r['fresh transformers'] / f:.1f}x",
        f"  transformers + fastokens      {us('fresh transformers+fastokens')}  -> qwen4exp is "
        f"{r['fresh transformers+fastokens'] / f:.1f}x",
        f"growing transcript, turns 41-60 (last {r['transcript_bytes']:,} bytes), per turn:",
        f"  encode_chat                   {us('turn encode_chat')}",
        f"  chat_encoder.encode           {us('turn chat_encoder')}  -> "
        f"{r['turn encode_chat'] / turn:.1f}x less than encode_chat"
        f" ({r['turn reused share']:.1%} of the bytes reused)",
        f"  render + encode_chat          {us('turn render + encode_chat')}",
        f"  render + chat_encoder.encode  {us('turn render + chat_encoder')}  -> "
        f"{r['turn render + encode_chat'] / r['turn render + chat_encoder']:.1f}x",
        f"  transformers                  {us('turn transformers')}  -> "
        f"{r['turn transformers'] / r['turn render + chat_encoder']:.1f}x render + chat_encoder",
        f"  transformers + fastokens      {us('turn transformers+fastokens')}  -> "
        f"{r['turn transformers+fastokens'] / r['turn render + chat_encoder']:.1f}x render + chat_encoder",
    ]
    return "\n".join(lines)


def test_bench_chat_hot_path(benchmark, capsys):
    tok = qwen4exp.Tokenizer()
    plain, fast = load_peers()
    msgs, opts = fresh_conversation()
    benchmark.group = "chat hot path"
    benchmark.pedantic(lambda: tok.encode_chat(qwen4exp.render_chat(msgs, **opts)), rounds=200,
                       warmup_rounds=20)
    result = measure_hot_path(tok, plain, fast)
    with capsys.disabled():
        print("\n" + format_hot_path(result))


if __name__ == "__main__":
    print(format_hot_path(measure_hot_path(qwen4exp.Tokenizer(), *load_peers())))
