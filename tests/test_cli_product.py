"""The command line as a product: every command on either vocabulary
(--vocab / --tokenizer), chat formats where it renders, token counts of chat
requests, training masks and carried columns in `batch`, and each command's
own help. Results are compared with HF `tokenizers` and the official chat
templates (tests/_formats_reference.py), not with the library."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import qwen4exp
from qwen4exp.cli.main import main
from qwen4exp.cli.parser import COMMAND_EPILOGS

import _formats_reference as formats
from helpers import WEATHER_REQUEST as REQUEST

TEXT = "héllo wörld, 数据 <|im_end|> naïve\n"
COMMANDS = ("demo", "render", "encode", "decode", "parse", "count", "batch", "gate", "folder")


def run(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def request_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("requests") / "chat.json"
    path.write_text(json.dumps(REQUEST, ensure_ascii=False), encoding="utf-8")
    return path


def reference_chat_ids(hf, fmt: str, add_generation_prompt=False) -> list[int]:
    text = formats.reference_text({**REQUEST, "add_generation_prompt": add_generation_prompt}, fmt)
    return hf.encode(text, add_special_tokens=False).ids


# -- every command on the Qwen3.6 vocabulary -----------------------------------------


def test_encode_decode_count_on_qwen36(capsys, hf_plain36):
    expected = hf_plain36.encode(TEXT).ids
    code, out, _ = run(capsys, "encode", "--vocab", "qwen3.6", "--text", TEXT)
    assert code == 0 and json.loads(out) == expected
    code, out, _ = run(capsys, "count", "--vocab", "qwen3.6", "--text", TEXT)
    assert code == 0 and int(out) == len(expected)
    code, out, _ = run(capsys, "decode", "--vocab", "qwen3.6", "-n", *expected)
    assert code == 0 and out == hf_plain36.decode(expected) == TEXT
    code, out, _ = run(capsys, "encode", "--vocab", "qwen3.5", "--text", TEXT)  # the alias
    assert json.loads(out) == expected


@pytest.mark.parametrize("fmt", formats.FORMATS)
def test_chat_counts_and_ids_in_every_format(capsys, request, request_file, fmt):
    vocab = formats.VOCAB_OF[fmt]
    hf = request.getfixturevalue("hf_full36" if vocab == "qwen3.6" else "hf_full")
    expected = reference_chat_ids(hf, fmt, add_generation_prompt=True)
    common = ("--chat", request_file, "--chat-format", fmt, "--add-generation-prompt")
    code, out, err = run(capsys, "count", *common, "--vocab", vocab)
    assert code == 0 and int(out) == len(expected), err
    code, out, _ = run(capsys, "count", *common)  # the format's models' vocabulary by default
    assert int(out) == len(expected)
    code, out, _ = run(capsys, "encode", *common, "--vocab", vocab)
    assert code == 0 and json.loads(out) == expected


def test_render_demo_parse_gate_on_qwen36(capsys, request_file, hf_full36):
    tok36 = qwen4exp.Tokenizer("qwen3.6")
    im_start, im_end = tok36.atoms["<|im_start|>"], tok36.atoms["<|im_end|>"]

    code, out, _ = run(capsys, "render", request_file, "--vocab", "qwen3.6", "--chat-format", "qwen3.6",
                       "--table", "--color", "never")
    assert code == 0
    table = out.split("\n\n", 1)[1]
    assert f"[{im_start}]" in table and f"[{im_end}]" in table
    code, out, _ = run(capsys, "render", request_file, "--chat-format", "qwen3.6", "--json")
    assert json.loads(out)["text"] == formats.reference_text(REQUEST, "qwen3.6")

    code, out, _ = run(capsys, "demo", "--vocab", "qwen3.6", "--chat-format", "qwen3.6")
    assert code == 0 and f"atom id {im_end}" in out and "stayed DATA" in out

    reply = "<think>\nCall it.\n</think>\n\nIt is 18 °C.<|im_end|>"
    ids = hf_full36.encode(reply, add_special_tokens=False).ids
    code, out, _ = run(capsys, "parse", "--vocab", "qwen3.6", *ids)
    message = json.loads(out)
    assert code == 0 and (message["content"], message["reasoning_content"]) == ("It is 18 °C.", "Call it.")

    code, out, _ = run(capsys, "gate", "--vocab", "qwen3.6")
    assert code == 0 and "FAIL" not in out


def test_batch_on_qwen36(capsys, tmp_path, hf_plain36, hf_full36):
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"text": TEXT}) + "\n" + json.dumps(REQUEST) + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    code, _, err = run(capsys, "batch", src, out, "--vocab", "qwen3.6", "--chat-format", "qwen3.6", "-q")
    assert code == 0, err
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows[0]["ids"] == hf_plain36.encode(TEXT).ids
    assert rows[1]["ids"] == hf_full36.encode(formats.reference_text(REQUEST, "qwen3.6"),
                                              add_special_tokens=False).ids


def test_vocab_and_tokenizer_exclude_each_other(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["encode", "--vocab", "qwen3.6", "--tokenizer", "x.json", "--text", "a"])
    assert exc.value.code == 2
    code, _, err = run(capsys, "encode", "--vocab", "qwen9", "--text", "a")
    assert code == 2 and "unknown vocabulary 'qwen9'" in err
    code, _, err = run(capsys, "count", "--text", "a", "--chat-format", "qwen3.6")
    assert code == 2 and "add --chat" in err


# -- batch: masks and carried columns -------------------------------------------------------

TOOLS = REQUEST["tools"]
CHATS = [
    {"id": 7, "source": "web", "messages": REQUEST["messages"], "tools": TOOLS},
    {"id": 8, "source": "books", "text": "plain text, no turns"},
    {"id": 9, "messages": [{"role": "narrator", "content": "rejected"}]},
    {"id": 10, "source": "web", "meta": {"lang": "fr"}, "messages": [
        {"role": "user", "content": "Bonjour"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Lyon"}}}]},
        {"role": "tool", "content": "12 °C"},
        {"role": "assistant", "content": "Il fait 12 °C.", "reasoning_content": "Easy."}], "tools": TOOLS},
]


def expected_rows(tok, records, fmt="qwen3"):
    """What batch --masks --keep-columns should write for the records that render."""
    out = []
    for index, rec in enumerate(records):
        other = {k: v for k, v in rec.items() if k not in ("messages", "tools", "text")}
        if "text" in rec:
            ids = tok.encode(rec["text"])
            out.append({"index": index, "ids": ids, "length": len(ids), "assistant_mask": [False] * len(ids),
                        "message_index": [-1] * len(ids), **other})
            continue
        try:
            chat = qwen4exp.render_chat(rec["messages"], tools=rec.get("tools"), chat_format=fmt)
        except qwen4exp.ChatFormatError:
            continue
        e = tok.encode_chat(chat, return_masks=True)
        out.append({"index": index, "ids": e.ids.tolist(), "length": len(e.ids),
                    "assistant_mask": e.assistant_mask.tolist(), "message_index": e.message_index.tolist(), **other})
    return out


@pytest.fixture(scope="module")
def chats_jsonl(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("batch") / "chats.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in CHATS), encoding="utf-8")
    return path


@pytest.mark.parametrize("fmt", ["qwen3", "qwen3.6"])
def test_batch_masks_and_kept_columns(capsys, tmp_path, chats_jsonl, fmt):
    pq = pytest.importorskip("pyarrow.parquet")
    vocab = formats.VOCAB_OF[fmt]
    tok = qwen4exp.Tokenizer(vocab)
    expected = expected_rows(tok, CHATS, fmt)
    assert any(any(r["assistant_mask"]) for r in expected)
    for name in ("out.parquet", "out.jsonl"):
        out = tmp_path / name
        code, _, err = run(capsys, "batch", chats_jsonl, out, "--masks", "--keep-columns", "--chat-format", fmt,
                           "--on-error", "skip", "-q")
        assert code == 1, err  # the rejected record was skipped
        if name.endswith(".parquet"):
            table = pq.read_table(out)
            assert table.schema.names[:5] == ["index", "ids", "length", "assistant_mask", "message_index"]
            assert table.to_pylist() == [{"source": None, "meta": None, **r} for r in expected]
        else:
            assert [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()] == expected


def test_batch_parquet_keeps_its_columns_and_types(capsys, tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    table = pa.table({
        "messages": [json.dumps(REQUEST["messages"]), None, json.dumps([{"role": "narrator"}])],
        "text": [None, "some text", None],
        "id": pa.array([1, 2, 3], pa.int16()),
        "score": [0.5, None, 2.0],
        "tags": [["a"], [], ["b", "c"]],
    })
    src = tmp_path / "in.parquet"
    pq.write_table(table, src)
    out = tmp_path / "out.parquet"
    code, _, err = run(capsys, "batch", src, out, "--keep-columns", "--masks", "--on-error", "skip", "-q")
    assert code == 1, err
    got = pq.read_table(out)
    assert got.schema.field("id").type == pa.int16() and got.schema.field("tags").type == pa.list_(pa.string())
    assert got.column("id").to_pylist() == [1, 2] and got.column("tags").to_pylist() == [["a"], []]
    tok = qwen4exp.Tokenizer()
    e = tok.encode_chat(qwen4exp.render_chat(REQUEST["messages"]), return_masks=True)
    assert got.column("assistant_mask").to_pylist()[0] == e.assistant_mask.tolist()
    out_jsonl = tmp_path / "out.jsonl"
    code, _, _ = run(capsys, "batch", src, out_jsonl, "--keep-columns", "--on-error", "skip", "-q")
    rows = [json.loads(line) for line in out_jsonl.read_text().splitlines()]
    assert [(r["index"], r["id"], r["score"], r["tags"]) for r in rows] == [(0, 1, 0.5, ["a"]), (1, 2, None, [])]
    # No rows at all: the columns are still there.
    empty = tmp_path / "empty.parquet"
    pq.write_table(table.slice(2), src)
    code, _, _ = run(capsys, "batch", src, empty, "--keep-columns", "--masks", "--on-error", "skip", "-q")
    assert pq.read_table(empty).schema.names == ["index", "ids", "length", "assistant_mask", "message_index",
                                                 "id", "score", "tags"]


def test_batch_kept_column_errors(capsys, tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    src = tmp_path / "clash.parquet"
    pq.write_table(pa.table({"text": ["a"], "ids": [[1]]}), src)
    code, _, err = run(capsys, "batch", src, tmp_path / "o.parquet", "--keep-columns", "-q")
    assert code == 2 and "'ids' has the name of an output column" in err
    lines = tmp_path / "drift.jsonl"
    lines.write_text('{"text": "a", "n": 1}\n{"text": "b", "n": "two"}\n', encoding="utf-8")
    code, _, err = run(capsys, "batch", lines, tmp_path / "o.parquet", "--keep-columns", "--chunk-size", "1", "-q")
    assert code == 3 and "'n'" in err and not (tmp_path / "o.parquet").exists()


# -- a request's own options and chat format -----------------------------------------------

# Options set in the request itself, in formats that have them: qwen3.6 keeps the
# reasoning of the turn before the last query, qwen3.8 drops it and thinks briefly.
REQUEST_OPTIONS = {"qwen3.6": {"preserve_thinking": True},
                   "qwen3.8": {"preserve_thinking": False, "reasoning_effort": "low"}}


@pytest.mark.parametrize("fmt", sorted(REQUEST_OPTIONS))
def test_request_options_in_every_command(capsys, tmp_path, hf_full36, fmt):
    """A request's preserve_thinking / reasoning_effort reach render_chat in
    render, encode, count and batch (a JSONL record's keys, a Parquet input's
    columns): the official template's text with those options."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    options = REQUEST_OPTIONS[fmt]
    request = {**REQUEST, **options, "chat_format": fmt}  # naming the run's own format is fine
    text = formats.reference_text(request, fmt)
    assert text != formats.reference_text(REQUEST, fmt)  # the options change this request's text
    ids = hf_full36.encode(text, add_special_tokens=False).ids
    f = tmp_path / "chat.json"
    f.write_text(json.dumps(request), encoding="utf-8")
    code, out, err = run(capsys, "render", f, "--chat-format", fmt, "--json")
    assert code == 0 and json.loads(out)["text"] == text, err
    code, out, err = run(capsys, "encode", "--chat", f, "--chat-format", fmt)
    assert code == 0 and json.loads(out) == ids, err
    code, out, _ = run(capsys, "count", "--chat", f, "--chat-format", fmt)
    assert int(out) == len(ids)
    jsonl, parquet = tmp_path / "in.jsonl", tmp_path / "in.parquet"
    jsonl.write_text(json.dumps(request) + "\n", encoding="utf-8")
    pq.write_table(pa.table({"messages": [json.dumps(REQUEST["messages"])], "tools": [json.dumps(TOOLS)],
                             **{k: [v] for k, v in options.items()}}), parquet)
    for src in (jsonl, parquet):
        out = tmp_path / "out.jsonl"
        code, _, err = run(capsys, "batch", src, out, "--chat-format", fmt, "-q")
        assert code == 0, err
        assert [json.loads(line)["ids"] for line in out.read_text().splitlines()] == [ids]


