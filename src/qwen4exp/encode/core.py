"""What a Tokenizer is made of, apart from its public methods: the native
core over one compiled vocabulary, the tables built from it on first use,
and the chat format it is bound to; and how it is loaded and pickled.

`Tokenizer.core` is the one way the library's other modules (the chat
encoder, budgets, the completion parser, model folders, the runtimes, the
gate) reach these: typed, and never through the Tokenizer's privates.
Not public API: names here may change between versions.
"""

from __future__ import annotations

import operator
import os
import types
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import numpy as np

from qwen4exp._native._encoder import NativeTokenizer
from qwen4exp._native._faults import InitFault
from qwen4exp.errors import ChatFormatError, Qwen4ExpError, VocabularyError, init_error
from qwen4exp.render.segments import RenderedChat
from qwen4exp.vocab import compile as _vocab_compile
from qwen4exp.vocab.loading import arrays_sha256
from qwen4exp.vocab.vocabulary import VOCABULARIES

# The formats (and so the renderer's validation) and the parse path's tables
# load when a chat is first rendered, encoded or parsed, not with the tokenizer.
if TYPE_CHECKING:
    from qwen4exp.formats import ChatFormat
    from qwen4exp.parse.decode_stream import IdTables

__all__ = ["TokenizerCore", "HasCore", "CACHE_SIZE_DEFAULT", "TEMPLATE_FORMAT", "thread_count"]

#: chat_format of a tokenizer that renders its model folder's own Jinja template
#: (render.template.TEMPLATE_FORMAT; not imported here: jinja2 loads on first render).
TEMPLATE_FORMAT = "template"

_CACHE_MAX = 1 << 22  # pieces per worker cache (about 150 bytes each with their share of spill and pool)
CACHE_SIZE_DEFAULT = 1 << 16  # tuned on fresh documents: 32768 measured slower, 16384 much slower
_THREADS_MAX = 1024  # more threads than this never helps; larger requests are clamped


class HasCore(Protocol):
    """What the library's helpers take: a Tokenizer, seen through its core and the
    two public methods they call back (no import of the Tokenizer class, which
    imports them)."""

    @property
    def core(self) -> "TokenizerCore": ...

    @property
    def atoms(self) -> Mapping[str, int]: ...

    @property
    def vocab_size(self) -> int: ...

    def decode(self, ids: Any, *, skip_special: bool = False) -> str: ...


_Tok = TypeVar("_Tok")


