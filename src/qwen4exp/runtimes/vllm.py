"""The vLLM plugin: `--tokenizer-mode qwen4exp`, `--tool-call-parser qwen4exp`,
`--reasoning-parser qwen4exp` (docs/RUNTIMES.md, "vLLM").

Installing qwen4exp next to vLLM (0.32, 0.33) is all it takes: pyproject.toml
declares `register` under the `vllm.general_plugins` entry point, which vLLM
calls in each of its processes. `register` adds

* tokenizer mode `qwen4exp` (`Qwen4ExpTokenizer`, below): the model folder's
  vocabulary and chat format, or its own Jinja template for a folder of
  another family (`qwen4exp.Tokenizer.from_pretrained`). Text it
  is given (a raw `/v1/completions` prompt, `/tokenize`) is DATA: an atom
  spelled in it is ordinary BPE text. Mode `qwen4exp-trusted-prompts` is the
  same tokenizer except that such text resolves atom spellings to their ids,
  for a server whose callers send pre-rendered prompts and are trusted to.
* the renderer of both modes (vllm_render.Qwen4ExpRenderer): chat requests are
  rendered with provenance and handed to vLLM as token ids;
* the reasoning parser and tool-call parser `qwen4exp` and, so that both read
  the output token ids rather than their text, the one parser vLLM builds
  from them (vllm_parse).

This module imports vLLM only inside `register` and the classes vLLM loads
from it; `import qwen4exp` never imports it.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import qwen4exp
from qwen4exp.encode.core import TEMPLATE_FORMAT
from qwen4exp.errors import ChatFormatError, Qwen4ExpError
from qwen4exp.vocab.loading import TOKENIZER_JSON_LIMIT
from qwen4exp.vocab.pretrained import read_folder_file, read_folder_json
from qwen4exp.render.segments import SegmentBuilder

__all__ = ["MODE", "TRUSTED_PROMPTS_MODE", "register", "Qwen4ExpTokenizer"]

logger = logging.getLogger(__name__)

#: The tokenizer and renderer mode, and the parsers' name.
MODE = "qwen4exp"
#: The same tokenizer, but plain text resolves atom spellings (trusted callers only).
TRUSTED_PROMPTS_MODE = "qwen4exp-trusted-prompts"
#: Names a chat format for a model folder whose template qwen4exp does not
#: recognise (vLLM has no flag for tokenizer options).
CHAT_FORMAT_ENV = "QWEN4EXP_CHAT_FORMAT"

# Files of a model repository the tokenizer reads (from_pretrained of a hub id).
_FOLDER_FILES = ["tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "config.json",
                 "generation_config.json"]


def register() -> None:
    """The `vllm.general_plugins` entry point: add the qwen4exp tokenizer and
    renderer modes and parsers to vLLM's registries (idempotent; vLLM calls it
    once per process)."""
    try:
        from vllm.reasoning import ReasoningParserManager
        from vllm.renderers.registry import RENDERER_REGISTRY
        from vllm.tokenizers.registry import TokenizerRegistry
        from vllm.tool_parsers import ToolParserManager
    except ImportError as exc:  # a vLLM without these registries: say so, do not break it
        logger.error("qwen4exp: this vLLM has no tokenizer/renderer/parser registries (%s); "
                     "the qwen4exp plugin is not registered", exc)
        return
    module = __name__
    for mode in (MODE, TRUSTED_PROMPTS_MODE):
        if TokenizerRegistry.tokenizers.get(mode) != (module, _TOKENIZER_CLASSES[mode]):
            TokenizerRegistry.register(mode, module, _TOKENIZER_CLASSES[mode])
        if RENDERER_REGISTRY.renderers.get(mode) != ("qwen4exp.runtimes.vllm_render", "Qwen4ExpRenderer"):
            RENDERER_REGISTRY.register(mode, "qwen4exp.runtimes.vllm_render", "Qwen4ExpRenderer")
    ToolParserManager.register_lazy_module(MODE, "qwen4exp.runtimes.vllm_parse", "Qwen4ExpToolParser")
    ReasoningParserManager.register_lazy_module(MODE, "qwen4exp.runtimes.vllm_parse",
                                                "Qwen4ExpReasoningParser")
    from qwen4exp.runtimes.vllm_parse import install_parser_composition

    install_parser_composition(MODE)
    _install_startup_check()


def parser_flags_problem(tool_parser: str | None, reasoning_parser: str | None, auto_tools: bool,
                         tokenizer_mode: str | None, chat_format: str | None = None) -> str | None:
    """What is wrong with a server's parser flags for the qwen4exp parser (one
    line), or None. The one parser reads reasoning and tool calls together
    (docs/RUNTIMES.md, "The reply"), in the chat formats qwen4exp knows:
    `chat_format` "template" (a model folder's own template, see
    folder_chat_format) takes vLLM's own parsers."""
    tool_parser, reasoning_parser = tool_parser or None, reasoning_parser or None
    if MODE not in (tool_parser, reasoning_parser):
        return None
    if chat_format == TEMPLATE_FORMAT:
        flag = "--tool-call-parser" if tool_parser == MODE else "--reasoning-parser"
        return (f"{flag} {MODE}: the qwen4exp parsers read the Qwen chat formats, and this model folder's "
                "chat template is none of them (qwen4exp renders it as the folder's own template); use "
                f"vLLM's parser for the model's family instead (e.g. {flag} "
                f"{'llama3_json' if flag == '--tool-call-parser' else 'deepseek_r1'})")
    others = sorted(p for p in {tool_parser, reasoning_parser} if p is not None and p != MODE)
    if others:
        return (f"--tool-call-parser {tool_parser} and --reasoning-parser {reasoning_parser}: the qwen4exp "
                f"parser reads reasoning and tool calls together and cannot be combined with {others[0]}; "
                f"use --tool-call-parser {MODE} --reasoning-parser {MODE}")
    if tool_parser == MODE and auto_tools and reasoning_parser is None:
        return (f"--tool-call-parser {MODE} needs --reasoning-parser {MODE} (the qwen4exp parser reads "
                "reasoning and tool calls together)")
    if tokenizer_mode not in _TOKENIZER_CLASSES:
        return (f"the qwen4exp parsers read the qwen4exp tokenizer's ids: add --tokenizer-mode {MODE} "
                f"(not {tokenizer_mode or 'auto'})")
    return None


