"""The columns `qwen4exp batch` writes beside `index`, `ids` and `length`.

* `--masks`: `assistant_mask` (list<bool>) and `message_index`
  (list<int32>), token for token as `encode_chat(chat, return_masks=True)`
  gives them; a text record has no assistant turn and no message, so its
  mask is all false and its indexes all -1.
* `--keep-columns`: every other field of an input record, carried through:
  a JSONL record's other keys, a Parquet input's other columns (with their
  Arrow types). Into Parquet from JSONL, a field's type is what pyarrow
  infers from the first chunk that has rows; a later value of another type,
  a field (or an object's key) no record of that chunk had, and what
  Parquet cannot store (an integer outside int64, an object with no keys)
  are input errors naming the field. Into JSONL from Parquet, a float that
  JSON cannot write (NaN, Infinity) is written as null, and the run's
  summary says how many of each field were.

The names and types of the columns themselves are `qwen4exp.encode.batch_schema`'s.

`RecordOptions` is what every record is read with (the chat format and
whether to keep the other fields); the engines hand it to the sources and to
the actors of `--engine ray`. Nothing here imports pyarrow until a Parquet
value is built.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from typing import Any, NamedTuple

import numpy as np

from qwen4exp.encode import batch_schema
from qwen4exp.render.requests import REQUEST_KEYS
from qwen4exp.cli.common import InputError, UsageError

__all__ = ["RecordOptions", "record_options", "BASE_COLUMNS", "MASK_COLUMNS", "other_fields", "check_kept_names",
           "mask_arrays", "kept_of", "join_kept", "ExtraColumns"]

BASE_COLUMNS = (batch_schema.INDEX,) + batch_schema.token_names(masks=False)
MASK_COLUMNS = batch_schema.token_names(masks=True)[len(BASE_COLUMNS) - 1:]
INT64 = range(-(2**63), 2**63)
RECORD_KEYS = frozenset(REQUEST_KEYS) | {"text"}  # what a record is made of; the rest is "other fields"


class RecordOptions(NamedTuple):
    """How records are read: `render` (render_chat's keywords the command line
    sets, such as chat_format), `keep` (carry the other fields) and `defaults`
    (render options a record may set, else these: the --tokenizer model
    folder's, Tokenizer.render_defaults)."""

    render: tuple = ()  # (name, value) pairs
    keep: bool = False
    defaults: tuple = ()  # (name, value) pairs
    # Tokenizer.render_chat of a --tokenizer FOLDER rendered through its own
    # template (chat_format "template"), which render_chat alone cannot render
    renderer: Any = None


def other_fields(obj) -> dict:
    """A JSONL record's fields that are not part of the request or text."""
    if not isinstance(obj, dict):
        return {}
    return {k: v for k, v in obj.items() if k not in RECORD_KEYS}


def check_kept_names(names, masks: bool) -> None:
    """UsageError when a carried column would take the name of an output column."""
    taken = set(BASE_COLUMNS) | (set(MASK_COLUMNS) if masks else set())
    clash = sorted(set(names) & taken)
    if clash:
        raise UsageError(f"--keep-columns: the input's {clash[0]!r} has the name of an output column")


def mask_arrays(results) -> tuple[np.ndarray, np.ndarray]:
    """(assistant_mask, message_index) of a chunk's results, flat in the order
    of their ids: EncodedChat for chats, plain ids for texts."""
    if not results:
        return np.zeros(0, dtype=bool), np.zeros(0, dtype=np.int32)
    masks, indexes = [], []
    for x in results:
        if hasattr(x, "assistant_mask"):
            masks.append(x.assistant_mask)
            indexes.append(x.message_index)
        else:
            masks.append(np.zeros(len(x), dtype=bool))
            indexes.append(np.full(len(x), -1, dtype=np.int32))
    return np.concatenate(masks), np.concatenate(indexes).astype(np.int32, copy=False)


def kept_of(records):
    """The other fields of a chunk's records, one row per record: a list of
    dicts (JSONL) or a pyarrow Table (Parquet rows: `extra` is (table, row))."""
    extras = [r.extra for r in records]
    if extras and isinstance(extras[0], tuple):
        table = extras[0][0]
        return table.take([row for _, row in extras])
    return [e or {} for e in extras]


def join_kept(parts):
    """kept_of(...) of consecutive chunks joined into one."""
    parts = [p for p in parts if p is not None]
    if not parts:
        return None
    if isinstance(parts[0], list):
        return [row for p in parts for row in p]
    import pyarrow as pa

    return pa.concat_tables(parts)


class ExtraColumns:
    """What OUT holds beyond index and ids for one run: the mask columns
    (`masks`) and the carried fields (`keep`)."""

    def __init__(self, masks: bool, keep: bool, kept_schema=None) -> None:
        self.masks, self.keep = masks, keep
        self.kept_schema = kept_schema  # pyarrow schema of the carried columns, once known
        self.nulled: Counter[str] = Counter()  # JSONL: field -> floats JSON cannot write, written as null

    def __bool__(self) -> bool:
        return self.masks or self.keep

    # -- Parquet ------------------------------------------------------------------

    def schema(self, pa, kept=None, index=()):
        """OUT's whole schema: index, the token columns, then the carried
        columns (their types from `kept`, the first chunk of records `index`,
        when not yet known)."""
        fields = [batch_schema.index_field(pa)] + batch_schema.token_fields(pa, self.masks)
        if self.keep:
            if self.kept_schema is None:
                self.kept_schema = self._infer(pa, kept or [], index)
            fields += list(self.kept_schema)
        return pa.schema(fields)

    def _infer(self, pa, rows: list, index):
        names = list(dict.fromkeys(k for row in rows for k in row))
        check_kept_names(names, self.masks)
        fields = []
        for name in names:
            values = [row.get(name) for row in rows]
            try:
                kind = pa.array(values).type
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
                raise InputError(f"--keep-columns: the values of {name!r} have no one Arrow type "
                                 f"({_unstorable(values, name, index) or exc})") from None
            empty = _empty_struct(kind, name)
            if empty:
                raise InputError(f"--keep-columns: {empty} is an object with no keys in every record of the "
                                 "first chunk, which Parquet cannot store (write JSONL, or give it a key)")
            fields.append(pa.field(name, kind))
        return pa.schema(fields)

    def kept_arrays(self, pa, kept, index) -> list:
        """The carried columns of one chunk (of records `index`), in schema order."""
        if not self.keep:
            return []
        if not isinstance(kept, list):  # a Parquet input's rows: its own columns
            return [kept.column(f.name).combine_chunks() for f in self.kept_schema]
        unknown = sorted({k for row in kept for k in row} - set(self.kept_schema.names))
        if unknown:
            raise InputError(f"--keep-columns: field {unknown[0]!r} first appears after the first chunk, "
                             "which fixed OUT's columns (give it in the first records, or write JSONL)")
        arrays = []
        for f in self.kept_schema:
            values = [row.get(f.name) for row in kept]
            try:
                arrays.append(pa.array(values, type=f.type))
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
                raise InputError(f"--keep-columns: a value of {f.name!r} is not of the type of the "
                                 f"first chunk's ({f.type}): {_unstorable(values, f.name, index) or exc}") from None
            dropped = _has_struct(f.type) and _dropped_key(values, f.type, f.name)
            if dropped:
                raise InputError(f"--keep-columns: {dropped} first appears after the first chunk, which fixed "
                                 f"the type of {f.name!r} ({f.type}) (give it in the first records, or write JSONL)")
        return arrays

    # -- JSONL --------------------------------------------------------------------

    def json_suffixes(self, offsets, masks, kept) -> list[str]:
        """One string per record, to close its JSONL object after "length"."""
        n = len(offsets) - 1
        parts: list[list[str]] = [[] for _ in range(n)]
        if self.masks:
            assistant, message = masks
            for k in range(n):
                a, b = offsets[k], offsets[k + 1]
                bits = ",".join("true" if m else "false" for m in assistant[a:b].tolist())
                parts[k].append(f',"{batch_schema.ASSISTANT_MASK}":[{bits}],'
                                f'"{batch_schema.MESSAGE_INDEX}":[{",".join(map(str, message[a:b].tolist()))}]')
        if self.keep:
            rows = kept if isinstance(kept, list) else kept.to_pylist()
            taken = set(BASE_COLUMNS) | (set(MASK_COLUMNS) if self.masks else set())
            for k, row in enumerate(rows):
                for name, value in row.items():
                    if name in taken:
                        raise InputError(f"--keep-columns: a record's {name!r} has the name of an output column")
                    parts[k].append("," + json.dumps(name, ensure_ascii=False) + ":" + self._json(name, value))
        return ["".join(p) for p in parts]

    def _json(self, name: str, value) -> str:
        """`value` as JSON; the floats JSON has no spelling for (NaN,
        Infinity) become null, counted in `nulled`."""
        try:
            return json.dumps(value, ensure_ascii=False, default=_json_value, allow_nan=False)
        except ValueError:  # a NaN or an infinity somewhere in it
            count = [0]
            value = _finite(value, count)
            self.nulled[name] += count[0]
            return json.dumps(value, ensure_ascii=False, default=_json_value, allow_nan=False)


def _finite(value, count: list):
    """`value` with every float that is NaN or infinite replaced by None (count[0] counts them)."""
    if isinstance(value, float) and not math.isfinite(value):
        count[0] += 1
        return None
    if isinstance(value, dict):
        return {k: _finite(v, count) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v, count) for v in value]
    return value


