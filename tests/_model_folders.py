"""Tiny Hugging Face model folders for the runtime tests (tests/, tests_vllm/, bench/).

`model_folder(directory, chat_format)` writes what a Qwen model repository
holds for tokenization and serving, with no weights: tokenizer.json (the
shipped Qwen3 file, or the Qwen3.5/3.6 reference derived from its tiktoken
ranks by tests/_qwen36_reference.py), tokenizer_config.json with the format's
official chat template (tests/data/chat_templates/), config.json of a ~10M
parameter Qwen3-architecture model (vLLM serves it with dummy weights) and
generation_config.json. Nothing here imports qwen4exp: the folders are
reference inputs, built from the reference files only. The library's
`qwen4exp.vocab.model_folder.write_model_folder` (the `qwen4exp folder` command)
writes the same folders for users; tests/test_model_folder.py checks that
they agree file by file, this module being the reference.
"""

from __future__ import annotations

import json
import os
import shutil
from functools import lru_cache

from _hf_reference import REPO, TOKENIZER_JSON

TEMPLATES = os.path.join(REPO, "tests", "data", "chat_templates")
#: Each format's official template, and the vocabulary its models use.
FORMAT_TEMPLATE = {
    "qwen3": "qwen3.jinja",
    "qwen3-2507": "qwen3_instruct_2507.jinja",
    "qwen3.5": "qwen3_5_think.jinja",
    "qwen3.6": "qwen3_6.jinja",
    "qwen3.8": "qwen3_8.jinja",
    "qwen3-coder": "qwen3_coder.jinja",
}
QWEN36_FORMATS = ("qwen3.5", "qwen3.6", "qwen3.8")
#: The model's embedding size per vocabulary (padded past the last id, as Qwen's are).
MODEL_VOCAB_SIZE = {"qwen3": 151936, "qwen3.6": 248320}


def vocabulary_of(chat_format: str) -> str:
    return "qwen3.6" if chat_format in QWEN36_FORMATS else "qwen3"


def qwen36_tokenizer_json(cache_dir: str | None = None) -> str:
    """The Qwen3.5/3.6 reference tokenizer.json (built once, ~15 s, then cached)."""
    from _qwen36_reference import reference_json

    cache_dir = cache_dir or os.environ.get("QWEN4EXP_TEST_CACHE") or os.path.join(
        REPO, ".pytest_cache", "qwen36-reference")
    return reference_json(cache_dir)


def model_folder(directory: str, chat_format: str, *, template: str | None = None,
                 template_file: bool = False, cache_dir: str | None = None) -> str:
    """Write a tiny model folder for `chat_format` into `directory` (created) and return it.

    `template`: a template file name under tests/data/chat_templates/ (default:
    the format's official one) or, when it contains a newline, the template
    text itself. `template_file`: write it as chat_template.jinja beside
    tokenizer_config.json (as newer model repositories do) instead of inside it.
    """
    os.makedirs(directory, exist_ok=True)
    vocab = vocabulary_of(chat_format)
    source = TOKENIZER_JSON if vocab == "qwen3" else qwen36_tokenizer_json(cache_dir)
    target = os.path.join(directory, "tokenizer.json")
    if not os.path.exists(target) or not os.path.samefile(source, target):
        shutil.copyfile(source, target)  # a copy: callers may edit or overwrite it
    added = _added_tokens(source)
    ids = {t["content"]: t["id"] for t in added}

    name = template or FORMAT_TEMPLATE[chat_format]
    if "\n" in name:
        text = name
    else:
        with open(os.path.join(TEMPLATES, name), encoding="utf-8") as f:
            text = f.read()

    config = {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": {
            str(t["id"]): {k: t[k] for k in ("content", "lstrip", "normalized", "rstrip", "single_word", "special")}
            for t in added
        },
        "bos_token": None,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": 262144,
        "model_input_names": ["input_ids", "attention_mask"],  # as Qwen2Tokenizer's (no token_type_ids)
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        # Qwen3's repositories name Qwen2Tokenizer; for the Qwen3.5/3.6 vocabulary the
        # generic class, which transformers 5 loads with tokenizer.json's own pattern
        # (its Qwen2Tokenizer substitutes Qwen2's split pattern)
        "tokenizer_class": "Qwen2Tokenizer" if vocab == "qwen3" else "PreTrainedTokenizerFast",
        "unk_token": None,
    }
    if template_file:
        with open(os.path.join(directory, "chat_template.jinja"), "w", encoding="utf-8") as f:
            f.write(text)
    else:
        config["chat_template"] = text
    _write_json(directory, "tokenizer_config.json", config)

    eos, eot = ids["<|im_end|>"], ids["<|endoftext|>"]
    _write_json(directory, "config.json", {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
        "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": eot,
        "eos_token_id": eos, "head_dim": 32, "hidden_act": "silu",
        "hidden_size": 64, "initializer_range": 0.02, "intermediate_size": 128,
        "max_position_embeddings": 4096, "max_window_layers": 2,
        "num_attention_heads": 2, "num_hidden_layers": 2, "num_key_value_heads": 1,
        "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000,
        "sliding_window": None, "tie_word_embeddings": True,
        "torch_dtype": "bfloat16", "use_cache": True, "use_sliding_window": False,
        "vocab_size": MODEL_VOCAB_SIZE[vocab],
    })
    _write_json(directory, "generation_config.json",
                {"bos_token_id": eot, "eos_token_id": [eos, eot], "do_sample": False})
    return directory