def _install_startup_check() -> None:
    """Refuse wrong parser flags before the model loads: vLLM builds its
    parsers only once the engine is up (minutes later), and the failure
    there is a traceback. The API server validates its arguments in
    `vllm.entrypoints.launchers.launcher.validate_api_server_args`, before
    it starts the engine; the check runs there (only in the process that has
    that module loaded: the API server's, where vLLM loads plugins while it
    builds its argument parser)."""
    import sys

    launcher = sys.modules.get("vllm.entrypoints.launchers.launcher")
    validate = getattr(launcher, "validate_api_server_args", None)
    if validate is None or getattr(validate, "_qwen4exp", False):
        return

    def validate_api_server_args(args, *rest, **kwargs):
        outputs = getattr(args, "structured_outputs_config", None)
        reasoning = getattr(outputs, "reasoning_parser", None) or getattr(args, "reasoning_parser", None)
        tool_parser = getattr(args, "tool_call_parser", None)
        mode = getattr(args, "tokenizer_mode", None)
        fmt = None
        if MODE in (tool_parser, reasoning) and mode in _TOKENIZER_CLASSES:
            fmt = folder_chat_format(getattr(args, "tokenizer", None) or getattr(args, "model", None))
        problem = parser_flags_problem(tool_parser, reasoning,
                                       bool(getattr(args, "enable_auto_tool_choice", False)), mode, fmt)
        if problem is not None:
            raise SystemExit(f"qwen4exp: {problem}")  # one line, no traceback, before the model loads
        return validate(args, *rest, **kwargs)

    validate_api_server_args._qwen4exp = True  # type: ignore[attr-defined]
    setattr(launcher, "validate_api_server_args", validate_api_server_args)


