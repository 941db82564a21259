"""The output side, ids per second: completion parsing and streaming decode.

    python -m pytest bench/bench_completion.py --benchmark-only -n 0 -s

Input: 100 assistant turns (reasoning, content and a tool call, text from the
multilingual and code corpora) rendered with render_chat + encode_chat; the
ids after each generation prompt are the completions (~110,000 ids).

* parse_completion(ids), one call per completion;
* completion_parser: feed() one id at a time, as a generate loop does;
* decode_stream: step() one id at a time, against HF `tokenizers`'
  DecodeStream (0.22.1) on the same ids in the same run (the texts are
  checked equal first);
* parse_completion on 10x the ids: the time must grow about 10x, not 100x;
* the XML calls of Qwen3.6 (100 turns after a thinking prompt: reasoning,
  content and a call with a long string, an integer and an object argument,
  typed by the prompt's tools; ~120,000 ids): parse_completion(ids, prompt)
  and feed() one id at a time, against decoding the same ids alone
  (`Tokenizer.decode` per completion, `decode_stream().step` per id). No
  text-scanning parser of a peer installs from PyPI without a model runtime
  (vLLM's needs torch), so decoding is the bar: the parser's work on top of
  turning ids into text.
* held text: every parser state (tests/_parser_states.py) fed 100,000 ids
  of each kind of text the parser holds back (spaces, newlines, marker
  starts), one id per feed, against ordinary content text: the slowest
  state per kind, in us/id and as a factor (a quadratic path took seconds).
"""

from __future__ import annotations

import json

import pytest

import corpora
import qwen4exp

N_TURNS = 100
_results: dict[str, float] = {}


@pytest.fixture(scope="module")
def completions():
    tok = qwen4exp.Tokenizer()
    texts = [d[:1500] for d in corpora.multilingual_documents()[:N_TURNS]]
    code = [d[:1500] for d in corpora.code_documents()[:N_TURNS]]
    out = []
    for k in range(N_TURNS):
        history = [{"role": "user", "content": f"question {k}"}]
        turn = {"role": "assistant", "reasoning_content": texts[k], "content": code[k],
                "tool_calls": [{"name": "lookup", "arguments": {"q": texts[(k + 1) % N_TURNS][:200]}}]}
        full = tok.encode_chat(qwen4exp.render_chat(history + [turn])).tolist()
        prompt = len(tok.encode_chat(qwen4exp.render_chat(history, add_generation_prompt=True)))
        ids = full[prompt:-1]
        assert tok.parse_completion(ids)["content"] == code[k].lstrip("\n")
        out.append(ids)
    return tok, out


def _report(benchmark, name, n_ids, capsys):
    _results[name] = n_ids / benchmark.stats.stats.min
    with capsys.disabled():
        print(f"\n{name}: {_results[name] / 1e6:.2f} M ids/s ({n_ids:,} ids, best round)")
        ours, hf = _results.get("qwen4exp decode_stream.step"), _results.get("HF DecodeStream.step")
        if ours and hf:
            print(f"decode_stream / HF DecodeStream: {ours / hf:.1f}x")


def test_bench_parse_completion(benchmark, completions, capsys):
    tok, comps = completions
    benchmark.group = "completion parser"
    benchmark.pedantic(lambda: [tok.parse_completion(c) for c in comps], rounds=5, warmup_rounds=1)
    _report(benchmark, "qwen4exp parse_completion (one call per completion)", sum(map(len, comps)), capsys)


def test_bench_completion_parser_stream(benchmark, completions, capsys):
    tok, comps = completions
    benchmark.group = "completion parser"

    def run():
        for c in comps:
            p = tok.completion_parser()
            feed = p.feed
            for i in c:
                feed(i)
            p.finish()

    benchmark.pedantic(run, rounds=3, warmup_rounds=1)
    _report(benchmark, "qwen4exp completion_parser.feed (one id per call)", sum(map(len, comps)), capsys)


@pytest.fixture(scope="module")
def hf_tokenizer():
    from peers import TOKENIZER_JSON
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(TOKENIZER_JSON))


def test_bench_decode_stream_qwen4exp(benchmark, completions, hf_tokenizer, capsys):
    tok, comps = completions
    benchmark.group = "decode stream"
    from tokenizers.decoders import DecodeStream

    for c in comps[:10]:  # the same text as HF's stream
        ds, hf = tok.decode_stream(), DecodeStream(skip_special_tokens=False)
        assert "".join(map(ds.step, c)) + ds.flush() == "".join(hf.step(hf_tokenizer, i) or "" for i in c)

    def run():
        for c in comps:
            step = tok.decode_stream().step
            for i in c:
                step(i)

    benchmark.pedantic(run, rounds=3, warmup_rounds=1)
    _report(benchmark, "qwen4exp decode_stream.step", sum(map(len, comps)), capsys)


