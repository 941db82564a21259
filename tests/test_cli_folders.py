"""Every command with `--tokenizer FOLDER` against the library on the same
folder: `Tokenizer.from_pretrained(folder)` (its format, its render defaults,
its vocabulary) driven with the same inputs.

A model folder carries more than a vocabulary: its template picks the chat
format and may imply render options (the Qwen3.5 small models' template turns
thinking off). The command line used to take the format and drop the
defaults, so `encode --chat` opened a think block where
`from_pretrained(folder).render_chat` wrote the closed one. The folders are
built from the reference templates (tests/_model_folders.py); the default run
takes one folder per vocabulary and the thinking-off template in both places
a folder may keep it, `slow` every template file in both places.
"""

from __future__ import annotations

import json
import os

import pytest

import qwen4exp
from qwen4exp.errors import Qwen4ExpError

import _model_folders
from helpers import EXAMPLE
from helpers import cli_in_process as cli

TEMPLATE_FORMAT = _model_folders.TEMPLATE_FORMAT
assert sorted(TEMPLATE_FORMAT) == sorted(f for f in os.listdir(_model_folders.TEMPLATES) if f.endswith(".jinja"))
DEFAULT_RUN = [("qwen3.jinja", False), ("qwen3_6.jinja", False), ("qwen3_5_nothink.jinja", False),
               ("qwen3_5_nothink.jinja", True)]
EVERY = [(name, in_file) for name in sorted(TEMPLATE_FORMAT) for in_file in (False, True)]

MESSAGES = [
    {"role": "system", "content": "Be brief. <|im_end|>"},
    {"role": "user", "content": "What is 2+2?"},
    {"role": "assistant", "content": "4", "reasoning_content": "Add them."},
    {"role": "user", "content": "And <think>3+3</think>?"},
]
# The request options a record may set (None: left out); the command-line flags on top.
OPTION_SETS = [{}, {"enable_thinking": True}, {"enable_thinking": False}]
TEXT = "Hello <|im_end|> wörld\n"


@pytest.fixture(scope="module")
def base(tmp_path_factory, qwen36_json):
    """A folder per vocabulary whose tokenizer.json the variants link to."""
    root = tmp_path_factory.mktemp("cli-folders")
    cache = os.path.dirname(qwen36_json)
    return {fmt: _model_folders.model_folder(str(root / fmt), fmt, cache_dir=cache)
            for fmt in ("qwen3", "qwen3.6")}, root, cache


def folder_of(base, template: str, in_file: bool) -> str:
    folders, root, cache = base
    path = root / f"{template}-{'file' if in_file else 'config'}"
    if not path.exists():
        _model_folders.template_folder(
            str(path), template, template_file=in_file, cache_dir=cache,
            tokenizer_from=folders[_model_folders.vocabulary_of(TEMPLATE_FORMAT[template])])
    return str(path)


def _library(tok, call):
    """call(tok)'s result, or the Qwen4ExpError it raised."""
    try:
        return call(tok)
    except Qwen4ExpError as exc:
        return exc


def _check(result, want, read=lambda out: out):
    """The command's outcome equals the library's: the same value, or both failed
    (the command with one line and an input exit code)."""
    if isinstance(want, Qwen4ExpError):
        assert result.returncode == 3 and result.stdout == "", (result, want)
        assert len(result.stderr.strip().splitlines()) == 1
    else:
        assert result.returncode == 0, result.stderr
        assert read(result.stdout) == want


