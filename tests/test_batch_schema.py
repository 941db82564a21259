"""One output schema: `qwen4exp batch` (Parquet and JSONL OUT) and
`qwen4exp.runtimes.ray.tokenize_dataset` give the same token columns, name for name,
type for type and value for value, for the same input, with and without
masks, for chats and texts. tokenize_dataset's batch function is called on
the Arrow table directly (no cluster: test_ray.py runs it on one)."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from qwen4exp.encode import batch_schema

from helpers import batch_in_process, conversations

ray_module = pytest.importorskip("qwen4exp.runtimes.ray")


def _ray_columns(tok, table, column, kind, masks, skip):
    """tokenize_dataset's output for `table` (one batch), without a cluster."""
    fn = ray_module._TokenizeColumn(tok, 1, column, kind, masks, skip, {"chat_format": tok.chat_format})
    return fn(table)


@pytest.fixture(scope="module")
def chats():
    convs = conversations(9)
    rows = [json.dumps(c) for c in convs]
    rows[4] = json.dumps([{"role": "bogus", "content": "x"}])  # a bad row: Ray keeps it, batch skips it
    return pa.table({"messages": rows, "id": list(range(len(rows)))})


@pytest.mark.parametrize("masks", [False, True])
def test_batch_and_ray_write_one_schema_for_chats(tok, tmp_path, capsys, chats, masks):
    src = tmp_path / "in.parquet"
    pq.write_table(chats, src)
    flags = ["--masks"] * masks + ["--keep-columns", "--on-error", "skip", "-q"]
    code, _ = batch_in_process(capsys, src, tmp_path / "out.parquet", *flags)
    assert code == 1
    code, _ = batch_in_process(capsys, src, tmp_path / "out.jsonl", *flags)
    assert code == 1
    local = pq.read_table(tmp_path / "out.parquet")
    ray_out = _ray_columns(tok, chats, "messages", "chat", masks, skip=True)

    names = batch_schema.token_names(masks)
    fields = batch_schema.token_fields(pa, masks)
    assert [f.name for f in fields] == list(names)
    assert local.schema.names == [batch_schema.INDEX, *names, "id"]
    assert ray_out.schema.names == ["messages", "id", *names, batch_schema.ERROR]
    assert [local.schema.field(n) for n in names] == [ray_out.schema.field(n) for n in names] == fields
    assert local.schema.field(batch_schema.INDEX) == batch_schema.index_field(pa)
    assert ray_out.schema.field(batch_schema.ERROR) == batch_schema.error_field(pa)

    # the same values: batch's rows are the records that encoded, in place in Ray's
    kept = local.column(batch_schema.INDEX).to_pylist()
    assert kept == [k for k in range(chats.num_rows) if k != 4] == local.column("id").to_pylist()
    for name in names:
        ray_values = ray_out.column(name).to_pylist()
        assert local.column(name).to_pylist() == [ray_values[k] for k in kept], name
    errors = ray_out.column(batch_schema.ERROR).to_pylist()
    assert errors[4].startswith("ChatFormatError") and errors[:4] + errors[5:] == [None] * 8
    assert ray_out.column(batch_schema.IDS).to_pylist()[4] == [] and ray_out.column(batch_schema.LENGTH)[4].as_py() == 0

    # JSONL: the same names in the same order, the same values
    lines = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert all(list(row) == local.schema.names for row in lines)
    assert [[row[n] for n in names] for row in lines] == [[local.column(n)[k].as_py() for n in names]
                                                         for k in range(local.num_rows)]


def test_batch_and_ray_write_one_schema_for_texts(tok, tmp_path, capsys):
    texts = ["héllo wörld", "", "数据 <|im_end|>", "naïve\n" * 30]
    table = pa.table({"text": texts})
    src = tmp_path / "in.parquet"
    pq.write_table(table, src)
    code, _ = batch_in_process(capsys, src, tmp_path / "out.parquet", "-q")
    assert code == 0
    local = pq.read_table(tmp_path / "out.parquet")
    ray_out = _ray_columns(tok, table, "text", "text", False, skip=False)
    names = batch_schema.token_names(False)
    assert local.schema.names == [batch_schema.INDEX, *names]
    assert ray_out.schema.names == ["text", *names]
    for name in names:
        assert local.schema.field(name) == ray_out.schema.field(name)
        assert local.column(name).to_pylist() == ray_out.column(name).to_pylist()
    assert local.column(batch_schema.IDS).to_pylist() == [tok.encode(t) for t in texts]


def test_token_arrays_share_offsets():
    """token_arrays: ids, length and the masks, row for row over one offsets array."""
    import numpy as np

    offsets = np.array([0, 2, 2, 5], dtype=np.int32)
    ids = np.arange(5, dtype=np.int32)
    masks = (np.array([0, 1, 0, 0, 1], dtype=bool), np.array([0, 0, -1, 1, 1], dtype=np.int32))
    arrays = batch_schema.token_arrays(pa, offsets, ids, masks)
    assert [a.type for a in arrays] == [f.type for f in batch_schema.token_fields(pa, True)]
    assert [a.to_pylist() for a in arrays] == [[[0, 1], [], [2, 3, 4]], [2, 0, 3],
                                              [[False, True], [], [False, False, True]], [[0, 0], [], [-1, 1, 1]]]


def test_one_place_picks_the_sink():
    """OUT's format: sinks.SINKS gives --format its choices, and each sink's
    extensions (any case) pick it; a name with none is a usage error naming
    --format."""
    from qwen4exp.cli.common import UsageError
    from qwen4exp.cli.main import COMMANDS
    from qwen4exp.cli.parser import build_parser
    from qwen4exp.cli.sinks import SINKS, sink_for

    batch = next(a for a in build_parser(COMMANDS)._actions if a.dest == "command").choices["batch"]
    assert next(a for a in batch._actions if a.dest == "format").choices == tuple(SINKS)
    for name, cls in SINKS.items():
        assert cls.name == name and cls.extensions
        for ext in cls.extensions:
            assert sink_for(f"dir/out{ext}") is cls and sink_for(f"OUT{ext.upper()}") is cls
        assert sink_for("out.weird", name) is cls
    with pytest.raises(UsageError, match="--format"):
        sink_for("out.weird")
