"""Incremental encoding of a growing conversation: `Tokenizer.chat_encoder()`.

A server re-renders the whole history at every turn. Each segment of a
rendered chat is tokenized on its own (docs: the segment contract), so the
ids of a segment depend only on its bytes and kind: the ids of every leading
segment that is byte-identical, of the same kind and at the same offsets as
in the previous call can be copied instead of recomputed. That is exact by
construction, not a heuristic; only the segments after the first difference
are tokenized again.
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from typing import Any, Literal, overload

import numpy as np

from qwen4exp.render import media as _media
from qwen4exp._native._encoder import common_prefix
from qwen4exp.encode.masks import EncodedChat, chat_masks
from qwen4exp.errors import fault_error
from qwen4exp.render.segments import RenderedChat

from qwen4exp.encode.core import HasCore

__all__ = ["ChatEncoder"]


class ChatEncoder:
    """`encode(chat)` returns exactly `tokenizer.encode_chat(chat)`, re-tokenizing
    only the segments after the longest common prefix of whole segments
    shared with the previous call.

    It keeps the previous call's stream, segment boundaries, ids and the ids'
    end per segment (memory: one conversation), and nothing else. Use one
    encoder per conversation and per thread: a call while another is running
    on the same encoder raises RuntimeError and leaves it unchanged; so does
    any failing call (the next call reuses what the last good one produced).
    """

    __slots__ = ("_tok", "_lock", "_prev", "_reused")

    def __init__(self, tokenizer: HasCore) -> None:
        self._tok = tokenizer
        self._lock = threading.Lock()
        # (data, bounds, first_control, ids, tok_ends) of the last good call
        self._prev: tuple[bytes, tuple[int, ...], bool, np.ndarray, np.ndarray] | None = None
        self._reused = 0

    @property
    def reused_bytes(self) -> int:
        """How many leading bytes of the last call's stream were not tokenized
        again (their ids came from the call before)."""
        return self._reused

    def __repr__(self) -> str:
        kept = 0 if self._prev is None else len(self._prev[0])
        return f"ChatEncoder({kept} bytes kept, {self._reused} reused by the last call)"

    def reset(self) -> None:
        """Forget the previous conversation (the next call encodes in full)."""
        self._acquire()
        self._prev = None
        self._reused = 0
        self._lock.release()

    @overload
    def encode(self, chat: RenderedChat, *, return_masks: Literal[False] = False,
               expand_media: Any = False) -> np.ndarray: ...
    @overload
    def encode(self, chat: RenderedChat, *, return_masks: Literal[True], expand_media: Any = False) -> EncodedChat: ...
    @overload
    def encode(self, chat: RenderedChat, *, return_masks: bool, expand_media: Any = False) -> np.ndarray | EncodedChat: ...

    def encode(self, chat: RenderedChat, *, return_masks: bool = False,
               expand_media: Any = False) -> np.ndarray | EncodedChat:
        """Ids of `chat` (numpy int32), equal to `Tokenizer.encode_chat(chat)`;
        an EncodedChat with its masks when `return_masks`, media expanded with
        `expand_media` (as encode_chat). The kept state is the unexpanded ids."""
        if not isinstance(chat, RenderedChat):
            raise TypeError(f"ChatEncoder.encode() takes a RenderedChat, not {type(chat).__name__}")
        self._tok.core.check_chat(chat, "ChatEncoder.encode()")
        proc = _media.processor_of(self._tok, expand_media, "ChatEncoder.encode()")
        self._acquire()
        try:
            data, bounds, first_control = chat.data, chat.boundaries, chat.first_is_control
            first = self._reusable(data, bounds, first_control)
            ids, tok_ends = self._encode_from(data, bounds, first_control, first)
            # counted before the state changes: a part that cannot be counted changes nothing
            reps = None if proc is None else _media.repeats(self._tok, chat, ids, proc, "ChatEncoder.encode()")
            self._prev = (data, bounds, first_control, ids, tok_ends)
            self._reused = bounds[first]
        finally:
            self._lock.release()
        if return_masks:
            return _media.apply(chat_masks(chat, ids.copy(), tok_ends, self._tok.core.token_lengths()), reps)
        if reps is not None:
            return _media.apply(ids, reps)  # a new array
        return ids.copy()  # the kept ids must not change under the caller's hands

    def _reusable(self, data: bytes, bounds: tuple, first_control: bool) -> int:
        """How many leading segments equal the previous call's (same bytes, same
        boundaries, same kinds): their ids can be copied."""
        prev = self._prev
        if prev is None or prev[2] != first_control:
            return 0
        pdata, pbounds = prev[0], prev[1]
        # segments 0..k-1 end within the common bytes, in both streams
        k = min(bisect_right(bounds, common_prefix(pdata, data)), len(pbounds)) - 1
        if bounds[: k + 1] == pbounds[: k + 1]:
            return k
        lo, hi = 0, k  # bounds[:lo+1] agree, bounds[:hi+1] do not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if bounds[: mid + 1] == pbounds[: mid + 1]:
                lo = mid
            else:
                hi = mid
        return lo

    def _encode_from(self, data: bytes, bounds: tuple, first_control: bool, first: int):
        """(ids, ids' end per segment) of the whole stream, tokenizing only
        segments first..; raises (and changes nothing) as encode_chat does."""
        tok = self._tok
        tail, tail_ends, fault = tok.core.native.encode_bounds(data, bounds, first_control, first, True)
        if fault is not None:
            raise fault_error(fault, data, bounds, bounds[1:])
        if first == 0:
            return tail, tail_ends
        assert self._prev is not None and tail is not None and tail_ends is not None  # first > 0, no fault
        _, _, _, pids, pends = self._prev
        kept = int(pends[first - 1])
        ids = np.concatenate((pids[:kept], tail))
        tok_ends = np.concatenate((pends[:first], tail_ends + kept))
        return ids, tok_ends

    def _acquire(self) -> None:
        if not self._lock.acquire(blocking=False):
            raise RuntimeError(
                "ChatEncoder used from two threads at once: it holds one conversation's "
                "state, so use one ChatEncoder per conversation and per thread"
            )
