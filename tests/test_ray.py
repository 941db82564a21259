"""qwen4exp.runtimes.ray on a local 2-CPU Ray cluster, compared row by row with the
local path: the library calls and the local `qwen4exp batch` engine, bad
rows included."""

import gc
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import corpora
import qwen4exp
from qwen4exp import ChatFormatError
from qwen4exp.render.chat import render_chat

from conftest import TOKENIZER_JSON
from helpers import BAD_LINES, EXAMPLE, batch_in_process, conversations, finishes, ray_rows, requests_with_tools


# --dist loadgroup (pyproject.toml): the module's tests share one worker, and its one local cluster.
# `slow`: a local cluster's processes take a core from the rest of the run for
# half a minute; .ci/run runs this module (and test_ray_nodes.py) after the default run.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]


@pytest.fixture(scope="module")
def qray(ray_cluster):
    import qwen4exp.runtimes.ray

    return qwen4exp.runtimes.ray


def test_text_column_with_a_null_row(qray, tok):
    """Also ships a from_file tokenizer to the actors (pickled with its
    compiled arrays, checked by checksum)."""
    texts = list(corpora.multilingual_documents()[:30]) + [d[:4000] for d in corpora.code_documents()[:6]]
    texts.insert(7, None)
    ds = qray.ray.data.from_arrow(pa.table({"id": list(range(len(texts))), "text": texts}))
    out = ray_rows(qray.tokenize_dataset(ds, column="text", kind="text", on_error="skip", batch_size=16,
                                      concurrency=1, vocab=qwen4exp.Tokenizer.from_file(TOKENIZER_JSON)))
    assert out.column_names == ["id", "text", "ids", "length", "error"]
    assert out.schema.field("ids").type == pa.list_(pa.int32())
    assert out.schema.field("length").type == pa.int32()
    assert out.column("id").to_pylist() == list(range(len(texts)))
    good = [t for t in texts if t is not None]
    expected = tok.encode_batch(good, num_threads=1)
    expected.insert(7, [])
    assert out.column("ids").to_pylist() == expected
    assert out.column("length").to_pylist() == [len(x) for x in expected]
    errors = out.column("error").to_pylist()
    assert errors[7] == "Qwen4ExpError: the text is null"
    assert errors[:7] + errors[8:] == [None] * len(good)


@pytest.mark.slow  # a JSON chat column: also test_tools_and_option_columns_match_the_local_engine[json]
def test_chat_json_column_matches_the_local_engine(qray, tok, tmp_path, capsys):
    """Request JSON strings, good and bad: ids equal the local engine's, and a
    bad row carries the local engine's error name and message."""
    with open(EXAMPLE, encoding="utf-8") as f:
        example = json.load(f)
    requests = [json.dumps({"messages": c, "add_generation_prompt": i % 2 == 0, "enable_thinking": i % 3 == 0})
                for i, c in enumerate(conversations(24))]
    requests[3:3] = [json.dumps(example), json.dumps(example["messages"])]  # with tools; a bare list
    requests[9:9] = [line for line in BAD_LINES if line and '"text"' not in line]  # bad JSON, roles, images...
    requests.append(json.dumps({"messages": [{"role": "user", "content": "\ud800 lone surrogate"}]}))
    src = tmp_path / "chats.jsonl"
    src.write_text("\n".join(requests) + "\n", encoding="utf-8")
    code, _ = batch_in_process(capsys, src, tmp_path / "local.parquet", "--on-error", "skip",
                           "--errors", tmp_path / "errors.jsonl", "-q")
    assert code == 1
    local = pq.read_table(tmp_path / "local.parquet")
    local_ids = dict(zip(local.column("index").to_pylist(), local.column("ids").to_pylist()))
    local_err = {e["index"]: f'{e["error"]}: {e["message"]}'
                 for e in map(json.loads, (tmp_path / "errors.jsonl").read_text(encoding="utf-8").splitlines())}
    assert len(local_err) == 5 and len(local_ids) == len(requests) - 5

    ds = qray.ray.data.from_arrow(pa.table({"request": requests + [None]}))
    out = ray_rows(qray.tokenize_dataset(ds, column="request", on_error="skip", batch_size=8, concurrency=1))
    ids, errors = out.column("ids").to_pylist(), out.column("error").to_pylist()
    assert ids[:-1] == [local_ids.get(i, []) for i in range(len(requests))]
    assert errors[:-1] == [local_err.get(i) for i in range(len(requests))]
    assert (ids[-1], errors[-1]) == ([], "ChatFormatError: the chat is null")
    assert ids[3] == tok.encode_chat(render_chat(example["messages"], tools=example["tools"])).tolist()


