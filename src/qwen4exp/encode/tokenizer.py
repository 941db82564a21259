"""The Tokenizer: plain-text encode/decode and the segmented adapter.

Python validates and converts; the native core (qwen4exp._native._encoder) does all
per-byte work in one GIL-free call. DATA never yields an added-token id;
TRUSTED_CONTROL only resolves exact atoms.
"""

from __future__ import annotations

import os
import types
from itertools import chain
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, overload

import numpy as np

from qwen4exp.vocab.vocabulary import ALIASES, DEFAULT_VOCABULARY, VOCABULARIES, bundled_vocabulary
from qwen4exp.vocab.loading import bundled_arrays, compiled_file
from qwen4exp.encode.core import CACHE_SIZE_DEFAULT, TEMPLATE_FORMAT, TokenizerCore, thread_count as _thread_count
from qwen4exp.encode.token_buffer import TokenBuffer
from qwen4exp.errors import SegmentError, VocabularyError, fault_error, id_error, surrogate_error
from qwen4exp.render.segments import Kind, RenderedChat, Segment

# What `import qwen4exp; Tokenizer().encode(...)` needs loads with this module;
# rendering, parsing, masks and media load on first use (tests/test_import_cost.py).
if TYPE_CHECKING:
    from qwen4exp.encode.masks import EncodedChat
    from qwen4exp.parse.completion import CompletionParser
    from qwen4exp.parse.decode_stream import DecodeStream
    from qwen4exp.shapes import MessageLike, ParsedCompletion, ToolLike
    from qwen4exp.encode.budget import FittedChat
    from qwen4exp.encode.chat_encoder import ChatEncoder

__all__ = ["Tokenizer", "TokenBuffer", "vocabularies"]

_INT64_MAX = 2**63 - 1

def vocabularies() -> tuple[str, ...]:
    """Names of the bundled vocabularies, for `Tokenizer(name)` (aliases not listed)."""
    return tuple(VOCABULARIES)


