"""`Qwen4ExpTokenizer.apply_chat_template(chat_template=T)` on every model
folder against transformers' own tokenizer of that folder given the same T.

A folder's template may imply render options (the Qwen3.5 small models'
turns thinking off); a template given to the call replaces the folder's, and
with it those defaults: the think template on a small model's folder renders
thinking on in transformers, and must here too (it used to render thinking
off, the folder's default winning over the template given). Each template is
either rendered as transformers renders it, or refused (a template of another
format than the folder's).

The conversations end with the last query's turn: the training variants of
the templates write the reasoning of earlier turns too, which the format they
are bound to (for TRL's assistant masks) does not.
"""

from __future__ import annotations

import os

import pytest

from qwen4exp.errors import ChatFormatError

import _model_folders
from _model_folders import TEMPLATE_FORMAT

from qwen4exp.hf import Qwen4ExpTokenizer  # transformers is installed for tests

CONVERSATIONS = [
    ([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2+2?"}], True),
    ([{"role": "user", "content": "What is 2+2?"},
      {"role": "assistant", "content": "4", "reasoning_content": "Add them."}], False),
]
THINKING = [None, True, False]
DEFAULT_RUN = ["qwen3_5_nothink.jinja", "qwen3.jinja"]


@pytest.fixture(scope="module")
def folders(tmp_path_factory, qwen36_json):
    root = tmp_path_factory.mktemp("template-folders")
    cache = os.path.dirname(qwen36_json)
    base = {fmt: _model_folders.model_folder(str(root / fmt), fmt, cache_dir=cache) for fmt in ("qwen3", "qwen3.6")}
    made: dict = {}

    def get(template: str):
        if template not in made:
            from transformers import AutoTokenizer

            path = _model_folders.template_folder(
                str(root / template), template, cache_dir=cache,
                tokenizer_from=base[_model_folders.vocabulary_of(TEMPLATE_FORMAT[template])])
            made[template] = Qwen4ExpTokenizer.from_pretrained(path), AutoTokenizer.from_pretrained(path)
        return made[template]

    return get


def _text(name: str) -> str:
    with open(os.path.join(_model_folders.TEMPLATES, name), encoding="utf-8") as f:
        return f.read()


def check_folder(folders, folder_template: str) -> None:
    ours, hf = folders(folder_template)
    atoms = set(ours.get_added_vocab().values())
    for given in [None, *sorted(TEMPLATE_FORMAT)]:
        template = None if given is None else _text(given)
        same_format = given is None or TEMPLATE_FORMAT[given] == TEMPLATE_FORMAT[folder_template]
        for messages, prompt in CONVERSATIONS:
            for thinking in THINKING:
                if TEMPLATE_FORMAT[folder_template] in ("qwen3-2507", "qwen3-coder") and thinking is not None:
                    continue  # the format has no thinking option (refused: test_hf_tokenizer)
                options = {} if thinking is None else {"enable_thinking": thinking}
                call = dict(chat_template=template, add_generation_prompt=prompt, **options)
                if not same_format:
                    with pytest.raises(ChatFormatError, match="format's"):
                        ours.apply_chat_template(messages, tokenize=False, **call)
                    continue
                want = hf.apply_chat_template(messages, tokenize=False, **call)
                assert ours.apply_chat_template(messages, tokenize=False, **call) == want, (given, options)
                if thinking is None:  # the ids too (no typed atoms: the same ids)
                    ids = ours.apply_chat_template(messages, tokenize=True, return_dict=False, **call)
                    assert ids == hf.encode(want, add_special_tokens=False) and set(ids) & atoms
    # the attribute, as transformers reads it when the call names no template
    ours.chat_template = hf.chat_template = _text("qwen3_5_think.jinja" if TEMPLATE_FORMAT[folder_template]
                                                   == "qwen3.5" else folder_template)
    try:
        messages, prompt = CONVERSATIONS[0]
        assert ours.apply_chat_template(messages, add_generation_prompt=prompt, tokenize=False) == \
            hf.apply_chat_template(messages, add_generation_prompt=prompt, tokenize=False)
    finally:
        ours.chat_template = hf.chat_template = _text(folder_template)


@pytest.mark.parametrize("folder_template", DEFAULT_RUN)
def test_chat_template_argument_renders_as_transformers(folders, folder_template):
    check_folder(folders, folder_template)


@pytest.mark.slow
@pytest.mark.parametrize("folder_template", sorted(set(TEMPLATE_FORMAT) - set(DEFAULT_RUN)))
def test_chat_template_argument_on_every_folder(folders, folder_template):
    check_folder(folders, folder_template)