def test_chat_struct_column_with_masks(qray, tok):
    """list<struct> messages as SFT datasets store them (Arrow fills absent
    fields with nulls), with the training masks of encode_chats."""
    convs = conversations(20)
    ds = qray.ray.data.from_arrow(pa.table({"messages": convs}))
    out = ray_rows(qray.tokenize_dataset(ds, column="messages", masks=True, batch_size=8, concurrency=1))
    assert out.column_names == ["messages", "ids", "length", "assistant_mask", "message_index"]
    assert out.schema.field("assistant_mask").type == pa.list_(pa.bool_())
    assert out.schema.field("message_index").type == pa.list_(pa.int32())
    local = tok.encode_chats([render_chat(c) for c in convs], num_threads=1, return_masks=True)
    assert out.column("ids").to_pylist() == [e.ids.tolist() for e in local]
    assert out.column("assistant_mask").to_pylist() == [e.assistant_mask.tolist() for e in local]
    assert out.column("message_index").to_pylist() == [e.message_index.tolist() for e in local]
    assert all(0 < sum(m) < len(m) for m in out.column("assistant_mask").to_pylist())


def _local_ids(capsys, tmp_path, table, *args):
    """ids of `qwen4exp batch` (the local engine) on `table` written as Parquet."""
    pq.write_table(table, tmp_path / "in.parquet")
    code, _ = batch_in_process(capsys, tmp_path / "in.parquet", tmp_path / "local.parquet", "-q", *args)
    assert code == 0
    return pq.read_table(tmp_path / "local.parquet").column("ids").to_pylist()


@pytest.mark.parametrize("layout", ["json", pytest.param("struct", marks=pytest.mark.slow)])  # struct: test_chat_struct_column_with_masks
def test_tools_and_option_columns_match_the_local_engine(qray, tok, tmp_path, capsys, layout):
    """A tools column (and add_generation_prompt / enable_thinking columns)
    beside the messages: tokenize_dataset reads them as the local engine
    does, row by row; the rows with tools carry their preamble."""
    cols = requests_with_tools(24)
    if layout == "json":
        cols["messages"] = [json.dumps(m) for m in cols["messages"]]
        cols["tools"] = [None if t is None else json.dumps(t) for t in cols["tools"]]
    table = pa.table(cols)
    ds = qray.ray.data.from_arrow(table)
    ray_ids = ray_rows(qray.tokenize_dataset(ds, column="messages", batch_size=8, concurrency=1)).column("ids").to_pylist()
    assert ray_ids == _local_ids(capsys, tmp_path, table)
    if layout == "json":  # JSON text keeps the tools exactly: the library's own rendering
        raw = requests_with_tools(24)
        want = [tok.encode_chat(render_chat(m, tools=t, add_generation_prompt=a,
                                            **({} if e is None else {"enable_thinking": e}))).tolist()
                for m, t, a, e in zip(*(raw[k] for k in ("messages", "tools", "add_generation_prompt",
                                                          "enable_thinking")))]
        assert ray_ids == want
        bare = [tok.encode_chat(render_chat(m)).tolist() for m in raw["messages"]]
        assert all((a != b) == (t is not None or g) for a, b, t, g in
                   zip(ray_ids, bare, raw["tools"], raw["add_generation_prompt"]))


@pytest.mark.slow  # a column option: also test_tools_and_option_columns_match_the_local_engine[json]
def test_a_renamed_messages_column_and_a_chat_format(qray, tmp_path, capsys):
    """Any column name for the messages, the tools column beside it, and
    chat_format (batch's --chat-format) in another format and vocabulary."""
    cols = requests_with_tools(12)
    table = pa.table({"messages": [json.dumps(m) for m in cols["messages"]],
                      "tools": [None if t is None else json.dumps(t) for t in cols["tools"]]})
    local = _local_ids(capsys, tmp_path, table, "--chat-format", "qwen3.6", "--vocab", "qwen3.6")
    ds = qray.ray.data.from_arrow(table.rename_columns(["conversation", "tools"]))
    out = ray_rows(qray.tokenize_dataset(ds, column="conversation", chat_format="qwen3.6", vocab="qwen3.6",
                                      batch_size=4, concurrency=1))
    assert out.column("ids").to_pylist() == local
    with pytest.raises(ValueError, match="chat_format"):
        qray.tokenize_dataset(ds, column="conversation", chat_format="qwen9")