def test_bench_decode_stream_hf(benchmark, completions, hf_tokenizer, capsys):
    _, comps = completions
    benchmark.group = "decode stream"
    from tokenizers.decoders import DecodeStream

    def run():
        for c in comps:
            ds = DecodeStream(skip_special_tokens=False)
            for i in c:
                ds.step(hf_tokenizer, i)

    benchmark.pedantic(run, rounds=3, warmup_rounds=1)
    _report(benchmark, "HF DecodeStream.step", sum(map(len, comps)), capsys)


def _long_completion(tok, n):
    """Ids of one completion: a reasoning of 50*n words, then n tool calls."""
    call = tok.encode('\n{"name": "f", "arguments": {"a": "' + "x" * 50 + '"}}\n')
    unit = [tok.atoms["<tool_call>"], *call, tok.atoms["</tool_call>"], *tok.encode("\n")]
    return ([tok.atoms["<think>"], *tok.encode("\n" + "why? " * (50 * n) + "\n"), tok.atoms["</think>"],
             *tok.encode("\n\n"), *unit * n, tok.atoms["<|im_end|>"]])


def test_bench_parse_time_is_linear(benchmark, capsys):
    """parse_completion on 10x the ids (200 then 2,000 tool calls after a long
    reasoning) takes about 10x the time; a quadratic path would take ~100x."""
    import time

    tok = qwen4exp.Tokenizer()
    small, big = _long_completion(tok, 200), _long_completion(tok, 2000)

    def best(ids, rounds=5):
        t = float("inf")
        for _ in range(rounds):
            start = time.perf_counter()
            tok.parse_completion(ids)
            t = min(t, time.perf_counter() - start)
        return t

    benchmark.group = "completion parser"
    benchmark.pedantic(tok.parse_completion, args=(big,), rounds=3, warmup_rounds=1)
    t_small, t_big = best(small), best(big)
    with capsys.disabled():
        print(f"\nparse_completion: {len(small):,} ids {t_small * 1e3:.1f} ms, "
              f"{len(big):,} ids {t_big * 1e3:.1f} ms (x{t_big / t_small:.1f} for x10)")
    assert t_big < 40 * t_small  # cache effects on a busy machine reach x25; quadratic is x100


# -- the XML calls of the 3.5+ formats -------------------------------------------

XML_TOOLS = [{"type": "function", "function": {"name": "write_file", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}, "text": {"type": "string"},
                                     "mode": {"type": "integer"}, "meta": {"type": "object"}}}}}]


@pytest.fixture(scope="module")
def xml_completions():
    """(tokenizer, [(prompt, completion ids)]) in the qwen3.6 format."""
    tok = qwen4exp.Tokenizer("qwen3.6")
    texts = [d[:1500] for d in corpora.multilingual_documents()[:N_TURNS]]
    code = [d[:1500] for d in corpora.code_documents()[:N_TURNS]]
    out = []
    for k in range(N_TURNS):
        history = [{"role": "user", "content": f"question {k}"}]
        args = {"path": f"src/file_{k}.py", "text": code[(k + 1) % N_TURNS], "mode": 420, "meta": {"k": k, "tags": ["a"]}}
        turn = {"role": "assistant", "reasoning_content": texts[k], "content": code[k][:300],
                "tool_calls": [{"type": "function", "function": {"name": "write_file", "arguments": args}}]}
        full = qwen4exp.render_chat(history + [turn], tools=XML_TOOLS, chat_format="qwen3.6")
        prompt = qwen4exp.render_chat(history, tools=XML_TOOLS, chat_format="qwen3.6", add_generation_prompt=True)
        b = qwen4exp.SegmentBuilder()  # the ids a model writes after the prompt's own ids
        for seg in full.segments:
            if seg.end > len(prompt.data):
                part = full.data[max(seg.start, len(prompt.data)) : seg.end].decode()
                b.control(part) if seg.kind == qwen4exp.Kind.TRUSTED_CONTROL else b.text(part)
        ids = tok.encode_chat(b.build()).tolist()[:-1]  # up to and including <|im_end|>
        msg = tok.parse_completion(ids, prompt)
        assert "errors" not in msg and json.loads(msg["tool_calls"][0]["function"]["arguments"]) == args
        out.append((prompt, ids))
    return tok, out


