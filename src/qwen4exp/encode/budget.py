"""Token budgets: `Tokenizer.count_chat` and `Tokenizer.fit_chat`.

Fitting a conversation into a context window drops whole turns, oldest
first: a turn is a user message and everything up to the next user message
(assistant replies, tool calls and their results), so a tool call is never
separated from its results. The system message (with the tools preamble)
and the last user turn are always kept.

Each segment of a rendered chat is tokenized on its own, so a message's ids
depend only on its own segments: one encoding of the whole conversation
gives every message's token count, and a candidate's count is the total
minus the dropped messages' counts. That estimate picks the candidate; the
candidate is then rendered, and when its stream is the full stream with the
dropped messages' bytes cut out (same bytes, same segment boundaries) its
ids are the full ids with theirs cut out, exactly, without encoding again.
A format that renders the kept messages differently once older ones are
gone (Qwen3 keeps the reasoning of turns after the last query only, and
newer formats have similar rules) is encoded instead. The search over the
number of dropped turns relies only on exact counts, so the result is the
longest suffix that fits, whatever the format.
"""

from __future__ import annotations

import operator
from bisect import bisect_left
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from qwen4exp.render import media as _media
from qwen4exp.errors import BudgetError, fault_error
from qwen4exp.render.segments import RenderedChat

from qwen4exp.encode.core import HasCore

__all__ = ["FittedChat", "fit_chat"]

_HEAD_ROLES = ("system",)  # a leading message that is never dropped


class FittedChat(NamedTuple):
    """What `Tokenizer.fit_chat` returns.

    * `messages`: the kept messages (a new list of the caller's message objects);
    * `chat`: their `RenderedChat`;
    * `ids`: `encode_chat(chat)`, at most the budget long;
    * `dropped`: how many messages were dropped, all from the oldest turns.
    """

    messages: list
    chat: RenderedChat
    ids: np.ndarray
    dropped: int


def _role(message: Any) -> Any:
    return message.get("role") if isinstance(message, Mapping) else None


def _turn_starts(messages: list) -> tuple[int, list[int]]:
    """(head, starts): messages[:head] are always kept (the system message);
    starts[k] is where the kept messages resume when k turns are dropped.
    starts[-1] is the last user message (or `head` when there is none)."""
    head = 1 if messages and _role(messages[0]) in _HEAD_ROLES else 0
    starts = [head] + [i for i in range(head + 1, len(messages)) if _role(messages[i]) == "user"]
    return head, starts


class _Full:
    """The whole conversation's stream, ids and ids so far at each boundary."""

    def __init__(self, tok: HasCore, chat: RenderedChat, media) -> None:
        ids, tok_ends, fault = tok.core.native.encode_bounds(chat.data, chat.boundaries, chat.first_is_control, 0, True)
        if fault is not None:
            raise fault_error(fault, chat.data, chat.boundaries, chat.boundaries[1:])
        assert ids is not None and tok_ends is not None  # no fault: both are there
        self.ends: np.ndarray = np.concatenate(([0], tok_ends))  # ids before segment j: ends[j]
        reps = None if media is None else _media.repeats(tok, chat, ids, media, "fit_chat()")
        if reps is not None:  # each pad id written once per merged patch; the ends move with them
            ids = np.repeat(ids, reps)
            self.ends = np.concatenate(([0], np.cumsum(reps)))[self.ends]
        self.chat, self.ids = chat, ids

    def at(self, offset: int) -> tuple[int, int]:
        """(segment index, ids before it) of a segment boundary `offset`."""
        j = bisect_left(self.chat.boundaries, offset)
        return j, int(self.ends[j])

    def cut(self, chat: RenderedChat, start: int, stop: int) -> np.ndarray | None:
        """The ids of `chat` when its stream is this one with bytes start..stop
        cut out, segment for segment (each segment is tokenized on its own, so
        its ids are the full stream's); None when it is not."""
        full = self.chat
        data, bounds = chat.data, chat.boundaries
        (j0, t0), (j1, t1) = self.at(start), self.at(stop)
        if (
            chat.first_is_control != full.first_is_control
            or (j1 - j0) % 2  # kinds alternate: the joined segments must have the same kind
            or len(data) != len(full.data) - (stop - start)
            or full.boundaries[j0] != start or full.boundaries[j1] != stop
        ):
            return None
        shift = stop - start
        if bounds[: j0 + 1] != full.boundaries[: j0 + 1] or bounds[j0:] != tuple(b - shift for b in full.boundaries[j1:]):
            return None
        if data[:start] != full.data[:start] or data[start:] != full.data[stop:]:
            return None
        return np.concatenate((self.ids[:t0], self.ids[t1:]))