@pytest.mark.slow  # request options: also test_tools_and_option_columns_match_the_local_engine[json]
def test_request_options_and_chat_format_in_rows(qray, tmp_path, capsys):
    """A request's preserve_thinking / reasoning_effort (its own keys or a
    column) reach render_chat, and a row whose "chat_format" (key or column)
    is not the run's is a bad row naming both formats, as in the local engine;
    so is an option the run's format lacks."""
    from qwen4exp.cli.main import main

    with open(EXAMPLE, encoding="utf-8") as f:
        example = json.load(f)
    # a last user query after the reasoning turn, so that preserve_thinking matters
    convs = [example["messages"] + [{"role": "user", "content": f"and now {i}?"}] for i in range(6)]
    own = [{"preserve_thinking": True}, {"chat_format": "qwen3.6"}, {"chat_format": "qwen3.8"},
           {"reasoning_effort": "low"}, {}, {}]
    table = pa.table({"messages": [json.dumps({"messages": c, "tools": example["tools"], **o}) for c, o in zip(convs, own)],
                      "preserve_thinking": [None, None, None, None, True, None],
                      "chat_format": [None, None, None, None, None, "qwen3"]})
    pq.write_table(table, tmp_path / "in.parquet")
    capsys.readouterr()
    code = main(["batch", str(tmp_path / "in.parquet"), str(tmp_path / "local.parquet"), "--chat-format", "qwen3.6",
                 "--vocab", "qwen3.6", "--on-error", "skip", "--errors", str(tmp_path / "errors.jsonl"), "-q"])
    assert code == 1, capsys.readouterr().err
    local = pq.read_table(tmp_path / "local.parquet")
    local_ids = dict(zip(local.column("index").to_pylist(), local.column("ids").to_pylist()))
    local_err = {e["index"]: f'{e["error"]}: {e["message"]}'
                 for e in map(json.loads, (tmp_path / "errors.jsonl").read_text(encoding="utf-8").splitlines())}
    assert sorted(local_ids) == [0, 1, 4] and sorted(local_err) == [2, 3, 5]
    assert local_err[2].startswith("RecordError") and "'qwen3.8'" in local_err[2] and "'qwen3.6'" in local_err[2]
    assert local_err[3].startswith("ChatFormatError") and "reasoning_effort" in local_err[3]
    assert local_err[5].startswith("RecordError") and "'qwen3'" in local_err[5]
    tok36 = qwen4exp.Tokenizer("qwen3.6")
    for k in (0, 4):
        kept = tok36.encode_chat(render_chat(convs[k], tools=example["tools"], chat_format="qwen3.6",
                                             preserve_thinking=True)).tolist()
        assert local_ids[k] == kept != local_ids[1]

    ds = qray.ray.data.from_arrow(table)
    out = ray_rows(qray.tokenize_dataset(ds, column="messages", chat_format="qwen3.6", vocab="qwen3.6",
                                         on_error="skip", batch_size=4, concurrency=1))
    assert out.column("ids").to_pylist() == [local_ids.get(i, []) for i in range(len(convs))]
    assert out.column("error").to_pylist() == [local_err.get(i) for i in range(len(convs))]


@pytest.mark.slow  # ~10 s (a Qwen3.6 folder); the CLI's folder defaults: test_cli_folders.py
def test_a_model_folder_tokenizer_renders_with_its_defaults(qray, tmp_path, qwen36_json):
    """A tokenizer of a Qwen3.5 small model's folder (thinking off by its
    template) renders each row as its render_chat does: thinking off unless
    the row asks for it. It used to render with the format's default (on)."""
    import os

    import _model_folders

    folder = _model_folders.template_folder(str(tmp_path / "small"), "qwen3_5_nothink.jinja",
                                            cache_dir=os.path.dirname(qwen36_json))
    tok = qwen4exp.Tokenizer.from_pretrained(folder)
    rows = [{"messages": [{"role": "user", "content": f"Hi {i}"}], "add_generation_prompt": True,
             **({} if i % 3 == 0 else {"enable_thinking": i % 3 == 1})} for i in range(6)]
    ds = qray.ray.data.from_arrow(pa.table({"messages": [json.dumps(r) for r in rows]}))
    out = ray_rows(qray.tokenize_dataset(ds, column="messages", vocab=tok, batch_size=2, concurrency=1))
    want = [tok.encode_chat(tok.render_chat(r["messages"], **{k: v for k, v in r.items() if k != "messages"}))
            .tolist() for r in rows]
    assert out.column("ids").to_pylist() == want
    assert want[0] != want[1]  # the rows differ by the thinking option
