"""Fixtures that run a test module on both bundled vocabularies: `vocab` is
"qwen3" then "qwen3.6", and `tok` / `hf_plain` become that vocabulary's
tokenizer and its reference (conftest's session fixtures). A module imports
these three names to opt in."""

import pytest


@pytest.fixture(scope="module", params=["qwen3", "qwen3.6"])
def vocab(request):
    return request.param


@pytest.fixture(scope="module")
def tok(tok, vocab, request):
    return request.getfixturevalue("tok36") if vocab == "qwen3.6" else tok


@pytest.fixture(scope="module")
def hf_plain(hf_plain, vocab, request):
    return request.getfixturevalue("hf_plain36") if vocab == "qwen3.6" else hf_plain
