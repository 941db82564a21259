"""`qwen4exp batch` through Arrow: text records read by pyarrow's JSON reader
(or a Parquet text column) and tokenized by encode_arrow, every other record
one at a time. The ids are checked against HF tokenizers, and the failures
against what each bad line is (its line number and its error), also when the
reader refuses a block and the block is cut in two until the bad line is
alone."""

from __future__ import annotations

import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import corpora
from helpers import cli_in_process as cli
from helpers import temp_files
from qwen4exp.render.chat import render_chat
from qwen4exp.cli.blocks import read_blocks

# Bad or non-text lines spliced into a text corpus: (line, error name or None
# for a record that encodes, what it encodes to: "chat" or a text).
SPLICED = [
    ('{"text": 5}', "RecordError", None),
    ("{not json", "JSONDecodeError", None),
    ('{"text": "x", "text": "y"}', "JSONDecodeError", None),  # duplicate keys
    ('{"text": "extra field", "id": 7}', None, "extra field"),  # the reader refuses it; the decoder takes it
    ('{"text": "two"} {"text": "objects"}', "JSONDecodeError", None),
    ('{"text": "nan", "x": NaN}', "JSONDecodeError", None),
    ('{"text": "lone \\ud800"}', "TextEncodingError", None),
    ('{"text": null}', "RecordError", None),
    ("{}", "RecordError", None),
    ('\ufeff{"text": "a byte order mark"}', "JSONDecodeError", None),  # only line 1 may start with one
    ('{"messages": [{"role": "user", "content": "a chat in the middle"}]}', None, "chat"),
    ('[{"role": "user", "content": "a bare message list"}]', None, "chat"),
    ('{"text": "escapes \\u00e9\\n\\t\\"q\\" \\ud83d\\ude00 \\u0000"}', None, 'escapes é\n\t"q" 😀 \x00'),
]


@pytest.fixture(scope="module")
def texts():
    docs = list(corpora.multilingual_documents()[:150]) + [d[:3000] for d in corpora.code_documents()[:50]]
    return [line for d in docs for line in d.split("\n") if line.strip()][:900]


def _expected_rows(tok, hf_plain, texts):
    """Lines of the spliced corpus, and per record (index, line, ids or the error name)."""
    lines, rows = [], []
    spliced = {37 + 53 * k: s for k, s in enumerate(SPLICED)}
    at = 0
    for t in texts:
        while len(lines) in spliced:
            line, error, value = spliced[len(lines)]
            lines.append(line)
            if error is not None:
                rows.append((len(rows), len(lines), error))
            elif value == "chat":
                obj = json.loads(line)
                messages = obj["messages"] if isinstance(obj, dict) else obj
                rows.append((len(rows), len(lines), tok.encode_chat(render_chat(messages)).tolist()))
            else:
                rows.append((len(rows), len(lines), hf_plain.encode(value, add_special_tokens=False).ids))
        lines.append(json.dumps({"text": t}, ensure_ascii=at % 2 == 0))
        rows.append((len(rows), len(lines), hf_plain.encode(t, add_special_tokens=False).ids))
        at += 1
    return lines, rows


@pytest.mark.parametrize("chunk", ["4096", "300"])
def test_bad_lines_inside_large_blocks(tmp_path, tok, hf_plain, texts, chunk):
    lines, rows = _expected_rows(tok, hf_plain, texts)
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out, errors = tmp_path / "out.parquet", tmp_path / "errors.jsonl"
    r = cli("batch", src, out, "--on-error", "skip", "--errors", errors, "--chunk-size", chunk, "--threads", "2")
    assert r.returncode == 1, r.stderr
    table = pq.read_table(out)
    got = dict(zip(table.column("index").to_pylist(), table.column("ids").to_pylist()))
    assert got == {i: x for i, _, x in rows if not isinstance(x, str)}
    assert table.column("length").to_pylist() == [len(x) for x in got.values()]
    failed = [(e["index"], e["line"], e["error"]) for e in map(json.loads, errors.read_text().splitlines())]
    assert failed == [r for r in rows if isinstance(r[2], str)]
    assert not temp_files(tmp_path)


def test_text_only_corpus_to_jsonl_and_parquet_agree(tmp_path, hf_plain, texts):
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n\n" for t in texts), encoding="utf-8")
    want = [hf_plain.encode(t, add_special_tokens=False).ids for t in texts]
    r = cli("batch", src, tmp_path / "out.jsonl", "--chunk-size", "100", "--threads", "2")
    assert r.returncode == 0, r.stderr
    rows = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [x["index"] for x in rows] == list(range(len(texts)))
    assert [x["ids"] for x in rows] == want and [x["length"] for x in rows] == [len(x) for x in want]
    r = cli("batch", "-", tmp_path / "out.parquet", "--format", "parquet", input=src.read_text(encoding="utf-8"))
    assert r.returncode == 0, r.stderr
    assert pq.read_table(tmp_path / "out.parquet").column("ids").to_pylist() == want


def test_invalid_utf8_text_is_its_own_failure(tmp_path, hf_plain, texts):
    body = [json.dumps({"text": t}, ensure_ascii=False).encode() for t in texts[:200]]
    body[120] = b'{"text": "bad \xff byte"}'
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"\n".join(body) + b"\n")
    r = cli("batch", src, tmp_path / "out.parquet", "--on-error", "skip")
    assert r.returncode == 1, r.stderr
    (failure,) = [json.loads(x) for x in (tmp_path / "out.parquet.errors.jsonl").read_text().splitlines()]
    assert (failure["line"], failure["error"]) == (121, "UnicodeDecodeError")
    table = pq.read_table(tmp_path / "out.parquet")
    assert table.column("index").to_pylist() == [i for i in range(200) if i != 120]
    assert table.column("ids").to_pylist() == [hf_plain.encode(t, add_special_tokens=False).ids
                                               for i, t in enumerate(texts[:200]) if i != 120]


