"""`qwen4exp gate`: passes on both bundled vocabularies, fails on
tampered tokenizer files naming the check and the atom, and keeps its exit codes."""

import copy
import importlib.util
import json
import os
import re

import pytest

import qwen4exp
from qwen4exp.runtimes import gate
from qwen4exp.cli.main import main

from _hf_reference import tokenizer_json
from conftest import REPO, TOKENIZER_JSON


def run(capsys, *args):
    code = main(["gate", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("name", ["qwen3", "qwen3.6", pytest.param("qwen3.5", marks=pytest.mark.slow)])  # an alias
def test_passes_on_bundled_vocabularies(capsys, name):
    code, out, _ = run(capsys, "--vocab", name, "--json")
    report = json.loads(out)
    assert code == 0 and report["ok"] and report["cases"] >= 39
    checked = {c["name"]: c["checked"] for c in report["checks"]}
    assert all(c["ok"] and c["ran"] for c in report["checks"])
    own = qwen4exp.Tokenizer(name).chat_formats()  # by default every format of the vocabulary
    assert report["chat_formats"] == list(own) and set(own) < set(qwen4exp.chat_formats())
    for fmt in own:
        assert checked[f"chat[{fmt}].accepted"] + checked[f"chat[{fmt}].rejected"] == report["cases"]
    assert checked["atoms.outside_bpe"] == len(qwen4exp.Tokenizer(name).atoms)


def test_chat_format_option(capsys):
    """--chat-format F runs the chat checks in F only; without --vocab, over the
    vocabulary of F's models."""
    code, out, _ = run(capsys, "--chat-format", "qwen3.5", "--json")
    report = json.loads(out)
    assert code == 0 and report["ok"] and report["chat_formats"] == ["qwen3.5"]
    assert report["tokenizer"] == "bundled vocabulary qwen3.6"
    assert [c["name"] for c in report["checks"] if c["name"].startswith("chat")] == [
        "chat[qwen3.5].accepted", "chat[qwen3.5].rejected"]
    code, out, _ = run(capsys, "--vocab", "qwen3", "--chat-format", "qwen3-2507", "--chat-format", "qwen3")
    assert code == 0 and "bundled vocabulary qwen3 " in out and "chat formats qwen3-2507, qwen3" in out
    # a format of another vocabulary cannot be encoded with this one: a usage error
    code, out, err = run(capsys, "--vocab", "qwen3", "--chat-format", "qwen3.8")
    assert code == 2 and "qwen3.8 chat format is for the qwen3.6 vocabulary" in err and not out
    with pytest.raises(SystemExit) as exc:
        run(capsys, "--chat-format", "qwen4")
    assert exc.value.code == 2


def test_readable_report_and_default_vocabulary(capsys):
    code, out, _ = run(capsys)
    assert code == 0
    assert "qwen4exp gate: bundled vocabulary qwen3" in out and "result: all checks passed" in out
    assert out.count("PASS") == len(gate.run_gate(qwen4exp.Tokenizer()).checks)


def test_packaged_oracle_is_derived_from_the_tests_oracle():
    spec = importlib.util.spec_from_file_location("gen_gate_oracle", os.path.join(REPO, "tools", "gen_gate_oracle.py"))
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    with open(os.path.join(REPO, "tests", "data", "chat_oracle.json"), encoding="utf-8") as f:
        want = tool.derive(json.load(f))
    with open(gate.ORACLE, encoding="utf-8") as f:
        assert json.load(f) == want


def test_oracle_covers_the_design_note_cases():
    cases = {c["name"]: c for c in gate.load_oracle()}
    assert len(cases) >= 39
    for name in ["literal_controls_user", "literal_controls_system", "literal_controls_tool_result",
                 "literal_controls_tool_arguments_dict", "literal_controls_tool_arguments_string",
                 "literal_controls_tool_name", "literal_controls_tool_schema", "literal_media_token_text",
                 "reject_image_part", "reject_image_url_part", "reject_video_part", "reject_second_system",
                 "reject_unsupported_role", "reject_tool_arguments_not_json"]:
        assert name in cases, name
    assert sum("error" in c["expect"] for c in cases.values()) >= 30


def tampered(tmp_path, edit):
    # the parsed file is cached (_hf_reference); the edits touch added_tokens only
    raw = dict(tokenizer_json(TOKENIZER_JSON))
    raw["added_tokens"] = copy.deepcopy(raw["added_tokens"])
    edit(raw)
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    return path


def _move_im_end(raw):
    for t in raw["added_tokens"]:
        if t["content"] == "<|im_end|>":
            t["id"] = 100


def _remove_think(raw):
    raw["added_tokens"] = [t for t in raw["added_tokens"] if t["content"] != "<think>"]


@pytest.mark.parametrize("edit,check,atom", [
    (_move_im_end, "atoms.outside_bpe", "<|im_end|>"),
    # each compiles a tampered tokenizer.json (~5 s): the second check's case with -m slow
    pytest.param(_remove_think, "atoms.markers", "<think>", marks=pytest.mark.slow),
])
def test_fails_on_tampered_files(capsys, tmp_path, monkeypatch, edit, check, atom):
    monkeypatch.setenv("QWEN4EXP_CACHE", str(tmp_path / "cache"))
    code, out, _ = run(capsys, "--tokenizer", str(tampered(tmp_path, edit)))
    assert code == 1 and "result: FAILED" in out
    failures = re.split(r"\n  (?=[A-Z])", out.split(f"FAIL    {check}", 1)[1])[0]  # to the next check
    assert atom in failures, out


def test_untampered_file_passes(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("QWEN4EXP_CACHE", str(tmp_path / "cache"))
    code, out, _ = run(capsys, "--tokenizer", str(tampered(tmp_path, lambda raw: None)), "--json")
    report = json.loads(out)
    assert code == 0 and report["ok"] and report["cases"] >= 39, out


def test_usage_and_unreadable(capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:  # argparse: the two options exclude each other
        run(capsys, "--vocab", "qwen3", "--tokenizer", "x")
    assert exc.value.code == 2
    code, _, err = run(capsys, "--vocab", "qwen9")
    assert code == 2 and "unknown vocabulary" in err
    code, _, err = run(capsys, "--tokenizer", str(tmp_path / "missing.json"))
    assert code == 3 and "unreadable" in err
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert run(capsys, "--tokenizer", str(bad))[0] == 3
    bad.write_text("[1, 2]")
    assert run(capsys, "--tokenizer", str(bad))[0] == 3


def test_unreadable_oracle(tmp_path):
    bad = tmp_path / "oracle.json"
    bad.write_text('{"cases": 3}')
    with pytest.raises(gate.GateInputError):
        gate.run_gate(qwen4exp.Tokenizer(), oracle=str(bad))


def test_chat_checks_name_the_failing_case(tmp_path):
    """An oracle that disagrees with the renderer fails the chat checks, naming the case."""
    with open(gate.ORACLE, encoding="utf-8") as f:
        oracle = json.load(f)
    cases = {c["name"]: c for c in oracle["cases"]}
    # A marker the oracle claims is DATA, and a rejection the renderer does not give.
    seg = cases["literal_controls_user"]["expect"]["segments"]
    seg[0][2] = "DATA"
    cases["reject_second_system"]["expect"]["match"] = "no such message"
    path = tmp_path / "oracle.json"
    path.write_text(json.dumps(oracle), encoding="utf-8")
    report = gate.run_gate(qwen4exp.Tokenizer(), oracle=str(path))
    failed = {c.name: c.failures for c in report.checks if not c.ok}
    assert set(failed) == {"chat[qwen3].accepted", "chat[qwen3].rejected"}
    assert len(failed["chat[qwen3].accepted"]) == 1 and "literal_controls_user" in failed["chat[qwen3].accepted"][0]
    assert len(failed["chat[qwen3].rejected"]) == 1 and "reject_second_system" in failed["chat[qwen3].rejected"][0]


def test_chat_checks_in_one_format(tmp_path):
    """formats=(F,) runs the oracle in F only, against F's own expectations."""
    with open(gate.ORACLE, encoding="utf-8") as f:
        oracle = json.load(f)
    cases = {c["name"]: c for c in oracle["cases"]}
    # every format but the default's (whose expectations are "expect")
    known = set(qwen4exp.chat_formats()[1:])
    assert all(set(c["formats"]) == known for c in cases.values())
    # the 3.5+ formats need a user query: accepted in qwen3, rejected there
    assert "text" in cases["system_only"]["expect"]
    assert cases["system_only"]["formats"]["qwen3.6"]["error"] == "ChatFormatError"
    report = gate.run_gate(qwen4exp.Tokenizer("qwen3.6"), formats=("qwen3.6",))
    names = [c.name for c in report.checks if c.name.startswith("chat")]
    assert report.ok and names == ["chat[qwen3.6].accepted", "chat[qwen3.6].rejected"]
    assert report.to_json()["chat_formats"] == ["qwen3.6"]
    # an expectation of that format tampered with: its check fails, naming the case
    cases["tool_call_dict_arguments"]["formats"]["qwen3.6"]["text"] += "x"
    path = tmp_path / "oracle.json"
    path.write_text(json.dumps(oracle), encoding="utf-8")
    report = gate.run_gate(qwen4exp.Tokenizer("qwen3.6"), oracle=str(path))
    failed = {c.name: c.failures for c in report.checks if not c.ok}
    assert set(failed) == {"chat[qwen3.6].accepted"} and "tool_call_dict_arguments" in failed[
        "chat[qwen3.6].accepted"][0]
    with pytest.raises(qwen4exp.ChatFormatError, match="chat_format: unknown chat format 'qwen4'"):
        gate.run_gate(qwen4exp.Tokenizer(), formats=("qwen4",))
    report = gate.run_gate(None, facts=gate.facts_of_tokenizer(qwen4exp.Tokenizer()), formats=("qwen3.8",))
    assert [c.name for c in report.checks if not c.ran][-2:] == ["chat[qwen3.8].accepted", "chat[qwen3.8].rejected"]
