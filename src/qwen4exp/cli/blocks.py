"""`qwen4exp batch` input as it is read, before anything is parsed: blocks of
whole JSONL lines and Parquet record batches, the units the engines encode
(`encode.encode_work`).

A `Block` is raw bytes and a table of its records (the non-blank lines, as
`pyx/_jsonl.scan_lines` finds them): where each one starts and ends, its line
number, and whether it must take the per-line path (it is not an object, or
it holds "messages": a chat, or a line the Arrow JSON reader would read
otherwise than the strict decoder). Nothing is decoded here, so the engine
decides how each record is read, and line numbers stay exact whatever it
decides.
"""

from __future__ import annotations

import numpy as np

from qwen4exp._native._jsonl import scan_lines
from qwen4exp.cli.columns import RecordOptions

__all__ = ["Block", "Rows", "read_blocks", "block_of_lines"]

READ_SIZE = 1 << 20  # bytes asked of the file at a time (a pipe answers with what it has); one size, reused


class Block:
    """Whole lines of a JSONL input. Per record (a non-blank line): `starts`,
    `ends` (newline excluded) in `data`, `lines` (1-based line numbers),
    `slow` (takes the per-line path); records are numbered from
    `first_index`; `longest` is the longest record's length."""

    __slots__ = ("data", "starts", "ends", "lines", "slow", "longest", "first_index", "options")

    def __init__(self, data, starts, ends, lines, slow, longest, first_index, options):
        self.data, self.starts, self.ends, self.lines, self.slow = data, starts, ends, lines, slow
        self.longest, self.first_index, self.options = longest, first_index, options

    def __len__(self) -> int:
        return len(self.starts)

    def raw(self, k: int) -> bytes:
        """Record k's line (newline excluded)."""
        return self.data[self.starts[k]:self.ends[k]]


class Rows:
    """A record batch of a Parquet input, its rows numbered from `first_index`."""

    __slots__ = ("batch", "first_index", "options")

    def __init__(self, batch, first_index: int, options: RecordOptions):
        self.batch, self.first_index, self.options = batch, first_index, options


def read_blocks(f, chunk_records: int, chunk_bytes: int, options: RecordOptions = RecordOptions()):
    """Yield (Block, bytes consumed) from the binary file f: up to
    chunk_records records or about chunk_bytes bytes each, whole lines only,
    as soon as the file has given them (a pipe's records are not held back
    waiting for more).

    The bytes read wait in one buffer that only ever grows (to about a
    chunk and a read): what a block leaves is moved to its front rather than
    the buffer shrunk, so a long job does not give the allocator a buffer of
    every size from one read to a chunk, chunk after chunk (which left
    glibc's heap fragmented, and the job's memory creeping)."""
    read = getattr(f, "read1", f.read)
    buf = bytearray()
    have = 0  # bytes of buf in use: buf[:have]
    newlines, line, index, eof = 0, 1, 0, False
    while True:
        if not eof and (newlines == 0 or (newlines < chunk_records and have < chunk_bytes)):
            data = read(READ_SIZE)
            if data:
                buf[have:have + len(data)] = data  # grows buf only when it runs past its end
                have += len(data)
                newlines += data.count(b"\n")
                continue
            eof = True
        if not have:
            return
        with memoryview(buf) as whole:
            end, starts, ends, lines, slow, longest = scan_lines(whole[:have], chunk_records, chunk_bytes, eof)
            if end == 0:  # no whole line yet (blank lines only are taken too, so this means: read on)
                newlines = 0
                continue
            data = bytes(whole[:end])
            whole[:have - end] = whole[end:have]  # moved in place (overlapping views copy safely), not resized
        taken = data.count(b"\n")
        have -= end
        newlines -= taken
        yield Block(data, starts, ends, lines + line, slow, longest, index, options), end
        line += taken
        index += len(starts)


def block_of_lines(lines, options: RecordOptions = RecordOptions()) -> Block:
    """A Block of (index, line number, raw line) tuples, consecutive records
    of one input (the lines --engine ray ships to its actors)."""
    data = b"".join(raw if raw.endswith(b"\n") else raw + b"\n" for _, _, raw in lines)
    end, starts, ends, _, slow, longest = scan_lines(data, len(lines), len(data) + 1, True)
    if len(starts) != len(lines):
        raise ValueError("block_of_lines takes non-blank lines only")
    numbers = np.fromiter((n for _, n, _ in lines), dtype=np.int64, count=len(lines))
    return Block(data, starts, ends, numbers, slow, longest, lines[0][0] if lines else 0, options)
