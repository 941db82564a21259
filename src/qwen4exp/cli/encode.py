"""How `qwen4exp batch` turns a chunk of input into ids, on either engine.

A chunk is a `blocks.Block` (whole JSONL lines), a `blocks.Rows` (a Parquet
record batch) or a list of parsed `Record`s. Its records take one of two ways:

* **Arrow** (text records, unless --masks or --keep-columns): a block's
  lines go through pyarrow's JSON reader with one column, "text", and no
  other field allowed; a batch's text column is taken as it is. The texts
  stay one Arrow string array from the reader to `Tokenizer.encode_arrow`,
  whose ids are the chunk's columns: no Python object per record or per id.
* **one record at a time**: every other record (a chat, a record the
  reader refuses, a null text, text that is not valid UTF-8) is decoded by
  the strict decoder, rendered and encoded as before (`encode_chunk`), so
  that a bad record is named by its own line with its own error.

The reader refuses a whole block for one line it cannot read (bad JSON,
another field, a text that is not a string): the block is then cut in two
and each half read again, down to BISECT_MIN lines and BISECT_READS reads in
all (a few bad lines cost a few reads; bad lines everywhere stop the cutting
early), and the lines of a part still refused take the per-line path. Both
ways give the
ids and failures the per-line path alone gives: the reader only ever reads a
line whose whole content is {"text": <string>}, which the strict decoder reads
as the same string.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any, NamedTuple

import numpy as np

from qwen4exp.errors import Qwen4ExpError, TextEncodingError
from qwen4exp.cli.blocks import Block, Rows
from qwen4exp.cli.columns import kept_of, mask_arrays
from qwen4exp.cli.sinks import flatten
from qwen4exp.cli.sources import CHAT, TEXT, failure_of, record_of_line, records_of_batch

__all__ = ["EncodedChunk", "encode_chunk", "encode_work"]

BISECT_MIN = 64  # a refused part of a block is cut in two down to this many lines
BISECT_READS = 24  # and read again at most this many times in all


class EncodedChunk(NamedTuple):
    ids: list | None  # the token ids of each record that encoded, in input order (None: only the columns)
    nbytes: int       # their input bytes
    failures: list    # Failure of the records that did not, in input order
    columns: tuple | None  # flatten(...) of ids: what Sink.write takes (None when no record encoded)
    masks: tuple | None = None  # --masks: columns.mask_arrays of the encoded records
    kept: object = None  # --keep-columns: columns.kept_of the encoded records


def encode_chunk(tok, records, threads: int | None, failures=(), masks: bool = False) -> EncodedChunk:
    """Encode one chunk's records: texts with encode_batch, chats with encode_chats
    (with their masks when `masks`). A chunk with a bad record is retried one
    record at a time, to find who. `failures`: the chunk's records that did
    not parse, if the caller has them."""
    failures = list(failures)
    if not records:
        return EncodedChunk([], 0, sorted(failures, key=lambda f: f.index), None,
                            mask_arrays([]) if masks else None)
    results: list[Any] = [None] * len(records)
    chats, chat = tok.encode_chats, tok.encode_chat
    if masks:
        chats, chat = partial(chats, return_masks=True), partial(chat, return_masks=True)
    for kind, call, single in (
        (TEXT, tok.encode_batch, tok.encode),
        (CHAT, chats, chat),
    ):
        pos = [k for k, r in enumerate(records) if r.kind == kind]
        if not pos:
            continue
        try:
            ids = call([records[k].payload for k in pos], num_threads=threads)
        except Qwen4ExpError:
            ids = []
            for k in pos:
                try:
                    ids.append(single(records[k].payload))
                except Qwen4ExpError as exc:
                    failures.append(failure_of(exc, records[k].index, records[k].line))
                    ids.append(None)
        for k, x in zip(pos, ids):
            results[k] = x
    ok = [(r, x) for r, x in zip(records, results) if x is not None]
    ids = [x.ids if masks and r.kind == CHAT else x for r, x in ok]
    return EncodedChunk(
        ids, sum(r.nbytes for r, _ in ok), sorted(failures, key=lambda f: f.index),
        flatten([r.index for r, _ in ok], ids) if ok else None,
        mask_arrays([x for _, x in ok]) if masks else None,
        kept_of([r for r, _ in ok]) if ok and records[0].extra is not None else None,
    )


def encode_work(tok, work, threads: int | None, masks: bool = False) -> EncodedChunk:
    """Encode a chunk as the engines receive it (see the module doc)."""
    if isinstance(work, Block):
        return encode_block(tok, work, threads, masks)
    if isinstance(work, Rows):
        return encode_rows(tok, work, threads, masks)
    return encode_chunk(tok, work, threads, (), masks)


# -- JSONL blocks ------------------------------------------------------------------


def _have_pyarrow() -> bool:
    """JSONL to JSONL needs no pyarrow: without it every record is read one at a time."""
    try:
        import pyarrow.json  # noqa: F401
    except ImportError:
        return False
    return True


def encode_block(tok, block: Block, threads, masks: bool) -> EncodedChunk:
    slow = np.ones(len(block), dtype=bool)
    encoded, fast = None, np.zeros(0, dtype=np.int64)
    if not masks and not block.options.keep and len(block) and _have_pyarrow():
        slow = block.slow.copy()
        fast, chunks = _read_texts(block, np.flatnonzero(~slow))
        slow[:] = True
        slow[fast] = False
        if len(fast):
            import pyarrow as pa

            texts = pa.chunked_array(chunks, type=pa.large_string())
            fast, encoded = _encode_texts(tok, threads, fast, texts, slow)
    records, failures = [], []
    for k in np.flatnonzero(slow).tolist():
        try:
            records.append(record_of_line(block.raw(k), block.first_index + k, int(block.lines[k]), block.options))
        except Exception as exc:  # noqa: BLE001 - classified by failure_of
            failures.append(failure_of(exc, block.first_index + k, int(block.lines[k])))
    rest = encode_chunk(tok, records, threads, failures, masks)
    return _joined(block.first_index + fast, encoded, rest)


def _read_texts(block: Block, rows: np.ndarray):
    """(rows read, their texts as a list of large_string arrays) of the
    records `rows` of a block, through the Arrow JSON reader (module doc)."""
    import pyarrow as pa
    import pyarrow.json as pj

    from qwen4exp._native._jsonl import gather_lines

    block_size = max(1 << 20, 1 << int(block.longest + 2).bit_length())
    read_options = pj.ReadOptions(use_threads=True, block_size=block_size)
    parse_options = pj.ParseOptions(explicit_schema=pa.schema([("text", pa.large_string())]),
                                    unexpected_field_behavior="error")

    def read(part):
        if len(part) == len(block) and not block.slow.any():
            data = block.data  # every record: the block as it is (blank lines are skipped alike)
        else:
            data = gather_lines(block.data, block.starts[part], block.ends[part])
        try:
            table = pj.read_json(pa.BufferReader(data), read_options=read_options, parse_options=parse_options)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            return None  # refused: the part is halved (below); its last pieces go line by line, naming the bad record
        if table.num_rows != len(part):  # two objects on one line
            return None
        return table.column("text").chunks

    done_rows, done_chunks = [], []
    # Refused parts are halved depth first, first half first, with an explicit
    # stack: a recursive closure would be a reference cycle holding every
    # chunk's texts until the cyclic GC ran (a batch job's memory grew with
    # its input).
    refused, budget = [], BISECT_READS
    halves: tuple[Any, ...]
    got: Sequence[Any]
    halves, got = ((rows,), (read(rows),)) if len(rows) else ((), ())
    while True:
        for h, g in zip(halves, got):
            if g is not None:
                done_rows.append(h)
                done_chunks.extend(g)
        refused += [h for h, g in zip(halves[::-1], got[::-1]) if g is None]  # first half on top
        if not refused:
            break
        part = refused.pop()
        if len(part) <= BISECT_MIN or budget < 2:
            halves, got = (), ()  # its lines take the per-line path
            continue
        budget -= 2
        halves = (part[: len(part) // 2], part[len(part) // 2:])
        got = [read(h) for h in halves]
    if not done_rows:
        return np.zeros(0, dtype=np.int64), []
    return np.concatenate(done_rows), done_chunks


def _encode_texts(tok, threads, rows: np.ndarray, texts, slow: np.ndarray):
    """(rows, (their ids, their UTF-8 bytes)) of the texts of `rows`, encoded
    with encode_arrow; null texts and those that are not valid UTF-8 (Arrow
    holds any bytes) are marked slow instead, for the per-record path to
    report. encode_arrow checks UTF-8 as it goes, so the texts are scanned
    for bad rows only after it refused one."""
    import pyarrow as pa

    from qwen4exp.encode.arrow import bool_array, invalid_rows, valid_numpy

    def without(bad):
        slow[rows[bad]] = True
        return rows[~bad], texts.filter(bool_array(pa, ~bad))

    bad = ~valid_numpy(texts)
    if bad.any():
        rows, texts = without(bad)
    try:
        ids = tok.encode_arrow(texts, num_threads=threads)
    except TextEncodingError:
        bad = np.zeros(len(rows), dtype=bool)
        bad[invalid_rows(texts)] = True
        rows, texts = without(bad)
        ids = tok.encode_arrow(texts, num_threads=threads)
    return rows, (ids, sum(_text_bytes(chunk) for chunk in texts.chunks))


# -- Parquet batches -----------------------------------------------------------------


def encode_rows(tok, rows: Rows, threads, masks: bool) -> EncodedChunk:
    import pyarrow as pa

    batch, first = rows.batch, rows.first_index
    names = batch.column_names
    text = batch.column("text") if "text" in names else None
    if (masks or rows.options.keep or text is None
            or not (pa.types.is_string(text.type) or pa.types.is_large_string(text.type))):
        records, failures = records_of_batch(batch, first, rows.options)
        return encode_chunk(tok, records, threads, failures, masks)
    from qwen4exp.encode.arrow import bool_array, valid_numpy

    fast = valid_numpy(text)
    if "messages" in names:
        fast &= ~valid_numpy(batch.column("messages"))
    slow = ~fast
    fast_rows = np.flatnonzero(fast)
    encoded = None
    if len(fast_rows):
        texts = pa.chunked_array([text.filter(bool_array(pa, fast))])
        fast_rows, encoded = _encode_texts(tok, threads, fast_rows, texts, slow)
    slow_rows = np.flatnonzero(slow)
    records, failures = [], []
    if len(slow_rows):
        records, failures = records_of_batch(batch.filter(bool_array(pa, slow)), 0, rows.options)
        for x in (*records, *failures):
            x.index = first + int(slow_rows[x.index])
    rest = encode_chunk(tok, records, threads, failures, masks)
    return _joined(first + fast_rows, encoded, rest)


# -- both ----------------------------------------------------------------------------


def _text_bytes(chunk) -> int:
    """UTF-8 bytes of a string array without nulls: its offsets' span."""
    if not len(chunk):
        return 0
    from qwen4exp.encode.arrow import offsets_numpy

    ends = offsets_numpy(chunk)
    return int(ends[-1] - ends[0])