def folder_chat_format(folder: Any) -> str | None:
    """The chat format the tokenizer of a model folder will have, read cheaply
    (its chat template's fingerprint, no vocabulary loaded): a native
    format's name, TEMPLATE_FORMAT for a template qwen4exp renders as the
    folder's own, or None when that cannot be told here (not a local folder,
    no template, a file that does not read: loading the tokenizer reports it)."""
    named = os.environ.get(CHAT_FORMAT_ENV)
    if named:
        return named
    if not isinstance(folder, (str, os.PathLike)) or not os.path.isdir(folder):
        return None
    from qwen4exp.formats import identify_template
    from qwen4exp.vocab.pretrained import read_chat_template

    try:
        template = read_chat_template(os.fspath(folder))
        if template is None:
            return None
        return identify_template(template)[0].name
    except ChatFormatError:
        return TEMPLATE_FORMAT
    except (Qwen4ExpError, OSError):
        return None


def _added_specials(folder: str, atoms: dict[str, int]) -> tuple[list[int], list[int]]:
    """(prefix, suffix) atom ids tokenizer.json's post-processor adds around
    one text when special tokens are added (a TemplateProcessing's `single`,
    alone or in a Sequence, as Llama 3's BOS; RobertaProcessing's cls and
    sep); none for any other post-processor (Qwen's is ByteLevel only)."""
    import json

    raw = read_folder_file(os.path.join(folder, "tokenizer.json"), "tokenizer.json", TOKENIZER_JSON_LIMIT)
    try:
        post = json.loads(raw or b"{}").get("post_processor")
    except (ValueError, AttributeError):
        return [], []  # loading the tokenizer has read it: not reached
    steps = post.get("processors", ()) if isinstance(post, dict) and post.get("type") == "Sequence" else [post]
    for step in steps:
        if not isinstance(step, dict):
            continue
        if step.get("type") == "RobertaProcessing":
            cls, sep = step.get("cls"), step.get("sep")
            if isinstance(cls, list) and isinstance(sep, list) and cls[0] in atoms and sep[0] in atoms:
                return [atoms[cls[0]]], [atoms[sep[0]]]
        if step.get("type") != "TemplateProcessing" or not isinstance(step.get("single"), list):
            continue
        prefix: list[int] = []
        suffix: list[int] = []
        side = prefix
        for piece in step["single"]:
            if not isinstance(piece, dict):
                return [], []
            if "Sequence" in piece:
                side = suffix
            else:
                name = str((piece.get("SpecialToken") or {}).get("id"))
                spec = (step.get("special_tokens") or {}).get(name) or {}
                ids: list[Any] = spec["ids"] if isinstance(spec.get("ids"), list) else [atoms.get(name)]
                if any(not isinstance(i, int) for i in ids):
                    return [], []
                side.extend(ids)
        return prefix, suffix
    return [], []


def _special_atom_ids(tok: qwen4exp.Tokenizer) -> list[int]:
    """The atom ids `decode(skip_special=True)` drops (tokenizer.json's special ones)."""
    return sorted(i for i in tok.atoms.values() if not tok.decode_bytes([i], skip_special=True))


