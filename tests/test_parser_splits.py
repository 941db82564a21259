"""Streamed == one-shot for every split of every input (src/qwen4exp/parse/completion.py,
tool_calls.py, pyx/_stream.pyx).

The reported instances: a call written without <tool_call> right after
`</think>\\n\\n` (streaming emitted an empty delta, read an empty string past
its end and kept the call as text), and function names or parameter keys
over 1,024 characters (streaming dropped the call or the parameter). The
class: completions built from fragments chosen for the parser's edges (long
names, held newlines, marker starts, atoms), fed at once, id by id and in
random chunks; every feed must give the one-shot message, and no delta is
empty.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _parser_states import IM_END, THINK, THINK_END, TOOL_CALL, TOOL_CALL_END, ids_of

LONG = "n" * 1500


@pytest.fixture(scope="module", params=["qwen3", "qwen3.6"])
def vocab(request, tok, tok36):
    return tok if request.param == "qwen3" else tok36


def feeds(tok, ids, cuts):
    """The message and deltas of `ids` fed in the pieces `cuts` marks."""
    parser = tok.completion_parser()
    deltas = []
    bounds = [0, *sorted(set(cuts)), len(ids)]
    for a, b in zip(bounds, bounds[1:]):
        if b > a:
            deltas += parser.feed(ids[a:b])
    return parser.finish(), deltas


def check_splits(tok, ids, cuts_list):
    one = tok.parse_completion(ids)
    for cuts in cuts_list:
        msg, deltas = feeds(tok, ids, cuts)
        assert msg == one, cuts
        assert all(d.text or d.call_id for d in deltas), "an empty delta"
    return one


def every_id(ids):
    return [list(range(1, len(ids)))]


@pytest.mark.parametrize("lead", ["", "\n", "\n\n", "\n\n\n"])
def test_a_call_without_tool_call_after_think(vocab, lead):
    body = lead + "<function=f>\n<parameter=x>\n1\n</parameter>\n</function>\n"
    ids = ids_of(vocab, [THINK, "\nwhy\n", THINK_END, "\n\n" + body, TOOL_CALL_END, IM_END])
    msg = check_splits(vocab, ids, every_id(ids))
    assert [c["function"]["name"] for c in msg["tool_calls"]] == ["f"]
    assert any("without <tool_call>" in e["error"] for e in msg["errors"])


@pytest.mark.parametrize("body", [
    f"\n<function={LONG}>\n<parameter=x>\n1\n</parameter>\n</function>\n",
    f"\n<function=f>\n<parameter={LONG}>\n1\n</parameter>\n</function>\n",
    f"\n<function={LONG}\n<parameter={LONG}\n1\n</parameter>\n</function>\n",  # no '>': the newline ends them
    f'\n{{"name": "{LONG}", "arguments": {{"a": 1}}}}\n',
    f'\n{{"arguments": {{"{LONG}": 1}}, "name": "{LONG}"}}\n',
], ids=["xml name", "xml key", "xml names without >", "json name", "json other form"])
def test_long_names(vocab, body):
    ids = ids_of(vocab, [TOOL_CALL, body, TOOL_CALL_END, IM_END])
    msg = check_splits(vocab, ids, every_id(ids))
    assert len(msg["tool_calls"]) == 1 and msg["tool_calls"][0]["function"]["name"] in (LONG, "f")
    assert LONG in msg["tool_calls"][0]["function"]["name"] + msg["tool_calls"][0]["function"]["arguments"]


FRAGMENTS = [THINK, THINK_END, TOOL_CALL, TOOL_CALL_END, "\n", "\n\n", " ", "  \n", "x", "Hi.",
             "<", "<function=", "<function=f>", f"<function={LONG}>", "<parameter=", "<parameter=p>",
             f"<parameter={LONG}>", "</parameter>", "</parameter", "</function>", "</func", LONG,
             '{"name": "', '{"name": "f", "arguments": ', '{"a": 1}', "}", '"', "1e400", "[1e400]",
             "true", "None", "12 ", "é", "日本", "😀"]


def _any_split(vocab, data):
    parts = data.draw(st.lists(st.sampled_from(FRAGMENTS), max_size=16))
    ids = ids_of(vocab, parts) + data.draw(st.sampled_from([[], ids_of(vocab, [IM_END])]))
    cuts = data.draw(st.lists(st.integers(0, max(0, len(ids))), max_size=8))
    check_splits(vocab, ids, [cuts, []] + (every_id(ids) if len(ids) < 400 else []))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_split(vocab, data):
    _any_split(vocab, data)


@pytest.mark.slow
@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_split_many(vocab, data):
    _any_split(vocab, data)