class TokenizerCore:
    """One loaded vocabulary and the chat format it renders (Tokenizer.core)."""

    native: NativeTokenizer
    #: spelling -> id of the added tokens (read-only)
    atoms: Mapping[str, int]
    #: spelling -> lstrip / rstrip flags of the added tokens that have them
    atom_strip: dict[str, int]
    #: number of BPE ids (atoms may lie past it)
    n_vocab: int
    special_ids: frozenset[int]
    #: the bundled vocabulary's name; None for one loaded from a tokenizer.json
    vocab_name: str | None
    #: the bundled vocabulary whose chat formats this one renders
    family: str
    #: render options a model folder's template implies
    render_defaults: dict[str, Any]
    #: a model folder's other files (preprocessor_config.json, ...)
    model_config: dict[str, Any]
    #: a model folder's own chat template (render.template.TemplateBinding), or None
    template: Any

    def __init__(self, arrays: Mapping[str, np.ndarray], cache_size: int, encode_threads: int | None,
                 vocab_name: str | None) -> None:
        if isinstance(cache_size, (bool, np.bool_)) or not isinstance(cache_size, (int, np.integer)) or not (
            0 <= cache_size <= _CACHE_MAX
        ):
            raise ValueError(
                f"cache_size must be an int from 0 (no cache) to {_CACHE_MAX:,} words, not {cache_size!r}"
            )
        cache_size = operator.index(cache_size)
        threads = thread_count(encode_threads, "encode_threads")
        native_pattern = arrays.get("native_pattern", (1, 1))  # [digits a number piece (0: GPT-2's), NFC]
        try:
            native = NativeTokenizer(
                arrays["token_bytes"],
                arrays["token_offsets"],
                arrays["merges"],
                arrays["atom_bytes"],
                arrays["atom_offsets"],
                arrays["atom_ids"],
                cache_size=cache_size,
                marks=bool(arrays["marks"][0]),
                ignore_merges=bool(arrays["ignore_merges"][0]),
                self_encoding=arrays.get("self_encoding"),
                encode_threads=threads,
                missing_bytes="pipeline" in arrays,
                digit_runs=int(native_pattern[0]) == 3,
                nfc=bool(native_pattern[1]),
                byte_level=int(native_pattern[0]) == _vocab_compile.BYTE_LEVEL_DIGITS,
            )
        except InitFault as fault:
            raise init_error(*fault.args) from None
        #: the native core, behind the vocabulary's own pre-tokenizer when it is not
        #: one the native scanner runs (qwen4exp.vocab.pipeline, encode/generic.py)
        self.generic = "pipeline" in arrays
        self.native = _generic_native(native, arrays["pipeline"]) if self.generic else native
        blob = arrays["atom_bytes"].tobytes()
        offs = arrays["atom_offsets"]
        self.atoms = types.MappingProxyType(
            {blob[offs[i]: offs[i + 1]].decode("utf-8"): int(a) for i, a in enumerate(arrays["atom_ids"])}
        )
        # STRIP_LEFT | STRIP_RIGHT (qwen4exp.vocab.compile): the whitespace it takes with it
        self.atom_strip = {sp: int(f) for sp, f in zip(self.atoms, arrays["atom_strip"].tolist()) if f}
        self.n_vocab = int(len(arrays["token_offsets"]) - 1)
        special = arrays["atom_special"].astype(bool).tolist()
        self.special_ids = frozenset(int(a) for a, s in zip(arrays["atom_ids"], special) if s)
        self.vocab_name = vocab_name
        self._id_source = (arrays["token_bytes"], arrays["token_offsets"])
        self._id_tables: IdTables | None = None
        self._spellings: tuple[list[str | None], dict[str, int]] | None = None
        self._lengths: np.ndarray | None = None
        self.cache_size = cache_size
        self.encode_threads = encode_threads
        # A from_file vocabulary (no name) keeps its compiled arrays (about 4 MB):
        # it pickles with them (see reduce); a bundled one pickles by name.
        self._compiled = arrays if vocab_name is None else None
        self._compiled_sha256: str | None = None
        # The chat formats it renders are its vocabulary's; a from_file vocabulary
        # counts as the bundled one with the same split pattern (same family).
        marks = bool(arrays["marks"][0])
        self.family = vocab_name or next(v.name for v in VOCABULARIES.values() if v.marks == marks)
        self._format: ChatFormat | None = None  # the family's default until bound (see format)
        self.render_defaults = {}
        self.model_config = {}
        self.template = None
        self._atom_matcher: Any = None

    # -- the tables built on first use -----------------------------------------

    @property
    def vocab_size(self) -> int:
        """Number of ids: BPE tokens plus atoms (the largest id + 1)."""
        return max([self.n_vocab, *(i + 1 for i in self.atoms.values())])

    def id_tables(self) -> IdTables:
        """Lookup lists for decode_stream and the completion parser (built once, ~50 ms)."""
        tables = self._id_tables
        if tables is None:
            blob, offsets = self._id_source
            from qwen4exp.parse.decode_stream import IdTables

            tables = self._id_tables = IdTables(blob.tobytes(), offsets, dict(self.atoms), self.special_ids)
        return tables

    def spellings(self) -> tuple[list[str | None], dict[str, int]]:
        """(spelling by id, id by spelling) as HF spells them, built on first use (about 0.1 s)."""
        tables = self._spellings
        if tables is None:
            blob, offsets = self._id_source
            stand_ins = {b: c for c, b in _vocab_compile.byte_level_alphabet().items()}
            # Latin-1 maps each byte to the code point of its value; translate to the stand-ins.
            text = blob.tobytes().decode("latin-1").translate(stand_ins)
            ends = offsets.tolist()
            by_id: list[str | None] = [text[a:b] for a, b in zip(ends, ends[1:])]
            by_id += [None] * (self.vocab_size - len(by_id))
            for spelling, i in self.atoms.items():
                by_id[i] = spelling
            by_spelling = {t: i for i, t in enumerate(by_id) if t is not None}
            tables = self._spellings = (by_id, by_spelling)
        return tables

    def token_lengths(self) -> np.ndarray:
        """Byte length of each id's spelling (int32, by id), built once."""
        lengths = self._lengths
        if lengths is None:
            lengths = self._lengths = self.native.token_lengths()
        return lengths

    # -- the chat format -------------------------------------------------------

    @property
    def format(self) -> ChatFormat:
        """The format render_chat uses unless told otherwise (the family's
        default until a model folder binds its own)."""
        if self._format is None:
            from qwen4exp.formats import default_format

            self._format = default_format(self.family)
        return self._format

    @format.setter
    def format(self, fmt: ChatFormat) -> None:
        self._format = fmt

    @property
    def chat_format(self) -> str:
        return TEMPLATE_FORMAT if self.template is not None else self.format.name

    def bind(self, fmt: ChatFormat | str, defaults: Mapping[str, object], model_config: Mapping[str, object],
             template: tuple | None = None) -> None:
        """Render `fmt` by default, with a model folder's option defaults and files;
        with `template` (TemplateBinding's state: the text and the folder's special
        tokens), the folder's own template instead."""
        binding = None
        if template is not None:
            from qwen4exp.render.template import TemplateBinding

            binding = TemplateBinding(*template)
        self.template = None
        self.format = self.chat_format_of(fmt, "chat_format")
        self.render_defaults = dict(defaults)
        self.model_config = dict(model_config)
        self.template = binding

    def render_own_template(self, messages: Any, options: dict) -> RenderedChat:
        """render_chat through the model folder's own template: `tools`,
        `add_generation_prompt`, `documents` and any other keyword as
        transformers' apply_chat_template takes them."""
        tools = options.pop("tools", None)
        add_generation_prompt = options.pop("add_generation_prompt", False)
        binding = self.template
        other = options.pop("chat_template", None)  # transformers' keyword: another template, same tokens
        if other is not None and other != binding.template:
            binding = type(binding)(other, binding.special_tokens)
        chat = RenderedChat()
        chat._commit(binding.record(self.atom_matcher(), messages, tools, add_generation_prompt, options))
        return chat

    def atom_matcher(self) -> Any:
        """The added tokens trusted template text resolves to, with the
        whitespace those with lstrip / rstrip take (render.template.AtomMatcher)."""
        if self._atom_matcher is None:
            from qwen4exp.render.template import AtomMatcher

            self._atom_matcher = AtomMatcher(self.atoms, self.atom_strip)
        return self._atom_matcher

    def chat_format_of(self, name: ChatFormat | str | None, where: str) -> ChatFormat:
        """The format `name` (None: the bound one), refused unless it belongs to
        this vocabulary: a chat rendered for another vocabulary's models would
        get ids no model was trained on."""
        if name is None and self.template is None:
            return self.format
        if name is None or name == TEMPLATE_FORMAT:
            raise ChatFormatError(
                f"{where}: {'this tokenizer renders' if self.template is not None else 'there is no'} its model "
                f"folder's own chat template (chat_format {TEMPLATE_FORMAT!r}), which has no native format: "
                f"qwen4exp renders it with provenance, but {where} needs one of the native formats "
                f"({', '.join(self.chat_formats())}); name one with chat_format= if the model speaks it")
        from qwen4exp.formats import chat_format as format_named

        fmt = format_named(name)
        if fmt.vocabulary != self.family:
            raise ChatFormatError(
                f"{where}: the {fmt.name} chat format is for the {fmt.vocabulary} vocabulary, and this "
                f"tokenizer is {self.describe()}; use Tokenizer({fmt.vocabulary!r}) (or "
                f"Tokenizer.from_pretrained of the model folder) for {fmt.name}, or one of "
                f"{', '.join(self.chat_formats())} here"
            )
        return fmt

    def chat_formats(self) -> tuple[str, ...]:
        from qwen4exp.formats import formats_of_vocabulary

        return formats_of_vocabulary(self.family)

    def check_chat(self, chat: RenderedChat, where: str) -> None:
        """Refuse a chat rendered in a format of another vocabulary (a caller-built
        stream, with no format, is the caller's to vouch for)."""
        name = chat.chat_format
        if name == TEMPLATE_FORMAT:  # its atoms are checked against this vocabulary's when encoded
            return
        if name is not None and (name != self.format.name or self.format.vocabulary != self.family):
            self.chat_format_of(name, where)  # a dict look-up; raises for another vocabulary

    def describe(self) -> str:
        if self.vocab_name is not None:
            return f"the {self.vocab_name} vocabulary"
        return f"a tokenizer.json of the {self.family} family"

    # -- pickling ----------------------------------------------------------------

    def reduce(self, cls: type) -> tuple[Any, tuple[Any, ...]]:
        """Tokenizer.__reduce__: by name (a bundled vocabulary) or by checksum (a
        from_file one, which carries its compiled arrays and their SHA-256, so a
        process that never saw the tokenizer.json rebuilds it; the arrays are
        verified against the checksum before use)."""
        binding = (self.format.name, dict(self.render_defaults), dict(self.model_config),
                   None if self.template is None else self.template.state())
        if self.vocab_name is not None:
            return (tokenizer_by_name, (cls, self.vocab_name, self.cache_size, self.encode_threads, binding))
        assert self._compiled is not None  # a from_file vocabulary keeps its arrays
        if self._compiled_sha256 is None:
            self._compiled_sha256 = arrays_sha256(self._compiled)
        return (tokenizer_by_checksum,
                (cls, self._compiled_sha256, dict(self._compiled), self.cache_size, self.encode_threads, binding))

    def tokenizer(self, cls: type[_Tok]) -> _Tok:
        """A `cls` (the Tokenizer class, passed in: it imports this module) over this core."""
        tok = cls.__new__(cls)
        tok.core = self  # type: ignore[attr-defined]
        return tok


