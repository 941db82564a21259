"""The completion parser: structure from atom ids only (src/qwen4exp/parse/completion.py).

The oracle is the renderer's own output: a conversation ending in an
assistant turn is rendered (render_chat + encode_chat; for atom-free turns
the ids are checked equal to transformers' apply_chat_template), the ids
after the generation prompt are the completion, and parsing them must give
that turn back. (Every chat format, typed XML calls and the OpenAI streaming
shape: tests/test_completion_formats.py.)
"""

from __future__ import annotations

import json
import random
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import qwen4exp
from _chat_reference import has_atom, reference_tokenizer
from qwen4exp.render.validate import tojson

# --------------------------------------------------------------------------- the oracle

SCHEMA = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}


def _call(name, arguments, wrapped=True):
    fn = {"name": name, "arguments": arguments}
    return {"type": "function", "function": fn} if wrapped else fn


# (name, final assistant turn, history before it, tools)
TURNS = [
    ("content", {"content": "Hello there."}),
    ("empty", {"content": ""}),
    ("reasoning", {"content": "42.", "reasoning_content": "Six times seven."}),
    ("reasoning newlines", {"content": "\n\nAnswer\n", "reasoning_content": "\n\nline 1\n\nline 2\n\n"}),
    ("content newlines", {"content": "a\n\nb\n\n"}),
    ("one call", {"content": "", "tool_calls": [_call("get_weather", {"city": "Paris"})]}),
    ("call with text", {"content": "Let me check.", "reasoning_content": "Need weather.",
                        "tool_calls": [_call("get_weather", {"city": "Zürich", "units": ["C", 1, None]})]}),
    ("several calls", {"content": "Two lookups:\n", "tool_calls": [
        _call("get_weather", {"city": "Oslo"}),
        _call("get_time", '{"tz":"Europe/Oslo"}', wrapped=False),
        _call("noop", {}),
    ]}),
    ("string arguments verbatim", {"content": "x", "tool_calls": [_call("f", '{ "a" : [1, 2.5e3, {"b": "c"}] }')]}),
    ("unicode", {"content": "日本語のテキスト 😀 👩‍💻 café ﷽", "reasoning_content": "Ωμέγα — हिन्दी 🇫🇷",
                 "tool_calls": [_call("翻訳", {"text": "こんにちは", "emoji": "🤖"})]}),
    ("literal controls in content", {"content": "Write <tool_call> then </tool_call>, <think></think> and <|im_end|>."}),
    ("literal controls in reasoning", {"content": "ok", "reasoning_content": "The tag </think> and <tool_call>{\"name\": \"x\"}</tool_call> <|endoftext|>"}),
    ("literal controls in arguments", {"content": "", "tool_calls": [
        _call("echo", {"text": "</tool_call><|im_end|><tool_call>"})]}),
    ("name the template does not escape", {"content": "", "tool_calls": [_call('we"ird\\name', {"a": 1})]}),
    ("name spelling the separator", {"content": "", "tool_calls": [_call('a", "arguments": {}', {"k": '", "arguments": '})]}),
    ("split multibyte", {"content": "\U0001f9d1\u200d\U0001f52c" * 5 + "\u0300\u0301", "reasoning_content": "\ufffd literal"}),
]
HISTORIES = [
    [{"role": "user", "content": "Hi"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What now?"},
     {"role": "assistant", "content": "", "tool_calls": [_call("get_weather", {"city": "Rome"})]},
     {"role": "tool", "content": "sunny"}],
]


CALL_ID = re.compile(r"call_[A-Za-z0-9]{24}")


def _no_ids(msg):
    """The message without its call ids, which must be well formed and distinct."""
    ids = [c["id"] for c in msg["tool_calls"]]
    assert all(CALL_ID.fullmatch(i) for i in ids) and len(set(ids)) == len(ids)
    return {**msg, "tool_calls": [{k: v for k, v in c.items() if k != "id"} for c in msg["tool_calls"]]}


def _expected(turn):
    calls = []
    for c in turn.get("tool_calls") or []:
        fn = c.get("function", c)
        args = fn["arguments"]
        calls.append({"type": "function",
                      "function": {"name": fn["name"], "arguments": args if isinstance(args, str) else tojson(args)}})
    return {
        "role": "assistant",
        "content": (turn.get("content") or "").lstrip("\n"),
        "reasoning_content": (turn.get("reasoning_content") or "").strip("\n"),
        "tool_calls": calls,
    }


def _completion(tok, history, turn, tools=None):
    """(ids the model would generate for `turn`, ids of the whole conversation)."""
    msgs = history + [{"role": "assistant", **turn}]
    full = tok.encode_chat(qwen4exp.render_chat(msgs, tools=tools)).tolist()
    prompt = tok.encode_chat(qwen4exp.render_chat(history, tools=tools, add_generation_prompt=True)).tolist()
    assert full[: len(prompt)] == prompt
    end = len(full) - 1 - full[::-1].index(tok.atoms["<|im_end|>"])
    assert tok.decode(full[end + 1 :]) == "\n"
    return full[len(prompt) : end + 1], full


def _cases():
    for h, history in enumerate(HISTORIES):
        for name, turn in TURNS:
            yield pytest.param(history, turn, SCHEMA if h else None, id=f"{name}-h{h}")


CASES = list(_cases())


@pytest.mark.parametrize("history,turn,tools", CASES)
def test_round_trip(tok, history, turn, tools):
    completion, full = _completion(tok, history, turn, [tools] if tools else None)
    msgs = history + [{"role": "assistant", **turn}]
    if not has_atom({"messages": msgs}):  # the peer: transformers writes the same ids
        ref = reference_tokenizer().apply_chat_template(msgs, tools=[tools] if tools else None, tokenize=True)
        assert list(ref["input_ids"] if hasattr(ref, "keys") else ref) == full
    parsed = tok.parse_completion(completion)
    assert _no_ids(parsed) == _expected(turn)
    # and the parsed message renders back to the very same ids
    again = tok.encode_chat(qwen4exp.render_chat(history + [parsed], tools=[tools] if tools else None))
    assert again.tolist() == full


def _stream(tok, ids, chunks, **kw):
    p = tok.completion_parser(**kw)
    deltas = []
    for a, b in zip(chunks, chunks[1:]):
        deltas += p.feed(ids[a:b])
    return deltas, p.finish()


def _joined(deltas):
    out = {}
    for d in deltas:
        out[(d.kind, d.index)] = out.get((d.kind, d.index), "") + d.text
    return out


@pytest.mark.parametrize("history,turn,tools", CASES)
def test_streaming_equals_one_shot(tok, history, turn, tools):
    ids, _ = _completion(tok, history, turn, [tools] if tools else None)
    whole = tok.parse_completion(ids)
    one_by_one, msg = _stream(tok, ids, list(range(len(ids) + 1)))
    assert msg == whole
    assert all(d.text or d.call_id for d in one_by_one)  # only a call's first delta is empty
    rng = random.Random(len(ids))
    cuts = sorted({0, len(ids), *rng.sample(range(len(ids) + 1), min(5, len(ids)))})
    chunked, msg2 = _stream(tok, np.array(ids), cuts)  # arrays go through the numpy path
    assert msg2 == whole
    assert _joined(chunked) == _joined(one_by_one)
    joined = _joined(one_by_one)
    assert joined.get(("content", None), "") == whole["content"]
    assert joined.get(("reasoning", None), "") == (whole["reasoning_content"] or "")
    firsts = [d for d in one_by_one if d.call_id is not None]
    for k, call in enumerate(whole["tool_calls"]):
        fn = call["function"]  # a call streams its name and id, then its arguments
        if '", "arguments": ' in fn["name"]:
            # a name that spells the separator streams as its part before it (the
            # stream cannot wait for the end); the message names it whole
            assert firsts[k].name == fn["name"].split('"', 1)[0]
            continue
        assert (firsts[k].index, firsts[k].name, firsts[k].call_id) == (k, fn["name"], call["id"])
        assert joined[("tool_call", k)] == fn["arguments"]


_TAIL = re.compile("\n*\ufffd*")


@pytest.mark.parametrize("history,turn,tools", CASES[: len(TURNS)])
def test_every_truncation_point(tok, history, turn, tools):
    ids, _ = _completion(tok, history, turn, None)
    full_deltas, full = _stream(tok, ids, list(range(len(ids) + 1)))
    full_text = _joined(full_deltas)
    for k in range(len(ids) + 1):
        deltas, msg = _stream(tok, ids, [0, k])
        # what was streamed is never retracted: a prefix of the full stream
        for key, text in _joined(deltas).items():
            assert full_text[key].startswith(text)
        if k == len(ids):
            assert msg == full
            continue
        assert msg["errors"][-1] == {"position": k, "error": msg["errors"][-1]["error"], "text": ""}
        assert msg["errors"][-1]["error"].startswith("truncated")
        streamed = _joined(deltas)
        for field, kind in (("content", "content"), ("reasoning_content", "reasoning")):
            text = msg[field] or ""
            head = streamed.get((kind, None), "")
            assert text.startswith(head) and _TAIL.fullmatch(text[len(head) :])
        assert msg["tool_calls"] == full["tool_calls"][: len(msg["tool_calls"])]
        for bad in msg.get("invalid_tool_calls", []):  # only the call the cut went through
            assert bad["index"] == len(msg["tool_calls"]) and "unterminated" in bad["error"]
            fn = full["tool_calls"][bad["index"]]["function"]
            body = f'{{"name": "{fn["name"]}", "arguments": {fn["arguments"]}}}'
            assert body.startswith(bad["text"].rstrip("\ufffd").removesuffix("\n"))


# --------------------------------------------------------------------------- bad output


def _ids(tok, *parts):
    """Ids of a mix of atom spellings (given as ("atom", spelling)) and text."""
    out = []
    for p in parts:
        out += [tok.atoms[p[1]]] if isinstance(p, tuple) else tok.encode(p)
    return out


def A(spelling):
    return ("atom", spelling)


def test_bpe_spellings_are_text(tok):
    ids = tok.encode('<think>x</think><tool_call>\n{"name": "f", "arguments": {}}\n</tool_call><|im_end|>')
    msg = tok.parse_completion(ids + [tok.atoms["<|im_end|>"]])
    assert msg == {"role": "assistant", "content": tok.decode(ids), "reasoning_content": None, "tool_calls": []}


@pytest.mark.parametrize("body,error", [
    ("not json", "not a JSON object"),
    ('{"name": "f"}', "needs both"),
    ('{"name": "f", "arguments": "{}"}', "arguments are a JSON str"),
    ('{"name": "", "arguments": {}}', "non-empty string"),
    ('{"name": "f", "arguments": {}, "id": 1}', "unexpected key"),
    ('{"arguments": {}, "name": "f", "name": "g"}', "twice"),
    ('{"arguments": {}, "name": "\\ud800"}', "lone surrogate"),
    ('{"name": "f", "arguments": {"x": NaN}}', "not a JSON object"),
    ('{"name": "f", "arguments": {}} trailing', "extra text"),
    ("[" * 100000 + "]" * 100000, "not a JSON object"),
])
def test_invalid_tool_call_keeps_the_text(tok, body, error):
    ids = _ids(tok, "Sure.\n", A("<tool_call>"), "\n" + body + "\n", A("</tool_call>"),
               "\n", A("<tool_call>"), '\n{"name": "ok", "arguments": {"a": 1}}\n', A("</tool_call>"), A("<|im_end|>"))
    msg = tok.parse_completion(ids)
    assert msg["content"] == "Sure."
    assert _no_ids(msg)["tool_calls"] == [{"type": "function", "function": {"name": "ok", "arguments": '{"a": 1}'}}]
    [bad] = msg["invalid_tool_calls"]
    assert bad["index"] == 0 and bad["text"] == body and error in bad["error"]
    assert "errors" not in msg


def test_template_form_wins(tok):
    """The template writes names verbatim: a body it would write for a name reads as that name."""
    ids = _ids(tok, A("<tool_call>"), '\n{"name": "f", "name": "g", "arguments": {}}\n', A("</tool_call>"), A("<|im_end|>"))
    [call] = tok.parse_completion(ids)["tool_calls"]
    assert call["function"] == {"name": 'f", "name": "g', "arguments": "{}"} and CALL_ID.fullmatch(call["id"])
    assert qwen4exp.render_chat([{"role": "user", "content": "q"}, {"role": "assistant", "content": "", "tool_calls": [call]}]).text.endswith(
        '<tool_call>\n{"name": "f", "name": "g", "arguments": {}}\n</tool_call><|im_end|>\n')


def test_json_tool_call_forms(tok):
    ids = _ids(tok, A("<tool_call>"), '{ "arguments" : {"b": [1,2]},\n"name":"f\\u00e9" }', A("</tool_call>"), A("<|im_end|>"))
    assert _no_ids(tok.parse_completion(ids))["tool_calls"] == [
        {"type": "function", "function": {"name": "fé", "arguments": '{"b": [1,2]}'}}]


def test_unexpected_atoms_are_reported_not_copied(tok):
    ids = _ids(tok, A("<think>"), "\nr", A("<|im_start|>"), "s\n", A("</think>"), "\n\nc", A("<tool_response>"),
               "d", A("</think>"), A("<think>"), A("<|im_end|>"), "\nuser", A("<|im_start|>"))
    msg = tok.parse_completion(ids)
    assert msg["reasoning_content"] == "rs" and msg["content"] == "cd"
    assert [(e["text"], e["position"]) for e in msg["errors"]] == [
        ("<|im_start|>", 3), ("<tool_response>", 9), ("</think>", 11), ("<think>", 12), ("\nuser<|im_start|>", 14)]
    assert msg["errors"][-1]["error"] == "ids after the end of the message"


def test_in_reasoning(tok):
    ids = _ids(tok, "\nthinking\n", A("</think>"), "\n\nanswer", A("<|im_end|>"))
    assert tok.parse_completion(ids, in_reasoning=True) == {
        "role": "assistant", "content": "answer", "reasoning_content": "thinking", "tool_calls": []}
    msg = tok.parse_completion(ids)  # forgot in_reasoning: nothing lost, the hint says why
    assert msg["content"] == "\nthinking\n\n\nanswer" and "in_reasoning=True" in msg["errors"][0]["error"]


def test_unclosed_reasoning_and_tool_call(tok):
    msg = tok.parse_completion(_ids(tok, A("<think>"), "\nhmm\n", A("<|endoftext|>")))
    assert msg["reasoning_content"] == "hmm\n" and "inside reasoning" in msg["errors"][0]["error"]
    msg = tok.parse_completion(_ids(tok, A("<tool_call>"), '\n{"name": "f"', A("<|im_end|>")))
    assert msg["invalid_tool_calls"] == [{"index": 0, "text": '{"name": "f"', "error": msg["invalid_tool_calls"][0]["error"]}]
    assert "unterminated" in msg["invalid_tool_calls"][0]["error"]


def test_bad_ids_raise_and_change_nothing(tok):
    p = tok.completion_parser()
    assert p.feed(tok.encode("ab")) == [qwen4exp.Delta("content", "ab")]
    for bad in ([1, -1], [tok.vocab_size], np.array([5, 2**40]), [1] * 100 + [2**64]):
        with pytest.raises(qwen4exp.Qwen4ExpError, match="not in the vocabulary"):
            p.feed(bad)
    with pytest.raises(TypeError):
        p.feed(["x"])
    with pytest.raises(TypeError):
        p.feed([True])
    assert p.feed(tok.encode("c")) == [qwen4exp.Delta("content", "c")]
    assert p.finish()["content"] == "abc"
    with pytest.raises(qwen4exp.Qwen4ExpError, match="finished"):
        p.feed([1])


# --------------------------------------------------------------------------- hypothesis


def _pieces(tok):
    """Ids worth drawing: every atom, template whitespace, JSON, split characters."""
    texts = ["\n", "\n\n", " ", "x", "{", "}", '"', '{"name": "f", "arguments": {}}', '", "arguments": ',
             "<think>", "</tool_call>", "é", "日本", "😀", "\ufffd", "<function=f>", "<parameter=a>",
             "</parameter>", "</function>", "<"]
    ids = sorted({i for t in texts for i in tok.encode(t)} | set(tok.atoms.values()))
    spelled = tok.core.id_tables().text
    partial = [i for i in range(tok.vocab_size - len(tok.atoms)) if spelled[i][:1] >= b"\x80"][:400:7]
    return ids + partial


@pytest.fixture(scope="module")
def pieces(tok):
    return _pieces(tok)


@pytest.fixture(scope="module")
def vocabularies(tok, tok36):
    """format -> (its tokenizer, ids worth drawing): one format of each call style
    (Qwen3: JSON, "\n" before a first call; 3.6: XML, "\n\n")."""
    return {"qwen3": (tok, _pieces(tok)), "qwen3.6": (tok36, _pieces(tok36))}


def _runs(tok, ids):
    """Decoded text of each maximal run of BPE ids, up to the first end atom."""
    atom_ids = set(tok.atoms.values())
    ends = {tok.atoms["<|im_end|>"], tok.atoms["<|endoftext|>"]}
    text, run = [], []
    for i in ids:
        if i in atom_ids:
            text.append(tok.decode(run))
            run = []
            if i in ends:
                break
        else:
            run.append(i)
    else:
        text.append(tok.decode(run))
    return "".join(text)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), in_reasoning=st.booleans(), policy=st.sampled_from(["text", "call"]),
       fmt=st.sampled_from(["qwen3", "qwen3.6"]))