class Tokenizer:
    """Qwen byte-level BPE with provenance-aware segment encoding.

    `Tokenizer()` loads the bundled Qwen3 vocabulary, `Tokenizer(name)` any
    bundled one by name or alias (no network; `vocabularies()` lists them);
    `Tokenizer.from_file(path)` loads a Qwen-family tokenizer.json.

    `cache_size`: pieces each thread's own cache holds at first (the words it
    merged and the vocabulary spellings it looked up), about 150 bytes each;
    a cache that fills grows, doubling, to 4 times that (a long run over a
    large corpus keeps its words), and is emptied when it fills again; 0
    disables caching, so every piece is merged. Every
    thread first asks its own cache, then the seed: every token spelling
    that is one whole piece, built once per tokenizer and shared (16 MiB for
    Qwen3, 32 MiB for Qwen3.6).

    `encode_threads`: threads one `encode()` call may use (default: the CPUs
    this process may run on). A text from 2,048 bytes (1,536 if not ASCII) is cut into parts at
    piece boundaries and the parts run on the process's helper threads, the
    ids unchanged (docs/ARCHITECTURE.md, "Texts across threads"); 1 keeps
    every `encode()` on the calling thread.
    """

    #: What the library's other modules use (qwen4exp.encode.core); not public API.
    core: TokenizerCore

    def __init__(self, name: str = DEFAULT_VOCABULARY, *, cache_size: int = CACHE_SIZE_DEFAULT,
                 encode_threads: int | None = None) -> None:
        vocab = bundled_vocabulary(name)
        if vocab is None:
            raise VocabularyError(
                f"unknown vocabulary {name!r}: bundled are {', '.join(vocabularies())} "
                f"(aliases: {', '.join(f'{a} = {b}' for a, b in ALIASES.items())}); "
                "use Tokenizer.from_file for a tokenizer.json, Tokenizer.from_pretrained for a model folder"
            )
        self.core = TokenizerCore(bundled_arrays(vocab), cache_size, encode_threads, vocab.name)

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike, *, chat_format: str | None = None,
                        cache_size: int = CACHE_SIZE_DEFAULT, encode_threads: int | None = None) -> "Tokenizer":
        """Load a Hugging Face model folder: its vocabulary (the bundled one when
        the folder's tokenizer.json has the same contents) bound to the chat
        format its template is (qwen4exp.vocab.pretrained; docs/FORMAT.md, "Model
        folders"). `chat_format` names the format instead, for a template
        qwen4exp does not recognise. VocabularyError for a folder without a
        usable tokenizer.json, ChatFormatError for a template of no known
        format or a format of another vocabulary."""
        from qwen4exp.vocab.pretrained import load_model_folder

        return load_model_folder(cls, path, chat_format=chat_format, cache_size=cache_size,
                                 encode_threads=encode_threads)

    @classmethod
    def from_file(
        cls, path: str | os.PathLike, *, cache_size: int = CACHE_SIZE_DEFAULT, encode_threads: int | None = None
    ) -> "Tokenizer":
        """Load a byte-level BPE tokenizer.json (Qwen's, or another model's:
        GPT-2, Llama 3, DeepSeek...; docs/FORMAT.md, "Other vocabularies"),
        or a directory that holds one.

        The compiled form is cached under $QWEN4EXP_CACHE (default
        ~/.cache/qwen4exp), keyed by the file's SHA-256. FileNotFoundError
        when there is none, OSError when it cannot be read, Qwen4ExpError
        when it is not a regular file (a FIFO, a device), not a valid
        tokenizer.json, or not byte-level BPE (the error names what is not
        supported).
        """
        return TokenizerCore(compiled_file(path), cache_size, encode_threads, None).tokenizer(cls)

    def __reduce__(self):
        """Pickle by name (a bundled vocabulary) or by checksum (a from_file one:
        the compiled arrays travel, verified before use; qwen4exp.encode.core)."""
        return self.core.reduce(type(self))

    # -- the chat format -------------------------------------------------------

    @property
    def chat_format(self) -> str:
        """The chat format this tokenizer renders by default: its vocabulary's
        (formats.default_format of the vocabulary) or, from
        `from_pretrained`, the model folder's: a known format by its template's
        fingerprint, else "template" (the folder's own Jinja template, rendered
        with provenance by qwen4exp.render.template)."""
        return self.core.chat_format

    @property
    def vocabulary(self) -> str | None:
        """The bundled vocabulary's name, or None for a from_file vocabulary."""
        return self.core.vocab_name

    @property
    def render_defaults(self) -> Mapping[str, object]:
        """Render options the model folder's template implies (e.g. the Qwen3.5
        small models' enable_thinking=False); {} for a bundled vocabulary."""
        return types.MappingProxyType(self.core.render_defaults)

    def chat_formats(self) -> tuple[str, ...]:
        """The chat formats this tokenizer renders and encodes (its vocabulary's)."""
        return self.core.chat_formats()

    def render_chat(self, messages: Sequence[MessageLike], **options: Any) -> RenderedChat:
        """qwen4exp.render_chat in this tokenizer's chat format, with the model
        folder's defaults for options left out (`chat_format=` must be a
        format of this vocabulary). A tokenizer whose chat_format is "template"
        renders its model folder's own Jinja template (qwen4exp.render_template):
        `tools`, `add_generation_prompt`, `documents` and any other keyword as
        transformers' apply_chat_template takes them."""
        name = options.pop("chat_format", None)
        if self.core.template is not None and name in (None, TEMPLATE_FORMAT):
            return self.core.render_own_template(messages, options)
        fmt = self.core.chat_format_of(name, "render_chat()")
        for key, value in self.core.render_defaults.items():
            if options.get(key) is None:
                options[key] = value
        from qwen4exp.render.chat import render_chat

        return render_chat(messages, chat_format=fmt.name, **options)

    # -- plain text --------------------------------------------------------

    @property
    def atoms(self) -> Mapping[str, int]:
        """The special-atom table: spelling -> id (read-only)."""
        return self.core.atoms

    @property
    def vocab_size(self) -> int:
        """Number of ids: BPE tokens plus atoms (the largest id + 1)."""
        return self.core.vocab_size

    def token_to_id(self, token: str) -> int | None:
        """The id of a token spelled as in HF `tokenizers`: byte-level for BPE
        tokens ("Ġworld" is " world"), as written for atoms (`Marker.IM_END.value`);
        None when the vocabulary has no such token."""
        if not isinstance(token, str):
            raise TypeError(f"token_to_id() takes a str, not {type(token).__name__}")
        return self.core.spellings()[1].get(token)

    def id_to_token(self, id: int) -> str | None:
        """The spelling of an id as in HF `tokenizers` (see token_to_id); None
        for an id outside the vocabulary."""
        if isinstance(id, (bool, np.bool_)) or not isinstance(id, (int, np.integer)):
            raise TypeError(f"id_to_token() takes an int, not {type(id).__name__}")
        spellings = self.core.spellings()[0]
        return spellings[id] if 0 <= id < len(spellings) else None

    def __repr__(self) -> str:
        core = self.core
        return f"Tokenizer({core.n_vocab} BPE tokens, {len(core.atoms)} atoms, vocab_size={self.vocab_size})"

    def encode(self, text: str) -> list[int]:
        """Ids of `text`, all of it DATA: an atom spelling in it is BPE-encoded.

        A list, like the plain-text APIs of HF tokenizers and tiktoken; the
        stream and chat forms return int32 arrays (docs/FORMAT.md, section 7).
        """
        text = _exact_str(text, "encode()")
        try:
            return self.core.native.encode(text)
        except UnicodeEncodeError:
            raise surrogate_error(text, "encode()") from None

    def count(self, text: str) -> int:
        """len(encode(text)), without building the list."""
        text = _exact_str(text, "count()")
        try:
            return self.core.native.count(text)
        except UnicodeEncodeError:
            raise surrogate_error(text, "count()") from None

    def encode_batch(self, texts: Sequence[str], num_threads: int | None = None) -> list[list[int]]:
        """encode() of each text, in order, on `num_threads` native threads (default: all
        CPUs; a larger request than 1024 is clamped to 1024)."""
        if isinstance(texts, (str, bytes)):
            raise TypeError("encode_batch() takes a sequence of str, not a single "
                            f"{type(texts).__name__} (use encode() for one text)")
        texts = [_exact_str(t, f"encode_batch(): texts[{i}]") for i, t in enumerate(texts)]
        threads = _thread_count(num_threads)
        try:
            return self.core.native.encode_batch(texts, threads)
        except UnicodeEncodeError:
            for i, t in enumerate(texts):
                try:
                    t.encode("utf-8")
                except UnicodeEncodeError:
                    raise surrogate_error(t, f"encode_batch(): texts[{i}]") from None
            raise

    def encode_arrow(self, strings: Any, *, num_threads: int | None = None) -> Any:  # pyarrow in and out
        """encode() of each row of a pyarrow string or large_string Array (a
        ListArray of int32 ids back) or ChunkedArray (a ChunkedArray back,
        chunk for chunk), or of a list of str (None: a null row); nulls stay
        null. The native threads read the UTF-8 buffers in place and write
        the ids straight into the result's buffers: no Python object per row
        or per id. All or nothing, as encode_batch: a row that is not valid
        UTF-8 (Arrow arrays built from buffers can hold any bytes) raises
        TextEncodingError naming it. Needs pyarrow (the `cli` extra)."""
        if self.core.generic:  # another pre-tokenizer: qwen4exp.vocab.pipeline
            from qwen4exp.encode.generic import GenericNative, encode_arrow as encode_arrow_generic

            generic = self.core.native
            assert isinstance(generic, GenericNative)  # what core built for a pipeline
            return encode_arrow_generic(generic, strings, _thread_count(num_threads))
        from qwen4exp.encode.arrow import encode_arrow

        return encode_arrow(self.core.native, strings, _thread_count(num_threads))

    def decode_bytes(self, ids: Iterable[int], *, skip_special: bool = False) -> bytes:
        """The bytes the ids spell (atoms spell themselves; with `skip_special`,
        the special ones, such as the IM_END marker, spell nothing, as in HF)."""
        core = self.core
        arr = _ids_array(ids, core.n_vocab)
        if skip_special and core.special_ids and arr.size:
            arr = arr[~np.isin(arr, np.fromiter(core.special_ids, dtype=np.int32))]
        data, bad = self.core.native.decode_bytes(arr)
        if data is None:
            raise id_error(int(arr[bad]), bad, "decode()", core.n_vocab)
        return data

    def decode(self, ids: Iterable[int], *, skip_special: bool = False) -> str:
        """Text of the ids; bytes that do not form UTF-8 become U+FFFD, as in HF."""
        return self.decode_bytes(ids, skip_special=skip_special).decode("utf-8", errors="replace")

    # -- the output side (docs/FORMAT.md, section 11) ---------------------------

    def decode_stream(self, *, skip_special: bool = False, embedding_rows: int | None = None) -> DecodeStream:
        """A streaming decoder: `step(id)` returns the text completed by that id.
        With `embedding_rows` (the model's), an id past the vocabulary below it
        (a padded embedding row) spells nothing, as in HF's decode."""
        from qwen4exp.parse.decode_stream import DecodeStream, PaddedRowsDecodeStream

        tables = self.core.id_tables()
        table = tables.skip if skip_special else tables.text
        if embedding_rows is None:
            return DecodeStream(table, n_vocab=tables.n_vocab, _internal=True)
        if isinstance(embedding_rows, bool) or not isinstance(embedding_rows, int):
            raise TypeError(f"embedding_rows must be an int or None, not {type(embedding_rows).__name__}")
        return PaddedRowsDecodeStream(table, n_vocab=tables.n_vocab, rows=(self.vocab_size, embedding_rows),
                                      _internal=True)

    def completion_parser(self, prompt: RenderedChat | None = None, *, chat_format: str | None = None,
                          tools: Sequence[ToolLike] | None = None, in_reasoning: bool | None = None,
                          calls_in_reasoning: str = "text", embedding_rows: int | None = None) -> CompletionParser:
        """A streaming parser of the ids a model generates after `prompt` (a
        RenderedChat rendered with add_generation_prompt=True, which gives the
        chat format, the tools and whether reasoning is open; the keywords
        override it): `feed(ids) -> [Delta]`, `finish() -> dict`. With
        `embedding_rows` (the model's), ids past the vocabulary below it spell
        nothing and are listed in the message's `notes`."""
        from qwen4exp.parse.completion import CompletionParser

        return CompletionParser(self, prompt, chat_format=chat_format, tools=tools,
                                in_reasoning=in_reasoning, calls_in_reasoning=calls_in_reasoning,
                                embedding_rows=embedding_rows)

    def parse_completion(self, ids: Iterable[int], prompt: RenderedChat | None = None, *,
                         chat_format: str | None = None, tools: Sequence[ToolLike] | None = None,
                         in_reasoning: bool | None = None, calls_in_reasoning: str = "text",
                         embedding_rows: int | None = None) -> ParsedCompletion:
        """The assistant message (OpenAI style: role, content, reasoning_content,
        tool_calls with ids and typed arguments) that generated ids spell after
        `prompt`; structure comes only from atom ids (docs/FORMAT.md, section 11)."""
        from qwen4exp.parse.completion import parse_all

        return parse_all(self, ids, prompt, chat_format=chat_format, tools=tools,
                         in_reasoning=in_reasoning, calls_in_reasoning=calls_in_reasoning,
                         embedding_rows=embedding_rows)

    def flush_cache(self) -> None:
        """Forget the words the caches learned: each goes back to the token
        spellings it started from (they are bounded; this only drops their contents)."""
        self.core.native.flush_cache()

    # -- segments ------------------------------------------------------------

    def encode_segments(self, data: bytes, segments: Iterable[Segment]) -> np.ndarray:
        """Ids of a caller-built segmented stream: a numpy int32 array, like every
        stream and chat form (docs/FORMAT.md, section 7)."""
        return self._encode_stream(data, segments)

    @overload
    def encode_chat(self, chat: RenderedChat, *, return_masks: Literal[False] = False,
                    expand_media: Any = False) -> np.ndarray: ...
    @overload
    def encode_chat(self, chat: RenderedChat, *, return_masks: Literal[True], expand_media: Any = False) -> EncodedChat: ...
    @overload
    def encode_chat(self, chat: RenderedChat, *, return_masks: bool, expand_media: Any = False) -> np.ndarray | EncodedChat: ...

    def encode_chat(self, chat: RenderedChat, *, return_masks: bool = False,
                    expand_media: Any = False) -> np.ndarray | EncodedChat:
        """Ids of a rendered chat, each segment tokenized on its own: a numpy int32
        array, what model inputs and the batch output take (docs/FORMAT.md, section 7).

        With `return_masks=True`, an EncodedChat: the same ids plus
        `control_mask`, `message_index` and `assistant_mask` (qwen4exp.encode.masks).
        With `expand_media` (True, or a dict of image-processor parameters),
        each image or video pad is written once per merged patch (qwen4exp.render.media).
        """
        from qwen4exp.encode.masks import chat_masks
        from qwen4exp.render import media as _media

        proc = _media.processor_of(self, expand_media, "encode_chat()")
        ids, tok_ends = self._chat_ids(chat, "encode_chat()", return_masks)
        result = chat_masks(chat, ids, tok_ends, self.core.token_lengths()) if return_masks else ids
        return _media.expand(self, chat, result, proc, "encode_chat()")

    def count_chat(self, chat: RenderedChat, *, expand_media: Any = False) -> int:
        """len(encode_chat(chat, expand_media=expand_media))."""
        from qwen4exp.render import media as _media

        proc = _media.processor_of(self, expand_media, "count_chat()")
        ids = self._chat_ids(chat, "count_chat()", False)[0]
        return _media.expanded_count(self, chat, ids, proc, "count_chat()")

    def _chat_ids(self, chat: RenderedChat, where: str, with_ends: bool):
        """(ids, ids so far after each segment or None) of a RenderedChat."""
        if not isinstance(chat, RenderedChat):
            raise TypeError(f"{where} takes a RenderedChat, not {type(chat).__name__}")
        self.core.check_chat(chat, where)
        data, bounds = chat.data, chat.boundaries
        ids, tok_ends, fault = self.core.native.encode_bounds(data, bounds, chat.first_is_control, 0, with_ends)
        if fault is not None:
            raise fault_error(fault, data, bounds, bounds[1:])
        return ids, tok_ends

    def fit_chat(
        self,
        messages: Sequence[MessageLike],
        budget: int,
        *,
        tools: Sequence[ToolLike] | None = None,
        chat_format: str | None = None,
        add_generation_prompt: bool = True,
        expand_media: Any = False,
        **render_options: Any,
    ) -> "FittedChat":
        """The conversation cut to at most `budget` ids by dropping its oldest
        turns: a FittedChat (`messages`, `chat`, `ids`, `dropped`).

        The system message and the last user turn are always kept; a turn (a
        user message and everything up to the next one, tool calls with their
        results) goes whole. The result is the longest such suffix that fits,
        exactly; BudgetError when even the minimum does not (qwen4exp.encode.budget).
        `render_options` go to render_chat; `expand_media` counts media parts
        as encode_chat does (the ids are expanded too).
        """
        from qwen4exp.encode.budget import fit_chat

        return fit_chat(self, messages, budget, tools=tools, chat_format=chat_format,
                        add_generation_prompt=add_generation_prompt, expand_media=expand_media,
                        **render_options)

    def chat_encoder(self) -> "ChatEncoder":
        """A ChatEncoder for one growing conversation (qwen4exp.encode.chat_encoder)."""
        from qwen4exp.encode.chat_encoder import ChatEncoder

        return ChatEncoder(self)

    def encode_segments_into(self, data: bytes, segments: Iterable[Segment], out: TokenBuffer) -> None:
        """Append the stream's ids to `out`; on any error `out` is exactly as before."""
        if not isinstance(out, TokenBuffer):
            raise TypeError(f"out must be a TokenBuffer, not {type(out).__name__}")
        ids = self._encode_stream(data, segments)
        out._append(ids)

    @overload
    def encode_chats(self, chats: Sequence[RenderedChat], num_threads: int | None = None, *,
                     return_masks: Literal[False] = False, expand_media: Any = False) -> list[np.ndarray]: ...
    @overload
    def encode_chats(self, chats: Sequence[RenderedChat], num_threads: int | None = None, *,
                     return_masks: Literal[True], expand_media: Any = False) -> list[EncodedChat]: ...
    @overload
    def encode_chats(self, chats: Sequence[RenderedChat], num_threads: int | None = None, *,
                     return_masks: bool, expand_media: Any = False) -> list[np.ndarray] | list[EncodedChat]: ...

    def encode_chats(
        self, chats: Sequence[RenderedChat], num_threads: int | None = None, *, return_masks: bool = False,
        expand_media: Any = False,
    ) -> list[np.ndarray] | list[EncodedChat]:
        """encode_chat() of each chat, in order, on `num_threads` native threads
        (EncodedChat with masks when `return_masks`; media expanded with `expand_media`).

        All-or-nothing: if any chat is malformed the first fault is raised
        (naming the chat's index) and no result is returned.
        """
        from qwen4exp.encode.masks import chat_masks
        from qwen4exp.render import media as _media

        proc = _media.processor_of(self, expand_media, "encode_chats()")
        items: list[tuple[Any, ...]] = []
        chats = list(chats)
        for i, chat in enumerate(chats):
            if not isinstance(chat, RenderedChat):
                raise TypeError(f"encode_chats(): chats[{i}] is {type(chat).__name__}, not RenderedChat")
            self.core.check_chat(chat, f"encode_chats(): chats[{i}]")
            arrays: tuple[np.ndarray, ...] = _chat_arrays(chat)
            if return_masks:
                arrays += (np.empty(len(arrays[0]), dtype=np.int64),)
            items.append((chat.data, *arrays))
        results: list[Any] = self.core.native.encode_streams(items, _thread_count(num_threads))
        for i, r in enumerate(results):
            if isinstance(r, tuple):
                data, starts, ends = items[i][:3]
                exc = fault_error(r, data, starts, ends)
                raise type(exc)(f"chats[{i}]: {exc}")
        if return_masks:
            lengths = self.core.token_lengths()
            results = [chat_masks(chat, ids, item[4], lengths) for chat, ids, item in zip(chats, results, items)]
        if proc is not None:  # all or nothing: every chat's media counted before one is returned
            results = [_media.expand(self, chat, r, proc, f"encode_chats(): chats[{i}]")
                       for i, (chat, r) in enumerate(zip(chats, results))]
        return results

    def _encode_stream(self, data: bytes, segments: Iterable[Segment]) -> np.ndarray:
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"data must be bytes, not {type(data).__name__}")
        return self._encode_arrays(bytes(data), *_segment_arrays(segments))

    def _encode_arrays(self, data: bytes, starts: np.ndarray, ends: np.ndarray, kinds: np.ndarray) -> np.ndarray:
        ids, fault = self.core.native.encode_segments(data, starts, ends, kinds)
        if ids is not None:
            return ids
        raise fault_error(fault, data, starts, ends)