def _unstorable(values: list, name: str, index) -> str | None:
    """Where `values` (a field's, of records `index`) hold what no Arrow
    type stores: an integer outside int64 (Parquet's widest), with its path."""
    def find(value, path):
        if isinstance(value, int) and not isinstance(value, bool):
            return None if value in INT64 else f"{path} is {_short(value)}, outside int64 (Parquet's widest integer)"
        items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        for key, v in items:
            found = find(v, f"{path}[{key!r}]" if isinstance(value, dict) else f"{path}[{key}]")
            if found:
                return found
        return None

    for k, value in enumerate(values):
        found = find(value, name)
        if found:
            where = f"record {index[k]}" if k < len(index) else "a record"
            return f"{where}: {found}; write JSONL, or give it as a string"
    return None


def _short(value: int) -> str:
    text = str(value)
    return text if len(text) <= 40 else f"{text[:20]}...{text[-10:]} ({len(text)} digits)"


def _empty_struct(kind, path: str) -> str | None:
    """The path of an object type with no fields inside `kind`, or None."""
    import pyarrow as pa

    if pa.types.is_struct(kind):
        if kind.num_fields == 0:
            return repr(path)
        return next(filter(None, (_empty_struct(kind.field(i).type, f"{path}.{kind.field(i).name}")
                                  for i in range(kind.num_fields))), None)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return _empty_struct(kind.value_type, f"{path}[]")
    return None


