"""Hints on command-line misuse: a positional FILE that names no file, given
to `encode` or `count`, was most likely the text itself; the error names the
`--text` command that does it, and that command works. A chat request that
is not a file says what one is; an id that is not a number says how to get
ids of text."""

from __future__ import annotations

import json
import shlex

import pytest

import qwen4exp
from helpers import cli_in_process as cli


def _one_line(result) -> str:
    assert result.returncode == 3 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize("command", ["encode", "count"])
@pytest.mark.parametrize("text", ["hello", "hello world", "it's 'quoted' & $HOME"])
def test_text_given_as_file_names_the_text_option(tmp_path, command, text):
    line = _one_line(cli(command, text, cwd=tmp_path))
    suggested = line.split(f"qwen4exp {command} ", 1)[1].rstrip(")")
    argv = shlex.split(suggested)
    assert argv == ["--text", text]
    done = cli(command, *argv, cwd=tmp_path)  # the suggestion works
    tok = qwen4exp.Tokenizer()
    assert done.returncode == 0
    assert done.stdout.strip() == (json.dumps(tok.encode(text)) if command == "encode" else str(tok.count(text)))


@pytest.mark.parametrize("argv", [["encode", "--chat", "hello"], ["count", "--chat", "hello"], ["render", "hello"],
                                  ["parse", "1", "--prompt", "hello"]])
def test_missing_chat_request_says_what_one_is(tmp_path, argv):
    assert "a chat request is a JSON file" in _one_line(cli(*argv, cwd=tmp_path))


def test_an_existing_unreadable_file_gets_no_text_hint(tmp_path):
    (tmp_path / "folder").mkdir()
    assert "--text" not in _one_line(cli("encode", "folder", cwd=tmp_path))


@pytest.mark.parametrize("command", ["decode", "parse"])
def test_words_given_as_ids_name_encode(tmp_path, command):
    assert "qwen4exp encode --text" in _one_line(cli(command, "hello", cwd=tmp_path))