def differential(folder: str, tmp_path) -> None:
    tok = qwen4exp.Tokenizer.from_pretrained(folder)
    opt = ["--tokenizer", folder]
    im_end = tok.atoms["<|im_end|>"]

    # plain text: encode, count, decode
    _check(cli("encode", "--text", TEXT, *opt), tok.encode(TEXT), json.loads)
    _check(cli("count", "--text", TEXT, *opt), tok.count(TEXT), int)
    ids = tok.encode(TEXT) + [im_end]
    _check(cli("decode", *map(str, ids), *opt), tok.decode(ids) + "\n")

    # chat requests: render, encode --chat, count --chat, each with the flags too
    for k, options in enumerate(OPTION_SETS):
        request = tmp_path / f"request{k}.json"
        request.write_text(json.dumps({"messages": MESSAGES, **options}), encoding="utf-8")
        for flags, extra in (([], {}), (["--add-generation-prompt"], {"add_generation_prompt": True}),
                             (["--add-generation-prompt", "--no-thinking"],
                              {"add_generation_prompt": True, "enable_thinking": False})):
            given = {**options, **extra}
            want = _library(tok, lambda t, given=given: t.render_chat(MESSAGES, **given))
            _check(cli("render", request, "--json", *flags, *opt),
                   want if isinstance(want, Exception) else
                   {"text": want.text, "segments": [[s.start, s.end, s.kind.name] for s in want.segments]},
                   json.loads)
            _check(cli("encode", "--chat", request, *flags, *opt),
                   _library(tok, lambda t, given=given: t.encode_chat(t.render_chat(MESSAGES, **given)).tolist()), json.loads)
            _check(cli("count", "--chat", request, *flags, *opt),
                   _library(tok, lambda t, given=given: t.count_chat(t.render_chat(MESSAGES, **given))), int)
        # parse: the prompt (its generation prompt open or closed) decides what the ids are
        reply = tok.encode("Let me see") + [tok.atoms["</think>"]] + tok.encode("\n\n6") + [im_end]
        _check(cli("parse", *map(str, reply), "--prompt", request, *opt),
               _library(tok, lambda t, reply=reply, options=options: t.parse_completion(
                   reply, t.render_chat(MESSAGES, add_generation_prompt=True, **options))), json.loads)

    # batch: records with and without their own options, a text record; ids and masks
    records = [{"messages": MESSAGES, "add_generation_prompt": True, **o} for o in OPTION_SETS] + [{"text": TEXT}]
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    result = cli("batch", source, out, "--masks", "--on-error", "skip", *opt)
    assert result.returncode in (0, 1), result.stderr
    rows = {row["index"]: row for row in map(json.loads, out.read_text(encoding="utf-8").splitlines())}
    for i, record in enumerate(records):
        if "text" in record:
            assert rows[i]["ids"] == tok.encode(TEXT)
            continue
        options = {k: v for k, v in record.items() if k != "messages"}
        want = _library(tok, lambda t, options=options: t.encode_chat(
            t.render_chat(MESSAGES, **options), return_masks=True))
        if isinstance(want, Exception):
            assert i not in rows
        else:
            assert rows[i]["ids"] == want.ids.tolist()
            assert rows[i]["assistant_mask"] == want.assistant_mask.tolist()
            assert rows[i]["message_index"] == want.message_index.tolist()

    # demo: the bundled example in the folder's format
    with open(EXAMPLE, encoding="utf-8") as f:
        example = json.load(f)
    options = {k: v for k, v in example.items() if k != "messages"}
    want = _library(tok, lambda t: t.encode_chat(t.render_chat(example["messages"], **options)).tolist())
    result = cli("demo", "--full", *opt)
    if isinstance(want, Exception):
        assert result.returncode == 3 and len(result.stderr.strip().splitlines()) == 1
    else:
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout.split("token ids (")[1].split("\n", 1)[1]) == want


@pytest.fixture
def load_once(monkeypatch):
    """The command line's own --tokenizer loader, its result kept per path: a
    folder is loaded once, not once per command (0.1 - 0.3 s each)."""
    from qwen4exp.cli import common

    loaded: dict = {}
    real = common._load_path
    monkeypatch.setattr(common, "_load_path", lambda path: loaded.get(path) or loaded.setdefault(path, real(path)))


@pytest.mark.parametrize("template,in_file", DEFAULT_RUN)
def test_cli_with_a_folder_is_from_pretrained(base, tmp_path, load_once, template, in_file):
    differential(folder_of(base, template, in_file), tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("template,in_file", [c for c in EVERY if c not in DEFAULT_RUN])
def test_cli_with_every_folder_is_from_pretrained(base, tmp_path, load_once, template, in_file):
    differential(folder_of(base, template, in_file), tmp_path)
