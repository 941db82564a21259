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
from qwen4exp.cli.main import COMMAND_EPILOGS, main

import _formats_reference as formats

REQUEST = {  # atom-free, so that the reference's added-token matching is exact
    "messages": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Weather in Paris, please."},
        {"role": "assistant", "content": "", "reasoning_content": "Call the tool.",
         "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
        {"role": "tool", "content": '{"temperature": 18}'},
        {"role": "assistant", "content": "18 °C."},
        {"role": "user", "content": "Thanks!"},
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather.",
                                                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
}
TEXT = "héllo wörld, 数据 <|im_end|> naïve\n"
COMMANDS = ("demo", "render", "encode", "decode", "parse", "count", "batch", "gate")


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


def test_vocab_and_tokenizer_exclude_each_other(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["encode", "--vocab", "qwen3.6", "--tokenizer", "x.json", "--text", "a"])
    assert exc.value.code == 2
    code, _, err = run(capsys, "encode", "--vocab", "qwen9", "--text", "a")
    assert code == 2 and "unknown vocabulary 'qwen9'" in err
    code, _, err = run(capsys, "count", "--text", "a", "--chat-format", "qwen3.6")
    assert code == 2 and "add --chat" in err


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


def test_no_install_line_names_an_unpublished_package():
    """qwen4exp is installed from a clone: no message may suggest `pip install qwen4exp[...]`."""
    root = Path(qwen4exp.__file__).parent
    for path in root.rglob("*.py"):
        assert not re.search(r"qwen4exp\[", path.read_text(encoding="utf-8")), path
