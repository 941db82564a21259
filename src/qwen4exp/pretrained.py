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
  default (`Tokenizer.render_defaults`). Any other template is an error that
  names the nearest format and the `chat_format=` override.
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

from ._files import read_regular_file
from .loading import DATA_DIR, compiled_file
from .errors import ChatFormatError, VocabularyError
from .formats import chat_format as format_named, identify_template
from .vocabulary import VOCABULARIES

__all__ = ["load_model_folder", "vocabulary_digest", "read_chat_template"]

# The compiled arrays that decide ids and decoded text (not the source checksum).
_CONTENT = ("token_bytes", "token_offsets", "merges", "atom_ids", "atom_special", "atom_bytes",
            "atom_offsets", "marks", "ignore_merges")
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


def _read_json(path: str, what: str) -> dict | None:
    if not os.path.exists(path):
        return None
    try:
        value = json.loads(read_regular_file(path))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise VocabularyError(f"{path}: {what} is not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise VocabularyError(f"{path}: {what} must be a JSON object")
    return value


def read_chat_template(folder: str) -> str | None:
    """The folder's chat template: chat_template.jinja, else tokenizer_config.json's
    `chat_template` (a string, or the entry named "default" of a list of named
    templates, as transformers reads it); None when there is none."""
    jinja = os.path.join(folder, "chat_template.jinja")
    if os.path.exists(jinja):
        try:
            return read_regular_file(jinja).decode("utf-8")
        except UnicodeDecodeError:
            raise ChatFormatError(f"{jinja}: the chat template is not UTF-8 text") from None
    config = _read_json(os.path.join(folder, "tokenizer_config.json"), "tokenizer_config.json") or {}
    template = config.get("chat_template")
    if isinstance(template, list):
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default")
    if template is not None and not isinstance(template, str):
        raise ChatFormatError(f"{folder}: tokenizer_config.json's chat_template is not a string")
    return template


def load_model_folder(cls, path, *, chat_format: str | None, cache_size: int, encode_threads: int | None):
    """Tokenizer.from_pretrained (see the module)."""
    folder = os.fspath(path)
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"from_pretrained: {folder!r} is not a model folder (a directory "
                                "holding tokenizer.json); use Tokenizer.from_file for a single file")
    source = os.path.join(folder, "tokenizer.json")
    if not os.path.exists(source):
        raise VocabularyError(f"from_pretrained: {folder!r} has no tokenizer.json (qwen4exp reads the "
                              "fast-tokenizer file that Qwen model repositories ship)")
    tok = _vocabulary(cls, source, cache_size, encode_threads)

    defaults: Mapping[str, Any]
    if chat_format is not None:
        fmt, defaults = format_named(chat_format), {}
    else:
        template = read_chat_template(folder)
        if template is None:
            raise ChatFormatError(
                f"from_pretrained: {folder!r} has no chat template (tokenizer_config.json's chat_template "
                f"or chat_template.jinja); name the format: from_pretrained(path, chat_format=...), one of "
                f"{', '.join(tok.chat_formats())}")
        fmt, defaults = identify_template(template)
    if fmt.vocabulary != tok._family:
        raise ChatFormatError(
            f"from_pretrained: {folder!r}: its chat template is the {fmt.name} format, which is for the "
            f"{fmt.vocabulary} vocabulary, but its tokenizer.json is {tok._describe()}")

    config = _read_json(os.path.join(folder, "config.json"), "config.json") or {}
    _check_embedding(folder, config, tok)
    kept = {}
    for name in _KEPT_FILES:
        value = _read_json(os.path.join(folder, name), name)
        if value is not None:
            kept[name] = value
    tok._bind(fmt, defaults, kept)
    return tok


def _vocabulary(cls, source: str, cache_size: int, encode_threads: int | None):
    """The bundled tokenizer when the file's contents are a bundled vocabulary's,
    else the file's own."""
    raw_sha = hashlib.sha256(read_regular_file(source)).hexdigest()
    for name, vocab in VOCABULARIES.items():  # the very file a vocabulary was built from
        if vocab.kind == "tokenizer.json" and _bundled_fact(name, "source") == raw_sha:
            return cls(name, cache_size=cache_size, encode_threads=encode_threads)
    arrays = compiled_file(source)
    digest = vocabulary_digest(arrays)
    for name in VOCABULARIES:
        if _bundled_fact(name, "content") == digest:
            return cls(name, cache_size=cache_size, encode_threads=encode_threads)
    tok = cls.__new__(cls)
    tok._vocab_name = None
    tok._init_arrays(arrays, cache_size, encode_threads)
    return tok


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
