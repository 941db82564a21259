"""`qwen4exp batch`'s JSONL rows (pyx/_jsonl.pyx, write_jsonl_rows): the
lines the JSON parser reads back, written a buffer at a time, with rows
longer than the buffer and the extra columns' suffixes."""
import io
import json

import numpy as np
import pytest

from qwen4exp._native._jsonl import write_jsonl_rows


class CountingFile(io.BytesIO):
    """A binary file that counts its writes and checks it was handed views."""

    def __init__(self):
        super().__init__()
        self.writes = 0

    def write(self, data):
        self.writes += 1
        assert isinstance(data, memoryview) and not isinstance(data, bytes)
        return super().write(bytes(data))


def rows_of(lengths, seed=0):
    rng = np.random.default_rng(seed)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    offsets[1:] = np.cumsum(lengths)
    values = rng.integers(-(2**31), 2**31 - 1, size=int(offsets[-1]), dtype=np.int64).astype(np.int32)
    values[: min(3, len(values))] = [2**31 - 1, -(2**31), 0][: min(3, len(values))]
    index = np.arange(7, 7 + len(lengths), dtype=np.int64) * 1_000_003
    return index, offsets, values


@pytest.mark.parametrize("lengths", [[], [0], [3, 0, 5], [40_000] * 5, [10, 200_000, 10], [1] * 50_000])
def test_rows_read_back(lengths):
    index, offsets, values = rows_of(lengths)
    f = CountingFile()
    n = write_jsonl_rows(f, index, offsets, values)
    data = f.getvalue()
    assert n == len(data)
    lines = data.decode().splitlines()
    assert len(lines) == len(lengths)
    for k, line in enumerate(lines):
        row = json.loads(line)
        assert row == {"index": int(index[k]), "ids": values[offsets[k]:offsets[k + 1]].tolist(),
                       "length": lengths[k]}
    # a piece at a time: about a MiB each, never the whole output at once
    assert f.writes >= len(data) // (1 << 20)


def test_suffixes_and_an_offset_start():
    index, offsets, values = rows_of([4, 100_000, 0, 2])
    suffixes = [b',"a":1', b',"b":[true,false]', b"", b',"c":"\\u00e9"']
    f = CountingFile()
    write_jsonl_rows(f, index[1:], offsets[1:], values, suffixes[1:])
    lines = [json.loads(x) for x in f.getvalue().decode().splitlines()]
    assert [x["ids"] for x in lines] == [values[offsets[k]:offsets[k + 1]].tolist() for k in range(1, 4)]
    assert lines[0]["b"] == [True, False] and lines[2]["c"] == "é" and "a" not in lines[0]


def test_bad_arguments_are_refused_before_writing():
    index, offsets, values = rows_of([2, 2])
    f = CountingFile()
    with pytest.raises(ValueError, match="one entry more"):
        write_jsonl_rows(f, index, offsets[:-1], values)
    with pytest.raises(ValueError, match="outside values"):
        write_jsonl_rows(f, index, offsets + 1, values)
    with pytest.raises(ValueError, match="must not decrease"):
        write_jsonl_rows(f, index, offsets[::-1].copy(), values)
    with pytest.raises(ValueError, match="one entry per row"):
        write_jsonl_rows(f, index, offsets, values, [b""])
    assert f.getvalue() == b"" and f.writes == 0