def _joined(index: np.ndarray, encoded, rest: EncodedChunk) -> EncodedChunk:
    """The chunk of the texts' ids (records `index`; `encoded`: their ids and
    bytes from _encode_texts) and of `rest` (the per-record path's), in input
    order."""
    if encoded is None or not len(index):
        return rest
    import pyarrow as pa

    from qwen4exp.encode.arrow import int_array, list_array, list_numpy

    ids, nbytes = encoded
    arrays = list(ids.chunks)
    if rest.columns is not None:
        r_index, _, r_flat, r_offsets, _ = rest.columns
        arrays.append(list_array(pa, r_offsets, r_flat))
        index = np.concatenate([index, r_index])
    ids = pa.concat_arrays(arrays) if len(arrays) != 1 else arrays[0]
    order = np.argsort(index, kind="stable")
    if len(arrays) > 1 and (order != np.arange(len(order))).any():
        ids, index = ids.take(int_array(pa, order, pa.int64())), index[order]
    offsets, flat = list_numpy(ids)
    flat = flat[offsets[0]:offsets[-1]]
    offsets = (offsets - offsets[0]).astype(np.int32, copy=False)  # a list<int32>'s: within int32
    columns = (index.astype(np.int64, copy=False), np.diff(offsets).astype(np.int32), flat, offsets,
               int(offsets[-1]))
    return EncodedChunk(None, nbytes + rest.nbytes, rest.failures, columns)
