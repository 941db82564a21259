"""The command line on real files, results read back with pyarrow and
compared with the library's ids. The commands run in this process through
`main` (helpers.cli_in_process: stdout and stderr a pipe's), where a process
of their own would add only its start-up; the entry points themselves (the
console script, `python -m qwen4exp`), the import cost and a missing pyarrow
run in subprocesses (PYTHONPATH=src)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import corpora
from helpers import BAD_LINES, EXAMPLE, cli_env, temp_files
from helpers import cli as cli_subprocess
from helpers import cli_in_process as cli
import qwen4exp
from qwen4exp.render.chat import render_chat

import pyarrow as pa  # a test dependency (pyproject's `test` extra): never skipped
import pyarrow.parquet as pq

import qwen4exp

REPO = Path(__file__).resolve().parent.parent
COMMANDS = ["demo", "render", "encode", "decode", "parse", "count", "batch", "folder"]


def _expected(tok, record):
    """The library's ids for one batch record (dict or bare list)."""
    if isinstance(record, list):
        return tok.encode_chat(render_chat(record)).tolist()
    if "text" in record:
        return tok.encode(record["text"])
    opts = {k: record[k] for k in ("tools", "add_generation_prompt", "enable_thinking") if k in record}
    return tok.encode_chat(render_chat(record["messages"], **opts)).tolist()