def _exact_str(text, where: str) -> str:
    """text as an exact str: a subclass (numpy.str_, or one overriding methods)
    is copied, so the native core and the error paths see plain text."""
    if type(text) is str:
        return text
    if not isinstance(text, str):
        raise TypeError(f"{where} takes a str, not {type(text).__name__}")
    return str.__str__(text)


def _ids_array(ids: Iterable[int], n_vocab: int) -> np.ndarray:
    """ids as an int32 array; an id that cannot be one is named with its own
    value (an unsigned array's 2**64 - 1 is not called -1)."""
    if isinstance(ids, np.ndarray):
        if ids.ndim != 1 or ids.dtype.kind not in "iu":
            raise TypeError("decode() takes a 1-D array of integer ids")
        if ids.size and (ids.min() < 0 or ids.max() > 2**31 - 1):
            bad = int(np.flatnonzero((ids < 0) | (ids > 2**31 - 1))[0])
            raise id_error(int(ids[bad]), bad, "decode()", n_vocab)
        return np.ascontiguousarray(ids, dtype=np.int32)
    if isinstance(ids, (str, bytes)):
        raise TypeError("decode() takes a sequence of int ids, not a string")
    ids = list(ids)
    for i, t in enumerate(ids):
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)):
            raise TypeError(f"decode(): ids[{i}] is {type(t).__name__}, not int")
        if not 0 <= t <= 2**31 - 1:
            raise id_error(t, i, "decode()", n_vocab)
    return np.array(ids, dtype=np.int32)


