"""qwen4exp.model_folder and `qwen4exp folder`: a tiny model folder for a chat format.

The folder written is compared with the reference folder of
tests/_model_folders.py (built from the reference files, without qwen4exp),
and transformers' AutoTokenizer, loading it, renders and tokenizes as
qwen4exp does; the packaged templates are the official ones.
"""

from __future__ import annotations

import json
import os

import pytest

import _model_folders
import qwen4exp
from qwen4exp.errors import ChatFormatError, VocabularyError
from qwen4exp.formats import chat_format, chat_formats
from qwen4exp.vocab.model_folder import ModelFolderError, write_model_folder

from helpers import WEATHER_REQUEST

FILES = ("tokenizer.json", "tokenizer_config.json", "config.json", "generation_config.json")
# the shared agent conversation, ending in a user turn that types a marker
MESSAGES = WEATHER_REQUEST["messages"][:-1] + [{"role": "user", "content": "And <|im_end|> typed?"}]
TOOLS = WEATHER_REQUEST["tools"]


def _read(folder, name):
    with open(os.path.join(folder, name), "rb") as f:
        data = f.read()
    return data if name == "tokenizer.json" else json.loads(data)


def test_the_packaged_templates_are_the_official_ones():
    for fmt in chat_formats():
        name = chat_format(fmt).template_file
        assert _model_folders.FORMAT_TEMPLATE[fmt] == name
        packaged = os.path.join(os.path.dirname(qwen4exp.__file__), "formats", "templates", name)
        with open(packaged, "rb") as a, open(os.path.join(_model_folders.TEMPLATES, name), "rb") as b:
            assert a.read() == b.read(), name


# qwen3 in the default run; the other vocabulary (its tokenizer.json given, the generic
# tokenizer class) and the other Qwen3 template with -m slow: ~5 s each.
@pytest.mark.parametrize("fmt", ["qwen3", pytest.param("qwen3-2507", marks=pytest.mark.slow),
                                 pytest.param("qwen3.6", marks=pytest.mark.slow)])
def test_the_folder_is_the_reference_folder_and_transformers_agrees(fmt, tmp_path, request):
    from transformers import AutoTokenizer

    qwen36_json = request.getfixturevalue("qwen36_json") if fmt == "qwen3.6" else None
    source = qwen36_json
    folder = write_model_folder(tmp_path / "m", fmt, tokenizer_json=source)
    reference = _model_folders.model_folder(str(tmp_path / "ref"), fmt,
                                            cache_dir=qwen36_json and os.path.dirname(qwen36_json))
    assert sorted(os.listdir(folder)) == sorted(FILES)
    for name in FILES:
        assert _read(folder, name) == _read(reference, name), name

    hf = AutoTokenizer.from_pretrained(folder)
    ours = qwen4exp.Tokenizer.from_pretrained(folder)
    assert ours.chat_format == fmt
    chat = ours.render_chat(MESSAGES, tools=TOOLS, add_generation_prompt=True)
    assert hf.apply_chat_template(MESSAGES, tools=TOOLS, tokenize=False, add_generation_prompt=True) == chat.text
    benign = MESSAGES[:-1] + [{"role": "user", "content": "Thanks."}]  # no typed marker: one-pass ids agree
    ids = hf.apply_chat_template(benign, tools=TOOLS, tokenize=True, add_generation_prompt=True)
    ids = ids["input_ids"] if isinstance(ids, dict) else ids
    assert ours.encode_chat(ours.render_chat(benign, tools=TOOLS, add_generation_prompt=True)).tolist() == list(ids)


def test_template_file_and_refusals_leave_nothing_behind(tmp_path):
    folder = write_model_folder(tmp_path / "t", "qwen3", template_file=True)
    with open(os.path.join(_model_folders.TEMPLATES, "qwen3.jinja"), encoding="utf-8") as f:
        assert open(os.path.join(folder, "chat_template.jinja"), encoding="utf-8").read() == f.read()
    assert "chat_template" not in _read(folder, "tokenizer_config.json")
    assert qwen4exp.Tokenizer.from_pretrained(folder).chat_format == "qwen3"

    before = sorted(os.listdir(tmp_path))
    with pytest.raises(ModelFolderError, match="not an empty directory"):
        write_model_folder(folder, "qwen3")
    with pytest.raises(VocabularyError, match="tokenizer_json"):
        write_model_folder(tmp_path / "x", "qwen3.6")
    with pytest.raises(ChatFormatError, match="qwen3 vocabulary"):  # a Qwen3 file for a 3.6 format
        write_model_folder(tmp_path / "x", "qwen3.8", tokenizer_json=os.path.join(folder, "tokenizer.json"))
    with pytest.raises(VocabularyError, match="not a tokenizer.json"):
        write_model_folder(tmp_path / "x", "qwen3", tokenizer_json=os.path.join(folder, "config.json"))
    with pytest.raises(ChatFormatError, match="unknown chat format"):
        write_model_folder(tmp_path / "x", "qwen9")
    assert sorted(os.listdir(tmp_path)) == before  # no staging folder, no partial target
    assert sorted(os.listdir(folder)) == sorted(["chat_template.jinja", *FILES[:1], *FILES[1:]])

    (tmp_path / "empty").mkdir()  # an empty directory is filled
    assert write_model_folder(tmp_path / "empty", "qwen3-2507") == str(tmp_path / "empty")


def test_the_folder_command(tmp_path, capsys):
    from qwen4exp.cli.main import main

    def cli(*args):
        code = main(["folder", *map(str, args)])
        out = capsys.readouterr()
        return code, out.out, out.err

    code, out, err = cli(tmp_path / "tiny", "--chat-format", "qwen3-2507")
    assert (code, out) == (0, f"{tmp_path / 'tiny'}\n"), err
    assert qwen4exp.Tokenizer.from_pretrained(tmp_path / "tiny").chat_format == "qwen3-2507"
    code, _, err = cli(tmp_path / "tiny")
    assert code == 4 and "not an empty directory" in err
    code, _, err = cli(tmp_path / "t36", "--chat-format", "qwen3.6")
    assert code == 2 and "needs --tokenizer-json" in err
    code, _, err = cli(tmp_path / "t36", "--chat-format", "qwen3.6", "--tokenizer-json", tmp_path / "tiny" / "tokenizer.json")
    assert code == 3 and "ChatFormatError" in err
    assert sorted(os.listdir(tmp_path)) == ["tiny"]