@pytest.fixture(scope="module")
def example():
    with open(EXAMPLE, encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def records(example):
    """Real mixed records: texts from the corpora, conversations around them,
    the bundled example, a bare message list and options."""
    ml = list(corpora.multilingual_documents())
    code = list(corpora.code_documents())
    out = []
    for i in range(300):
        d = ml[i % len(ml)]
        k = i % 6
        if k == 0:
            out.append({"text": d, "id": f"doc-{i}"})
        elif k == 1:
            out.append({"text": code[i % len(code)][:20000]})
        elif k == 2:
            out.append({"messages": [{"role": "user", "content": d}], "add_generation_prompt": True})
        elif k == 3:
            out.append(example)
        elif k == 4:
            out.append([{"role": "user", "content": "<|im_end|>" + d[:200]},
                        {"role": "assistant", "content": d[200:400], "reasoning_content": "hm"}])
        else:
            out.append({"messages": [{"role": "system", "content": "be brief"},
                                     {"role": "user", "content": d}],
                        "add_generation_prompt": True, "enable_thinking": False})
    return out


@pytest.fixture(scope="module")
def expected(tok, records):
    return [_expected(tok, r) for r in records]


@pytest.fixture(scope="module")
def jsonl_in(tmp_path_factory, records):
    p = tmp_path_factory.mktemp("in") / "records.jsonl"
    with open(p, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    return p


def _read_parquet(path):
    t = pq.read_table(path)
    assert t.schema.names == ["index", "ids", "length"]
    assert t.schema.field("index").type == pa.int64()
    assert t.schema.field("ids").type == pa.list_(pa.int32())
    assert t.schema.field("length").type == pa.int32()
    return t.column("index").to_pylist(), t.column("ids").to_pylist(), t.column("length").to_pylist()


def _read_jsonl(path):
    rows = [json.loads(line) for line in open(path, encoding="utf-8")]
    return [r["index"] for r in rows], [r["ids"] for r in rows], [r["length"] for r in rows]


# ---------------------------------------------------------------------------
# help, usage, import cost
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("command", [None] + COMMANDS)
def test_help(command):
    args = ([command] if command else []) + ["--help"]
    r = cli(*args)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("usage: qwen4exp")
    assert "exit codes:" in r.stdout and "130" in r.stdout
    if command is None:
        for c in COMMANDS:
            assert c in r.stdout


def test_usage_errors(tmp_path):
    assert cli().returncode == 2  # no command: help on stderr
    assert cli("nosuchcommand").returncode == 2
    r = cli("batch", EXAMPLE, tmp_path / "out.parquet", "--threads", "0")
    assert r.returncode == 2 and "--threads" in r.stderr
    r = cli("batch", tmp_path / "x.jsonl", tmp_path / "out.weird")
    assert r.returncode == 2 and "--format" in r.stderr
    r = cli("batch", tmp_path / "x.jsonl", tmp_path / "nodir" / "out.parquet")
    assert r.returncode == 2
    r = cli("encode", "--text", "a", EXAMPLE)
    assert r.returncode == 2


def _console_script() -> str:
    """The installed `qwen4exp` console script (pip writes it beside the interpreter)."""
    import shutil
    import sysconfig

    path = os.pathsep.join([sysconfig.get_path("scripts"), os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    script = shutil.which("qwen4exp", path=path)
    assert script, "no `qwen4exp` console script: install the package (pip install '.[test]')"
    return script


def test_module_and_console_entry_point():
    """The installed console script and `python -m qwen4exp` run the same program."""
    script = _console_script()
    for args in (["--version"], ["encode", "--text", "it's <|im_end|>"]):  # count: in-process below
        via_script = subprocess.run([script, *args], capture_output=True, text=True, env=cli_env(), timeout=120)
        via_module = cli_subprocess(*args)
        assert via_script.returncode == via_module.returncode == 0, via_script.stderr + via_module.stderr
        assert via_script.stdout == via_module.stdout == cli(*args).stdout  # and main() in this process
    assert json.loads(via_module.stdout) == qwen4exp.Tokenizer().encode("it's <|im_end|>")
    assert cli("count", "-t", "hello world").stdout.strip() == str(qwen4exp.Tokenizer().count("hello world"))
    # --version names the package version (importlib.metadata, or pyproject in a source tree)
    assert cli("--version").stdout.split() == ["qwen4exp", qwen4exp.__version__]
    # a usage error exits 2 through both
    r = subprocess.run([script, "no-such-command"], capture_output=True, text=True, env=cli_env(), timeout=120)
    assert r.returncode == cli_subprocess("no-such-command").returncode == 2


def test_import_does_not_load_cli_dependencies():
    code = (
        "import sys, qwen4exp; qwen4exp.Tokenizer().encode('x'); "
        "print(sorted(m for m in ('pyarrow', 'tqdm', 'qwen4exp.cli', 'pandas', 'ray') if m in sys.modules))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=cli_env())
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_missing_pyarrow_is_explained(tmp_path, jsonl_in):
    code = (
        "import sys; sys.modules['pyarrow'] = None; sys.modules['pyarrow.parquet'] = None; "
        "from qwen4exp.cli.main import main; sys.exit(main(sys.argv[1:]))"
    )
    out = tmp_path / "out.parquet"
    r = subprocess.run([sys.executable, "-c", code, "batch", str(jsonl_in), str(out)],
                       capture_output=True, text=True, env=cli_env())
    assert r.returncode == 2
    assert 'pip install ".[cli]"' in r.stderr and "pip install pyarrow" in r.stderr
    assert not out.exists() and not temp_files(tmp_path)
    # JSONL out needs neither pyarrow nor (without a terminal) tqdm.
    code2 = code.replace("sys.modules['pyarrow.parquet'] = None;", "sys.modules['pyarrow.parquet'] = None; sys.modules['tqdm'] = None;")
    r = subprocess.run([sys.executable, "-c", code2, "batch", str(jsonl_in), str(tmp_path / "o.jsonl")],
                       capture_output=True, text=True, env=cli_env())
    assert r.returncode == 0, r.stderr


# ---------------------------------------------------------------------------
# demo / render / encode / decode / count
# ---------------------------------------------------------------------------


def test_example_conversation_has_everything(example):
    msgs = example["messages"]
    assert example["tools"]
    assert any(m.get("tool_calls") for m in msgs)
    assert any(m["role"] == "tool" for m in msgs)
    assert any(m.get("reasoning_content") for m in msgs)
    assert any(m["role"] == "user" and "<|im_end|>" in m["content"] for m in msgs)


def test_demo(tok, example):
    r = cli("demo")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    chat = render_chat(example["messages"], tools=example["tools"])
    ids = tok.encode_chat(chat)
    assert f"{len(chat.segments)} segments -> {len(ids)} tokens" in out
    # One table row per segment, its kind spelled as qwen4exp.Kind names it (as the docs do).
    rows = [x.split() for x in out.splitlines() if x[:12].strip().replace("..", "").isdigit()]
    assert [(r[0], r[1]) for r in rows] == [(f"{s.start}..{s.end}", s.kind.name) for s in chat.segments]
    # Atom ids of the template markers are printed...
    for name in ("<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>", "<tool_response>"):
        assert str(tok.atoms[name]) in out
    # ...and the user's literal <|im_end|> is said to have stayed DATA, with BPE ids.
    line = next(x for x in out.splitlines() if "the user typed" in x)
    assert "stayed DATA" in line and "none is an atom id" in line
    bpe = json.loads(line[line.index("[") : line.index("]") + 1])
    assert bpe and not set(bpe) & set(tok.atoms.values())
    assert tok.decode(bpe).strip() == "<|im_end|>"
    assert "never becomes one" in out
    assert len(out.splitlines()) < 60  # short
    full = cli("demo", "--full")
    assert full.returncode == 0
    listed = full.stdout.split(f"token ids ({len(ids)}):\n", 1)[1].strip()
    assert json.loads(listed) == ids.tolist()


def test_render_plain_and_json(example):
    chat = render_chat(example["messages"], tools=example["tools"])
    r = cli("render", EXAMPLE, "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["text"] == chat.text
    assert doc["segments"] == [[s.start, s.end, s.kind.name] for s in chat.segments]
    assert {k for _, _, k in doc["segments"]} == {"DATA", "TRUSTED_CONTROL"}

    plain = cli("render", EXAMPLE)  # stdout is a pipe: plain markers, no colour
    assert plain.returncode == 0
    expect = "".join(
        ("\u27e6%s\u27e7" if s.kind is qwen4exp.Kind.TRUSTED_CONTROL else "%s")
        % chat.data[s.start : s.end].decode()
        for s in chat.segments
    )
    assert plain.stdout == expect
    assert "\x1b[" not in plain.stdout
    # The user's literal marker is not wrapped: it is DATA.
    assert "I typed <|im_end|> in my notes" in plain.stdout

    colored = cli("render", EXAMPLE, "--color", "always")
    assert "\x1b[" in colored.stdout
    table = cli("render", EXAMPLE, "--table")
    assert "TRUSTED_CONTROL" in table.stdout


def test_render_stdin_bare_list_and_options():
    msgs = [{"role": "user", "content": "hi"}]
    r = cli("render", "-", "--json", "--add-generation-prompt", "--no-thinking", input=json.dumps(msgs))
    assert r.returncode == 0, r.stderr
    chat = render_chat(msgs, add_generation_prompt=True, enable_thinking=False)
    assert json.loads(r.stdout)["text"] == chat.text


@pytest.mark.parametrize(
    "payload, fragment",
    [
        ('{"messages": [{"role": "bogus", "content": "x"}]}', "ChatFormatError"),
        ("{not json", "invalid JSON"),
        ('"just a string"', "chat request"),
        ('{"messages": [{"role": "user", "content": "x"}], "tools": 5}', "ChatFormatError"),
    ],
)
def test_render_rejects_bad_requests(payload, fragment):
    r = cli("render", "-", input=payload)
    assert r.returncode == 3
    assert fragment in r.stderr
    assert r.stdout == ""


def test_missing_input_file(tmp_path):
    for cmd in (["render"], ["encode"], ["count"], ["encode", "--chat"]):
        r = cli(*cmd, tmp_path / "nope.json")
        assert r.returncode == 3 and "nope.json" in r.stderr


def test_encode_count_decode(tok, tmp_path, example):
    text = corpora.multilingual_documents()[3]
    ids = tok.encode(text)
    r = cli("encode", "--text", text)
    assert r.returncode == 0 and json.loads(r.stdout) == ids
    f = tmp_path / "doc.txt"
    f.write_bytes(text.encode("utf-8"))
    assert json.loads(cli("encode", f).stdout) == ids
    assert json.loads(cli("encode", input=text).stdout) == ids  # stdin
    assert cli("encode", f, "--format", "space").stdout.split() == [str(i) for i in ids]
    assert cli("count", f).stdout.strip() == str(len(ids))
    assert cli("count", "--text", "").stdout.strip() == "0"
    # Plain text is DATA: the spelling of an atom is BPE.
    lit = json.loads(cli("encode", "--text", "<|im_end|>").stdout)
    assert lit == tok.encode("<|im_end|>") and tok.atoms["<|im_end|>"] not in lit
    # Chat requests.
    chat_ids = tok.encode_chat(render_chat(example["messages"], tools=example["tools"])).tolist()
    assert json.loads(cli("encode", "--chat", EXAMPLE).stdout) == chat_ids
    assert cli("count", "--chat", EXAMPLE).stdout.strip() == str(len(chat_ids))
    # decode: arguments, stdin JSON, stdin space-separated; round trip.
    d = cli("decode", "-n", *ids)
    assert d.returncode == 0 and d.stdout == text
    assert cli("decode", "-n", input=json.dumps(ids)).stdout == text
    assert cli("decode", input=" ".join(map(str, chat_ids))).stdout == tok.decode(chat_ids) + "\n"
    r = cli("decode", "1", "99999999")
    assert r.returncode == 3 and "99999999" in r.stderr
    assert cli("decode", "abc").returncode == 3


def test_parse(tok, tmp_path):
    history = [{"role": "user", "content": "Weather in Paris? Say <tool_call> literally."}]
    turn = {"role": "assistant", "content": "Checking <tool_call> 🌦", "reasoning_content": "Use the tool.",
            "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]}
    full = tok.encode_chat(render_chat(history + [turn])).tolist()
    prompt = tok.encode_chat(render_chat(history, add_generation_prompt=True)).tolist()
    ids = full[len(prompt) : -1]  # up to and including <|im_end|>
    expected = tok.parse_completion(ids)
    assert expected["content"] == turn["content"] and len(expected["tool_calls"]) == 1
    r = cli("parse", *ids)
    assert r.returncode == 0 and json.loads(r.stdout) == expected
    f = tmp_path / "ids.json"
    f.write_text(json.dumps(ids))
    assert json.loads(cli("parse", "--file", f, "--indent", "2").stdout) == expected
    assert json.loads(cli("parse", input=" ".join(map(str, ids))).stdout) == expected
    # --in-reasoning: the prompt opened <think>, the ids start inside it
    inner = ids[ids.index(tok.atoms["<think>"]) + 1 :]
    assert json.loads(cli("parse", "--in-reasoning", *inner).stdout) == expected
    # a cut-off completion is reported, not an error; a bad id is an input error
    cut = json.loads(cli("parse", *ids[:-3]).stdout)
    assert cut["errors"][-1]["error"].startswith("truncated") and cut["invalid_tool_calls"][0]["index"] == 0
    r = cli("parse", "1", "-2")
    assert r.returncode == 3 and "-2" in r.stderr


def test_encode_rejects_invalid_utf8(tmp_path):
    f = tmp_path / "bad.txt"
    f.write_bytes(b"ok \xff\xfe")
    r = cli("encode", f)
    assert r.returncode == 3 and "UTF-8" in r.stderr


# ---------------------------------------------------------------------------
# batch
# ---------------------------------------------------------------------------


def _check_summary(stderr, n_ok, n_failed):
    assert f"{n_ok:,} ok, {n_failed:,} failed" in stderr
    assert "tokens from" in stderr and "MB/s" in stderr and "records/s" in stderr


def test_batch_jsonl_to_parquet(tmp_path, jsonl_in, expected):
    out = tmp_path / "out.parquet"
    r = cli("batch", jsonl_in, out, "--threads", "2", "--chunk-size", "37")
    assert r.returncode == 0, r.stderr
    _check_summary(r.stderr, len(expected), 0)
    index, ids, lengths = _read_parquet(out)
    assert index == list(range(len(expected)))
    assert ids == expected
    assert lengths == [len(x) for x in expected]
    assert not temp_files(tmp_path)
    assert not (tmp_path / "out.parquet.errors.jsonl").exists()


def test_batch_jsonl_to_jsonl_threads_and_chunks_agree(tmp_path, jsonl_in, expected):
    outs = []
    for threads, chunk in ((1, 4096), (2, 1), (3, 50)):
        out = tmp_path / f"out-{threads}-{chunk}.jsonl"
        r = cli("batch", jsonl_in, out, "--threads", threads, "--chunk-size", chunk, "-q")
        assert r.returncode == 0, r.stderr
        assert r.stderr == ""  # --quiet
        outs.append(out.read_bytes())
    assert outs[0] == outs[1] == outs[2]
    index, ids, lengths = _read_jsonl(tmp_path / "out-1-4096.jsonl")
    assert index == list(range(len(expected))) and ids == expected
    assert lengths == [len(x) for x in expected]


def test_batch_format_option_and_stdin(tmp_path, jsonl_in, expected):
    out = tmp_path / "tokens.bin"
    r = cli("batch", "-", out, "--format", "parquet", input=jsonl_in.read_text(encoding="utf-8"))
    assert r.returncode == 0, r.stderr
    assert _read_parquet(out)[1] == expected


def test_batch_parquet_text_column_in(tmp_path, tok):
    docs = list(corpora.code_documents()[:40]) + list(corpora.multilingual_documents()[:200])
    src = tmp_path / "docs.parquet"
    pq.write_table(pa.table({"id": list(range(len(docs))), "text": docs}), src, row_group_size=64)
    out = tmp_path / "ids.parquet"
    r = cli("batch", src, out, "--chunk-size", "50", "--threads", "2")
    assert r.returncode == 0, r.stderr
    index, ids, lengths = _read_parquet(out)
    assert index == list(range(len(docs)))
    assert ids == tok.encode_batch(docs, num_threads=1)
    assert lengths == [len(x) for x in ids]


def test_batch_parquet_messages_struct_and_json_columns(tmp_path, tok, example):
    ml = corpora.multilingual_documents()
    convs = []
    for i in range(60):
        convs.append([
            {"role": "user", "content": ml[i]},
            {"role": "assistant", "content": ml[i + 1][:100], "reasoning_content": "think " + str(i),
             "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}]},
            {"role": "tool", "content": "<|im_end|> result " + str(i)},
        ])
    agp = [i % 2 == 0 for i in range(60)]
    exp = [tok.encode_chat(render_chat(c, add_generation_prompt=a)).tolist() for c, a in zip(convs, agp)]
    # A list<struct> column (pyarrow fills absent fields with nulls) ...
    struct_in = tmp_path / "struct.parquet"
    pq.write_table(pa.table({"messages": convs, "add_generation_prompt": agp}), struct_in)
    # ... and a JSON-string column.
    json_in = tmp_path / "json.parquet"
    pq.write_table(pa.table({"messages": [json.dumps(c) for c in convs], "add_generation_prompt": agp}), json_in)
    for src in (struct_in, json_in):
        out = tmp_path / (src.stem + ".jsonl")
        r = cli("batch", src, out)
        assert r.returncode == 0, r.stderr
        index, ids, _ = _read_jsonl(out)
        assert index == list(range(60)) and ids == exp
    # A JSON column holding whole requests with tools.
    req_in = tmp_path / "req.parquet"
    pq.write_table(pa.table({"messages": [json.dumps(example)] * 3}), req_in)
    r = cli("batch", req_in, tmp_path / "req.parquet.out.parquet", "--format", "parquet")
    assert r.returncode == 0, r.stderr
    ex_ids = tok.encode_chat(render_chat(example["messages"], tools=example["tools"])).tolist()
    assert _read_parquet(tmp_path / "req.parquet.out.parquet")[1] == [ex_ids] * 3


@pytest.fixture()
def bad_jsonl(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_bytes(("\n".join(BAD_LINES) + "\n").encode("utf-8") + b'{"text": "\xff"}\n')  # 11: bad UTF-8
    return p


def test_batch_skip_bad_records(tmp_path, bad_jsonl, tok):
    out = tmp_path / "out.parquet"
    errors = tmp_path / "errors.jsonl"
    r = cli("batch", bad_jsonl, out, "--on-error", "skip", "--errors", errors)
    assert r.returncode == 1, r.stderr
    _check_summary(r.stderr, 3, 7)
    assert "bad.jsonl:2" in r.stderr
    errs = [json.loads(x) for x in errors.read_text(encoding="utf-8").splitlines()]
    assert [(e["line"], e["error"]) for e in errs] == [
        (2, "RecordError"),
        (4, "JSONDecodeError"),
        (5, "ChatFormatError"),
        (6, "TextEncodingError"),
        (7, "RecordError"),
        (9, "ChatFormatError"),
        (11, "UnicodeDecodeError"),
    ]
    assert [e["index"] for e in errs] == [1, 2, 3, 4, 5, 7, 9]
    assert all(e["message"] for e in errs)
    assert "image" in errs[5]["message"]
    index, ids, _ = _read_parquet(out)
    assert index == [0, 6, 8]
    chat = render_chat([{"role": "user", "content": "<|im_end|> fine"}])
    assert ids == [tok.encode("first ok"), tok.encode_chat(chat).tolist(), tok.encode("last ok")]
    assert not temp_files(tmp_path)


def test_batch_skip_default_errors_path(tmp_path, bad_jsonl):
    out = tmp_path / "out.jsonl"
    r = cli("batch", bad_jsonl, out, "--on-error", "skip")
    assert r.returncode == 1
    assert len((tmp_path / "out.jsonl.errors.jsonl").read_text().splitlines()) == 7
    assert len(out.read_text().splitlines()) == 3


def test_batch_stop_on_bad_record(tmp_path, bad_jsonl):
    out = tmp_path / "out.parquet"
    r = cli("batch", bad_jsonl, out)
    assert r.returncode == 3
    assert "bad.jsonl:2" in r.stderr and "RecordError" in r.stderr
    assert not out.exists()
    assert not temp_files(tmp_path)
    # An existing OUT is left exactly as it was; --errors gets the fatal record.
    out.write_bytes(b"previous results")
    errors = tmp_path / "e.jsonl"
    r = cli("batch", bad_jsonl, out, "--on-error", "stop", "--errors", errors)
    assert r.returncode == 3
    assert out.read_bytes() == b"previous results"
    assert [json.loads(x)["line"] for x in errors.read_text().splitlines()] == [2]
    assert not temp_files(tmp_path)


def test_batch_stop_on_bad_record_late_in_a_large_input(tmp_path, jsonl_in):
    big = tmp_path / "big.jsonl"
    lines = jsonl_in.read_text(encoding="utf-8").splitlines()
    big.write_text("\n".join(lines + ['{"messages": []}'] + lines) + "\n", encoding="utf-8")
    out = tmp_path / "out.parquet"
    r = cli("batch", big, out, "--chunk-size", "16")
    assert r.returncode == 3
    assert f"big.jsonl:{len(lines) + 1}" in r.stderr
    assert not out.exists() and not temp_files(tmp_path)


def test_batch_input_errors(tmp_path):
    out = tmp_path / "out.parquet"
    r = cli("batch", tmp_path / "missing.jsonl", out)
    assert r.returncode == 3 and "missing.jsonl" in r.stderr
    notpq = tmp_path / "fake.parquet"
    notpq.write_text("not parquet")
    r = cli("batch", notpq, out)
    assert r.returncode == 3 and "Parquet" in r.stderr
    nocol = tmp_path / "nocol.parquet"
    pq.write_table(pa.table({"body": ["x"]}), nocol)
    r = cli("batch", nocol, out)
    assert r.returncode == 3 and "'text'" in r.stderr
    assert not out.exists() and not temp_files(tmp_path)


def test_batch_empty_input(tmp_path):
    src = tmp_path / "empty.jsonl"
    src.write_text("\n\n")
    out = tmp_path / "out.parquet"
    r = cli("batch", src, out)
    assert r.returncode == 0, r.stderr
    assert _read_parquet(out) == ([], [], [])


def test_batch_progress_bar(tmp_path, jsonl_in):
    out = tmp_path / "out.parquet"
    r = cli("batch", jsonl_in, out, "--progress", "always", "--chunk-size", "100")
    assert r.returncode == 0, r.stderr
    assert "rec/s" in r.stderr and "B/s" in r.stderr  # records/s and MB/s
    src = tmp_path / "t.parquet"
    pq.write_table(pa.table({"text": ["a b c"] * 50}), src)
    r = cli("batch", src, tmp_path / "o.parquet", "--progress", "always")
    assert r.returncode == 0, r.stderr
    assert "rec/s" in r.stderr and "MB/s" in r.stderr
    assert np.array_equal(_read_parquet(tmp_path / "o.parquet")[0], np.arange(50))


def test_parse_after_a_prompt(tok36, tmp_path):
    """--prompt: the chat request the ids answer gives the format, the tools that
    type the arguments and the open <think>; --tools and --chat-format without it."""
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}]
    request = {"messages": [{"role": "user", "content": "Weather?"}], "tools": tools, "chat_format": "qwen3.6"}
    prompt = render_chat(request["messages"], tools=tools, chat_format="qwen3.6", add_generation_prompt=True)
    reply = ("Why not.\n</think>\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\n42\n</parameter>\n"
             "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call><|im_end|>")
    ids = []
    for part in reply.replace("</think>", "\0</think>\0").replace("<tool_call>", "\0<tool_call>\0").replace(
            "</tool_call>", "\0</tool_call>\0").replace("<|im_end|>", "\0<|im_end|>\0").split("\0"):
        ids += [tok36.atoms[part]] if part in tok36.atoms else tok36.encode(part)
    expected = tok36.parse_completion(ids, prompt)
    assert json.loads(expected["tool_calls"][0]["function"]["arguments"]) == {"city": "42", "days": 3}
    f, ids_file = tmp_path / "request.json", tmp_path / "ids.json"
    f.write_text(json.dumps({k: v for k, v in request.items() if k != "chat_format"}))
    ids_file.write_text(json.dumps(ids))
    r = cli("parse", "--prompt", f, "--chat-format", "qwen3.6", "--file", ids_file)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == expected
    # without the prompt: keywords; the ids differ (the prompt seeds them)
    t = tmp_path / "tools.json"
    t.write_text(json.dumps(tools))
    got = json.loads(cli("parse", "--chat-format", "qwen3.6", "--tools", t, "--in-reasoning", "--file", ids_file).stdout)
    assert [c["function"] for c in got["tool_calls"]] == [c["function"] for c in expected["tool_calls"]]
    assert got["reasoning_content"] == expected["reasoning_content"] == "Why not."
    t.write_text("{")
    r = cli("parse", "--tools", t, "1")
    assert r.returncode == 3 and "invalid JSON" in r.stderr