@lru_cache(maxsize=None)
def _added_tokens(source: str) -> list:
    with open(source, encoding="utf-8") as f:
        return json.load(f)["added_tokens"]


def _write_json(directory: str, name: str, value: dict) -> None:
    with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
        json.dump(value, f, ensure_ascii=False, indent=2)


#: Every reference template file -> the format whose models ship it (its
#: vocabulary picks the folder's tokenizer.json).
TEMPLATE_FORMAT = {
    "qwen3.jinja": "qwen3", "qwen3_training.jinja": "qwen3",
    "qwen3_instruct_2507.jinja": "qwen3-2507", "qwen3_instruct_2507_training.jinja": "qwen3-2507",
    "qwen3_5_think.jinja": "qwen3.5", "qwen3_5_think_training.jinja": "qwen3.5",
    "qwen3_5_nothink.jinja": "qwen3.5", "qwen3_5_nothink_training.jinja": "qwen3.5",
    "qwen3_6.jinja": "qwen3.6", "qwen3_6_training.jinja": "qwen3.6",
    "qwen3_8.jinja": "qwen3.8", "qwen3_8_training.jinja": "qwen3.8",
    "qwen3_coder.jinja": "qwen3-coder",
}


def template_folder(directory: str, template: str, *, template_file: bool = False,
                    tokenizer_from: str | None = None, cache_dir: str | None = None) -> str:
    """model_folder with the reference template file `template` (its format:
    TEMPLATE_FORMAT), its tokenizer.json hard-linked from the folder
    `tokenizer_from` when given (no 10 MB copy per folder)."""
    os.makedirs(directory, exist_ok=True)
    if tokenizer_from is not None and not os.path.exists(os.path.join(directory, "tokenizer.json")):
        os.link(os.path.join(tokenizer_from, "tokenizer.json"), os.path.join(directory, "tokenizer.json"))
    return model_folder(directory, TEMPLATE_FORMAT[template], template=template, template_file=template_file,
                        cache_dir=cache_dir)