def fit_chat(
    tok,
    messages: Any,
    budget: int,
    *,
    tools: Any = None,
    chat_format: str | None = None,
    add_generation_prompt: bool = True,
    expand_media: Any = False,
    **render_options: Any,
) -> FittedChat:
    """The longest suffix of whole turns whose ids fit `budget` (see the module),
    rendered in `tok`'s chat format unless `chat_format` names another of its vocabulary's."""
    budget = _checked_budget(budget)

    def render(kept: list) -> RenderedChat:
        return tok.render_chat(kept, tools=tools, add_generation_prompt=add_generation_prompt,
                               chat_format=chat_format, **render_options)

    media = _media.processor_of(tok, expand_media, "fit_chat()")
    full = _Full(tok, render(messages), media)  # validates the request: the kept suffixes are valid too
    messages = list(messages)
    if len(full.ids) <= budget:
        return FittedChat(messages, full.chat, full.ids, 0)
    head, starts = _turn_starts(messages)
    if starts[0] >= len(messages):
        raise BudgetError(f"fit_chat(): the conversation needs {len(full.ids)} tokens, over the budget "
                          f"of {budget}, and has no turn to drop")
    spans = full.chat.message_spans
    if len(spans) == len(messages):
        cut_from = spans[head].start
        before = full.at(cut_from)[1]
        # The count with k turns dropped, exact wherever the kept messages render as before.
        estimates = [len(full.ids) - (full.at(spans[s].start)[1] - before) for s in starts]
    else:  # a format without one span per message: search by counts alone
        estimates = None

    memo: dict[int, tuple[RenderedChat, np.ndarray]] = {}

    def candidate(k: int) -> tuple[RenderedChat, np.ndarray]:
        if k not in memo:
            chat = render(messages[:head] + messages[starts[k]:])
            ids = None if estimates is None else full.cut(chat, cut_from, spans[starts[k]].start)
            memo[k] = (chat, tok.encode_chat(chat, expand_media=media) if ids is None else ids)
        return memo[k]

    def fits(k: int) -> bool:
        return len(candidate(k)[1]) <= budget

    last = len(starts) - 1
    if estimates is None:
        guess = min(1, last)
    else:
        guess = next((k for k, n in enumerate(estimates) if n <= budget), last)
    if fits(guess):
        if guess == 0 or not fits(guess - 1):
            return _result(messages, head, starts, guess, candidate(guess))
        lo, hi = 0, guess - 1  # hi fits
    else:
        if guess == last or not fits(last):
            need = len(candidate(last)[1])
            kept = len(messages) - starts[last] + head
            raise BudgetError(
                f"fit_chat(): the minimum to keep (the system message and the last user turn, "
                f"{kept} message{'s' if kept != 1 else ''}) is {need} tokens, over the budget of {budget}"
            )
        lo, hi = guess + 1, last
    while lo < hi:  # the fewest dropped turns that fit; counts fall as turns are dropped
        mid = (lo + hi) // 2
        if fits(mid):
            hi = mid
        else:
            lo = mid + 1
    return _result(messages, head, starts, hi, candidate(hi))


def _checked_budget(budget: Any) -> int:
    """`budget` as an int: TypeError for anything but an integer (a float, even
    a whole one, None, a string, a bool), BudgetError for a negative one."""
    if isinstance(budget, (bool, np.bool_)) or not isinstance(budget, (int, np.integer)):
        raise TypeError(f"fit_chat(): budget must be an int (a number of tokens), not "
                        f"{type(budget).__name__} {budget!r}")
    budget = operator.index(budget)
    if budget < 0:
        raise BudgetError(f"fit_chat(): budget must be 0 or more tokens, not {budget}")
    return budget


def _result(messages: list, head: int, starts: list[int], k: int, found) -> FittedChat:
    chat, ids = found
    return FittedChat(messages[:head] + messages[starts[k]:], chat, ids, starts[k] - head)
