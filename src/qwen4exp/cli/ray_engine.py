"""`qwen4exp batch --engine ray`: the batch pipeline (`batch`) with its chunks
encoded on a Ray cluster, through a `qwen4exp.runtimes.ray.TokenizerPool`.

The driver reads JSONL lines, or lists Parquet row groups (IN may be a
directory of shards, taken in sorted order), and ships them as they are; each
actor parses and encodes its chunk as the local engine does
(`encode.encode_work` on a `blocks.Block` of the lines or a `blocks.Rows` batch)
and returns an `EncodedChunk`. The pipeline writes them in input order, so
OUT, the errors file, the summary and the exit code are the local engine's.
Parquet files are read by the actors: they must be reachable from every node.
"""

from __future__ import annotations

import os

import numpy as np
import ray

from qwen4exp.encode.arrow import offsets_of
from qwen4exp.errors import Qwen4ExpError
from qwen4exp.runtimes.ray import TokenizerPool
from qwen4exp.cli.blocks import Rows, block_of_lines
from qwen4exp.cli.columns import RecordOptions, join_kept, record_options
from qwen4exp.cli.common import InputError, UsageError
from qwen4exp.cli.encode import EncodedChunk, encode_work
from qwen4exp.cli.sources import PARQUET_EXT, JsonlSource, ParquetSource, iter_jsonl

__all__ = ["RayEngine"]


