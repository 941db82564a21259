"""Text the completion parser holds back costs O(1) an id (issue: 20,000 spaces
after </parameter> took 11 s to stream, 80,000 newlines in content 7 s).

In every parser state (tests/_parser_states.py), each kind of text that can
be held (whitespace, newlines, the start of a marker) is fed one id at a
time, then IM_END. No clock: `CompletionParser.scanned` counts the
characters the parser examined, held text each time it is looked at again,
and must stay within a constant times the text: the start of a marker is
looked at again with each of its characters, so the constant is about a
marker's length (16). A quadratic path counts about n²/2 (2,000,000 for
2,000 ids, against the bound's ~32,000). The
streamed message must also be the one-shot one. The default run feeds 2,000
ids a case; the slow run 100,000.
"""

from __future__ import annotations

import pytest

from _parser_states import HELD_KINDS, ORDINARY, STATES, held_completion

KINDS = {**HELD_KINDS, "ordinary text": ORDINARY}


@pytest.fixture(scope="module", params=["qwen3", "qwen3.6"])
def vocab(request, tok, tok36):
    """A tokenizer of each call style (the format is its vocabulary's default)."""
    return tok if request.param == "qwen3" else tok36


def _check(tok, state: str, unit: str, n_ids: int) -> None:
    prefix, held = held_completion(tok, state, unit, n_ids)
    parser = tok.completion_parser()
    parser.feed(prefix)
    feed = parser.feed
    for i in held:
        feed(i)
    msg = parser.finish()
    assert msg == tok.parse_completion(prefix + held), state
    chars = len(tok.decode(prefix + held))
    assert parser.scanned <= 16 * chars + 200, (state, parser.scanned, chars)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_held_text_is_scanned_a_bounded_number_of_times(vocab, kind):
    for state in STATES:
        _check(vocab, state, KINDS[kind], 2_000)


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_held_text_100000_ids(vocab, kind):
    for state in STATES:
        _check(vocab, state, KINDS[kind], 100_000)


def test_the_count_sees_rescans(vocab):
    """The measure itself: one feed of all the text scans it a few times; the
    same text held back and fed id by id may not cost more than a constant
    times that."""
    prefix, held = held_completion(vocab, "call: after </parameter>", " ", 2_000)
    once = vocab.completion_parser()
    once.feed(prefix + held)
    once.finish()
    by_id = vocab.completion_parser()
    for i in prefix + held:
        by_id.feed(i)
    by_id.finish()
    assert len(held) <= once.scanned and 0 < by_id.scanned <= 4 * once.scanned + 200