def _pool_dataset(qray):
    texts = [f"row {i}: " + "hello world " * (i % 7) for i in range(300)]
    return texts, qray.ray.data.from_arrow(pa.table({"text": texts})).repartition(8)


def test_a_pool_that_would_take_every_cpu_is_refused(qray, tok):
    """On 2 CPUs, actors taking both would wait forever for blocks the
    upstream tasks (repartition) can never run to make: refused up front,
    loudly (the check runs before any task)."""
    _, ds = _pool_dataset(qray)
    for concurrency, threads in ((2, 1), ((1, 2), 1), ((2, 2), 1), (1, 2), (None, 2), (1, 3)):
        with pytest.raises(ValueError, match="wait forever|cannot run a tokenizer actor"):
            qray.tokenize_dataset(ds, column="text", kind="text", concurrency=concurrency, num_threads=threads)
    assert qray.actor_room(1) == 1


@pytest.mark.slow  # two full pipelines: ~15 s on 2 cores
def test_the_default_and_the_largest_allowed_pool_finish(qray, tok):
    texts, ds = _pool_dataset(qray)
    for concurrency in (None, 1):
        out = finishes(lambda: ray_rows(qray.tokenize_dataset(ds, column="text", kind="text",
                                                            concurrency=concurrency, batch_size=64)))
        assert out.column("ids").to_pylist() == tok.encode_batch(texts, num_threads=1)


def test_raise_names_the_row(qray):
    ctx = qray.ray.data.DataContext.get_current()
    ctx.raise_original_map_exception = True  # surface our exception type, not Ray's wrapper
    try:
        ds = qray.ray.data.from_arrow(pa.table({"c": ['[{"role": "user", "content": "hi"}]', '{"messages": [{"role": "x"}]}']}))
        with pytest.raises(ChatFormatError, match=r"column 'c', row 1 of a batch of 2 .*role"):
            qray.tokenize_dataset(ds, column="c").materialize()
    finally:
        ctx.raise_original_map_exception = False
        # The failed run's actor lives (holding a CPU) until its handle is freed, which the
        # traceback's reference cycle delays to the next cyclic collection: the next test's
        # actors would wait 20 s for that CPU.
        gc.collect()


def test_argument_errors(qray):
    ds = qray.ray.data.from_items([{"t": "x"}])
    with pytest.raises(ValueError, match="kind"):
        qray.tokenize_dataset(ds, column="t", kind="code")
    with pytest.raises(ValueError, match="masks"):
        qray.tokenize_dataset(ds, column="t", kind="text", masks=True)
    with pytest.raises(ValueError, match="on_error"):
        qray.tokenize_dataset(ds, column="t", on_error="ignore")
    with pytest.raises(ValueError, match="concurrency"):
        qray.tokenize_dataset(ds, column="t", concurrency=0)


# ---------------------------------------------------------------------------
# qwen4exp batch --engine ray
# ---------------------------------------------------------------------------


