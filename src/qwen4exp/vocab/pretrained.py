"""A Hugging Face model folder -> a Tokenizer bound to the folder's chat format.

A model folder (what `huggingface_hub.snapshot_download` leaves, or what
`save_pretrained` writes) holds tokenizer.json, tokenizer_config.json (its
`chat_template`, or a chat_template.jinja beside it) and config.json.

* The vocabulary: the bundled one when the folder's tokenizer.json has the
  same contents (token spellings, merges, added tokens and their ids, split
  pattern), compared as compiled arrays, never by file name; otherwise the
  folder's own file (Tokenizer.from_file, cached by checksum).
* The chat format: the one whose official template (or a known revision) the
  folder's template is, by fingerprint (formats.identify_template); the
  Qwen3.5 small models' template is the qwen3.5 format with thinking off by
  default (`Tokenizer.render_defaults`). Any other template is rendered as it
  is, with provenance (chat_format "template", qwen4exp.render.template), with
  the folder's special tokens (tokenizer_config.json, special_tokens_map.json)
  as its variables; `chat_format=` names a native format instead.
* The format must belong to the vocabulary, and the model's embedding
  (config.json `vocab_size`) must hold every id the tokenizer can produce.

Other files a runtime needs (preprocessor_config.json for image sizes) are
kept on the tokenizer as read (`Tokenizer._model_config`).
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from collections.abc import Mapping
from typing import Any

import numpy as np

from qwen4exp.vocab.files import read_regular_file
from qwen4exp.vocab.loading import DATA_DIR, TOKENIZER_JSON_LIMIT, compiled_file
from qwen4exp.errors import ChatFormatError, VocabularyError
from qwen4exp.formats import chat_format as format_named, default_format, identify_template
from qwen4exp.vocab.vocabulary import VOCABULARIES

__all__ = ["load_model_folder", "vocabulary_digest", "read_chat_template", "read_folder_json", "read_folder_file",
           "read_special_tokens", "CONFIG_LIMIT"]

# The compiled arrays that decide ids and decoded text (not the source checksum).
_CONTENT = ("token_bytes", "token_offsets", "merges", "atom_ids", "atom_special", "atom_strip", "atom_bytes",
            "atom_offsets", "marks", "ignore_merges")
#: The largest config file (config.json, tokenizer_config.json, a chat template)
#: a model folder may have: Qwen's are a few KB to a few hundred KB.
CONFIG_LIMIT = 64 << 20
# Other JSON files of a model folder that the tokenizer keeps for its runtimes.
_KEPT_FILES = ("preprocessor_config.json",)


def vocabulary_digest(arrays) -> str:
    """SHA-256 over what a compiled vocabulary encodes and decodes with."""
    h = hashlib.sha256()
    for name in _CONTENT + tuple(k for k in ("pipeline", "native_pattern") if k in arrays):  # not Qwen's
        a = np.ascontiguousarray(arrays[name])
        h.update(name.encode() + str(a.dtype).encode() + str(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()


@lru_cache(maxsize=None)
def _bundled_fact(name: str, fact: str) -> str:
    """A bundled vocabulary's checksum of its source file ("source") or of its
    compiled contents ("content", vocabulary_digest), read once."""
    with np.load(os.path.join(DATA_DIR, VOCABULARIES[name].compiled)) as z:
        return z["source_sha256"].tobytes().hex() if fact == "source" else vocabulary_digest(z)


def read_folder_file(path: str, what: str, limit: int = CONFIG_LIMIT) -> bytes | None:
    """The bytes of a model folder's file, None when there is none. Anything
    else that is not a readable regular file of at most `limit` bytes (a
    directory, a FIFO, a loop of links, a file that cannot be read, a huge
    one) is a Qwen4ExpError naming it."""
    if not os.path.lexists(path):
        return None
    try:
        return read_regular_file(path, limit)
    except OSError as exc:
        raise VocabularyError(f"{path}: cannot read {what} ({exc.strerror or exc})") from None


def read_folder_json(path: str, what: str) -> dict | None:
    """A model folder's JSON file (config.json, tokenizer_config.json, ...) as
    a dict, None when there is none; VocabularyError for one that is not a
    UTF-8 JSON object of Unicode text (nesting too deep, a lone surrogate,
    a number past Python's digit limit)."""
    raw = read_folder_file(path, what)
    if raw is None:
        return None
    try:
        value = json.loads(raw.decode("utf-8"))
    except RecursionError:
        raise VocabularyError(f"{path}: {what} is nested too deeply") from None
    except ValueError as exc:  # not UTF-8, not JSON, an integer past the digit limit
        raise VocabularyError(f"{path}: {what} is not valid JSON "
                              f"({str(exc).split('; use sys.set_int_max_str_digits')[0]})") from None
    if not isinstance(value, dict):
        raise VocabularyError(f"{path}: {what} must be a JSON object, not {type(value).__name__}")
    if not _unicode_text(value):
        raise VocabularyError(f"{path}: {what} holds a lone surrogate (\\ud800-\\udfff), which is not text")
    return value


def _unicode_text(value: Any) -> bool:
    """Whether every string in a decoded JSON value (keys too) is Unicode text:
    no lone surrogate (an escape JSON allows). Iterative: the value may be as
    deep as json.loads allows."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            if not v.isascii():
                try:
                    v.encode("utf-8")
                except UnicodeEncodeError:
                    return False
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return True


def read_chat_template(folder: str) -> str | None:
    """The folder's chat template: chat_template.jinja, else tokenizer_config.json's
    `chat_template` (a string, or the entry named "default" of a list of named
    templates, as transformers reads it); None when there is none."""
    jinja = os.path.join(folder, "chat_template.jinja")
    raw = read_folder_file(jinja, "the chat template")
    if raw is not None:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ChatFormatError(f"{jinja}: the chat template is not UTF-8 text") from None
    config = read_folder_json(os.path.join(folder, "tokenizer_config.json"), "tokenizer_config.json") or {}
    template = config.get("chat_template")
    if isinstance(template, list):
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default")
    if template is not None and not isinstance(template, str):
        raise ChatFormatError(f"{folder}: tokenizer_config.json's chat_template is not a string")
    return template


# The special-token attributes transformers passes a template as variables
# (PreTrainedTokenizerBase.SPECIAL_TOKENS_ATTRIBUTES), additional_special_tokens last.
_SPECIAL_NAMES = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


def _token_text(value: Any, where: str) -> str | None:
    """A special token's spelling: a str, or an AddedToken's {"content": ...}."""
    if isinstance(value, dict):
        value = value.get("content")
    if value is None or isinstance(value, str):
        return value
    raise ChatFormatError(f"{where}: a special token must be a string or an AddedToken object")


def read_special_tokens(folder: str) -> dict[str, Any]:
    """The folder's special tokens as transformers' `special_tokens_map` gives
    them to a chat template: bos_token ... mask_token, additional_special_tokens
    and the extra_special_tokens names, from tokenizer_config.json, with
    special_tokens_map.json's values over them; empty ones left out."""
    config = read_folder_json(os.path.join(folder, "tokenizer_config.json"), "tokenizer_config.json") or {}
    overrides = read_folder_json(os.path.join(folder, "special_tokens_map.json"), "special_tokens_map.json") or {}
    merged = {**config, **{k: v for k, v in overrides.items() if v}}
    out: dict[str, Any] = {}
    for name in _SPECIAL_NAMES:
        text = _token_text(merged.get(name), f"{folder}: {name}")
        if text:
            out[name] = text
    extra = merged.get("additional_special_tokens")
    if isinstance(extra, list):
        texts = [_token_text(v, f"{folder}: additional_special_tokens") for v in extra]
        if any(texts):
            out["additional_special_tokens"] = [t for t in texts if t is not None]
    named = config.get("extra_special_tokens")
    if isinstance(named, dict):
        for name, value in named.items():
            text = _token_text(value, f"{folder}: extra_special_tokens")
            if isinstance(name, str) and text:
                out[name] = text
    return out


def load_model_folder(cls, path, *, chat_format: str | None, cache_size: int, encode_threads: int | None):
    """Tokenizer.from_pretrained (see the module)."""
    folder = os.fspath(path)
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"from_pretrained: {folder!r} is not a model folder (a directory "
                                "holding tokenizer.json); use Tokenizer.from_file for a single file")
    source = os.path.join(folder, "tokenizer.json")
    raw = read_folder_file(source, "tokenizer.json", TOKENIZER_JSON_LIMIT)
    if raw is None:
        raise VocabularyError(f"from_pretrained: {folder!r} has no tokenizer.json (qwen4exp reads the "
                              "fast-tokenizer file that Qwen model repositories ship)")
    try:
        tok = _vocabulary(cls, source, raw, cache_size, encode_threads)
    except OSError as exc:  # replaced since it was read
        raise VocabularyError(f"{source}: cannot read tokenizer.json ({exc.strerror or exc})") from None

    defaults: Mapping[str, Any]
    own_template = None
    if chat_format is not None:
        fmt, defaults = format_named(chat_format), {}
    else:
        template = read_chat_template(folder)
        if template is None:
            raise ChatFormatError(
                f"from_pretrained: {folder!r} has no chat template (tokenizer_config.json's chat_template "
                f"or chat_template.jinja); name the format: from_pretrained(path, chat_format=...), one of "
                f"{', '.join(tok.chat_formats())}")
        try:
            fmt, defaults = identify_template(template)
        except ChatFormatError:  # not a native format: the folder's own template, with provenance
            fmt, defaults = default_format(tok.core.family), {}
            own_template = (template, read_special_tokens(folder))
    if own_template is None and fmt.vocabulary != tok.core.family:
        raise ChatFormatError(
            f"from_pretrained: {folder!r}: its chat template is the {fmt.name} format, which is for the "
            f"{fmt.vocabulary} vocabulary, but its tokenizer.json is {tok.core.describe()}")

    config = read_folder_json(os.path.join(folder, "config.json"), "config.json") or {}
    _check_embedding(folder, config, tok)
    kept = {}
    for name in _KEPT_FILES:
        value = read_folder_json(os.path.join(folder, name), name)
        if value is not None:
            kept[name] = value
    tok.core.bind(fmt, defaults, kept, own_template)
    return tok