def test_a_request_files_chat_format_is_used(capsys, tmp_path, hf_full36):
    """A request file's "chat_format" picks the format, and with it the
    vocabulary, in every command that reads one: --chat-format is not needed,
    may repeat it, and only one that names another format is refused (exit 3,
    naming the field and both formats)."""
    f = tmp_path / "chat.json"
    f.write_text(json.dumps({**REQUEST, "chat_format": "qwen3.6"}), encoding="utf-8")
    text = formats.reference_text({**REQUEST, "add_generation_prompt": True}, "qwen3.6")
    ids = hf_full36.encode(text, add_special_tokens=False).ids
    for repeat in ((), ("--chat-format", "qwen3.6")):
        code, out, err = run(capsys, "render", f, "--json", "--add-generation-prompt", *repeat)
        assert code == 0 and json.loads(out)["text"] == text, err
        code, out, err = run(capsys, "encode", "--chat", f, "--add-generation-prompt", *repeat)
        assert code == 0 and json.loads(out) == ids, err
        code, out, err = run(capsys, "count", "--chat", f, "--add-generation-prompt", *repeat)
        assert code == 0 and int(out) == len(ids), err
        code, out, err = run(capsys, "render", f, "--table", *repeat)  # the table's ids: the 3.6 vocabulary
        assert code == 0 and str(hf_full36.token_to_id("<|im_start|>")) in out, err
    reply = hf_full36.encode("Hm.\n</think>\n\nSunny.<|im_end|>", add_special_tokens=False).ids
    code, out, err = run(capsys, "parse", "--prompt", f, *reply)  # the prompt opened <think>
    assert code == 0 and json.loads(out)["content"] == "Sunny.", err
    assert json.loads(out)["reasoning_content"] == "Hm."
    for args, run_format in ((("render", f, "--chat-format", "qwen3.8"), "qwen3.8"),
                             (("encode", "--chat", f, "--chat-format", "qwen3"), "qwen3"),
                             (("count", "--chat", f, "--chat-format", "qwen3.5"), "qwen3.5"),
                             (("parse", "--prompt", f, "--chat-format", "qwen3", "1"), "qwen3")):
        code, out, err = run(capsys, *args)
        assert code == 3 and out == "", err
        assert '"chat_format"' in err and "'qwen3.6'" in err and f"'{run_format}'" in err
    f.write_text(json.dumps({**REQUEST, "preserve_thinking": True}), encoding="utf-8")
    code, _, err = run(capsys, "render", f)
    assert code == 3 and "ChatFormatError" in err and "preserve_thinking" in err