def test_any_ids(vocabularies, data, in_reasoning, policy, fmt):
    tok, pieces = vocabularies[fmt]
    ids = data.draw(st.lists(st.sampled_from(pieces), max_size=40))
    kw = {"in_reasoning": in_reasoning, "calls_in_reasoning": policy, "chat_format": fmt}
    deltas, msg = _stream(tok, ids, list(range(len(ids) + 1)), **kw)
    assert msg == tok.parse_completion(ids, **kw)
    streamed = _joined(deltas)
    # only the end of a text channel may be held back (newlines, an unfinished character)
    rest = ""
    for field, kind in (("content", "content"), ("reasoning_content", "reasoning")):
        full, text = msg[field] or "", streamed.get((kind, None), "")
        assert full.startswith(text) and (_TAIL.fullmatch(full[len(text) :]) or kind == "content"
                                          and _held_call(full[len(text) :]))
        rest += full[len(text) :]
    # a valid call's fragments are its arguments; the first delta carries its id
    for call in msg["tool_calls"]:
        k = next(d.index for d in deltas if d.call_id == call["id"])
        assert streamed[("tool_call", k)] == call["function"]["arguments"]
        assert isinstance(json.loads(call["function"]["arguments"]), dict)
    # structure only from atoms: one tool call (valid or not) per accepted <tool_call> id
    open_id = tok.atoms["<tool_call>"]
    end = _end(tok, ids)
    n_open = sum(1 for i in ids[:end] if i == open_id)
    # a <tool_call> after the end of the message is reported as trailing, not opened;
    # one inside reasoning stays reasoning text unless the policy is "call"
    kept = sum(1 for e in msg.get("errors", []) if e["text"] == "<tool_call>" and e["position"] < end
               and "parsed as a call" not in e["error"])
    # and a </tool_call> after a `<function=` line in content closes a call that lacks its <tool_call>
    recovered = sum(1 for e in msg.get("errors", []) if "without <tool_call>" in e["error"])
    assert len(msg["tool_calls"]) + len(msg.get("invalid_tool_calls", [])) == n_open - kept + recovered
    # no text lost: without calls, every BPE character up to the end is in a delta or
    # held back, in order (a <tool_call> kept in reasoning is spelled there); only
    # template newlines may go
    if n_open == kept and not recovered:
        emitted, expected = "".join(d.text for d in deltas) + rest, _runs(tok, ids)
        for spelling in ("<tool_call>", "</tool_call>", "\n"):
            emitted, expected = emitted.replace(spelling, ""), expected.replace(spelling, "")
        assert emitted == expected


