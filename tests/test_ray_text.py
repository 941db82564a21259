"""tokenize_dataset(kind="text")'s batch function, called on Arrow tables
directly (no cluster): the column goes through encode_arrow; ids against HF,
null rows and rows whose bytes are not UTF-8 keep their place with empty ids
and an error, or raise naming the row."""

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import corpora
from qwen4exp import Qwen4ExpError, TextEncodingError

ray_module = pytest.importorskip("qwen4exp.runtimes.ray")


def _batch_fn(tok, skip):
    return ray_module._TokenizeColumn(tok, 2, "text", "text", False, skip, ())


def _texts_with_invalid_row(texts, at, kind):
    """A string column (two chunks) of texts whose row `at` is not UTF-8."""
    raw = [t.encode() for t in texts]
    raw[at] = b"bad \xff byte"
    offsets = [0]
    for r in raw:
        offsets.append(offsets[-1] + len(r))
    off = pa.array(offsets, type=pa.int32()).buffers()[1]
    col = pa.Array.from_buffers(pa.string(), len(raw), [None, off, pa.py_buffer(b"".join(raw))], null_count=0)
    if kind == "large":
        col = col.cast(pa.large_string(), safe=False)
    return pa.chunked_array([col.slice(0, 20), col.slice(20)])


@pytest.mark.parametrize("kind", ["string", "large"])
def test_text_rows_nulls_and_invalid_utf8(tok, hf_plain, kind):
    texts = list(corpora.multilingual_documents()[:40])
    col = _texts_with_invalid_row(texts, 11, kind)
    col = pc.if_else(pa.array([k == 5 for k in range(40)]), pa.scalar(None, col.type), col)
    table = pa.table({"id": list(range(40)), "text": col})
    out = _batch_fn(tok, True)(table)
    assert out.column_names == ["id", "text", "ids", "length", "error"]
    assert out.schema.field("ids").type == pa.list_(pa.int32())
    want = [[] if k in (5, 11) else hf_plain.encode(t, add_special_tokens=False).ids for k, t in enumerate(texts)]
    assert out.column("ids").to_pylist() == want
    assert out.column("length").to_pylist() == [len(x) for x in want]
    errors = out.column("error").to_pylist()
    assert errors[5] == "Qwen4ExpError: the text is null"
    assert errors[11] == "TextEncodingError: the text is not valid UTF-8"
    assert [e for k, e in enumerate(errors) if k not in (5, 11)] == [None] * 38
    with pytest.raises(Qwen4ExpError, match=r"column 'text', row 5 of a batch of 40 \('None'\): the text is null"):
        _batch_fn(tok, False)(table)
    filled = table.set_column(1, "text", pc.fill_null(table.column("text"), "now a text"))
    with pytest.raises(TextEncodingError, match=r"row 11 of a batch of 40 \(\"b'bad \\\\xff byte'\"\)"):
        _batch_fn(tok, False)(filled)