def test_parquet_text_column_with_nulls_and_chats(tmp_path, tok, hf_plain, texts):
    n = 300
    text = [None if i % 10 == 3 else texts[i] for i in range(n)]
    messages = [[{"role": "user", "content": texts[i]}] if i % 10 == 3 else None for i in range(n)]
    text[5], messages[5] = None, None  # neither: a bad row
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"text": text, "messages": messages}), src, row_group_size=128)
    r = cli("batch", src, tmp_path / "out.parquet", "--on-error", "skip", "--chunk-size", "50")
    assert r.returncode == 1, r.stderr
    table = pq.read_table(tmp_path / "out.parquet")
    want = {}
    for i in range(n):
        if text[i] is not None:
            want[i] = hf_plain.encode(text[i], add_special_tokens=False).ids
        elif messages[i] is not None:
            want[i] = tok.encode_chat(render_chat(messages[i])).tolist()
    assert dict(zip(table.column("index").to_pylist(), table.column("ids").to_pylist())) == want
    (failure,) = [json.loads(x) for x in (tmp_path / "out.parquet.errors.jsonl").read_text().splitlines()]
    assert failure["index"] == 5


class _Trickle(io.RawIOBase):
    """A pipe that hands over a few bytes per read."""

    def __init__(self, data: bytes, step: int):
        self.data, self.step, self.pos = data, step, 0

    def readable(self):
        return True

    def read1(self, n=-1):
        piece = self.data[self.pos:self.pos + min(self.step, n if n > 0 else self.step)]
        self.pos += len(piece)
        return piece


@pytest.mark.parametrize("step", [1, 7, 4096])
def test_read_blocks_numbers_lines_and_keeps_whole_lines(step):
    lines = [b'{"text": "%d"}' % i if i % 5 else b"  " for i in range(60)] + [b'{"text": "last, no newline"}']
    data = b"\n".join(lines)
    got = []
    for block, consumed in read_blocks(_Trickle(data, step), 7, 1 << 20):
        assert block.data.endswith(b"\n") or block.data == data[-len(block.data):]
        got += [(int(block.lines[k]), block.raw(k), block.first_index + k) for k in range(len(block))]
    records = [(i + 1, line) for i, line in enumerate(lines) if line.strip()]
    assert [(n, raw) for n, raw, _ in got] == records
    assert [k for _, _, k in got] == list(range(len(records)))


def test_plain_text_records_never_take_the_per_record_path(tok, hf_plain, texts):
    """A block of {"text"} lines (escaped or not, blank lines between) is read
    and encoded through Arrow alone: the per-record encoders are not called."""
    from qwen4exp.cli.encode import encode_work

    class ArrowOnly:
        def encode_arrow(self, strings, num_threads=None):
            return tok.encode_arrow(strings, num_threads=num_threads)

        def __getattr__(self, name):
            raise AssertionError(f"{name} called for a plain text record")

    data = "".join(json.dumps({"text": t}, ensure_ascii=k % 3 == 0) + "\n" + " \n" * (k % 2)
                   for k, t in enumerate(texts[:400])).encode()
    (block, _), = list(read_blocks(io.BytesIO(data), 10_000, 1 << 30))
    chunk = encode_work(ArrowOnly(), block, 2)
    index, lengths, flat, offsets, total = chunk.columns
    assert index.tolist() == list(range(400)) and chunk.failures == []
    want = [hf_plain.encode(t, add_special_tokens=False).ids for t in texts[:400]]
    assert [flat[offsets[k]:offsets[k + 1]].tolist() for k in range(400)] == want
    assert lengths.tolist() == [len(x) for x in want] and total == sum(map(len, want))
    assert chunk.nbytes == sum(len(t.encode()) for t in texts[:400])


@pytest.mark.parametrize("source,out", [("in.jsonl", "out.parquet"), ("in.jsonl", "out.jsonl"),
                                        ("in.parquet", "out.parquet")])
def test_text_batch_does_not_import_pandas(tmp_path, source, out):
    """pyarrow imports pandas on the first pa.array(numpy) or Array.to_numpy,
    a quarter of a second per process: a text batch job builds and reads its
    Arrow arrays over buffers instead, so pandas is never loaded (the rows
    have a Unicode text, an empty one and a chat, so every path runs)."""
    import subprocess
    import sys

    from helpers import cli_env

    src = tmp_path / source
    rows = [{"text": "héllo wörld " * 50}, {"text": ""}, {"messages": [{"role": "user", "content": "hi"}]}]
    if source.endswith(".jsonl"):
        src.write_text("".join(json.dumps(r) + "\n" for r in rows * 20), encoding="utf-8")
    else:
        texts = [r.get("text") for r in rows] * 20
        chats = [None if "text" in r else json.dumps(r["messages"]) for r in rows] * 20
        pq.write_table(pa.table({"text": pa.array(texts, pa.string()), "messages": pa.array(chats, pa.string())}), src)
    code = ("import runpy, sys\n"
            "sys.argv = ['qwen4exp', 'batch', sys.argv[1], sys.argv[2], '--threads', '2', '-q']\n"
            "try:\n    runpy.run_module('qwen4exp', run_name='__main__')\n"
            "except SystemExit as exc:\n    assert not exc.code, exc.code\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pandas')[:3])\n")
    run = subprocess.run([sys.executable, "-c", code, str(src), str(tmp_path / out)],
                         capture_output=True, text=True, env=cli_env(), timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split("\n")[-2] == "[]"
    assert (tmp_path / out).stat().st_size > 0