def _held_call(rest):
    """Content held at the end may also be a line from `<function=` on (a call
    that may lack its <tool_call>, until an atom shows), or the start of one."""
    line = rest.lstrip("\n")
    return line.startswith("<function=") or "<function=".startswith(line.rstrip("\ufffd"))


def _end(tok, ids):
    ends = {tok.atoms["<|im_end|>"], tok.atoms["<|endoftext|>"]}
    return next((k for k, i in enumerate(ids) if i in ends), len(ids))


def test_long_completion_parses_whole(tok):
    """A long reasoning and 2,000 tool calls: every call is found, the reasoning
    comes back whole. (That the time grows linearly with the ids is measured in
    bench/bench_completion.py: a ratio of wall times is no test.)"""
    n = 2000
    unit = _ids(tok, A("<tool_call>"), '\n{"name": "f", "arguments": {"a": "' + "x" * 50 + '"}}\n',
                A("</tool_call>"), "\n")
    reasoning = "why? " * (50 * n)
    ids = _ids(tok, A("<think>"), "\n" + reasoning + "\n", A("</think>"), "\n\n") + unit * n
    ids.append(tok.atoms["<|im_end|>"])
    msg = tok.parse_completion(ids)
    assert "errors" not in msg
    assert msg["reasoning_content"] == reasoning
    assert [c["function"] for c in msg["tool_calls"]] == [{"name": "f", "arguments": '{"a": "' + "x" * 50 + '"}'}] * n


