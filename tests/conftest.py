"""Shared fixtures: our tokenizer and the Hugging Face references."""

import json
import os

import pytest

# The allocation-fault switch (qwen4exp._alloc) only arms in a process that had
# this set when qwen4exp was first imported: conftest loads before any test.
os.environ["QWEN4EXP_FAULT_INJECTION"] = "1"
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