def test_a_vocabulary_that_is_not_the_formats_is_refused(capsys, tmp_path):
    """--vocab or --tokenizer of another vocabulary than the format's (named by
    the request: exit 3; by --chat-format: exit 2) is refused before anything
    is written, in every command that renders; an alias of the right one is not."""
    from conftest import TOKENIZER_JSON

    f = tmp_path / "chat.json"
    f.write_text(json.dumps({**REQUEST, "chat_format": "qwen3.6"}), encoding="utf-8")
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps(REQUEST), encoding="utf-8")
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps(REQUEST) + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    for given in (("--vocab", "qwen3"), ("--tokenizer", TOKENIZER_JSON)):
        for args in (("encode", "--chat", f), ("count", "--chat", f), ("render", f, "--table"),
                     ("parse", "--prompt", f, "1")):
            code, stdout, err = run(capsys, *args, *given)
            assert code == 3 and stdout == "", (args, err)
            assert "the request's \"chat_format\" 'qwen3.6' is a format of the qwen3.6 vocabulary's models" in err
            assert f"leave out {given[0]}" in err and "Traceback" not in err
        for args in (("encode", "--chat", plain), ("count", "--chat", plain), ("render", plain, "--table"),
                     ("parse", "1"), ("batch", src, out)):
            code, stdout, err = run(capsys, *args, "--chat-format", "qwen3.8", *given)
            assert code == 2 and stdout == "", (args, err)
            assert "--chat-format qwen3.8 is a format of the qwen3.6 vocabulary's models" in err
        assert not out.exists()
    code, stdout, err = run(capsys, "count", "--chat", f, "--vocab", "qwen3.5")  # the alias of qwen3.6
    assert code == 0, err
    code, stdout2, err = run(capsys, "count", "--chat", f)
    assert stdout == stdout2