def _chat_arrays(chat: RenderedChat) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A RenderedChat's segments as the native (starts int64, ends int64, kinds
    int8) arrays: its boundaries with alternating kinds (no checks needed)."""
    b = np.asarray(chat.boundaries, dtype=np.int64)
    kinds = (np.arange(len(b) - 1, dtype=np.int8) + np.int8(chat.first_is_control)) & 1
    return b[:-1].copy(), b[1:].copy(), kinds


def _segment_arrays(segments: Iterable[Segment]):
    """Convert caller-built segments to contiguous (starts, ends, kinds) arrays,
    type-checking them (ints for bounds, `Kind` for kinds); geometry is
    checked natively."""
    if isinstance(segments, (str, bytes)):
        raise TypeError("segments must be a sequence of Segment(start, end, kind)")
    segments = tuple(segments)
    m = len(segments)
    for i, seg in enumerate(segments):
        try:
            start, end, kind = seg
        except (TypeError, ValueError):
            raise SegmentError(f"segment {i} is not a (start, end, kind) triple: {seg!r}") from None
        for name, v in (("start", start), ("end", end)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise SegmentError(f"segment {i}: {name} must be an int, not {type(v).__name__}")
            if not 0 <= v <= _INT64_MAX:
                raise SegmentError(f"segment {i}: {name} {v} is out of range (negative or past 2**63)")
        if not isinstance(kind, Kind):
            raise SegmentError(
                f"segment {i} has an unknown kind {kind!r} "
                "(use qwen4exp.Kind.DATA or Kind.TRUSTED_CONTROL)"
            )
    flat = np.fromiter(chain.from_iterable(segments), dtype=np.int64, count=3 * m).reshape(m, 3)
    return (
        np.ascontiguousarray(flat[:, 0]),
        np.ascontiguousarray(flat[:, 1]),
        flat[:, 2].astype(np.int8),
    )
