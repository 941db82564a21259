"""Shared fixtures: our tokenizer and the Hugging Face references."""

import json
import os

import pytest

os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB_DIR = os.path.join(REPO, "vocab")
TOKENIZER_JSON = os.path.join(VOCAB_DIR, "tokenizer.json")


@pytest.fixture(scope="session")
def tok():
    import qwen4exp

    return qwen4exp.Tokenizer()


@pytest.fixture(scope="session")
def hf_plain():
    """The reference for DATA: the same tokenizer.json with `added_tokens` emptied
    (pure NFC + pre-tokenizer + BPE; SPEC.md invariant 3)."""
    from tokenizers import Tokenizer

    with open(TOKENIZER_JSON, encoding="utf-8") as f:
        raw = json.load(f)
    raw["added_tokens"] = []
    return Tokenizer.from_str(json.dumps(raw))


@pytest.fixture(scope="session")
def hf_full():
    """The reference tokenizer.json as shipped (added tokens included)."""
    from tokenizers import Tokenizer

    return Tokenizer.from_file(TOKENIZER_JSON)


@pytest.fixture(scope="session")
def hf_nfc():
    from tokenizers import normalizers

    return normalizers.NFC().normalize_str


# -- Qwen3.5/3.6: the reference tokenizer.json is derived, not shipped -------------


@pytest.fixture(scope="session")
def qwen36_json(request):
    """The reference tokenizer.json of "qwen3.6", kept in pytest's cache."""
    from _qwen36_reference import reference_json

    return reference_json(str(request.config.cache.mkdir("qwen36-reference")))


@pytest.fixture(scope="session")
def tok36():
    import qwen4exp

    return qwen4exp.Tokenizer("qwen3.6")


@pytest.fixture(scope="session")
def hf_plain36(qwen36_json):
    from tokenizers import Tokenizer

    with open(qwen36_json, encoding="utf-8") as f:
        raw = json.load(f)
    raw["added_tokens"] = []
    return Tokenizer.from_str(json.dumps(raw))


@pytest.fixture(scope="session")
def hf_full36(qwen36_json):
    from tokenizers import Tokenizer

    return Tokenizer.from_file(qwen36_json)