def _token_name(value: Any) -> str | None:
    """A special token of tokenizer_config.json: a string, or an AddedToken
    dict with its "content" (older configs)."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


class _Encoding(dict):
    """What `tokenizer(text)` returns: a dict with attribute access, as
    transformers' BatchEncoding (vLLM reads `encoding["input_ids"]`)."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class Qwen4ExpTokenizer:
    """vLLM's TokenizerLike over a `qwen4exp.Tokenizer` of a model folder.

    `encode` / `__call__` treat text as DATA (see the module), `decode` and the
    token conversions spell tokens as HF `tokenizers` does. The chat format
    and the folder's render defaults travel with `qwen4exp_tokenizer`, which the
    renderer and the parsers use.
    """

    #: Whether plain text resolves atom spellings (the trusted-prompts mode).
    trusted_prompts = False
    #: How xgrammar (vLLM's structured-output backend) recognises a tokenizer
    #: it can read without transformers: a tiktoken-style vocabulary, which the
    #: Qwen vocabularies are; it then reads get_vocab() as byte-level spellings
    #: (it checks that " " encodes to "Ġ") and eos_token_id as the stop token.
    vocab_files_names = {"vocab_file": "qwen.tiktoken"}

    def __init__(self, tok: qwen4exp.Tokenizer, *, name_or_path: str = "", config: dict | None = None,
                 truncation_side: str = "left",
                 added_specials: tuple[list[int], list[int]] = ([], [])) -> None:
        self.qwen4exp_tokenizer = tok
        self.name_or_path = name_or_path
        self._truncation_side = truncation_side
        config = config or {}
        self._atoms = dict(tok.atoms)
        # Skipped by decode and convert_ids_to_tokens(skip_special_tokens=True):
        # the atoms tokenizer.json marks special, as HF's decoder (and so vLLM's
        # hf-mode detokenizer) skips them.
        self._special_set = frozenset(_special_atom_ids(tok))
        # all_special_*: the named ones of tokenizer_config.json, as transformers lists them.
        named = [config.get(k) for k in ("bos_token", "eos_token", "unk_token", "pad_token")]
        for key in ("additional_special_tokens", "extra_special_tokens"):
            extra = config.get(key)
            named += extra if isinstance(extra, list) else []
        named = [_token_name(t) for t in named]
        self._special_ids = sorted({self._atoms[t] for t in named if t in self._atoms})
        self._vocab: dict[str, int] | None = None
        self.eos_token = _token_name(config.get("eos_token"))
        self.pad_token = _token_name(config.get("pad_token"))
        self.bos_token = _token_name(config.get("bos_token"))
        # Longest first, so that a spelling that contains another wins.
        spellings = sorted(self._atoms, key=len, reverse=True)
        self._atom_pattern = re.compile("(" + "|".join(map(re.escape, spellings)) + ")")
        self._max_chars: int | None = None
        # Atoms tokenizer.json's post-processor adds to one text (add_special_tokens=True).
        self._prefix, self._suffix = added_specials

    # -- construction ----------------------------------------------------------

    @classmethod
    def from_pretrained(cls, path_or_repo_id: str | Path, *args, trust_remote_code: bool = False,
                        revision: str | None = None, download_dir: str | None = None,
                        **kwargs) -> "Qwen4ExpTokenizer":
        """Load a model folder (or a hub repository's tokenizer files) with
        `qwen4exp.Tokenizer.from_pretrained`: the bundled vocabulary when the
        folder's is the same, the chat format the folder's template is, or
        for any other template that template itself (chat_format "template",
        rendered with provenance); set $QWEN4EXP_CHAT_FORMAT (or pass
        chat_format=) to name a native format instead."""
        folder = str(path_or_repo_id)
        if not os.path.isdir(folder):
            folder = _download(folder, revision, download_dir, kwargs.get("token"))
        chat_format = kwargs.get("chat_format") or os.environ.get(CHAT_FORMAT_ENV) or None
        tok = qwen4exp.Tokenizer.from_pretrained(folder, chat_format=chat_format)
        config = read_folder_json(os.path.join(folder, "tokenizer_config.json"), "tokenizer_config.json") or {}
        return cls(tok, name_or_path=str(path_or_repo_id), config=config,
                   truncation_side=kwargs.get("truncation_side", "left"),
                   added_specials=_added_specials(folder, dict(tok.atoms)))

    # -- vocabulary ------------------------------------------------------------

    def num_special_tokens_to_add(self) -> int:
        return len(self._prefix) + len(self._suffix)  # Qwen: none; Llama 3: its BOS

    @property
    def all_special_tokens(self) -> list[str]:
        spell = self.qwen4exp_tokenizer.id_to_token
        return [t for i in self._special_ids if (t := spell(i)) is not None]  # every atom has one

    @property
    def all_special_ids(self) -> list[int]:
        return list(self._special_ids)

    def _token_id(self, token: str | None) -> int | None:
        return None if token is None else self._atoms.get(token)

    @property
    def bos_token_id(self) -> int | None:
        return self._token_id(self.bos_token)  # Qwen folders have none

    @property
    def eos_token_id(self) -> int | None:
        return self._token_id(self.eos_token)

    @property
    def pad_token_id(self) -> int | None:
        return self._token_id(self.pad_token)

    @property
    def is_fast(self) -> bool:
        # vLLM only uses this to pick its detokenizer: True makes it decode
        # token spellings with convert_tokens_to_string, atoms included, with
        # no space inserted around them (the slow path would).
        return True

    @property
    def vocab_size(self) -> int:
        return self.qwen4exp_tokenizer.vocab_size

    @property
    def max_token_id(self) -> int:
        return self.qwen4exp_tokenizer.vocab_size - 1

    @property
    def max_chars_per_token(self) -> int:
        # vLLM cuts over-long text prompts at max_tokens * this before encoding:
        # a byte-level spelling has one character per byte, at least as many
        # as the token decodes to, so its longest is a safe bound.
        if self._max_chars is None:
            if self._vocab is None:
                self.get_vocab()
            assert self._vocab is not None  # get_vocab() built it
            self._max_chars = max(map(len, self._vocab))
        return self._max_chars

    @property
    def truncation_side(self) -> str:
        return self._truncation_side

    def __hash__(self) -> int:
        return hash(id(self))

    def __len__(self) -> int:
        return self.vocab_size

    def get_vocab(self) -> dict[str, int]:
        if self._vocab is None:
            tok = self.qwen4exp_tokenizer
            spell = tok.id_to_token
            self._vocab = {s: i for i in range(tok.vocab_size) if (s := spell(i)) is not None}
        return dict(self._vocab)

    def get_added_vocab(self) -> dict[str, int]:
        return dict(self._atoms)

    # -- text -> ids -----------------------------------------------------------

    def _encode_text(self, text: str) -> list[int]:
        tok = self.qwen4exp_tokenizer
        if not self.trusted_prompts:
            return tok.encode(text)
        # Trusted prompts: an exact atom spelling is that atom, the rest DATA.
        builder = SegmentBuilder()
        for k, part in enumerate(self._atom_pattern.split(text)):
            if k % 2:
                builder.control(part)
            elif part:
                builder.text(part)
        chat = builder.build()
        return tok.encode_segments(chat.data, chat.segments).tolist()

    def _truncate(self, ids: list[int], truncation: bool | None, max_length: int | None) -> list[int]:
        if truncation and max_length is not None and len(ids) > max_length:
            return ids[len(ids) - max_length:] if self._truncation_side == "left" else ids[:max_length]
        return ids

    def encode(self, text: str, truncation: bool | None = None, max_length: int | None = None,
               add_special_tokens: bool = True) -> list[int]:
        ids = self._encode_text(text)
        if not (add_special_tokens and (self._prefix or self._suffix)):
            return self._truncate(ids, truncation, max_length)
        # As transformers: the text is cut to leave room for the added atoms.
        room = None if max_length is None else max(0, max_length - self.num_special_tokens_to_add())
        return [*self._prefix, *self._truncate(ids, truncation, room), *self._suffix]

    def __call__(self, text: str | list[str], text_pair: str | None = None, add_special_tokens: bool = True,
                 truncation: bool = False, max_length: int | None = None, **kwargs) -> _Encoding:
        if text_pair is not None:
            raise ValueError("qwen4exp tokenizer: text pairs are not supported (Qwen models take one text)")
        if kwargs.get("return_offsets_mapping"):
            raise ValueError("qwen4exp tokenizer: return_offsets_mapping is not supported")
        if isinstance(text, str):
            ids = self.encode(text, truncation, max_length, add_special_tokens)
            return _Encoding(input_ids=ids, attention_mask=[1] * len(ids))
        batch = [self.encode(t, truncation, max_length, add_special_tokens) for t in text]
        return _Encoding(input_ids=batch, attention_mask=[[1] * len(ids) for ids in batch])

    def apply_chat_template(self, messages: list, tools: list[dict[str, Any]] | None = None,
                            **kwargs) -> str | list[int]:
        """Render with provenance (as the renderer does): token ids, or the
        rendered text with tokenize=False."""
        from qwen4exp.runtimes.vllm_render import render_request

        kwargs = dict(kwargs)
        tokenize = kwargs.pop("tokenize", True)
        kwargs.pop("return_dict", None)
        if tools is not None:
            kwargs["tools"] = tools
        chat, ids = render_request(self, messages, kwargs)
        return ids if tokenize else chat.text

    def convert_tokens_to_ids(self, tokens: str | list[str]) -> int | None | list[int | None]:  # None: unknown
        to_id = self.qwen4exp_tokenizer.token_to_id
        if isinstance(tokens, str):
            return to_id(tokens)
        return [to_id(t) for t in tokens]

    # -- ids -> text -----------------------------------------------------------

    def convert_tokens_to_string(self, tokens: list[str]) -> str:
        to_id = self.qwen4exp_tokenizer.token_to_id
        ids = [i for t in tokens if t and (i := to_id(t)) is not None]
        return self.qwen4exp_tokenizer.decode(ids)

    def decode(self, ids: Sequence[int] | int, skip_special_tokens: bool = False) -> str:
        """Text of the ids, as HF decodes them: an id without a spelling (a row
        of the model's padded embedding: vLLM hands decode output and logprob
        ids up to the model's vocab_size) spells nothing. Never raises for an
        id: it runs inside vLLM's output handler, whose failure stops the server."""
        if isinstance(ids, int):
            ids = [ids]
        tok = self.qwen4exp_tokenizer
        n = tok.vocab_size
        ids = [int(i) for i in ids]
        if any(not 0 <= i < n for i in ids):
            ids = [i for i in ids if 0 <= i < n]
        try:
            return tok.decode(ids, skip_special=skip_special_tokens)
        except Qwen4ExpError:  # an id in a gap of a from_file vocabulary's ids
            spell = tok.id_to_token
            return tok.decode([i for i in ids if spell(i) is not None], skip_special=skip_special_tokens)

    def batch_decode(self, batch: Sequence[Sequence[int]], skip_special_tokens: bool = False) -> list[str]:
        return [self.decode(ids, skip_special_tokens) for ids in batch]

    def convert_ids_to_tokens(self, ids: Sequence[int], skip_special_tokens: bool = False) -> list[str | None]:
        """Spelling of each id; None for an id without one (a padded embedding
        row), as transformers' fast tokenizer gives (vLLM reads None as "")."""
        spell = self.qwen4exp_tokenizer.id_to_token
        special = self._special_set if skip_special_tokens else ()
        return [spell(int(i)) for i in ids if int(i) not in special]

    def __repr__(self) -> str:
        tok = self.qwen4exp_tokenizer
        return f"Qwen4ExpTokenizer({self.name_or_path!r}, chat_format={tok.chat_format!r}, {tok!r})"


class Qwen4ExpTrustedPromptsTokenizer(Qwen4ExpTokenizer):
    """Mode `qwen4exp-trusted-prompts`: plain text (a raw /v1/completions
    prompt) resolves exact atom spellings to atom ids, as a flat-string
    tokenizer would. Chat requests are rendered with provenance all the same."""

    trusted_prompts = True


_TOKENIZER_CLASSES = {MODE: "Qwen4ExpTokenizer", TRUSTED_PROMPTS_MODE: "Qwen4ExpTrustedPromptsTokenizer"}


def _download(repo_id: str, revision: str | None, download_dir: str | None, token: Any) -> str:
    """The local folder of a hub repository's tokenizer files."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise FileNotFoundError(f"qwen4exp tokenizer: {repo_id!r} is not a model folder") from None
    return snapshot_download(repo_id, revision=revision, cache_dir=download_dir, token=token,
                             allow_patterns=_FOLDER_FILES)