def test_a_vocabulary_alone_renders_in_its_own_format(capsys, tmp_path, hf_full36):
    """--vocab (or --tokenizer) with no format named anywhere: requests and
    batch records render in that vocabulary's format, not in qwen3's (whose
    ids would be refused, or wrong)."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    fmt = qwen4exp.Tokenizer("qwen3.6").chat_format
    ids = hf_full36.encode(formats.reference_text(REQUEST, fmt), add_special_tokens=False).ids
    f = tmp_path / "chat.json"
    f.write_text(json.dumps(REQUEST), encoding="utf-8")
    code, out, err = run(capsys, "encode", "--chat", f, "--vocab", "qwen3.6")
    assert code == 0 and json.loads(out) == ids, err
    code, out, err = run(capsys, "count", "--chat", f, "--vocab", "qwen3.5")
    assert code == 0 and int(out) == len(ids), err
    code, out, err = run(capsys, "render", f, "--vocab", "qwen3.6", "--json")
    assert code == 0 and json.loads(out)["text"] == formats.reference_text(REQUEST, fmt), err
    jsonl, parquet = tmp_path / "in.jsonl", tmp_path / "in.parquet"
    jsonl.write_text(json.dumps(REQUEST) + "\n", encoding="utf-8")
    pq.write_table(pa.table({"messages": [json.dumps(REQUEST["messages"])], "tools": [json.dumps(TOOLS)]}), parquet)
    for src in (jsonl, parquet):
        out = tmp_path / "out.jsonl"
        code, _, err = run(capsys, "batch", src, out, "--vocab", "qwen3.6", "-q")
        assert code == 0, err
        assert [json.loads(line)["ids"] for line in out.read_text().splitlines()] == [ids]


def test_batch_records_chat_format_must_be_the_runs(capsys, tmp_path, hf_full):
    """batch renders every record in the run's --chat-format (qwen3 without
    one), whose vocabulary tokenizes them all: a record naming another format
    fails, as does one with an option the format lacks."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    records = [{**REQUEST, "chat_format": "qwen3.6"}, {**REQUEST, "preserve_thinking": True},
               {**REQUEST, "chat_format": "qwen3"}, {"text": "ok"}]
    jsonl = tmp_path / "in.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    parquet = tmp_path / "in.parquet"
    pq.write_table(pa.table({"messages": [json.dumps(r.get("messages")) if "messages" in r else None for r in records],
                             "tools": [json.dumps(TOOLS) if "messages" in r else None for r in records],
                             "chat_format": [r.get("chat_format") for r in records],
                             "preserve_thinking": [r.get("preserve_thinking") for r in records],
                             "text": [r.get("text") for r in records]}), parquet)
    want = [hf_full.encode(formats.reference_text(REQUEST, "qwen3"), add_special_tokens=False).ids,
            hf_full.encode("ok", add_special_tokens=False).ids]
    for src in (jsonl, parquet):
        out, errors = tmp_path / "out.jsonl", tmp_path / "errors.jsonl"
        code, _, err = run(capsys, "batch", src, out, "--on-error", "skip", "--errors", errors, "-q")
        assert code == 1, err
        errs = [json.loads(line) for line in errors.read_text().splitlines()]
        assert [(e["index"], e["error"]) for e in errs] == [(0, "RecordError"), (1, "ChatFormatError")]
        assert "'qwen3.6'" in errs[0]["message"] and "'qwen3'" in errs[0]["message"]
        assert "preserve_thinking" in errs[1]["message"]
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        assert [(r["index"], r["ids"]) for r in rows] == [(2, want[0]), (3, want[1])]
        code, _, err = run(capsys, "batch", src, tmp_path / "stop.jsonl", "-q")  # --on-error stop
        assert code == 3 and '"chat_format"' in err and not (tmp_path / "stop.jsonl").exists()