class RayEngine:
    """The engine of `--engine ray` (see qwen4exp.cli.batch): one actor per
    --threads CPUs of the cluster (--threads: native threads per actor,
    default 1, at most the largest node's CPUs), two chunks in flight each."""

    def __init__(self, tok, args) -> None:
        self.input = args.input
        self.options, self.masks = record_options(args, tok), args.masks
        self.started = _connect(args.address)
        self.pool = None
        node_cpus = max([n["Resources"].get("CPU", 0) for n in ray.nodes() if n["Alive"]] or [1])
        threads = max(1, min(args.threads or 1, int(node_cpus)))
        actors = max(1, int(ray.cluster_resources().get("CPU", 1)) // threads)
        self.pool = TokenizerPool(tok, size=actors, num_threads=threads)
        self.window = 2 * actors
        self.chunk_size = args.chunk_size

    @staticmethod
    def open_source(path: str, fmt: str, options: RecordOptions = RecordOptions()):
        if os.path.isdir(path):
            if fmt == "jsonl":
                raise UsageError(f"{path} is a directory: only Parquet shards can be read from a directory")
            return _RowGroups(path, options)
        return _RowGroups(path, options) if fmt == "parquet" else _JsonlLines(path)

    def submit(self, work):
        assert self.pool is not None  # made by __init__
        return _Pending(self.pool.submit(_encode_work, work, self.chunk_size, self.options, self.masks),
                        self.input)

    def close(self, cancel: bool = False) -> None:
        if self.pool is not None:
            self.pool.close()
        if self.started:
            ray.shutdown()


class _Pending:
    def __init__(self, ref, input_name: str) -> None:
        self.ref, self.input_name = ref, input_name

    def result(self) -> EncodedChunk:
        try:
            return ray.get(self.ref)
        except ray.exceptions.RayError as exc:  # a worker failed (e.g. an unreadable row group)
            raise InputError(f"{self.input_name}: the Ray job failed: {_last_error_line(exc)}") from None


def _encode_work(tok, threads: int, work, chunk_size: int, options: RecordOptions = RecordOptions(),
                 masks: bool = False) -> EncodedChunk:
    """On an actor: parse and encode one chunk of raw JSONL lines, or one
    Parquet row group (`chunk_size` rows at a time), as the local engine does
    (encode.encode_work)."""
    if work[0] == "jsonl":
        return encode_work(tok, block_of_lines(work[1], options), threads, masks)
    import pyarrow.parquet as pq

    _, path, group, index, columns = work
    parts = []
    for batch in pq.ParquetFile(path).iter_batches(batch_size=chunk_size, row_groups=[group], columns=columns):
        parts.append(encode_work(tok, Rows(batch, index, options), threads, masks))
        index += batch.num_rows
    return _joined(parts)


def _joined(parts) -> EncodedChunk:
    """One EncodedChunk of consecutive ones."""
    if len(parts) == 1:
        return parts[0]
    filled = [p.columns for p in parts if p.columns is not None]
    columns = None
    if filled:
        index, lengths, flat = (np.concatenate([c[k] for c in filled]) for k in range(3))
        try:
            offsets = offsets_of(lengths)
        except Qwen4ExpError as exc:
            raise InputError(f"a row group is too large: {exc}") from None
        columns = (index, lengths, flat, offsets, int(offsets[-1]))
    masks = None
    if parts[0].masks is not None:
        masks = tuple(np.concatenate([p.masks[k] for p in parts]) for k in range(2))
    return EncodedChunk(
        None, sum(p.nbytes for p in parts),
        [f for p in parts for f in p.failures], columns, masks, join_kept([p.kept for p in parts]),
    )


class _JsonlLines:
    """A JSONL input read by the driver: chunks of (index, line number, raw
    line) of its non-blank lines, parsed on the actors."""

    def __init__(self, path: str) -> None:
        src = JsonlSource(path)  # checks the file as the local engine does
        self.path, self.name = path, src.name
        self.total_bytes, self.total_records, self.progress_unit = src.total_bytes, None, "bytes"

    def chunks(self, chunk_records: int, chunk_bytes: int, on_failure):
        lines, consumed, size, index = [], 0, 0, 0
        for lineno, raw in iter_jsonl(self.path):
            consumed += len(raw)
            if not raw.strip():
                continue  # blank lines are not records
            lines.append((index, lineno, raw))
            index += 1
            size += len(raw)
            if len(lines) >= chunk_records or size >= chunk_bytes:
                yield ("jsonl", lines), [], consumed
                lines, consumed, size = [], 0, 0
        if lines or consumed:
            yield ("jsonl", lines), [], consumed


class _RowGroups:
    """A Parquet file or a directory of shards: one chunk per row group, read
    by an actor. The shards' columns must agree."""

    def __init__(self, path: str, options: RecordOptions = RecordOptions()) -> None:
        if os.path.isdir(path):
            files = sorted(
                os.path.join(d, f)
                for d, _, names in os.walk(path)
                for f in names
                if f.lower().endswith(PARQUET_EXT) and not f.startswith((".", "_"))
            )
            if not files:
                raise InputError(f"{path}: the directory holds no Parquet files ({', '.join(PARQUET_EXT)})")
        else:
            files = [path]
        self.name, self.progress_unit, self.total_bytes = path, "records", None
        self.columns, self.groups, self.total_records, self.kept_schema = None, [], 0, None
        for f in files:
            src = ParquetSource(f, options)  # checks the file as the local engine does
            if self.columns is None:
                self.columns, self.kept_schema = src.columns, src.kept_schema
            elif src.columns != self.columns:
                raise InputError(
                    f"{f}: its columns ({', '.join(src.columns)}) differ from {files[0]}'s "
                    f"({', '.join(self.columns)}); the shards of one input must agree"
                )
            meta = src.file.metadata
            for g in range(meta.num_row_groups):
                rows = meta.row_group(g).num_rows
                self.groups.append((os.path.abspath(f), g, self.total_records, rows))
                self.total_records += rows

    def chunks(self, chunk_records: int, chunk_bytes: int, on_failure):
        for path, group, index, rows in self.groups:
            yield ("parquet", path, group, index, self.columns), [], rows


def _last_error_line(exc) -> str:
    """The 'SomeError: message' line of a Ray error's remote traceback."""
    import re

    found = [x for x in str(exc).splitlines() if re.match(r"[\w.]+(Error|Exception): ", x)]
    return found[-1] if found else str(exc).strip().splitlines()[-1]


def _connect(address) -> bool:
    """ray.init unless this process is already connected; True if we did."""
    import logging

    if ray.is_initialized():
        return False
    local = address is None and not os.environ.get("RAY_ADDRESS")
    extra = dict(include_dashboard=False) if local else {}
    ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False, **extra)
    return True
