"""transformers: `Qwen4ExpTokenizer`, a qwen4exp Tokenizer where transformers
code expects a tokenizer (docs/RUNTIMES.md, "transformers").

It subclasses transformers' `PreTrainedTokenizerBase`, as transformers' own
wrapper of mistral-common does, so `__call__`, `encode`, `decode`,
`batch_decode`, `pad`, the special-token attributes and their ids keep the
base class's argument handling (padding and truncation strategies, tensor
conversion), in transformers 4.57 and 5.x alike. What it fills in comes from
qwen4exp:

* text given to `__call__`, `encode` and `tokenize` is DATA: a typed atom
  spelling such as the IM_END marker's is ordinary BPE text, never an atom id.
  transformers' own `PreTrainedTokenizerFast` maps it to the atom's id;
  `split_special_tokens=False` (per call, or as the attribute) asks for that
  behaviour here too, for text the caller trusts;
* `apply_chat_template` renders with provenance in the model folder's chat
  format (`Tokenizer.render_chat` + `encode_chat`), never through Jinja, and
  gives assistant masks for Qwen's templates, which have no
  {% generation %} blocks: `assistant_mask_style="qwen4exp"` (the assistant's
  output through its IM_END marker) or "trl" (also the newline after it, what
  transformers computes from TRL's training templates).

A model folder's tokenizer.json is the vocabulary and cannot grow:
`add_tokens` of a spelling it lacks is an error.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

try:
    from transformers.tokenization_utils_base import (
        AddedToken,
        BatchEncoding,
        PaddingStrategy,
        PreTrainedTokenizerBase,
        TruncationStrategy,
    )
    from transformers.utils import get_json_schema, to_py_obj
except ImportError as exc:  # transformers is an optional dependency
    raise ImportError(
        "qwen4exp.hf needs transformers 4.57 or newer (before 6): "
        "pip install 'transformers>=4.57,<6', or in a clone of qwen4exp: pip install '.[hf]'"
    ) from exc

from qwen4exp.render.chat import render_chat
from qwen4exp.errors import ChatFormatError, Qwen4ExpError, TextEncodingError, VocabularyError, surrogate_error
from qwen4exp.formats import chat_format as format_named
from qwen4exp.formats import identify_template
from qwen4exp.vocab.pretrained import read_chat_template, read_folder_json
from qwen4exp.render.segments import RenderedChat, SegmentBuilder
from qwen4exp.encode.tokenizer import Tokenizer

__all__ = ["Qwen4ExpTokenizer", "ASSISTANT_MASK_STYLES"]

# Tokenizer.chat_format of a folder rendered through its own template (render/template.py).
_OWN_TEMPLATE = "template"
#: How `apply_chat_template` marks an assistant turn's tokens (see the module).
ASSISTANT_MASK_STYLES = ("qwen4exp", "trl")
# transformers 4.x returns ids from apply_chat_template unless asked, 5.x a dict.
_RETURN_DICT_DEFAULT = inspect.signature(PreTrainedTokenizerBase.apply_chat_template).parameters[
    "return_dict"].default
_NAMED_SPECIAL = ("bos_token", "eos_token", "unk_token", "pad_token")
# Constructor keywords (besides the special tokens) and where they come from in tokenizer_config.json.
_INIT_KEYS = ("model_max_length", "padding_side", "truncation_side", "clean_up_tokenization_spaces",
              "model_input_names", "additional_special_tokens", "split_special_tokens")
# A template with {% generation %} blocks (TRL's training variants) asks for masks that follow them.
_GENERATION_BLOCK = re.compile(r"\{%-?\s*generation\s*-?%\}")
# from_pretrained keywords that only matter for a download; a local folder needs none of them.
_HUB_KEYS = ("cache_dir", "force_download", "local_files_only", "token", "revision", "trust_remote_code",
             "use_fast", "proxies", "resume_download", "_from_auto", "_commit_hash")
_CONFIG = "tokenizer_config.json"
_TEMPLATE_FILE = "chat_template.jinja"
# Where save_pretrained records a format named explicitly (a template qwen4exp does not
# recognise) and a mask style other than the default; transformers ignores both keys.
_FORMAT_KEY = "qwen4exp_chat_format"
_MASK_KEY = "qwen4exp_assistant_mask_style"


class Qwen4ExpTokenizer(PreTrainedTokenizerBase):
    """A qwen4exp `Tokenizer`, bound to a model folder's chat format, behind
    transformers' tokenizer interface (see the module docstring).

    `Qwen4ExpTokenizer.from_pretrained(folder)` (or the constructor) reads a
    local Hugging Face model folder as `qwen4exp.Tokenizer.from_pretrained`
    does (vocabulary and chat format; `chat_format=` names the format for a
    template qwen4exp does not recognise) and tokenizer_config.json's
    settings: special tokens, model_max_length, padding and truncation sides.
    Encoding calls accept `add_special_tokens=` and add nothing either way:
    Qwen adds no BOS or EOS.
    `assistant_mask_style` ("qwen4exp", the default, or "trl") is the style
    `apply_chat_template` gives assistant masks in unless a call names one.
    """

    model_input_names: list[str] = ["input_ids", "attention_mask"]
    vocab_files_names: dict[str, str] = {"tokenizer_file": "tokenizer.json"}
    padding_side: str = "right"
    truncation_side: str = "right"

    def __init__(self, model_folder: str | os.PathLike, *, chat_format: str | None = None,
                 assistant_mask_style: str | None = None, **kwargs: Any) -> None:
        folder = os.fspath(model_folder)
        unknown = sorted(set(kwargs) - set(_INIT_KEYS) - set(_NAMED_SPECIAL) - {"name_or_path"})
        if unknown:
            raise TypeError(f"Qwen4ExpTokenizer(): unexpected keyword(s) {', '.join(unknown)}")
        config = _read_config(folder)
        if chat_format is None and isinstance(config.get(_FORMAT_KEY), str):
            chat_format = config[_FORMAT_KEY]
        if assistant_mask_style is None:
            assistant_mask_style = config.get(_MASK_KEY, "qwen4exp")
        _check_mask_style(assistant_mask_style)
        tok = Tokenizer.from_pretrained(folder, chat_format=chat_format)
        self._tok = tok
        self._folder = folder
        self.assistant_mask_style = assistant_mask_style
        self._explicit_format = chat_format is not None
        self._atom_split = re.compile(
            "(" + "|".join(re.escape(a) for a in sorted(tok.atoms, key=len, reverse=True)) + ")")

        init: dict[str, Any] = {key: config[key] for key in (*_INIT_KEYS, *_NAMED_SPECIAL) if key in config}
        # transformers' default for a Qwen folder lets typed atom spellings become atom ids; ours is DATA
        init["split_special_tokens"] = True
        for key in _NAMED_SPECIAL:
            if key in init:
                init[key] = _token_text(init[key], key, folder)
        if "additional_special_tokens" in init:
            extra = init["additional_special_tokens"]
            if not isinstance(extra, list):
                raise VocabularyError(f"{folder}: {_CONFIG}'s additional_special_tokens is not a list")
            init["additional_special_tokens"] = [_token_text(t, "additional_special_tokens", folder) for t in extra]
        init.update(kwargs)
        for key in (*_NAMED_SPECIAL, "additional_special_tokens"):
            for token in _as_list(init.get(key)):
                if not isinstance(token, (str, AddedToken)) or self._token_id(token) is None:
                    raise VocabularyError(
                        f"{folder}: {key} {token!r} is not a token of the folder's vocabulary "
                        "(Qwen4ExpTokenizer cannot add tokens)")
        init["chat_template"] = self._folder_template = read_chat_template(folder)
        init.setdefault("name_or_path", folder)
        super().__init__(**init)

    # -- what qwen4exp adds -----------------------------------------------------

    @property
    def qwen4exp_tokenizer(self) -> Tokenizer:
        """The qwen4exp Tokenizer underneath (render_chat, encode_chat, completion_parser, ...)."""
        return self._tok

    @property
    def chat_format(self) -> str:
        """The chat format `apply_chat_template` renders (the model folder's)."""
        return self._tok.chat_format

    @property
    def is_fast(self) -> bool:
        """False: there is no `tokenizers` backend (no offsets, no `Encoding` objects)."""
        return False

    # -- the vocabulary ---------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        """The BPE tokens, without the added tokens (as transformers counts them)."""
        return len(self._vocab()) - len(self._tok.atoms)

    def __len__(self) -> int:
        """Every token, added ones included."""
        return len(self._vocab())

    def get_vocab(self) -> dict[str, int]:
        """Spelling -> id for every token, BPE tokens spelled byte-level ("Ġworld")."""
        return dict(self._vocab())

    def get_added_vocab(self) -> dict[str, int]:
        """The added tokens (the atoms): spelling -> id."""
        return dict(sorted(self._tok.atoms.items(), key=lambda item: item[1]))

    @property
    def added_tokens_encoder(self) -> dict[str, int]:
        return self.get_added_vocab()

    @property
    def added_tokens_decoder(self) -> dict[int, AddedToken]:
        # a special atom is one that decode(skip_special=True) leaves out
        return {i: AddedToken(s, special=not self._tok.decode_bytes([i], skip_special=True), normalized=False, lstrip=False, rstrip=False,
                              single_word=False)
                for s, i in self.get_added_vocab().items()}

    def _vocab(self) -> Mapping[str, int]:
        # the Tokenizer's own spelling table (token_to_id reads it), built once
        return self._tok.core.spellings()[1]

    def _token_id(self, token) -> int | None:
        token = str(token)
        # special tokens are atoms: no need to build the whole spelling table for them
        found = self._tok.atoms.get(token)
        return found if found is not None else self._tok.token_to_id(token)

    def convert_tokens_to_ids(self, tokens: str | Sequence[str]) -> int | None | list[int | None]:
        """Id of each token spelling (byte-level for BPE tokens, as written for
        atoms); None for a spelling the vocabulary lacks (there is no unk token)."""
        if isinstance(tokens, (str, AddedToken)):
            return self._token_id(tokens)
        return [self._token_id(t) for t in tokens]

    def convert_ids_to_tokens(self, ids: int | Sequence[int], skip_special_tokens: bool = False):
        """Spelling of each id (None for an id outside the vocabulary); with
        `skip_special_tokens`, ids of `all_special_ids` are left out."""
        ids = to_py_obj(ids)
        if isinstance(ids, int):
            return self._tok.id_to_token(ids)
        skip = set(self.all_special_ids) if skip_special_tokens else ()
        return [self._tok.id_to_token(i) for i in ids if i not in skip]

    def convert_tokens_to_string(self, tokens: Sequence[str]) -> str:
        ids = [self._token_id(t) for t in tokens]
        missing = [t for t, i in zip(tokens, ids) if i is None]
        if missing:
            raise Qwen4ExpError(f"convert_tokens_to_string(): {missing[0]!r} is not a token of the vocabulary")
        return self._tok.decode([i for i in ids if i is not None])

    def _add_tokens(self, new_tokens, special_tokens: bool = False) -> int:
        """Nothing to add when every token is already in the vocabulary (what
        add_special_tokens({"pad_token": ...}) needs); any other is an error."""
        missing = [str(t) for t in new_tokens if self._token_id(t) is None]
        if missing:
            raise VocabularyError(
                f"Qwen4ExpTokenizer cannot add tokens ({missing[0]!r}): its vocabulary is the model "
                "folder's tokenizer.json, which qwen4exp encodes with its own tables")
        return 0

    def num_special_tokens_to_add(self, pair: bool = False) -> int:
        return 0

    def build_inputs_with_special_tokens(self, token_ids_0: list[int], token_ids_1: list[int] | None = None) -> list[int]:
        return list(token_ids_0) + list(token_ids_1 or ())

    # -- text -> ids ------------------------------------------------------------

    def tokenize(self, text: str, pair: str | None = None, add_special_tokens: bool = False, **kwargs) -> list[str]:
        """Token spellings of `text` (DATA unless split_special_tokens=False)."""
        if pair is not None:
            raise Qwen4ExpError("tokenize(): Qwen4ExpTokenizer takes no text pair")
        trusted = kwargs.pop("split_special_tokens", self.split_special_tokens) is False
        if kwargs:
            raise TypeError(f"tokenize(): unexpected keyword(s) {', '.join(sorted(kwargs))}")
        return self.convert_ids_to_tokens(self._encode_texts([text], trusted, "tokenize()")[0])

    def _encode_texts(self, texts: list, trusted: bool, where: str) -> list[list[int]]:
        """Ids of each text: all DATA, or (trusted) with every atom spelling as
        its atom id, as transformers' PreTrainedTokenizerFast reads added tokens."""
        def at(i: int) -> str:
            return f"{where}: text[{i}]" if len(texts) > 1 else f"{where}: text"

        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"{at(i)} is {type(text).__name__}, not str "
                                "(Qwen4ExpTokenizer takes text, or a batch of texts; no pre-split words or ids)")
        try:
            if not trusted:
                return [self._tok.encode(texts[0])] if len(texts) == 1 else self._tok.encode_batch(texts)
            out = []
            for text in texts:
                builder = SegmentBuilder()
                for k, part in enumerate(self._atom_split.split(text)):
                    builder.control(part) if k % 2 else builder.text(part)
                out.append(self._tok.encode_chat(builder.build()).tolist())
            return out
        except TextEncodingError:
            for i, text in enumerate(texts):  # name the text as the caller passed it
                try:
                    str.encode(text, "utf-8")
                except UnicodeEncodeError as exc:
                    raise surrogate_error(text, at(i), exc.start) from None
            raise

    def _encode_plus(self, text, text_pair=None, add_special_tokens: bool = True,
                     padding_strategy: PaddingStrategy = PaddingStrategy.DO_NOT_PAD,
                     truncation_strategy: TruncationStrategy = TruncationStrategy.DO_NOT_TRUNCATE,
                     max_length: int | None = None, stride: int = 0, is_split_into_words: bool = False,
                     pad_to_multiple_of: int | None = None, padding_side: str | None = None,
                     return_tensors=None, return_token_type_ids: bool | None = None,
                     return_attention_mask: bool | None = None, return_overflowing_tokens: bool = False,
                     return_special_tokens_mask: bool = False, return_offsets_mapping: bool = False,
                     return_length: bool = False, verbose: bool = True, split_special_tokens: bool | None = None,
                     **kwargs) -> BatchEncoding:
        """The one encoding path: a text or a batch (transformers 5 sends both
        here, 4.x a single text; its batches come through _batch_encode_plus)."""
        given = {"text_pair": text_pair is not None, "is_split_into_words": is_split_into_words,
                 "return_overflowing_tokens": return_overflowing_tokens,
                 "return_offsets_mapping": return_offsets_mapping}
        refused = [name for name, on in given.items() if on]
        if refused or kwargs:
            raise Qwen4ExpError(
                f"Qwen4ExpTokenizer does not support {', '.join(refused + sorted(kwargs))} "
                "(it encodes single texts: no pairs, pre-split words, overflow windows or offsets)")
        batched = isinstance(text, (list, tuple))
        texts = list(text) if batched else [text]
        if split_special_tokens is None:
            split_special_tokens = self.split_special_tokens
        rows = self._encode_texts(texts, split_special_tokens is False, "Qwen4ExpTokenizer")
        return self._finish(
            {"input_ids": rows}, batched, truncation_strategy=truncation_strategy, max_length=max_length,
            padding_strategy=padding_strategy, pad_to_multiple_of=pad_to_multiple_of, padding_side=padding_side,
            return_tensors=return_tensors, return_attention_mask=return_attention_mask,
            return_token_type_ids=return_token_type_ids, return_special_tokens_mask=return_special_tokens_mask,
            return_length=return_length)

    def _batch_encode_plus(self, batch_text_or_text_pairs, **kwargs) -> BatchEncoding:
        """transformers 4.x's batch entry point."""
        return self._encode_plus(list(batch_text_or_text_pairs), **kwargs)

    def _finish(self, columns: dict[str, list[list[int]]], batched: bool, *, truncation_strategy,
                max_length, padding_strategy, pad_to_multiple_of, padding_side, return_tensors,
                return_attention_mask, return_token_type_ids=None, return_special_tokens_mask=False,
                return_length=False) -> BatchEncoding:
        """Truncate, add the optional columns, pad, convert: the rows of
        `columns` ("input_ids" first, then aligned 0/1 columns such as
        assistant_masks) as transformers lays them out."""
        truncation_strategy = TruncationStrategy(truncation_strategy)
        padding_strategy = PaddingStrategy(padding_strategy)
        if truncation_strategy == TruncationStrategy.ONLY_SECOND:
            raise Qwen4ExpError("truncation='only_second' needs a text pair, which Qwen4ExpTokenizer does not take")
        if truncation_strategy != TruncationStrategy.DO_NOT_TRUNCATE and max_length is not None:
            keep = (lambda row: row[len(row) - max_length :]) if self.truncation_side == "left" else (
                lambda row: row[:max_length])
            columns = {key: [keep(r) if len(r) > max_length else r for r in rows] for key, rows in columns.items()}
        ids = columns["input_ids"]
        data: dict[str, Any] = {"input_ids": ids}
        if return_token_type_ids if return_token_type_ids is not None else "token_type_ids" in self.model_input_names:
            data["token_type_ids"] = [[0] * len(r) for r in ids]
        if return_attention_mask if return_attention_mask is not None else "attention_mask" in self.model_input_names:
            data["attention_mask"] = [[1] * len(r) for r in ids]
        if return_special_tokens_mask:
            # 1 marks what the tokenizer added itself (a fast tokenizer's post-processor), and
            # Qwen adds nothing: an atom id of trusted text is the caller's, 0 as in transformers
            data["special_tokens_mask"] = [[0] * len(r) for r in ids]
        data.update((key, rows) for key, rows in columns.items() if key != "input_ids")
        if padding_strategy != PaddingStrategy.DO_NOT_PAD:
            data = self._pad_columns(data, padding_strategy, max_length, pad_to_multiple_of, padding_side)
        if return_length:
            data["length"] = [len(r) for r in data["input_ids"]]
        if not batched and return_tensors is None:
            data = {key: rows if key == "length" else rows[0] for key, rows in data.items()}
        return BatchEncoding(data, tensor_type=return_tensors)

    def _pad_columns(self, data: dict, strategy: PaddingStrategy, max_length: int | None,
                     multiple: int | None, side: str | None) -> dict:
        """Pad every row to the batch's longest (or max_length), rounded up to
        `multiple`: ids with pad_token_id, masks with 0, special_tokens_mask with 1."""
        side = side or self.padding_side
        if side not in ("left", "right"):
            raise ValueError(f"padding_side must be 'left' or 'right', not {side!r}")
        rows = data["input_ids"]
        target = max(map(len, rows), default=0) if strategy == PaddingStrategy.LONGEST else max_length
        if target is None:
            raise ValueError("padding='max_length' needs max_length")
        if multiple and target % multiple:
            target = (target // multiple + 1) * multiple
        fill = {"input_ids": self.pad_token_id, "special_tokens_mask": 1, "token_type_ids": self.pad_token_type_id}
        out = {}
        for key, column in data.items():
            value = fill.get(key, 0)
            if side == "right":
                out[key] = [r + [value] * (target - len(r)) if len(r) < target else r for r in column]
            else:
                out[key] = [[value] * (target - len(r)) + r if len(r) < target else r for r in column]
        return out

    # -- ids -> text ------------------------------------------------------------

    def _decode(self, token_ids, skip_special_tokens: bool = False, clean_up_tokenization_spaces: bool | None = None,
                **kwargs) -> str:
        """Text of the ids; bytes that are not UTF-8 become U+FFFD and ids past
        the vocabulary spell nothing, as in transformers. `spaces_between_special_tokens`
        is accepted: byte-level decoding adds none."""
        kwargs.pop("spaces_between_special_tokens", None)
        if kwargs:
            raise TypeError(f"decode(): unexpected keyword(s) {', '.join(sorted(kwargs))}")
        token_ids = to_py_obj(token_ids)
        if isinstance(token_ids, int):
            token_ids = [token_ids]
        # A model's embedding is padded past the vocabulary (151,936 rows for 151,669 ids):
        # transformers decodes such an id to nothing, and so does this.
        n = self._tok.vocab_size
        token_ids = [i for i in token_ids if not (isinstance(i, int) and i >= n)]
        text = self._tok.decode(token_ids, skip_special=bool(skip_special_tokens))
        clean = self.clean_up_tokenization_spaces if clean_up_tokenization_spaces is None else clean_up_tokenization_spaces
        return self.clean_up_tokenization(text) if clean else text

    # -- chats ------------------------------------------------------------------

    def apply_chat_template(
        self,
        conversation,
        tools: list | None = None,
        documents: list | None = None,
        chat_template: str | None = None,
        add_generation_prompt: bool = False,
        continue_final_message: bool = False,
        tokenize: bool = True,
        padding: bool | str | PaddingStrategy = False,
        truncation: bool = False,
        max_length: int | None = None,
        return_tensors=None,
        return_dict: bool = _RETURN_DICT_DEFAULT,
        return_assistant_tokens_mask: bool = False,
        tokenizer_kwargs: dict[str, Any] | None = None,
        *,
        assistant_mask_style: str | None = None,
        **kwargs: Any,
    ):
        """Render a conversation (a list of OpenAI-style messages) or a batch of
        them in the model folder's chat format, with provenance: what the
        official template writes, but every caller string is DATA. The keyword
        arguments are transformers' (`return_dict` defaults as in the installed
        transformers: False in 4.x, True in 5.x); `kwargs` are the format's
        options (enable_thinking, preserve_thinking, reasoning_effort).

        tokenize=False gives the rendered text. It is meant for reading: the
        text alone has lost which bytes are markers, and tokenizing it again
        with transformers turns typed atom spellings into atom ids.

        With return_assistant_tokens_mask, "assistant_masks" marks each
        assistant turn's output: through its IM_END marker (assistant_mask_style
        "qwen4exp", qwen4exp's EncodedChat.assistant_mask), or also the newline
        after it ("trl", what transformers computes from TRL's training
        templates' {% generation %} blocks). Left None, the style is "trl" when
        `chat_template` has {% generation %} blocks (TRL passes its training
        variant of the model's template), else the tokenizer's
        `assistant_mask_style`.
        """
        own_template = self.chat_format == _OWN_TEMPLATE
        if documents is not None and not own_template:
            raise ChatFormatError("apply_chat_template(): the Qwen chat formats have no documents (RAG) section")
        if continue_final_message:
            raise ChatFormatError("apply_chat_template(): continue_final_message is not supported: qwen4exp "
                                  "renders whole turns (use add_generation_prompt to open the assistant's turn)")
        if return_assistant_tokens_mask and not (tokenize and return_dict):
            raise Qwen4ExpError("apply_chat_template(): return_assistant_tokens_mask=True needs tokenize=True "
                                "and return_dict=True")
        if chat_template is None:  # as transformers: the attribute, which a caller may have set
            chat_template = self.chat_template
        if assistant_mask_style is None:
            generation_blocks = isinstance(chat_template, str) and _GENERATION_BLOCK.search(chat_template)
            assistant_mask_style = "trl" if generation_blocks else self.assistant_mask_style
        _check_mask_style(assistant_mask_style)
        options = self._own_template_options(chat_template, documents, kwargs) if own_template else \
            self._template_options(chat_template, kwargs)
        batched = isinstance(conversation, (list, tuple)) and bool(conversation) and isinstance(
            conversation[0], (list, tuple))
        conversations = list(conversation) if batched else [conversation]
        tools = [get_json_schema(t) if callable(t) else t for t in tools] if tools is not None else None
        # the folder's own template renders through the tokenizer, which holds it; a native
        # format through render_chat, with the options the template given implies
        render = self._tok.render_chat if own_template else render_chat
        chats = [render(messages, tools=tools, add_generation_prompt=add_generation_prompt, **options)
                 for messages in conversations]
        if not tokenize:
            texts = [chat.text for chat in chats]
            return texts if batched else texts[0]

        call = dict(tokenizer_kwargs or {})
        unknown = sorted(set(call) - {"padding", "truncation", "max_length", "pad_to_multiple_of", "padding_side",
                                      "return_attention_mask", "add_special_tokens", "verbose"})
        if unknown:
            raise Qwen4ExpError(f"apply_chat_template(): tokenizer_kwargs {', '.join(unknown)} not supported")
        call.pop("add_special_tokens", None)  # Qwen adds none either way
        padding = call.pop("padding", padding)
        truncation = call.pop("truncation", truncation)
        max_length = call.pop("max_length", max_length)
        padding_strategy, truncation_strategy, max_length, _ = self._get_padding_truncation_strategies(
            padding=padding, truncation=truncation, max_length=max_length,
            pad_to_multiple_of=call.get("pad_to_multiple_of"), verbose=call.pop("verbose", True))

        encoded = self._tok.encode_chats(chats, return_masks=True) if batched else [
            self._tok.encode_chat(chats[0], return_masks=True)]
        columns = {"input_ids": [enc.ids.tolist() for enc in encoded]}
        if return_assistant_tokens_mask:
            columns["assistant_masks"] = [
                _assistant_mask(chat, enc, assistant_mask_style).astype(int).tolist()
                for chat, enc in zip(chats, encoded)]
        out = self._finish(
            columns, batched, truncation_strategy=truncation_strategy, max_length=max_length,
            padding_strategy=padding_strategy, pad_to_multiple_of=call.get("pad_to_multiple_of"),
            padding_side=call.get("padding_side"), return_tensors=return_tensors,
            return_attention_mask=call.get("return_attention_mask"))
        return out if return_dict else out["input_ids"]

    def _own_template_options(self, chat_template: str | None, documents: list | None,
                              kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """The render keywords for a folder rendered through its own template
        (chat_format "template"): every keyword is a template variable, as in
        transformers; a chat_template argument renders that template instead,
        with the folder's special tokens."""
        options = dict(kwargs)
        if documents is not None:
            options["documents"] = documents
        if chat_template is not None and chat_template != self.chat_template:
            options["chat_template"] = chat_template
        return options

    def _template_options(self, chat_template: str | None, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """render_chat's keywords: the chat format, the format's own keywords
        given, and for those left out the defaults of the template rendered:
        the model folder's (Tokenizer.render_defaults), or those a
        chat_template of this tokenizer's format implies (the think template
        on a Qwen3.5 small model's folder renders thinking on, as transformers
        does with it); a template of another format is refused."""
        fmt_options = format_named(self.chat_format).options
        unknown = sorted(set(kwargs) - set(fmt_options))
        if unknown:
            raise ChatFormatError(
                f"apply_chat_template(): the {self.chat_format} format has no option "
                f"{', '.join(map(repr, unknown))} (its options: {', '.join(fmt_options) or 'none'})")
        options = {k: v for k, v in kwargs.items() if v is not None}
        implied = self._tok.render_defaults
        if chat_template is not None and chat_template != self._folder_template:
            fmt, implied = identify_template(chat_template)
            if fmt.name != self.chat_format:
                raise ChatFormatError(
                    f"apply_chat_template(): chat_template is the {fmt.name} format's, and this tokenizer "
                    f"renders {self.chat_format} (load the model folder of a {fmt.name} model instead)")
        for key, value in implied.items():
            options.setdefault(key, value)
        return {"chat_format": self.chat_format, **options}

    # -- saving and loading -----------------------------------------------------

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path: str | os.PathLike, *init_inputs,
                        chat_format: str | None = None, subfolder: str | None = None,
                        **kwargs: Any) -> "Qwen4ExpTokenizer":
        """Load a local model folder (a directory holding tokenizer.json and
        tokenizer_config.json). Download keywords (cache_dir, revision, token,
        ...) are accepted and have nothing to do for a local folder; a hub id
        is not downloaded: fetch it first (huggingface_hub.snapshot_download)."""
        if init_inputs:
            raise TypeError("Qwen4ExpTokenizer.from_pretrained() takes the folder and keywords only")
        folder = os.fspath(pretrained_model_name_or_path)
        if subfolder:
            folder = os.path.join(folder, subfolder)
        if not os.path.isdir(folder):
            raise FileNotFoundError(
                f"Qwen4ExpTokenizer.from_pretrained: {folder!r} is not a local model folder; download the "
                "model's tokenizer files first (huggingface_hub.snapshot_download) and pass their directory")
        for key in _HUB_KEYS:
            kwargs.pop(key, None)
        return cls(folder, chat_format=chat_format, **kwargs)

    def save_pretrained(self, save_directory: str | os.PathLike, legacy_format: bool | None = None,
                        filename_prefix: str | None = None, push_to_hub: bool = False,
                        **kwargs: Any) -> tuple[str, ...]:
        """Write a model folder's tokenizer files: the source tokenizer.json as it
        was, tokenizer_config.json (the source's, with this tokenizer's special
        tokens, sides and lengths, and the chat template) and chat_template.jinja
        when the source kept the template there. transformers' AutoTokenizer
        loads the result as it loads the source folder; so does from_pretrained
        (a format named with chat_format= is recorded as "qwen4exp_chat_format",
        a mask style other than "qwen4exp" as "qwen4exp_assistant_mask_style")."""
        if push_to_hub:
            raise Qwen4ExpError("save_pretrained(push_to_hub=True) is not supported: save, then upload the "
                                "folder with huggingface_hub")
        if filename_prefix:
            raise Qwen4ExpError("save_pretrained(): filename_prefix is not supported (a model folder's "
                                "files have fixed names)")
        directory = os.fspath(save_directory)
        if os.path.isfile(directory):
            raise NotADirectoryError(f"save_pretrained: {directory!r} is a file, not a directory")
        os.makedirs(directory, exist_ok=True)
        written = list(self.save_vocabulary(directory))

        config = _read_config(self._folder)
        config.pop("chat_template", None)
        config.update(model_max_length=self.model_max_length, padding_side=self.padding_side,
                      truncation_side=self.truncation_side,
                      clean_up_tokenization_spaces=self.clean_up_tokenization_spaces)
        named = self.special_tokens_map
        for key in _NAMED_SPECIAL:
            config[key] = named.get(key)
        config.pop(_FORMAT_KEY, None)
        config.pop(_MASK_KEY, None)
        if self._explicit_format:
            config[_FORMAT_KEY] = self.chat_format
        if self.assistant_mask_style != "qwen4exp":
            config[_MASK_KEY] = self.assistant_mask_style
        template = self.chat_template if isinstance(self.chat_template, str) else None
        jinja = os.path.join(directory, _TEMPLATE_FILE)
        if template is not None and os.path.exists(os.path.join(self._folder, _TEMPLATE_FILE)):
            with open(jinja, "w", encoding="utf-8") as f:
                f.write(template)
            written.append(jinja)
        else:
            if template is not None:
                config["chat_template"] = template
            if os.path.exists(jinja) and not os.path.samefile(directory, self._folder):
                os.remove(jinja)  # a stale template there would take precedence when loading
        path = os.path.join(directory, _CONFIG)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(config, f, ensure_ascii=False, indent=2)
            f.write("\n")
        return (path, *written)

    def save_vocabulary(self, save_directory: str, filename_prefix: str | None = None) -> tuple[str, ...]:
        """Copy the source tokenizer.json (byte for byte) into `save_directory`."""
        source = os.path.join(self._folder, "tokenizer.json")
        target = os.path.join(os.fspath(save_directory), (filename_prefix or "") + "tokenizer.json")
        if not (os.path.exists(target) and os.path.samefile(source, target)):
            shutil.copyfile(source, target)
        return (target,)


def _assistant_mask(chat: RenderedChat, enc, style: str) -> np.ndarray:
    """The assistant mask of one encoded chat in `style`. "trl" adds, to each
    assistant turn's qwen4exp mask, the rest of its span: the newline after its
    IM_END marker (the span is the turn's, header to that newline; the header is
    what precedes the first masked token)."""
    mask = enc.assistant_mask
    if style == "qwen4exp":
        return mask
    mask = mask.copy()
    for span in chat.message_spans:
        if span.role != "assistant":
            continue
        where = np.flatnonzero(enc.message_index == span.index)
        body = np.flatnonzero(mask[where])
        if body.size:
            mask[where[body[0]] :where[-1] + 1] = True
    return mask


def _check_mask_style(style: Any) -> None:
    if style not in ASSISTANT_MASK_STYLES:
        raise Qwen4ExpError(f"assistant_mask_style must be one of {', '.join(map(repr, ASSISTANT_MASK_STYLES))}, "
                            f"not {style!r}")


def _read_config(folder: str) -> dict[str, Any]:
    """tokenizer_config.json ({} when there is none), the settings this class
    reads of the types transformers gives them meaning in (VocabularyError
    naming the first that is not)."""
    path = os.path.join(folder, _CONFIG)
    config = read_folder_json(path, _CONFIG) or {}
    for key, ok, want in _CONFIG_TYPES:
        if config.get(key) is not None and not ok(config[key]):
            raise VocabularyError(f"{path}: {key} must be {want}, not {config[key]!r:.80}")
    return config


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


# tokenizer_config.json's settings: the test of a good value, and what it must be.
_CONFIG_TYPES = (
    ("model_max_length", lambda v: _positive_int(v) or (isinstance(v, float) and v > 0), "a positive number"),
    ("padding_side", lambda v: v in ("left", "right"), '"left" or "right"'),
    ("truncation_side", lambda v: v in ("left", "right"), '"left" or "right"'),
    ("clean_up_tokenization_spaces", lambda v: isinstance(v, bool), "true or false"),
    ("split_special_tokens", lambda v: isinstance(v, bool), "true or false"),
    ("model_input_names", lambda v: isinstance(v, list) and all(isinstance(n, str) for n in v),
     "a list of names"),
    (_FORMAT_KEY, lambda v: isinstance(v, str), "a chat format's name"),
    (_MASK_KEY, lambda v: v in ASSISTANT_MASK_STYLES, f"one of {', '.join(ASSISTANT_MASK_STYLES)}"),
)


def _token_text(value: Any, key: str, folder: str) -> str | None:
    """A special token as tokenizer_config.json writes it: a string, null, or
    a serialized AddedToken ({"content": ...})."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    raise VocabularyError(f"{folder}: {_CONFIG}'s {key} is neither a string nor an added token: {value!r}")


def _as_list(value: Any) -> list:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]
