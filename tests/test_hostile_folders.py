"""A hostile-file corpus put in place of every file a model folder has.

Each of tokenizer.json, tokenizer_config.json, config.json,
preprocessor_config.json and chat_template.jinja is replaced in turn by JSON
nested 100,000 deep, a lone surrogate, bytes that are not UTF-8, a file past
the size its reader takes (sparse: nothing is written), each wrong JSON type,
a directory, a FIFO, a loop of links, a dangling link, a link to a device and
an empty file. Every loader of a model folder must refuse it with a
Qwen4ExpError subclass (no RecursionError, UnicodeEncodeError or hang):
`Tokenizer.from_pretrained`, `Qwen4ExpTokenizer.from_pretrained`, and the
command line's `--tokenizer FOLDER`, one line and a usage exit code, no
traceback.

Before: deep JSON in config.json, tokenizer_config.json or
preprocessor_config.json raised RecursionError; a lone surrogate in the chat
template UnicodeEncodeError (a traceback from the command line); a FIFO
tokenizer_config.json blocked Qwen4ExpTokenizer.from_pretrained forever.

The folders hold a 1,000-token cut of the Qwen3 vocabulary (from_file,
compiled once), so a case costs milliseconds.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
import threading

import pytest

import qwen4exp
from qwen4exp.vocab.files import FileTooLargeError
from qwen4exp.errors import Qwen4ExpError
from qwen4exp.vocab.loading import TOKENIZER_JSON_LIMIT
from qwen4exp.vocab.pretrained import CONFIG_LIMIT

import _model_folders
from _small_vocab import small_tokenizer_json
from helpers import cli_in_process as cli

from qwen4exp.hf import Qwen4ExpTokenizer  # transformers is installed for tests

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="FIFOs and /dev/zero as on Linux")

JSON_FILES = ("tokenizer.json", "tokenizer_config.json", "config.json", "preprocessor_config.json")
TEMPLATE_FILE = "chat_template.jinja"


def _write(text: str | bytes):
    def make(path, base):
        with open(path, "wb") as f:
            f.write(text if isinstance(text, bytes) else text.encode("utf-8"))
    return make


def _with_surrogate(path, base):
    """The file as it was, with one string a lone surrogate where the loaders read it."""
    name = os.path.basename(path)
    if name == TEMPLATE_FILE:
        _write(base + "\ud800".encode("utf-8", "surrogatepass"))(path, base)  # bytes no UTF-8 decoder takes
        return
    value = json.loads(base)
    if name == "tokenizer.json":
        value["added_tokens"][0]["content"] = "<|\ud800|>"
    elif name == "tokenizer_config.json":
        value["eos_token"] = "\ud800"
        value["chat_template"] += "\ud800"
    else:
        value["note"] = "\ud800"
    _write(json.dumps(value))(path, base)  # ensure_ascii: the surrogate as a \\ud800 escape


def _huge(path, base):
    limit = TOKENIZER_JSON_LIMIT if os.path.basename(path) == "tokenizer.json" else CONFIG_LIMIT
    with open(path, "wb") as f:
        f.truncate(limit + 1)  # sparse: no byte is written


def _fifo(path, base):
    os.mkfifo(path)


def _loop(path, base):
    os.symlink(os.path.basename(path), path)  # a link to itself


def _dangling(path, base):
    os.symlink("nowhere", path)


def _device(path, base):
    os.symlink("/dev/zero", path)


def _directory(path, base):
    os.mkdir(path)


CORPUS = {
    "deep list": _write("[" * 100_000 + "]" * 100_000),
    "deep object": _write('{"a": ' * 50_000 + "1" + "}" * 50_000),
    "lone surrogate": _with_surrogate,
    "not UTF-8": _write(b'{"a": "\xff\xfe"}'),
    "huge": _huge,
    "JSON list": _write("[]"),
    "JSON string": _write('"x"'),
    "JSON number": _write("1"),
    "JSON null": _write("null"),
    "JSON true": _write("true"),
    "5,000-digit number": _write('{"a": ' + "9" * 5000 + "}"),
    "directory": _directory,
    "FIFO": _fifo,
    "loop of links": _loop,
    "dangling link": _dangling,
    "device": _device,
    "empty": _write(b""),
}
# Values of the wrong type where the loaders read them; the settings only
# Qwen4ExpTokenizer reads are marked (the others load such a folder).
HF_ONLY = True
WRONG_FIELDS = {
    "tokenizer_config.json": [({"chat_template": 5}, False),
                              ({"chat_template": [{"name": "default", "template": 5}]}, False),
                              *(({key: value}, HF_ONLY) for key, value in (
                                  ("model_max_length", "big"), ("model_max_length", -1), ("padding_side", 3),
                                  ("truncation_side", "middle"), ("eos_token", 7), ("pad_token", {"x": 1}),
                                  ("additional_special_tokens", "x"), ("model_input_names", "input_ids"),
                                  ("clean_up_tokenization_spaces", "yes"), ("split_special_tokens", "no"),
                                  ("qwen4exp_chat_format", 1), ("qwen4exp_assistant_mask_style", [])))],
    "config.json": [({"vocab_size": "x"}, False), ({"vocab_size": True}, False), ({"vocab_size": 10}, False)],
    "tokenizer.json": [({"model": []}, False), ({"added_tokens": {}}, False)],
    # preprocessor_config.json: read as an object here, its values when media are counted (test_media)
}
CASES = [(name, kind) for name in (*JSON_FILES, TEMPLATE_FILE) for kind in CORPUS
         if not (name == TEMPLATE_FILE and kind.startswith("JSON"))]  # a template is any text
CASES += [(name, f"field {i}") for name, fields in WRONG_FIELDS.items() for i in range(len(fields))]


@pytest.fixture(scope="module")
def bases(tmp_path_factory):
    """Two small folders: the template in tokenizer_config.json, and in chat_template.jinja."""
    root = tmp_path_factory.mktemp("hostile-bases")
    out = {}
    for in_file in (False, True):
        path = _model_folders.model_folder(str(root / str(in_file)), "qwen3", template_file=in_file)
        with open(os.path.join(path, "tokenizer.json"), "w", encoding="utf-8") as f:
            json.dump(small_tokenizer_json(), f)
        with open(os.path.join(path, "preprocessor_config.json"), "w", encoding="utf-8") as f:
            json.dump({"patch_size": 16, "merge_size": 2}, f)
        out[in_file] = path
    return out


def _guarded(call, folder: str):
    """call(), with a guard: a call blocked on a FIFO is let go by a writer
    after 60 s, and counts as blocked (the result never decides on time)."""
    done, blocked = threading.Event(), []

    def unblock():
        if not done.wait(60):
            blocked.append(True)
            for name in os.listdir(folder):
                path = os.path.join(folder, name)
                if stat.S_ISFIFO(os.lstat(path).st_mode):
                    os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))

    guard = threading.Thread(target=unblock, daemon=True)
    guard.start()
    try:
        return call()
    finally:
        done.set()
        guard.join()
        assert not blocked, "the loader blocked on a FIFO"


# Hostile contents that are still well-formed text: as a chat_template.jinja, a template.
TEMPLATE_TEXT = ("deep list", "deep object", "empty", "5,000-digit number")


@pytest.mark.parametrize("name,kind", CASES)
def test_hostile_folder_file(bases, tmp_path, monkeypatch, name, kind):
    monkeypatch.setenv("QWEN4EXP_CACHE", str(tmp_path / "cache"))
    folder = str(tmp_path / "model")
    shutil.copytree(bases[name == TEMPLATE_FILE], folder)
    path = os.path.join(folder, name)
    with open(path, "rb") as f:
        base = f.read()
    os.remove(path)
    hf_only = False
    if kind.startswith("field"):
        value = json.loads(base)
        fields, hf_only = WRONG_FIELDS[name][int(kind.split()[1])]
        value.update(fields)
        _write(json.dumps(value))(path, base)
    else:
        CORPUS[kind](path, base)

    if name == TEMPLATE_FILE and kind in TEMPLATE_TEXT:
        # well-formed text is a template: rendered as it is, with provenance (chat_format
        # "template"); what it renders, or the ChatFormatError it raises, never a raw error
        tok = _guarded(lambda: qwen4exp.Tokenizer.from_pretrained(folder), folder)
        assert tok.chat_format == "template"
        try:
            chat = tok.render_chat([{"role": "user", "content": "hi"}], add_generation_prompt=True)
        except Qwen4ExpError:
            pass
        else:
            assert len(tok.encode_chat(chat)) == tok.count_chat(chat)
        assert _guarded(lambda: cli("count", "--text", "hi", "--tokenizer", folder), folder).returncode == 0
        return
    if hf_only:  # a setting of transformers' tokenizer only: the others load the folder
        qwen4exp.Tokenizer.from_pretrained(folder)
        assert cli("count", "--text", "hi", "--tokenizer", folder).returncode == 0
    for load in (qwen4exp.Tokenizer.from_pretrained, Qwen4ExpTokenizer.from_pretrained)[hf_only:]:
        with pytest.raises(Qwen4ExpError) as caught:
            _guarded(lambda load=load: load(folder), folder)
        if kind == "huge":
            assert isinstance(caught.value, FileTooLargeError)  # refused before a byte is read
    if hf_only:
        return
    result = _guarded(lambda: cli("encode", "--text", "hi", "--tokenizer", folder), folder)
    assert result.returncode == 2 and result.stdout == ""
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr, result.stderr