def _report_against_decode(benchmark, name, n_ids, baseline, capsys):
    _results[name] = n_ids / benchmark.stats.stats.min
    with capsys.disabled():
        print(f"\n{name}: {_results[name] / 1e6:.2f} M ids/s ({n_ids:,} ids, best round)")
        if baseline in _results:
            print(f"  {baseline}: {_results[baseline] / 1e6:.2f} M ids/s; the parser runs at "
                  f"{_results[name] / _results[baseline]:.2f}x its speed")


def test_bench_xml_decode(benchmark, xml_completions, capsys):
    tok, comps = xml_completions
    benchmark.group = "XML calls"
    benchmark.pedantic(lambda: [tok.decode(ids) for _, ids in comps], rounds=5, warmup_rounds=1)
    _report_against_decode(benchmark, "qwen3.6 decode (one call per completion)", sum(len(i) for _, i in comps), "", capsys)


def test_bench_xml_parse_completion(benchmark, xml_completions, capsys):
    tok, comps = xml_completions
    benchmark.group = "XML calls"
    benchmark.pedantic(lambda: [tok.parse_completion(ids, prompt) for prompt, ids in comps], rounds=5, warmup_rounds=1)
    _report_against_decode(benchmark, "qwen3.6 parse_completion(ids, prompt), XML calls", sum(len(i) for _, i in comps),
                           "qwen3.6 decode (one call per completion)", capsys)


def test_bench_xml_decode_stream(benchmark, xml_completions, capsys):
    tok, comps = xml_completions
    benchmark.group = "XML calls"

    def run():
        for _, ids in comps:
            step = tok.decode_stream().step
            for i in ids:
                step(i)

    benchmark.pedantic(run, rounds=3, warmup_rounds=1)
    _report_against_decode(benchmark, "qwen3.6 decode_stream.step (one id per call)", sum(len(i) for _, i in comps), "", capsys)


def test_bench_xml_completion_parser_stream(benchmark, xml_completions, capsys):
    tok, comps = xml_completions
    benchmark.group = "XML calls"

    def run():
        for prompt, ids in comps:
            p = tok.completion_parser(prompt)
            feed = p.feed
            for i in ids:
                for d in feed(i):
                    d.openai()
            p.finish()

    benchmark.pedantic(run, rounds=3, warmup_rounds=1)
    _report_against_decode(benchmark, "qwen3.6 completion_parser.feed + Delta.openai() (one id per call)",
                           sum(len(i) for _, i in comps), "qwen3.6 decode_stream.step (one id per call)", capsys)


# -- held text ---------------------------------------------------------------------


def test_bench_held_text(benchmark, capsys):
    """Every parser state (tests/_parser_states.py) fed 100,000 ids of each
    kind of text the parser holds back (spaces, newlines, marker starts), one
    id at a time, against the same number of ids of ordinary text: held text
    costs O(1) an id, so no state is more than a small factor slower (a
    quadratic path took 11 s for 20,000 spaces after </parameter>)."""
    import time

    from _parser_states import HELD_KINDS, ORDINARY, STATES, held_completion

    tok = qwen4exp.Tokenizer("qwen3.6")
    n_ids = 100_000

    def run(state, unit):
        prefix, held = held_completion(tok, state, unit, n_ids)
        parser = tok.completion_parser()
        parser.feed(prefix)
        feed = parser.feed
        start = time.perf_counter()
        for i in held:
            feed(i)
        parser.finish()
        return (time.perf_counter() - start) / len(held)

    benchmark.group = "completion parser"
    benchmark.pedantic(run, args=("call: after </parameter>", " "), rounds=3, warmup_rounds=1)
    ordinary = min(run("content", ORDINARY) for _ in range(3))
    worst = {kind: max((run(state, unit), state) for state in STATES) for kind, unit in HELD_KINDS.items()}
    with capsys.disabled():
        print(f"\nheld text, {n_ids:,} ids a state, one id per feed; ordinary content text "
              f"{ordinary * 1e6:.2f} us/id")
        for kind, (t, state) in worst.items():
            print(f"  {kind:>18}: slowest state {state!r}: {t * 1e6:.2f} us/id ({t / ordinary:.1f}x ordinary)")
    assert max(t for t, _ in worst.values()) < 40 * ordinary  # quadratic: thousands of times
