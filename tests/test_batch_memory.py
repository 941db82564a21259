"""A batch job's memory is bounded by its chunk window, not by its input:
encoding a chunk leaves nothing behind that only the cyclic garbage
collector could free (a reference cycle holding a chunk's Arrow texts kept
every chunk alive until a full collection, and the job grew with its input:
docs/PERFORMANCE.md, "A batch job's memory")."""

from __future__ import annotations

import gc
import io
import json

import pytest

import corpora
from qwen4exp.cli.blocks import read_blocks
from qwen4exp.cli.encode import encode_work


def _texts():
    docs = list(corpora.multilingual_documents()[:40])
    return [line for d in docs for line in d.split("\n") if line.strip()][:300]


# a clean block (one read), and blocks the JSON reader refuses (halved until
# the bad lines are alone, then line by line), one bad line and many
@pytest.mark.parametrize("bad_every", [0, 97, pytest.param(7, marks=pytest.mark.slow)])  # 7: most halvings
def test_encoding_a_chunk_leaves_no_cyclic_garbage(tok, bad_every):
    lines = [json.dumps({"text": t}, ensure_ascii=False) for t in _texts()]
    if bad_every:
        lines = [("{not json" if k % bad_every == bad_every - 1 else x) for k, x in enumerate(lines)]
    (block, _), = list(read_blocks(io.BytesIO(("\n".join(lines) + "\n").encode()), 10_000, 1 << 30))
    encode_work(tok, block, 2)  # first calls import and set up what they use, once
    gc.collect()
    gc.disable()
    try:
        chunk = encode_work(tok, block, 2)
        assert len(chunk.columns[0]) + len(chunk.failures) == len(lines)
        assert len(chunk.failures) == (len(lines) // bad_every if bad_every else 0)
        del chunk, block
        assert gc.collect() == 0  # everything was freed by reference counting alone
    finally:
        gc.enable()