def _has_struct(kind) -> bool:
    import pyarrow as pa

    if pa.types.is_struct(kind):
        return True
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return _has_struct(kind.value_type)
    return False


def _dropped_key(values: list, kind, name: str) -> str | None:
    """An object key in `values` that the struct type `kind` has no field for
    (pa.array would drop it without a word), as a path, or None."""
    import pyarrow as pa

    def find(value, kind, path):
        if value is None:
            return None
        if pa.types.is_struct(kind) and isinstance(value, dict):
            names = {kind.field(i).name: kind.field(i).type for i in range(kind.num_fields)}
            for key, v in value.items():
                if key not in names:
                    return f"{path}[{key!r}]"
                found = find(v, names[key], f"{path}[{key!r}]")
                if found:
                    return found
        elif (pa.types.is_list(kind) or pa.types.is_large_list(kind)) and isinstance(value, list):
            for v in value:
                found = find(v, kind.value_type, f"{path}[]")
                if found:
                    return found
        return None

    return next(filter(None, (find(v, kind, name) for v in values)), None)


def _json_value(value):
    """JSON for the Arrow values json cannot write (dates, decimals, bytes)."""
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise InputError("--keep-columns: a binary value is not UTF-8 text, which JSONL cannot "
                             "hold (write Parquet)") from None
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def record_options(args, tok=None) -> RecordOptions:
    """The RecordOptions of a `batch` command line run with the tokenizer
    `tok`: every record is rendered in --chat-format, else in `tok`'s format
    (its vocabulary's own, or its model folder's)."""
    fmt = getattr(args, "chat_format", None) or (tok.chat_format if tok is not None else None)
    render = (("chat_format", fmt),) if fmt else ()
    defaults = tuple(tok.render_defaults.items()) if tok is not None else ()
    renderer = tok.render_chat if tok is not None and fmt == "template" else None
    return RecordOptions(render, bool(getattr(args, "keep_columns", False)), defaults, renderer)