def _vocabulary(cls, source: str, raw: bytes, cache_size: int, encode_threads: int | None):
    """The bundled tokenizer when the file's contents (`raw`) are a bundled
    vocabulary's, else the file's own."""
    raw_sha = hashlib.sha256(raw).hexdigest()
    for name, vocab in VOCABULARIES.items():  # the very file a vocabulary was built from
        if vocab.kind == "tokenizer.json" and _bundled_fact(name, "source") == raw_sha:
            return cls(name, cache_size=cache_size, encode_threads=encode_threads)
    arrays = compiled_file(source)
    digest = vocabulary_digest(arrays)
    for name in VOCABULARIES:
        if _bundled_fact(name, "content") == digest:
            return cls(name, cache_size=cache_size, encode_threads=encode_threads)
    from qwen4exp.encode.core import TokenizerCore

    return TokenizerCore(arrays, cache_size, encode_threads, None).tokenizer(cls)


def _check_embedding(folder: str, config: dict[str, Any], tok) -> None:
    """A model whose embedding is smaller than the vocabulary would index past it."""
    size = config.get("vocab_size", config.get("text_config", {}).get("vocab_size")
                      if isinstance(config.get("text_config"), dict) else None)
    if size is None:
        return
    highest = tok.vocab_size
    if isinstance(size, bool) or not isinstance(size, int) or size < highest:
        raise VocabularyError(
            f"from_pretrained: {folder!r}: config.json's vocab_size {size!r} is smaller than the "
            f"tokenizer's {highest} ids: this tokenizer.json does not belong to that model")
