"""Every pair of `qwen4exp batch` paths that may alias.

`batch IN OUT --errors IN` used to destroy IN (the errors file is written by
rename), and `--errors OUT` was silently overwritten by OUT's rename. Each
file the run writes (OUT, the errors file, explicit or the default
OUT.errors.jsonl) is checked against each file it reads (IN, --tokenizer) and
against the other written file, spelled as the same path, with `./`, through
`dir/../`, a symlink and a hard link; the run must refuse (exit 2, one line)
and leave every file byte for byte as it was, with no temporary file.
"""

from __future__ import annotations

import json
import os

import pytest

from qwen4exp.cli.main import main
from helpers import cli_in_process as cli
from helpers import temp_files

SPELLINGS = ["same", "dot", "dotdot", "symlink", "hardlink"]
# (written path, other path): which two of the run's files alias
PAIRS = [
    ("out", "in"),
    ("errors", "in"),
    ("errors", "out"),
    ("out", "tokenizer"),
    ("errors", "tokenizer"),
    ("default_errors", "in"),
]


def _alias(tmp_path, target, spelling):
    """Another spelling of `target` (a file name in tmp_path), relative to tmp_path."""
    if spelling == "same":
        return target
    if spelling == "dot":
        return "./" + target
    if spelling == "dotdot":
        os.makedirs(tmp_path / "sub", exist_ok=True)
        return "sub/../" + target
    link = f"link-to-{target}"
    if spelling == "symlink":
        os.symlink(target, tmp_path / link)
    else:
        os.link(tmp_path / target, tmp_path / link)
    return link


def _snapshot(tmp_path):
    return {p.name: (p.read_bytes() if p.is_file() else None) for p in tmp_path.rglob("*")}


CASES = [
    (w, o, s, e)
    for w, o in PAIRS
    for s in SPELLINGS
    for e in ("skip", "stop")
    if not (w == "default_errors" and e == "stop")  # stop writes no default errors file
]


@pytest.mark.parametrize("written,other,spelling,on_error", CASES)
def test_batch_refuses_aliased_paths(tmp_path, monkeypatch, capsys, written, other, spelling, on_error):
    records = [{"text": "hello"}, {"messages": "not a list"}, {"text": "world"}]
    files = {
        "in": "in.jsonl",
        "tokenizer": "tokenizer.json",
        "out": "out.jsonl",
        "errors": "errors.jsonl",
    }
    with open(tmp_path / files["in"], "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in records)
    # every case is refused before the tokenizer is read: any file will do
    (tmp_path / files["tokenizer"]).write_text("{}")
    if written == "default_errors":
        # IN is named like OUT's default errors file
        os.rename(tmp_path / files["in"], tmp_path / "out.jsonl.errors.jsonl")
        files["in"] = "out.jsonl.errors.jsonl"
        target = files["in"]
        args = {"in": files["in"], "out": files["out"], "errors": None}
        if spelling != "same":
            alias = _alias(tmp_path, target, spelling)
            args["in"] = alias
    else:
        if other == "out":
            (tmp_path / files["out"]).write_text("old output\n")  # links need a target
        alias = _alias(tmp_path, files[other], spelling)
        args = {"in": files["in"], "out": files["out"], "errors": files["errors"]}
        args[written] = alias
        if other != "tokenizer":
            args[other] = files[other]
    before = _snapshot(tmp_path)
    cmd = ["batch", args["in"], args["out"], "--on-error", on_error, "--tokenizer", files["tokenizer"]]
    if args["errors"]:
        cmd += ["--errors", args["errors"]]
    monkeypatch.chdir(tmp_path)  # in-process: the refusal comes before any work
    assert main(cmd) == 2, cmd
    assert "refusing to write over it" in capsys.readouterr().err
    assert _snapshot(tmp_path) == before
    assert not temp_files(tmp_path)


def test_batch_refuses_directory_outputs(tmp_path):
    """OUT (or the errors file) an existing directory: refused up front, not
    after processing everything and leaving OUT.errors.jsonl behind."""
    src = tmp_path / "in.jsonl"
    src.write_text('{"text": "a"}\n{"text": 5}\n')
    (tmp_path / "d.jsonl").mkdir()
    for args in (["d.jsonl"], ["o.jsonl", "--errors", "d.jsonl"]):
        r = cli("batch", src, *args, cwd=tmp_path)
        assert r.returncode == 2, r.stderr
        assert "is a directory" in r.stderr and "Traceback" not in r.stderr
        assert sorted(p.name for p in tmp_path.iterdir()) == ["d.jsonl", "in.jsonl"]


def test_batch_aliased_errors_file_in_a_real_run(tmp_path):
    """The reported case, run for real: `batch in.jsonl out.jsonl --errors in.jsonl`."""
    src = tmp_path / "in.jsonl"
    src.write_text('{"text": "a"}\n{"text": 5}\n')
    before = src.read_bytes()
    for extra in (["--errors", "in.jsonl"], ["--errors", "./in.jsonl", "--on-error", "skip"],
                  ["--errors", "out.jsonl"]):
        r = cli("batch", "in.jsonl", "out.jsonl", *extra, cwd=tmp_path)
        assert r.returncode == 2, r.stderr
        assert src.read_bytes() == before
        assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]


def test_batch_unaliased_symlinks_still_work(tmp_path):
    """The check is not a blanket refusal: distinct files behind symlinks run."""
    (tmp_path / "real.jsonl").write_text('{"text": "hello world"}\n')
    os.symlink("real.jsonl", tmp_path / "in.jsonl")
    (tmp_path / "sub").mkdir()
    r = cli("batch", "in.jsonl", "./out.jsonl", "--errors", "sub/../errs.jsonl", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "out.jsonl").read_text())["length"] == 2
    assert (tmp_path / "errs.jsonl").read_text() == ""