def test_batch_engine_ray_jsonl_with_bad_records(ray_cluster, tmp_path, capsys):
    src = tmp_path / "bad.jsonl"
    src.write_bytes(("\n".join(BAD_LINES) + "\n").encode("utf-8") + b'{"text": "\xff"}\n')
    runs = {}
    for engine in ("local", "ray"):
        out, errors = tmp_path / f"{engine}.parquet", tmp_path / f"{engine}.errors.jsonl"
        code, shown = batch_in_process(capsys, src, out, "--engine", engine, "--on-error", "skip",
                                   "--errors", errors, "--chunk-size", "4")
        runs[engine] = (code, pq.read_table(out), errors.read_text(encoding="utf-8"))
    assert runs["ray"] == runs["local"]
    assert runs["ray"][0] == 1 and runs["ray"][1].num_rows == 3
    # The first five bad records are shown, in input order.
    errs = [json.loads(x) for x in runs["ray"][2].splitlines()]
    assert shown == [f'qwen4exp batch: skipped {src}:{e["line"]}: {e["error"]}: {e["message"]}' for e in errs[:5]]

    for engine in ("local", "ray"):  # --on-error stop: the same message, nothing written
        code, _ = batch_in_process(capsys, src, tmp_path / f"stop-{engine}.parquet", "--engine", engine)
        assert code == 3 and not (tmp_path / f"stop-{engine}.parquet").exists()
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]



@pytest.mark.slow  # masks through Ray: also test_chat_struct_column_with_masks
def test_batch_engine_ray_masks_and_kept_columns(ray_cluster, tmp_path, capsys):
    """--masks and --keep-columns on Ray write what the local engine writes:
    JSONL lines parsed on the actors, and Parquet shards read there."""
    convs = conversations(12)
    lines = [json.dumps({"messages": c, "id": i, "tag": f"t{i % 3}"}) for i, c in enumerate(convs)]
    lines[4] = json.dumps({"text": "plain", "id": 4, "tag": "x"})
    lines[7] = json.dumps({"messages": [{"role": "bogus"}], "id": 7})
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    shards = tmp_path / "shards"
    shards.mkdir()
    table = pa.table({"messages": [json.dumps(c) for c in convs], "id": list(range(12))})
    for k, start in enumerate((0, 5)):
        pq.write_table(table.slice(start, 5 if start == 0 else 7), shards / f"part-{k}.parquet")
    pq.write_table(table, tmp_path / "all.parquet")
    for inputs, out_name in (((src, src), "o.parquet"), ((tmp_path / "all.parquet", shards), "o.jsonl")):
        runs = {}
        for engine, path in zip(("local", "ray"), inputs):
            out = tmp_path / f"{engine}-{out_name}"
            code, _ = batch_in_process(capsys, path, out, "--engine", engine, "--masks", "--keep-columns",
                                   "--on-error", "skip", "-q", "--chunk-size", "4")
            runs[engine] = (code, pq.read_table(out) if out_name.endswith(".parquet") else out.read_text())
        assert runs["ray"] == runs["local"]
    assert runs["local"][1].count('"assistant_mask":[') == 12


@pytest.mark.slow  # the CLI's Ray engine: also test_batch_engine_ray_jsonl_with_bad_records
def test_batch_engine_ray_parquet_shards(ray_cluster, tmp_path, capsys):
    """A directory of shards (read by the workers) gives what the local engine
    gives for the same rows in one file; JSONL output."""
    convs = conversations(30)
    messages = [c if i not in (5, 17) else None for i, c in enumerate(convs)]  # two null rows
    messages[11] = [{"role": "bogus", "content": "x"}]
    agp = [i % 2 == 0 for i in range(30)]
    table = pa.table({"messages": messages, "add_generation_prompt": agp})
    shards = tmp_path / "shards"
    shards.mkdir()
    for k, start in enumerate((0, 12, 25)):
        pq.write_table(table.slice(start, {0: 12, 12: 13, 25: 5}[start]), shards / f"part-{k:03d}.parquet")
    (shards / "_SUCCESS").write_text("")
    pq.write_table(table, tmp_path / "all.parquet")
    runs = {}
    for engine, src in (("local", tmp_path / "all.parquet"), ("ray", shards)):
        out, errors = tmp_path / f"{engine}.jsonl", tmp_path / f"{engine}.errors.jsonl"
        code, _ = batch_in_process(capsys, src, out, "--engine", engine, "--on-error", "skip", "--errors", errors,
                               "-q", "--chunk-size", "8")
        runs[engine] = (code, out.read_text(encoding="utf-8"), errors.read_text(encoding="utf-8"))
    assert runs["ray"] == runs["local"]
    errs = [json.loads(x) for x in runs["ray"][2].splitlines()]
    assert [(e["index"], e["line"], e["error"]) for e in errs] == [
        (5, None, "RecordError"), (11, None, "ChatFormatError"), (17, None, "RecordError")]
    assert len(runs["ray"][1].splitlines()) == 27
