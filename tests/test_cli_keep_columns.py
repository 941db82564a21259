"""`qwen4exp batch --keep-columns` at the edges of what OUT's format can
hold, in process: into Parquet, what it cannot store (an integer outside
int64, an object with no keys, an object key the first chunk did not fix)
is an input error naming the field and the record, with nothing written;
into JSONL, every line is strict JSON (NaN and infinities become null,
counted in the summary); gzip JSONL is the same lines compressed."""

from __future__ import annotations

import gzip
import json
import math

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers import temp_files
from qwen4exp.cli.main import main

INT64_MAX = 2**63 - 1


def run(capsys, *args):
    code = main(["batch", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.err


def strict_json(line: str):
    """json.loads that refuses NaN, Infinity and -Infinity, as JSON does."""
    def refuse(constant):
        raise AssertionError(f"not JSON: {constant} in {line!r}")

    return json.loads(line, parse_constant=refuse)


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


# (carried value, what the error names): Parquet has no type for them
UNSTORABLE = {
    "past int64": (INT64_MAX + 1, "n is 9223372036854775808, outside int64"),
    "below int64": (-(2**63) - 1, "n is -9223372036854775809, outside int64"),
    "huge": (10**60, "outside int64"),
    "in a list": ([1, 2**64], "n[1] is 18446744073709551616"),
    "in an object": ({"a": {"b": -(2**70)}}, "n['a']['b'] is -1180591620717411303424"),
    "empty object": ({}, "'n' is an object with no keys"),
    "nested empty object": ({"a": {}}, "'n.a' is an object with no keys"),
    "list of empty objects": ([{}, {}], "'n[]' is an object with no keys"),
}


# an object with no keys after the first chunk is a key the first chunk did not fix (the next test)
CASES = [(case, late) for case in UNSTORABLE for late in (False, True)
         if not (late and "no keys" in UNSTORABLE[case][1])]


@pytest.mark.parametrize("case,late", CASES, ids=[f"{c}, {'later' if late else 'first'} chunk" for c, late in CASES])
def test_what_parquet_cannot_store_is_an_input_error(tmp_path, capsys, case, late):
    value, named = UNSTORABLE[case]
    first = {"text": "a", "n": 1 if isinstance(value, int) else value if not late else _like(value)}
    records = [first, {"text": "b", "n": value}] if late else [{"text": "a", "n": value}, {"text": "b", "n": value}]
    src = write_jsonl(tmp_path / "in.jsonl", records)
    out = tmp_path / "out.parquet"
    for policy in ("stop", "skip"):  # not a bad record: OUT cannot hold it, whatever the policy
        code, err = run(capsys, src, out, "--keep-columns", "--chunk-size", 1, "--on-error", policy, "-q")
        assert code == 3, err
        assert err.startswith("qwen4exp batch: error: --keep-columns:") and "Traceback" not in err
        assert named in err, err
        if "int64" in named:
            assert f"record {1 if late else 0}" in err and "write JSONL" in err, err
        assert not out.exists() and not temp_files(tmp_path)
    jsonl = tmp_path / "out.jsonl"  # JSONL holds every one of them as it was
    code, err = run(capsys, src, jsonl, "--keep-columns", "-q")
    assert code == 0, err
    assert [strict_json(x)["n"] for x in jsonl.read_text().splitlines()] == [r["n"] for r in records]


def _like(value):
    """A value of the same shape whose integers fit int64."""
    if isinstance(value, int):
        return 1
    if isinstance(value, list):
        return [_like(v) for v in value]
    return {k: _like(v) for k, v in value.items()}


def test_the_edges_of_int64_and_objects_are_stored(tmp_path, capsys):
    """The siblings that fit: int64's own bounds, an object with no keys beside
    ones with keys (one struct type), nested lists."""
    records = [{"text": "a", "n": INT64_MAX, "o": {}, "l": [[-(2**63)]]},
               {"text": "b", "n": -(2**63), "o": {"k": 2}, "l": []}]
    src = write_jsonl(tmp_path / "in.jsonl", records)
    out = tmp_path / "out.parquet"
    code, err = run(capsys, src, out, "--keep-columns", "-q")
    assert code == 0, err
    table = pq.read_table(out)
    assert table.column("n").to_pylist() == [INT64_MAX, -(2**63)]
    assert table.column("l").to_pylist() == [[[-(2**63)]], []]
    assert table.column("o").to_pylist() == [{"k": None}, {"k": 2}]


def test_a_key_the_first_chunk_did_not_fix_is_an_input_error(tmp_path, capsys):
    """pa.array would drop an object key its struct type lacks without a word:
    refused instead, at any depth."""
    for late in ({"a": 1, "b": 2}, {"a": 1, "c": {}}):
        src = write_jsonl(tmp_path / "in.jsonl", [{"text": "a", "o": {"a": 1}}, {"text": "b", "o": late}])
        code, err = run(capsys, src, tmp_path / "o.parquet", "--keep-columns", "--chunk-size", 1, "-q")
        assert code == 3 and "first appears after the first chunk" in err and "o['" in err, err
    src = write_jsonl(tmp_path / "in.jsonl", [{"text": "a", "o": [{"a": 1}]}, {"text": "b", "o": [{"a": 2, "z": 3}]}])
    code, err = run(capsys, src, tmp_path / "o.parquet", "--keep-columns", "--chunk-size", 1, "-q")
    assert code == 3 and "o[]['z']" in err, err
    assert not (tmp_path / "o.parquet").exists()


NON_FINITE = pa.table({
    "text": ["a", "b", "c", "d"],
    "score": [math.nan, 1.5, math.inf, None],
    "score32": pa.array([1.0, -math.inf, 2.0, math.nan], pa.float32()),
    "vec": [[1.0, -math.inf], [], None, [math.nan, math.nan]],
    "point": [{"x": math.nan, "y": 1.0}, None, {"x": 2.0, "y": math.inf}, {"x": 0.0, "y": -0.0}],
})


@pytest.mark.parametrize("name", ["out.jsonl", "out.jsonl.gz"])
def test_parquet_to_jsonl_writes_strict_json(tmp_path, capsys, name):
    src = tmp_path / "in.parquet"
    pq.write_table(NON_FINITE, src)
    out = tmp_path / name
    code, err = run(capsys, src, out, "--keep-columns")
    assert code == 0, err
    raw = out.read_bytes()
    if name.endswith(".gz"):
        raw = gzip.decompress(raw)
    rows = [strict_json(line) for line in raw.decode("utf-8").splitlines()]

    def finite(v):
        if isinstance(v, float):
            return v if math.isfinite(v) else None
        if isinstance(v, list):
            return [finite(x) for x in v]
        if isinstance(v, dict):
            return {k: finite(x) for k, x in v.items()}
        return v

    kept = [c for c in NON_FINITE.column_names if c != "text"]
    want = [{c: finite(NON_FINITE.column(c)[k].as_py()) for c in kept} for k in range(NON_FINITE.num_rows)]
    assert [{c: r[c] for c in kept} for r in rows] == want
    assert [list(r)[:3] for r in rows] == [["index", "ids", "length"]] * 4
    # the summary counts what became null, field by field
    counts = {"score": 2, "score32": 2, "vec": 3, "point": 2}
    for field, n in counts.items():
        assert f"{n} NaN/Infinity values of {field!r} written as null" in err, err


def test_parquet_to_parquet_keeps_non_finite_floats(tmp_path, capsys):
    src, out = tmp_path / "in.parquet", tmp_path / "out.parquet"
    pq.write_table(NON_FINITE, src)
    code, err = run(capsys, src, out, "--keep-columns")
    assert code == 0 and "written as null" not in err, err
    got = pq.read_table(out)
    def spelled(v):  # NaN != NaN: compare spellings
        if isinstance(v, float):
            return repr(v)
        if isinstance(v, list):
            return [spelled(x) for x in v]
        if isinstance(v, dict):
            return {k: spelled(x) for k, x in v.items()}
        return v

    for c in ("score", "score32", "vec", "point"):
        assert got.schema.field(c) == NON_FINITE.schema.field(c)
        assert spelled(got.column(c).to_pylist()) == spelled(NON_FINITE.column(c).to_pylist())


def test_jsonl_gz_out_is_compressed(tmp_path, capsys):
    """A .jsonl.gz OUT is gzip (it used to be plain JSONL under that name), its
    lines those of a .jsonl OUT; --format jsonl with a .gz name compresses too."""
    src = write_jsonl(tmp_path / "in.jsonl", [{"text": f"line {k} " * k, "k": k} for k in range(50)])
    code, _ = run(capsys, src, tmp_path / "plain.jsonl", "--keep-columns", "-q")
    assert code == 0
    for name, extra in (("out.jsonl.gz", ()), ("out.ndjson.gz", ()), ("renamed.gz", ("--format", "jsonl"))):
        code, err = run(capsys, src, tmp_path / name, "--keep-columns", "-q", *extra)
        assert code == 0, err
        assert gzip.decompress((tmp_path / name).read_bytes()) == (tmp_path / "plain.jsonl").read_bytes()
    code, err = run(capsys, src, tmp_path / "out.gz", "-q")  # no format in the name
    assert code == 2 and "--format" in err
