"""A tiny Hugging Face model folder, to try a runtime without downloading a model.

`write_model_folder(directory, chat_format)` writes what a Qwen model
repository holds for tokenization and serving, with no weights:

* tokenizer.json: the bundled Qwen3 file, or for the 3.5+ formats a
  tokenizer.json of the Qwen3.5/3.6 vocabulary the caller names (the package
  ships that vocabulary as tiktoken ranks, not as a tokenizer.json);
* tokenizer_config.json: the format's official chat template
  (qwen4exp/formats/templates/) and the special tokens, as Qwen's repositories;
* config.json: a ~10M-parameter Qwen3-architecture model that vLLM serves
  with `--load-format dummy` (random weights: gibberish replies, but every
  request goes through the real server, tokenizer and parsers);
* generation_config.json.

`transformers.AutoTokenizer`, `qwen4exp.Tokenizer.from_pretrained` and vLLM
load the folder as they load a real model's (README, "In vLLM";
docs/RUNTIMES.md). The folder is checked with `Tokenizer.from_pretrained`
before it appears: a failing call leaves `directory` as it was.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile

from qwen4exp.errors import ChatFormatError, Qwen4ExpError, VocabularyError
from qwen4exp.formats import chat_format as format_named, default_format
from qwen4exp.markers import Marker
from qwen4exp.vocab.files import read_regular_file
from qwen4exp.vocab.loading import DATA_DIR, TOKENIZER_JSON_LIMIT
from qwen4exp.vocab.vocabulary import VOCABULARIES

_IM_END, _END_OF_TEXT = Marker.IM_END.value, Marker.END_OF_TEXT.value

__all__ = ["write_model_folder", "official_template"]

_TOKEN_FLAGS = ("content", "lstrip", "normalized", "rstrip", "single_word", "special")


def _ships_tokenizer_json(vocabulary: str) -> bool:
    """Whether the package holds the vocabulary's tokenizer.json (Qwen3's); the
    Qwen3.5/3.6 vocabulary ships as tiktoken ranks (vocab/vocabularies.json)."""
    return VOCABULARIES[vocabulary].kind == "tokenizer.json"


class ModelFolderError(Qwen4ExpError):
    """A model folder that cannot be written: the target exists and is not an
    empty directory, or a file could not be written."""


def official_template(chat_format: str) -> str:
    """The official chat template text of `chat_format` (ChatFormatError for an unknown name)."""
    return format_named(chat_format).official_template()


def write_model_folder(directory: str | os.PathLike, chat_format: str | None = None, *,
                       tokenizer_json: str | os.PathLike | None = None,
                       template: str | None = None, template_file: bool = False) -> str:
    """Write a tiny model folder for `chat_format` at `directory` and return its path.

    `directory` must not exist or be an empty directory. `tokenizer_json`: the
    tokenizer.json to copy (default: the bundled Qwen3 file; required for the
    qwen3.5 / 3.6 / 3.8 formats, whose vocabulary ships as tiktoken ranks: take
    the file from any Qwen3.5/3.6 model repository). `template`: the chat
    template text (default: the format's official one). `chat_format` None:
    the default vocabulary's default format. `template_file`: write
    it as chat_template.jinja beside tokenizer_config.json, as newer
    repositories do. ChatFormatError for an unknown format, or a tokenizer.json
    of another vocabulary than the format's; VocabularyError for a file that is
    not a Qwen-family tokenizer.json; ModelFolderError for a target in use.
    """
    fmt = format_named(chat_format) if chat_format is not None else default_format()
    target = os.path.abspath(os.fspath(directory))
    if os.path.lexists(target) and not (os.path.isdir(target) and not os.path.islink(target)
                                        and not os.listdir(target)):
        raise ModelFolderError(f"write_model_folder: {target!r} exists and is not an empty directory")
    if tokenizer_json is None:
        if not _ships_tokenizer_json(fmt.vocabulary):
            raise VocabularyError(
                f"write_model_folder: the {fmt.name!r} format's vocabulary ({fmt.vocabulary}) ships as "
                "tiktoken ranks; pass tokenizer_json= (the tokenizer.json of a Qwen3.5/3.6 model repository)")
        source = os.path.join(DATA_DIR, "tokenizer.json")
    else:
        source = os.fspath(tokenizer_json)
    text = official_template(fmt.name) if template is None else template
    raw, added = _tokenizer_json(source)

    parent = os.path.dirname(target)
    try:
        os.makedirs(parent, exist_ok=True)
        staging = tempfile.mkdtemp(prefix=".qwen4exp-folder-", dir=parent)
    except OSError as exc:
        raise ModelFolderError(f"write_model_folder: cannot write in {parent!r}: {exc.strerror}") from None
    try:
        with open(os.path.join(staging, "tokenizer.json"), "wb") as out:
            out.write(raw)
        _write_files(staging, fmt.vocabulary, added, text, template_file)
        from qwen4exp.encode.tokenizer import Tokenizer

        Tokenizer.from_pretrained(staging, chat_format=fmt.name)  # the vocabulary is the format's
        if os.path.isdir(target):
            os.rmdir(target)  # empty (checked above)
        os.rename(staging, target)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise ModelFolderError(f"write_model_folder: cannot write {target!r}: {exc}") from None
    except Qwen4ExpError as exc:  # named after the target, not the staging folder
        shutil.rmtree(staging, ignore_errors=True)
        raise type(exc)(str(exc).replace(staging, target)) from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


def _tokenizer_json(source: str) -> tuple[bytes, list[dict]]:
    """The file's bytes (read as a regular file, bounded) and its added tokens."""
    try:
        raw = read_regular_file(source, TOKENIZER_JSON_LIMIT)
        added = json.loads(raw)["added_tokens"]
        return raw, [{k: t[k] for k in _TOKEN_FLAGS} | {"id": int(t["id"])} for t in added]
    except FileNotFoundError:
        raise VocabularyError(f"write_model_folder: no tokenizer.json at {source!r}") from None
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
        raise VocabularyError(f"write_model_folder: {source!r} is not a tokenizer.json "
                              f"({type(exc).__name__})") from None


def _write_files(folder: str, vocabulary: str, added: list[dict], template: str, template_file: bool) -> None:
    ids = {t["content"]: t["id"] for t in added}
    if _IM_END not in ids or _END_OF_TEXT not in ids:
        raise ChatFormatError(f"write_model_folder: the tokenizer.json has no {_IM_END} / {_END_OF_TEXT} "
                              "added tokens: not a Qwen chat vocabulary")
    config = {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": {str(t["id"]): {k: t[k] for k in _TOKEN_FLAGS} for t in added},
        "bos_token": None,
        "clean_up_tokenization_spaces": False,
        "eos_token": _IM_END,
        "errors": "replace",
        "model_max_length": 262144,
        "model_input_names": ["input_ids", "attention_mask"],  # as Qwen2Tokenizer's (no token_type_ids)
        "pad_token": _END_OF_TEXT,
        "split_special_tokens": False,
        # Qwen3's repositories name Qwen2Tokenizer; for the Qwen3.5/3.6 vocabulary the
        # generic class, which keeps tokenizer.json's own split pattern in transformers 5
        # (docs/RUNTIMES.md, "transformers")
        "tokenizer_class": "Qwen2Tokenizer" if _ships_tokenizer_json(vocabulary) else "PreTrainedTokenizerFast",
        "unk_token": None,
    }
    if template_file:
        with open(os.path.join(folder, "chat_template.jinja"), "w", encoding="utf-8") as f:
            f.write(template)
    else:
        config["chat_template"] = template
    _write_json(folder, "tokenizer_config.json", config)
    eos, eot = ids[_IM_END], ids[_END_OF_TEXT]
    # Small enough for a CPU (2 layers, hidden size 64): vLLM's --load-format dummy fills it.
    _write_json(folder, "config.json", {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
        "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": eot,
        "eos_token_id": eos, "head_dim": 32, "hidden_act": "silu",
        "hidden_size": 64, "initializer_range": 0.02, "intermediate_size": 128,
        "max_position_embeddings": 4096, "max_window_layers": 2,
        "num_attention_heads": 2, "num_hidden_layers": 2, "num_key_value_heads": 1,
        "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000,
        "sliding_window": None, "tie_word_embeddings": True,
        "torch_dtype": "bfloat16", "use_cache": True, "use_sliding_window": False,
        "vocab_size": max(VOCABULARIES[vocabulary].embedding_rows, max(ids.values()) + 1),
    })
    _write_json(folder, "generation_config.json",
                {"bos_token_id": eot, "eos_token_id": [eos, eot], "do_sample": False})


def _write_json(folder: str, name: str, value: dict) -> None:
    with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
        json.dump(value, f, ensure_ascii=False, indent=2)
