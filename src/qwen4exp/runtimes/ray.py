"""Tokenize a Ray Data dataset: one Tokenizer per worker actor, Arrow batches
in and out, the native batch threads inside each actor.

    import qwen4exp.runtimes.ray
    out = qwen4exp.runtimes.ray.tokenize_dataset(ds, column="messages", kind="chat", masks=True)

`TokenizerPool` is a fixed pool of such actors that runs a function on each
chunk it is given, in turn: `qwen4exp batch --engine ray` encodes its chunks
on one. This module imports `ray`, so `import qwen4exp` never does; install
the `ray` extra to use it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import ray
import ray.data

from qwen4exp.encode import batch_schema
from qwen4exp.encode.arrow import joined_rows, list_numpy
from qwen4exp.render.chat import render_chat
from qwen4exp.errors import ChatFormatError, Qwen4ExpError
from qwen4exp.formats import chat_format as format_named, chat_formats
from qwen4exp.vocab.vocabulary import DEFAULT_VOCABULARY
from qwen4exp.render.requests import REQUEST_KEYS, failure_name, request_from_json, request_of_row
from qwen4exp.encode.core import CACHE_SIZE_DEFAULT, tokenizer_by_name
from qwen4exp.encode.tokenizer import Tokenizer

__all__ = ["tokenize_dataset", "TokenizerPool", "actor_room"]

_KINDS = ("chat", "text")


def tokenize_dataset(
    ds: "ray.data.Dataset",
    *,
    column: str,
    kind: str = "chat",
    masks: bool = False,
    on_error: str = "raise",
    vocab: "str | Tokenizer | None" = None,
    batch_size: int = 256,
    concurrency: "int | tuple[int, int] | None" = None,
    num_threads: int = 1,
    chat_format: "str | None" = None,
) -> "ray.data.Dataset":
    """Tokenize `column` of `ds`; returns the input columns plus the token
    columns of qwen4exp.encode.batch_schema, those `qwen4exp batch` writes: `ids`
    (list<int32>), `length` (int32) and, with masks=True, `assistant_mask`
    (list<bool>) and `message_index` (list<int32>); with on_error="skip"
    also `error` (string, null when the row is fine; a bad row keeps its
    place with empty ids and the message).

    kind="text": a string column. kind="chat": request JSON strings
    ({"messages": [...], "tools": [...], "add_generation_prompt": ...} or a bare
    message list), Arrow list<struct> messages (as SFT datasets store them) or
    a struct column holding whole requests. The columns named after the
    other request keys ("tools", as JSON text or structs, "add_generation_prompt",
    "enable_thinking", "preserve_thinking", "reasoning_effort", "chat_format"),
    where the dataset has them, set those keys row by row, over the request's
    own: rows are read as `qwen4exp batch` reads a Parquet input
    (qwen4exp.render.requests.request_of_row). chat_format: as render_chat's, for
    every row (`--chat-format` of `qwen4exp batch`); a row whose own
    "chat_format" names another format is a bad row (RecordError).

    on_error="raise": a bad row raises its error (ChatFormatError for a bad
    request, the tokenizer's error otherwise) naming the column and the row's
    start; Ray wraps it in its UserCodeException unless
    `ray.data.DataContext.get_current().raise_original_map_exception` is set.

    vocab: a bundled vocabulary name or a Tokenizer (it pickles by name or by
    checksum, with its chat format); default: the vocabulary of `chat_format`'s
    models, else qwen4exp's default. `chat_format` defaults to the tokenizer's
    (Tokenizer.chat_format), and a row's options left out to its
    render_defaults (a model folder's, as Tokenizer.render_chat); a format of another vocabulary is a
    ChatFormatError before anything runs, and so is, row by row, a row whose
    own "chat_format" is one. Each actor encodes a batch of `batch_size` rows with
    `num_threads` native threads and reserves that many CPUs; `concurrency`
    is the actor count (n, or (min, max) to autoscale; default 1 to as many
    as the cluster fits while leaving it a CPU). The actors never take every
    CPU of the cluster: the operators that feed them (reading, repartitioning)
    need one, and actors holding them all would wait forever for blocks no
    task can run to make. A `concurrency` that leaves none (or a `num_threads`
    larger than every node) is refused with ValueError before anything runs.
    """
    if kind not in _KINDS:
        raise ValueError(f'kind must be "chat" or "text", not {kind!r}')
    if on_error not in ("raise", "skip"):
        raise ValueError(f'on_error must be "raise" or "skip", not {on_error!r}')
    if masks and kind != "chat":
        raise ValueError("masks=True needs kind=\"chat\" (plain text has no assistant turns)")
    if not isinstance(column, str):
        raise TypeError(f"column must be a column name (str), not {type(column).__name__}")
    for name, value in (("batch_size", batch_size), ("num_threads", num_threads)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, not {value!r}")
    if chat_format is not None and chat_format not in chat_formats():
        raise ValueError(f"chat_format must be one of {', '.join(chat_formats())}, not {chat_format!r}")
    if vocab is None:  # the vocabulary of the format's models
        vocab = format_named(chat_format).vocabulary if chat_format is not None else DEFAULT_VOCABULARY
    tok = vocab if isinstance(vocab, Tokenizer) else tokenizer_by_name(Tokenizer, vocab, CACHE_SIZE_DEFAULT)
    # a format of another vocabulary is refused here, before anything runs; a
    # tokenizer of a model folder's own template renders through it (Tokenizer.render_chat)
    render: dict
    if chat_format is None and tok.chat_format == "template":
        render = {"chat_format": "template", "renderer": tok.render_chat}
    else:
        render = {"chat_format": tok.core.chat_format_of(chat_format, "tokenize_dataset(chat_format=...)").name,
                  # a model folder's implied options (Tokenizer.render_defaults), for what a row leaves out
                  "defaults": dict(tok.render_defaults)}
    return ds.map_batches(
        _TokenizeColumn,
        fn_constructor_kwargs=dict(
            tokenizer=tok, num_threads=num_threads, column=column, kind=kind,
            masks=bool(masks), skip=on_error == "skip", render=render,
        ),
        batch_format="pyarrow",
        batch_size=batch_size,
        compute=_actor_pool(concurrency, num_threads),
        num_cpus=num_threads,
        udf_modifying_row_count=False,
    )


def _actor_pool(concurrency, num_threads: int):
    """The actor pool for `concurrency` actors of `num_threads` CPUs each, on a
    cluster that keeps at least one CPU for the operators feeding them."""
    def positive(x):
        return isinstance(x, int) and not isinstance(x, bool) and x >= 1

    pair = isinstance(concurrency, tuple) and len(concurrency) == 2 and all(map(positive, concurrency))
    if not (concurrency is None or positive(concurrency) or (pair and concurrency[0] <= concurrency[1])):
        raise ValueError(f"concurrency must be a positive int, a (min, max) pair or None, not {concurrency!r}")
    room = actor_room(num_threads)
    most = concurrency if isinstance(concurrency, int) else None if concurrency is None else concurrency[1]
    if most is not None and most > room:
        raise ValueError(
            f"concurrency={concurrency!r}: {most} actors of num_threads={num_threads} CPUs would take every "
            f"CPU of the cluster ({_cluster_cpus()}), and the operators that feed them (reading, "
            f"repartitioning) need one: the job would wait forever. Use at most {room} actors here"
        )
    if concurrency is None:
        return ray.data.ActorPoolStrategy(min_size=1, max_size=room)
    if isinstance(concurrency, tuple):
        return ray.data.ActorPoolStrategy(min_size=concurrency[0], max_size=concurrency[1])
    return ray.data.ActorPoolStrategy(size=concurrency)


def actor_room(num_threads: int) -> int:
    """How many actors of `num_threads` CPUs the cluster fits while keeping at
    least one CPU free (node by node: an actor's CPUs are on one node).
    ValueError when not even one fits."""
    if not ray.is_initialized():
        ray.init()  # as Ray Data would on the first run
    nodes = [int(n["Resources"].get("CPU", 0)) for n in ray.nodes() if n["Alive"]]
    fits = [c // num_threads for c in nodes]
    room = sum(fits)
    if room and sum(f * num_threads for f in fits) == sum(nodes):
        room -= 1  # the actors would fill every CPU: one fewer
    if room < 1:
        largest = max(nodes, default=0)
        why = (f"no node has {num_threads} CPUs (the largest has {largest})" if num_threads > largest else
               f"its {sum(nodes)} CPUs leave none for the operators that feed the actor")
        raise ValueError(f"num_threads={num_threads}: the cluster cannot run a tokenizer actor: {why}")
    return room


def _cluster_cpus() -> str:
    nodes = [int(n["Resources"].get("CPU", 0)) for n in ray.nodes() if n["Alive"]]
    return f"{sum(nodes)} CPUs on {len(nodes)} node{'s' * (len(nodes) != 1)}"


class TokenizerPool:
    """`size` Ray actors, each holding a copy of `tokenizer` and reserving
    `num_threads` CPUs for its native threads. `submit(fn, *args)` runs
    `fn(tokenizer, num_threads, *args)` on the next actor in turn and returns
    the ObjectRef of its result; an actor runs its calls one at a time, in
    the order submitted. `fn` must be importable on the workers (a module's
    function: Ray pickles it by name)."""

    def __init__(self, tokenizer: Tokenizer, *, size: int, num_threads: int = 1):
        for name, value in (("size", size), ("num_threads", num_threads)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, not {value!r}")
        actor = ray.remote(num_cpus=num_threads)(_PoolActor)
        self.actors = [actor.remote(tokenizer, num_threads) for _ in range(size)]
        self._turn = 0

    def submit(self, fn, *args) -> "ray.ObjectRef":
        handle = self.actors[self._turn % len(self.actors)]
        self._turn += 1
        return handle.run.remote(fn, *args)

    def close(self) -> None:
        """End the actors (what they were running is dropped)."""
        for handle in self.actors:
            ray.kill(handle)
        self.actors = []


class _PoolActor:
    def __init__(self, tokenizer: Tokenizer, num_threads: int):
        self.tok, self.threads = tokenizer, num_threads

    def run(self, fn, *args):
        return fn(self.tok, self.threads, *args)


# ---------------------------------------------------------------------------
# the actors
# ---------------------------------------------------------------------------


class _Worker:
    """One tokenizer per actor; encodes a batch's rows with the native threads."""

    def __init__(self, tokenizer: Tokenizer, num_threads: int):
        self.tok = tokenizer
        self.threads = num_threads

    def _encode(self, payloads, errors, masks: bool):
        """ids (and assistant masks) of every rendered chat whose errors[k] is
        None. A batch call first; if it fails, chat by chat so only the bad
        rows fail (their exception goes to errors). Texts take encode_arrow
        (_TokenizeColumn._texts)."""
        tok, n = self.tok, len(payloads)
        ids: list[Any] = [None] * n
        amask: list[Any] = [None] * n
        msg: list[Any] = [None] * n
        opts = dict(return_masks=True) if masks else {}
        pos = [k for k in range(n) if errors[k] is None]
        if not pos:
            return ids, (amask, msg)
        try:
            results: list[Any] = tok.encode_chats([payloads[k] for k in pos], num_threads=self.threads, **opts)
        except Qwen4ExpError:
            results = []
            for k in pos:
                try:
                    results.append(tok.encode_chat(payloads[k], **opts))
                except Qwen4ExpError as exc:
                    errors[k] = exc
                    results.append(None)
        for k, r in zip(pos, results):
            if r is None:
                continue
            if masks:
                ids[k], amask[k], msg[k] = r.ids, r.assistant_mask, r.message_index
            else:
                ids[k] = r
        return ids, (amask, msg)


class _TokenizeColumn(_Worker):
    """`tokenize_dataset`'s batch function."""

    def _texts(self, batch: pa.Table, col) -> pa.Table:
        """kind="text": the column through Tokenizer.encode_arrow, which reads
        its buffers in place and writes the ids straight into the list array;
        a null row, or one whose bytes are not UTF-8 (Arrow holds any), keeps
        its place with empty ids."""
        import pyarrow.compute as pc

        from qwen4exp.encode.arrow import invalid_rows
        from qwen4exp.errors import TextEncodingError

        if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
            raise TypeError(f"tokenize_dataset: kind=\"text\" needs a string column; {self.column!r} is {col.type}")
        n = len(col)
        errors = {}
        for k in np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False)).tolist():
            errors[k] = Qwen4ExpError("the text is null")
        for k in invalid_rows(col).tolist():
            errors[k] = TextEncodingError("the text is not valid UTF-8")
        if errors and not self.skip:
            k = min(errors)
            value = col.slice(k, 1).cast(pa.large_binary())[0].as_py() if col[k].is_valid else None
            raise type(errors[k])(f"tokenize_dataset: column {self.column!r}, row {k} of a batch of {n} "
                                  f"({_preview(value)}): {errors[k]}") from None
        if errors:
            mask = np.zeros(n, dtype=bool)
            mask[list(errors)] = True
            col = pc.if_else(pa.array(mask), pa.scalar(None, col.type), col)
        ids = self.tok.encode_arrow(col, num_threads=self.threads)
        parts = []  # the token columns of each chunk; a null row is an empty list (its offsets are equal)
        for chunk in ids.chunks if isinstance(ids, pa.ChunkedArray) else [ids]:
            offsets, values = list_numpy(chunk)
            parts.append(batch_schema.token_arrays(pa, offsets - offsets[0], values[offsets[0]:offsets[-1]]))
        columns = [pa.chunked_array([p[c] for p in parts], type=f.type)
                   for c, f in enumerate(batch_schema.token_fields(pa, masks=False))]
        return self._with_columns(batch, columns, [errors.get(k) for k in range(n)])

    def _with_columns(self, batch: pa.Table, columns: list, errors: list) -> pa.Table:
        """`batch` with the token columns (batch_schema's, in its order) and,
        when skipping bad rows, `error` appended."""
        out = batch
        for f, column in zip(batch_schema.token_fields(pa, self.masks), columns):
            out = out.append_column(f, column)
        if self.skip:
            out = out.append_column(batch_schema.error_field(pa),
                                    pa.array([None if e is None else _describe(e) for e in errors], pa.string()))
        return out

    def __init__(self, tokenizer, num_threads, column, kind, masks, skip, render):
        super().__init__(tokenizer, num_threads)
        self.column, self.kind, self.masks, self.skip, self.render = column, kind, masks, skip, render

    def __call__(self, batch: pa.Table) -> pa.Table:
        if self.column not in batch.column_names:
            raise KeyError(f"tokenize_dataset: no column {self.column!r} (columns: {batch.column_names})")
        added = [*batch_schema.token_names(self.masks)] + [batch_schema.ERROR] * self.skip
        taken = [c for c in added if c in batch.column_names]
        if taken:
            raise ValueError(f"tokenize_dataset: the dataset already has a column named {taken[0]!r}")
        col = batch.column(self.column)
        if self.kind == "text":
            return self._texts(batch, col)
        values = col.to_pylist()
        n = len(values)
        errors: list[Exception | None] = [None] * n
        payloads: list[Any] = [None] * n
        # the request keys' own columns beside the messages, as the local engine reads them
        columns = {key: batch.column(key).to_pylist() for key in REQUEST_KEYS[1:]
                   if key != self.column and key in batch.column_names}
        columns[self.column] = values
        for k, v in enumerate(values):
            try:
                payloads[k] = _render(columns, k, self.column, self.render)
            except Exception as failure:  # noqa: BLE001 - classified (or raised again) by _describe
                _describe(failure)
                errors[k] = failure
        ids, masks = self._encode(payloads, errors, self.masks)
        if not self.skip:
            for k, exc in enumerate(errors):
                if exc is not None:
                    cls = _library_error(exc, self.kind)
                    raise cls(
                        f"tokenize_dataset: column {self.column!r}, row {k} of a batch of {n} "
                        f"({_preview(values[k])}): {exc if type(exc) is cls else _describe(exc)}"
                    ) from None
        too_many = "use a smaller batch_size"
        offsets, flat = joined_rows(ids, np.int32, too_many)
        flat_masks = (joined_rows(masks[0], np.bool_, too_many)[1], joined_rows(masks[1], np.int32, too_many)[1]) \
            if self.masks else None
        return self._with_columns(batch, batch_schema.token_arrays(pa, offsets, flat, flat_masks), errors)


def _render(columns, r: int, column: str, render: dict):
    """Row r's chat -> RenderedChat (raises on a bad request)."""
    if columns[column][r] is None:
        raise ChatFormatError("the chat is null")
    # the run's format (render_chat's default without one): a row may only repeat it
    messages, options = request_from_json(request_of_row(columns, r, column), "record",
                                          render["chat_format"])
    for key, value in render.get("defaults", {}).items():
        options.setdefault(key, value)
    return render.get("renderer", render_chat)(messages, **options)


def _describe(exc: BaseException) -> str:
    """'ErrorType: message', as the batch command names failures; anything
    that is not a bad row (a bug) is raised again, as the local engine does."""
    error, message = failure_name(exc)
    return f"{error}: {message}"


def _library_error(exc, kind):
    if isinstance(exc, Qwen4ExpError):
        return type(exc)
    return ChatFormatError if kind == "chat" else Qwen4ExpError


def _preview(value) -> str:
    text = value if isinstance(value, str) else repr(value)
    return repr(text[:60] + "...") if len(text) > 60 else repr(text)
