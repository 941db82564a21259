"""Training masks from provenance: `EncodedChat`, what `encode_chat(chat,
return_masks=True)` returns.

The masks are derived from what the renderer recorded, never from the text:
segment kinds give `control_mask`, `RenderedChat.message_spans` give
`message_index` and `assistant_mask`. A token is placed by its first byte:
its offset in `chat.data`, which is exact wherever the DATA segment holding it
was already NFC; inside a segment that NFC changed it is the offset within
the normalized segment, clamped to the segment. Span boundaries and the
assistant header (ASCII, at a segment's start) are unaffected either way.
With `expand_media`, the masks are those of the unexpanded ids, each pad's
repeated with it (qwen4exp.render.media.apply): a pad is TRUSTED_CONTROL, in its
message's span, and in an assistant turn when its part is.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from qwen4exp.markers import Marker

__all__ = ["EncodedChat"]

# Bytes an assistant span opens with before its trainable part (the IM_START
# marker and "assistant\n"), and closes with after its IM_END marker (see
# segments.MessageSpan); alike in every format.
_ASSISTANT_HEADER = len(Marker.IM_START.data + b"assistant\n")
_TURN_CLOSE = len(b"\n")


class EncodedChat(NamedTuple):
    """Ids of a rendered chat with per-token provenance; four arrays of one length.

    * `ids` (int32): exactly `encode_chat(chat)`;
    * `control_mask` (bool): the token comes from a TRUSTED_CONTROL segment;
    * `message_index` (int32): the index in `messages` of the message whose
      span holds the token's first byte, -1 for none (the tools preamble
      without a system message, the generation prompt);
    * `assistant_mask` (bool): the token's first byte lies after an assistant
      turn's header (the IM_START marker, then "assistant\\n"), up to and
      including that turn's IM_END marker (its reasoning, content and tool
      calls: what a model is trained to produce).
    """

    ids: np.ndarray
    control_mask: np.ndarray
    message_index: np.ndarray
    assistant_mask: np.ndarray


def _in_ranges(off: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(which range, inside?) per offset, for sorted non-overlapping [start, end) ranges."""
    j = np.searchsorted(starts, off, side="right") - 1
    if not len(starts):
        return j, np.zeros(len(off), dtype=bool)
    jj = np.maximum(j, 0)
    return jj, (j >= 0) & (off < ends[jj])


def chat_masks(chat, ids: np.ndarray, tok_ends: np.ndarray, token_lengths: np.ndarray) -> EncodedChat:
    """The EncodedChat of `chat`, given its ids, the ids so far after each
    segment (`tok_ends`) and the byte length of every id's spelling."""
    bounds = np.asarray(chat.boundaries, dtype=np.int64)
    counts = np.diff(tok_ends, prepend=np.int64(0))
    seg = np.repeat(np.arange(len(counts)), counts)  # segment of each token
    control = ((seg + int(chat.first_is_control)) & 1).astype(bool)

    # Each token's first byte: its offset within its (normalized) segment,
    # clamped to the segment, plus where the segment starts in chat.data.
    lens = token_lengths[ids].astype(np.int64)
    ends_norm = np.cumsum(lens)
    seg_base = np.concatenate(([0], ends_norm))[tok_ends - counts]  # normalized offset of each segment
    rel = ends_norm - lens - seg_base[seg]
    off = bounds[:-1][seg] + np.minimum(rel, np.diff(bounds)[seg] - 1)

    spans = chat.message_spans
    starts = np.fromiter((s.start for s in spans), dtype=np.int64, count=len(spans))
    ends = np.fromiter((s.end for s in spans), dtype=np.int64, count=len(spans))
    which, inside = _in_ranges(off, starts, ends)
    message_index = np.where(inside, which, -1).astype(np.int32)

    generation = chat.generation_ranges
    if generation:  # a template's {% generation %} output: the tokens that overlap it, as transformers
        g = np.asarray(generation, dtype=np.int64)
        tok_end = np.maximum(off + 1, bounds[:-1][seg] + np.minimum(rel + lens, np.diff(bounds)[seg]))
        first = np.searchsorted(g[:, 1], off, side="right")  # the first range ending after the token starts
        inside = first < len(g)
        starts_at = g[np.minimum(first, len(g) - 1), 0]
        return EncodedChat(ids, control, message_index, inside & (starts_at < tok_end))

    assistant = [s for s in spans if s.role == "assistant"]
    a_starts = np.fromiter((s.start + _ASSISTANT_HEADER for s in assistant), dtype=np.int64,
                           count=len(assistant))
    a_ends = np.fromiter((s.end - _TURN_CLOSE for s in assistant), dtype=np.int64, count=len(assistant))
    _, assistant_mask = _in_ranges(off, a_starts, a_ends)
    return EncodedChat(ids, control, message_index, assistant_mask)