def tokenizer_by_name(cls: type[_Tok], name: str, cache_size: int, encode_threads: int | None = None,
                      binding: tuple | None = None) -> _Tok:
    tok = cls(name, cache_size=cache_size, encode_threads=encode_threads)  # type: ignore[call-arg]
    if binding is not None:
        tok.core.bind(*binding)  # type: ignore[attr-defined]
    return tok


def tokenizer_by_checksum(cls: type[_Tok], sha256: str, arrays: dict, cache_size: int,
                          encode_threads: int | None = None, binding: tuple | None = None) -> _Tok:
    """Unpickle a from_file Tokenizer. The checksum travels in the same pickle as
    the arrays, so it only detects accidents: the arrays get every check that
    compiling a tokenizer.json guarantees (check_compiled, deep) before they
    reach the native core; anything wrong is a Qwen4ExpError."""
    try:
        _vocab_compile.check_compiled(arrays, self_encoding=False, deep=True)
    except _vocab_compile.VocabFormatError as exc:
        raise VocabularyError(f"unpickling a Tokenizer: {exc} (the pickle is damaged or forged)") from None
    got = arrays_sha256(arrays)
    if got != sha256:
        raise VocabularyError(
            f"unpickling a Tokenizer: its compiled vocabulary has SHA-256 {got}, "
            f"expected {sha256!r} (the pickle is damaged)"
        )
    try:
        core = TokenizerCore(arrays, cache_size, encode_threads, None)
    except Qwen4ExpError:
        raise
    except ValueError as exc:  # cache_size, encode_threads
        raise Qwen4ExpError(f"unpickling a Tokenizer: {exc}") from None
    core._compiled_sha256 = sha256
    if binding is not None:
        core.bind(*binding)
    return core.tokenizer(cls)


def _generic_native(native: NativeTokenizer, pipeline: np.ndarray) -> Any:
    """The native core behind a compiled vocabulary's own pre-tokenizer."""
    from qwen4exp.encode.generic import GenericNative
    from qwen4exp.vocab.pipeline import Pipeline

    try:
        return GenericNative(native, Pipeline.from_json(pipeline.tobytes()))
    except (ValueError, TypeError, AttributeError) as exc:  # PipelineError is a ValueError
        raise VocabularyError(f"a compiled vocabulary's pipeline is not usable ({str(exc)[:200]})") from None


def thread_count(num_threads: int | None, name: str = "num_threads") -> int:
    """A thread count argument as an int (None: the CPUs this process may use)."""
    if num_threads is None:
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except AttributeError:
            return os.cpu_count() or 1
    if isinstance(num_threads, (bool, np.bool_)) or not isinstance(num_threads, (int, np.integer)) or num_threads < 1:
        raise ValueError(f"{name} must be a positive int or None, not {num_threads!r}")
    return min(operator.index(num_threads), _THREADS_MAX)