# -- help ---------------------------------------------------------------------------------


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_help_has_examples_and_its_own_exit_codes(capsys, command):
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    epilog = text[text.index("examples:"):]
    assert re.search(rf"^  qwen4exp {command}\b", epilog, re.M)
    codes = dict(re.findall(r"^  (\d+\S*)\s+(.*)$", epilog.split("exit codes:")[1], re.M))
    assert codes["0"] and codes["2"] and codes["130"]
    if command == "batch":
        assert "skipped" in codes["1"] and "128+N" in codes
    elif command == "gate":
        assert "check failed" in codes["1"]
    else:
        assert "1" not in codes
    assert epilog == COMMAND_EPILOGS[command] + "\n"


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_help_mentions_only_its_own_options(capsys, command):
    """Every --option a command's help names (its description, its options'
    help, its examples) is one that command takes."""
    from qwen4exp.cli.main import COMMANDS as RUNNERS
    from qwen4exp.cli.parser import build_parser

    sub = next(a for a in build_parser(RUNNERS)._actions if a.dest == "command").choices[command]
    own = {o for a in sub._actions for o in a.option_strings}
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = capsys.readouterr().out
    named = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", text))
    assert named and named <= own, sorted(named - own)


@pytest.mark.parametrize("command", ["decode", "parse"])
def test_ids_of_the_other_vocabulary_name_the_option_that_reads_them(capsys, command, tok36):
    """Qwen3.6 ids read with the default (Qwen3) vocabulary: exit 3 with a
    message naming the option that reads them, and only options the command
    has (decode has no --chat-format); past every vocabulary: --tokenizer."""
    ids = tok36.encode("héllo") + [tok36.atoms["<|im_end|>"]]
    assert max(ids) >= qwen4exp.Tokenizer().vocab_size
    code, out, err = run(capsys, command, *ids)
    assert code == 3 and out == ""
    assert "not of qwen3 (the default vocabulary): read them with --vocab qwen3.6" in err, err
    assert ("--chat-format qwen3.5 / qwen3.6 / qwen3.8" in err) == (command == "parse"), err
    code, out, err = run(capsys, command, "--vocab", "qwen3.6", *ids)
    assert code == 0, err
    code, out, err = run(capsys, command, 10**9)
    assert code == 3 and "past every bundled vocabulary: --tokenizer PATH" in err, err
    code, _, err = run(capsys, command, 5, 10**9 - 1)  # the largest id decides; the order does not
    assert code == 3 and "id 999999999" in err and "--tokenizer PATH" in err, err


def test_no_install_line_names_an_unpublished_package():
    """qwen4exp is installed from a clone: no message may suggest `pip install qwen4exp[...]`."""
    root = Path(qwen4exp.__file__).parent
    for path in root.rglob("*.py"):
        assert not re.search(r"qwen4exp\[", path.read_text(encoding="utf-8")), path