def test_only_template_newlines_go(tok):
    """Exactly the newlines the template writes are removed; any more are text."""
    ids = _ids(tok, A("<think>"), "\n\nr\n\n", A("</think>"), "\n\n\nc\n\n", A("<tool_call>"),
               '\n\n{"name": "f", "arguments": {}}\n\n', A("</tool_call>"), "\n\nd\n", A("<|im_end|>"))
    msg = tok.parse_completion(ids)
    assert (msg["reasoning_content"], msg["content"]) == ("\nr\n", "\nc\n" + "\n\nd\n")
    assert msg["tool_calls"][0]["function"] == {"name": "f", "arguments": "{}"}


def test_generate_loop_example(tok):
    """The README's generate loop, with a stand-in model that replays a rendered turn."""
    history = [{"role": "user", "content": "Weather in Oslo?"}]
    turn = {"role": "assistant", "reasoning_content": "Use the tool.", "content": "",
            "tool_calls": [_call("get_weather", {"city": "Oslo"})]}
    generated, full = _completion(tok, history, turn)

    def model_generate(prompt_ids):  # yields one id at a time, like a sampler
        assert list(prompt_ids) == full[: len(prompt_ids)]
        yield from np.array(generated)  # numpy scalars, as samplers give them

    messages = list(history)
    prompt = tok.encode_chat(qwen4exp.render_chat(messages, add_generation_prompt=True))
    parser = tok.completion_parser()
    stop = {tok.atoms["<|im_end|>"], tok.atoms["<|endoftext|>"]}
    shown = {"reasoning": "", "content": "", "tool_call": ""}
    for token in model_generate(prompt):
        for delta in parser.feed(token):
            shown[delta.kind] += delta.text
        if token in stop:
            break
    message = parser.finish()
    messages.append(message)
    assert shown == {"reasoning": "Use the tool.", "content": "", "tool_call": '{"city": "Oslo"}'}
    assert tok.encode_chat(qwen4exp.render_chat(messages)).tolist() == full


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_bad_ids_only_raise_qwen4exp_errors(tok, pieces, data):
    """Ids outside the vocabulary raise Qwen4ExpError and change nothing: the
    parser goes on as if they had never come."""
    bad_ids = st.sampled_from([-1, -(2**40), tok.vocab_size, tok.vocab_size + 7, 2**31, 2**63])
    ids = data.draw(st.lists(st.one_of(st.sampled_from(pieces), bad_ids), max_size=30))
    good = [i for i in ids if 0 <= i < tok.vocab_size]
    if len(good) != len(ids):
        with pytest.raises(qwen4exp.Qwen4ExpError):
            tok.parse_completion(ids)
    p = tok.completion_parser()
    deltas = []
    for i in ids:
        try:
            deltas += p.feed(i)
        except qwen4exp.Qwen4ExpError:
            assert not 0 <= i < tok.vocab_size
    expected_deltas, expected = _stream(tok, good, list(range(len(good) + 1)))
    assert p.finish() == expected and deltas == expected_deltas


def test_ids_missing_from_a_vocabulary():
    """A vocabulary whose ids have a hole (Tokenizer.from_file accepts any added-token
    ids): the hole is not an id, for the parser and for decode_stream."""
    tok = qwen4exp.Tokenizer()  # its own tables: the session's stay whole
    tables = tok.core.id_tables()
    hole = tok.encode("x")[0]
    tables.parse[hole] = tables.text[hole] = None
    tables.has_gaps = True
    for ids in (hole, [hole], [1] * 70 + [hole], np.array([1, hole])):
        with pytest.raises(qwen4exp.Qwen4ExpError, match=f"id {hole} at index"):
            tok.completion_parser().feed(ids)
    with pytest.raises(qwen4exp.Qwen4ExpError, match=f"id {hole} at index 0"):
        tok.decode_stream().step(hole)