#: Model folders of other families, whose templates qwen4exp renders as the
#: folder's own (chat_format "template"): {name: (tokenizer.json, template file
#: under tests/data/templates/)}. "qwen2.5" is the Qwen3 vocabulary with
#: Qwen2.5's template (not a native format); "llama3" is Meta Llama 3's
#: vocabulary (tests/data/vocabs/llama-bpe) with Llama 3.1's names for three of
#: its reserved tokens (Llama 3.1's tokenizer.json) and Llama 3.1's official template.
OTHER_FAMILIES = {
    "qwen2.5": (TOKENIZER_JSON, "Qwen-Qwen2.5-7B-Instruct.jinja"),
    "llama3": (os.path.join(REPO, "tests", "data", "vocabs", "llama-bpe", "tokenizer.json.gz"),
               "meta-llama-Llama-3.1-8B-Instruct.jinja"),
}
#: The special tokens each family's tokenizer_config.json names (as the model repositories do).
_FAMILY_TOKENS = {
    "qwen2.5": {"bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
    "llama3": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>", "pad_token": None},
}


def family_folder(directory: str, family: str) -> str:
    """A tiny model folder of another family (OTHER_FAMILIES): its
    tokenizer.json, tokenizer_config.json with the template, and a
    ~10M-parameter config.json (Qwen3 or Llama architecture, for vLLM's
    dummy weights) whose embedding has at least the tokenizer's ids."""
    import gzip

    os.makedirs(directory, exist_ok=True)
    source, template = OTHER_FAMILIES[family]
    opener = gzip.open if source.endswith(".gz") else open
    with opener(source, "rb") as f:
        raw = f.read()
    spec = json.loads(raw)
    if family == "llama3":
        raw = _llama31_names(spec)
    with open(os.path.join(directory, "tokenizer.json"), "wb") as f:
        f.write(raw)
    added = spec["added_tokens"]
    size = max([len(spec["model"]["vocab"])] + [t["id"] + 1 for t in added])
    ids = {t["content"]: t["id"] for t in added}
    with open(os.path.join(REPO, "tests", "data", "templates", template), encoding="utf-8") as f:
        text = f.read()
    tokens = _FAMILY_TOKENS[family]
    _write_json(directory, "tokenizer_config.json", {
        "added_tokens_decoder": {
            str(t["id"]): {k: t[k] for k in ("content", "lstrip", "normalized", "rstrip", "single_word", "special")}
            for t in added},
        **tokens, "clean_up_tokenization_spaces": False, "model_max_length": 131072,
        "model_input_names": ["input_ids", "attention_mask"],
        "tokenizer_class": "PreTrainedTokenizerFast", "chat_template": text,
    })
    eos = ids[tokens["eos_token"]]
    bos = ids[tokens["bos_token"]] if tokens["bos_token"] else ids[tokens["pad_token"]]
    rows = -(-size // 64) * 64  # padded past the last id, as checkpoints are
    arch = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "rope_theta": 500000.0,
            "mlp_bias": False, "pretraining_tp": 1} if family == "llama3" else \
        {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "rope_theta": 1000000,
         "max_window_layers": 2, "sliding_window": None, "use_sliding_window": False}
    _write_json(directory, "config.json", {
        **arch, "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": bos, "eos_token_id": eos,
        "head_dim": 32, "hidden_act": "silu", "hidden_size": 64, "initializer_range": 0.02,
        "intermediate_size": 128, "max_position_embeddings": 4096, "num_attention_heads": 2,
        "num_hidden_layers": 2, "num_key_value_heads": 1, "rms_norm_eps": 1e-05, "rope_scaling": None,
        "tie_word_embeddings": True, "torch_dtype": "bfloat16", "use_cache": True, "vocab_size": rows,
    })
    _write_json(directory, "generation_config.json", {"bos_token_id": bos, "eos_token_id": [eos], "do_sample": False})
    return directory


#: The reserved tokens of Llama 3 that Llama 3.1 named (its tokenizer.json is
#: Llama 3's with these names, the other reserved tokens numbered on).
_LLAMA31_NAMES = {128004: "<|finetune_right_pad_id|>", 128008: "<|eom_id|>", 128010: "<|python_tag|>"}


def _llama31_names(spec: dict) -> bytes:
    """Llama 3.1's tokenizer.json from Llama 3's (`spec`, renamed in place): its
    template writes <|python_tag|> and <|eom_id|>, and vLLM's llama3_json
    parser looks <|python_tag|> up."""
    reserved = 0
    for token in spec["added_tokens"]:
        if token["id"] in _LLAMA31_NAMES:
            token["content"] = _LLAMA31_NAMES[token["id"]]
        elif token["content"].startswith("<|reserved_special_token_"):
            token["content"] = f"<|reserved_special_token_{reserved}|>"
            reserved += 1
    return json.dumps(spec, ensure_ascii=False).encode("utf-8")
