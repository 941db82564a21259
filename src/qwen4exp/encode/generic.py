"""The native core for a vocabulary whose pre-tokenizer is not Qwen's.

`GenericNative` answers the NativeTokenizer calls the Tokenizer facade, the
chat encoder and the budget fitter make, with the file's own normalizer and
pre-tokenizer (qwen4exp.vocab.pipeline) in Python and the native BPE over its
pieces (NativeTokenizer.encode_split), through the same caches.

Segmented streams keep their contract (docs/FORMAT.md, section 7): the
native core first checks the geometry and parses every TRUSTED_CONTROL
segment into atoms (a fault comes back exactly as for a Qwen vocabulary);
each DATA segment is then normalized and pre-tokenized on its own, so its
ids are BPE ids only and never an atom's. That first pass also encodes the
DATA segments with the Qwen scanner, ids that are thrown away: the generic
path is bounded by the Python pre-tokenizer, several times slower anyway.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from qwen4exp.vocab.pipeline import Pipeline

_EMPTY = np.empty(0, dtype=np.int64)


class GenericNative:
    """A NativeTokenizer (its BPE, atoms, caches) behind a generic pre-tokenizer."""

    def __init__(self, native: Any, pipeline: Pipeline) -> None:
        self._core = native
        self.pipeline = pipeline

    def __getattr__(self, name: str) -> Any:  # decode_bytes, token_lengths, flush_cache, test hooks
        return getattr(self._core, name)

    # -- plain text ---------------------------------------------------------------

    def _split_texts(self, texts: list[str]) -> tuple[bytes, np.ndarray, np.ndarray]:
        """All texts' pieces joined: (bytes, piece ends, piece count after each text)."""
        blobs, ends, groups = [], [], []
        total = count = 0
        split = self.pipeline.split_array
        for text in texts:
            data, e = split(text)
            ends.append(e + total if total else e)
            blobs.append(data)
            count += len(e)
            groups.append(count)
            total += len(data)
        flat = np.concatenate(ends) if ends else _EMPTY
        return b"".join(blobs), flat, np.array(groups, dtype=np.int64)

    def encode(self, text: str) -> list[int]:
        data, ends = self.pipeline.split_array(text)
        ids, _ = self._core.encode_split(data, ends, _EMPTY)
        return ids.tolist()

    def count(self, text: str) -> int:
        data, ends = self.pipeline.split_array(text)
        ids, _ = self._core.encode_split(data, ends, _EMPTY)
        return len(ids)

    def encode_batch(self, texts: list[str], num_threads: int) -> list[list[int]]:
        if not texts:
            return []
        data, ends, groups = self._split_texts(texts)
        ids, marks = self._core.encode_split(data, ends, groups)
        bounds = [0, *marks.tolist()]
        flat = ids.tolist()
        return [flat[a:b] for a, b in zip(bounds, bounds[1:])]

    # -- segmented streams ----------------------------------------------------------

    def _stream_ids(self, data: bytes, bounds: list[tuple[int, int, int]], checked: np.ndarray,
                    checked_ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Ids of segments (start, end, kind) whose geometry the native pass checked:
        control ids from that pass (`checked`, with the ids so far after each
        segment in `checked_ends`), DATA ids from the generic pipeline.
        Returns (ids, ids so far after each segment)."""
        texts = [data[a:b].decode("utf-8") for a, b, kind in bounds if kind == 0]
        blob, ends, groups = self._split_texts(texts)
        data_ids, marks = self._core.encode_split(blob, ends, groups)
        parts, so_far = [], []
        total = prev_check = prev_mark = 0
        d = 0
        for k, (_, _, kind) in enumerate(bounds):
            if kind == 0:
                part = data_ids[prev_mark:marks[d]]
                prev_mark = int(marks[d])
                d += 1
            else:
                part = checked[prev_check:checked_ends[k]]
            prev_check = int(checked_ends[k])
            parts.append(part)
            total += len(part)
            so_far.append(total)
        ids = np.concatenate(parts).astype(np.int32, copy=False) if parts else np.empty(0, dtype=np.int32)
        return ids, np.array(so_far, dtype=np.int64)

    def encode_segments(self, data: bytes, starts: np.ndarray, ends: np.ndarray, kinds: np.ndarray):
        checked_ends = np.empty(len(starts), dtype=np.int64)
        result = self._core.encode_streams([(data, starts, ends, kinds, checked_ends)], 1)[0]
        if isinstance(result, tuple):
            return None, result
        bounds = list(zip(starts.tolist(), ends.tolist(), kinds.tolist()))
        return self._stream_ids(data, bounds, result, checked_ends)[0], None

    def encode_bounds(self, data: bytes, bounds: tuple, first_control: bool, first: int, want_ends: bool):
        checked, checked_ends, fault = self._core.encode_bounds(data, bounds, first_control, first, True)
        if fault is not None:
            return None, None, fault
        segments = [(bounds[k], bounds[k + 1], (k + first_control) & 1) for k in range(first, len(bounds) - 1)]
        ids, so_far = self._stream_ids(data, segments, checked, checked_ends)
        return ids, (so_far if want_ends else None), None

    def encode_streams(self, items: list, num_threads: int) -> list:
        checked_items, wanted = [], []
        for item in items:
            data, starts, ends, kinds = item[:4]
            checked_items.append((data, starts, ends, kinds, np.empty(len(starts), dtype=np.int64)))
            wanted.append(item[4] if len(item) > 4 else None)
        results = self._core.encode_streams(checked_items, num_threads)
        out: list = []
        for item, result, want in zip(checked_items, results, wanted):
            if isinstance(result, tuple):
                out.append(result)
                continue
            data, starts, ends, kinds, checked_ends = item
            bounds = list(zip(starts.tolist(), ends.tolist(), kinds.tolist()))
            ids, so_far = self._stream_ids(data, bounds, result, checked_ends)
            if want is not None:
                want[:] = so_far
            out.append(ids)
        return out


def encode_arrow(generic: GenericNative, strings: Any, num_threads: int) -> Any:
    """Tokenizer.encode_arrow for a generic pipeline: the same arrays in and
    out (qwen4exp.encode.arrow), each row pre-tokenized in Python."""
    from qwen4exp.encode import arrow
    from qwen4exp.errors import TextEncodingError

    pa = arrow.need_pyarrow("encode_arrow()")
    arrays, chunked = arrow._string_arrays(pa, strings)
    out, row0 = [], 0
    for a in arrays:
        bad = arrow.invalid_utf8_rows([arrow._describe(pa, a, pa.types.is_large_string(a.type))])
        if len(bad):
            raise TextEncodingError(f"encode_arrow(): strings[{row0 + int(bad[0])}] is not valid UTF-8")
        rows = a.to_pylist()
        ids = generic.encode_batch([r for r in rows if r is not None], num_threads)
        it = iter(ids)
        out.append(pa.array([None if r is None else next(it) for r in rows], type=pa.list_(pa.int32())))
        row0 += len(a)
    return pa.chunked_array(out, type=pa.list_(pa.int32())) if chunked else out[0]
