"""The columns `qwen4exp batch` writes beside `index`, `ids` and `length`.

* `--masks`: `assistant_mask` (list<bool>) and `message_index`
  (list<int32>), token for token as `encode_chat(chat, return_masks=True)`
  gives them; a text record has no assistant turn and no message, so its
  mask is all false and its indexes all -1.
* `--keep-columns`: every other field of an input record, carried through:
  a JSONL record's other keys, a Parquet input's other columns (with their
  Arrow types). Into Parquet from JSONL, a field's type is what pyarrow
  infers from the first chunk that has rows; a later value of another type,
  or a field no record of that chunk had, is an input error naming it.

`RecordOptions` is what every record is read with (the chat format and
whether to keep the other fields); the engines hand it to the sources and to
the actors of `--engine ray`. Nothing here imports pyarrow until a Parquet
value is built.
"""

from __future__ import annotations

import json
from typing import NamedTuple

import numpy as np

from ..requests import REQUEST_KEYS
from .common import InputError, UsageError

__all__ = ["RecordOptions", "record_options", "BASE_COLUMNS", "MASK_COLUMNS", "other_fields", "check_kept_names",
           "mask_arrays", "kept_of", "join_kept", "ExtraColumns"]

BASE_COLUMNS = ("index", "ids", "length")
MASK_COLUMNS = ("assistant_mask", "message_index")
RECORD_KEYS = frozenset(REQUEST_KEYS) | {"text"}  # what a record is made of; the rest is "other fields"


class RecordOptions(NamedTuple):
    """How records are read: `render` (render_chat's keywords the command line
    sets, such as chat_format) and `keep` (carry the other fields)."""

    render: tuple = ()  # (name, value) pairs
    keep: bool = False


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
    """The columns OUT gets after the base ones, for one run."""

    def __init__(self, masks: bool, keep: bool, kept_schema=None) -> None:
        self.masks, self.keep = masks, keep
        self.kept_schema = kept_schema  # pyarrow schema of the carried columns, once known

    def __bool__(self) -> bool:
        return self.masks or self.keep

    # -- Parquet ------------------------------------------------------------------

    def schema(self, pa, base, kept=None):
        """The whole schema: `base` plus the mask columns plus the carried
        columns (their types from `kept`, the first chunk, when not yet known)."""
        fields = list(base)
        if self.masks:
            fields += [pa.field("assistant_mask", pa.list_(pa.bool_())),
                       pa.field("message_index", pa.list_(pa.int32()))]
        if self.keep:
            if self.kept_schema is None:
                self.kept_schema = self._infer(pa, kept or [])
            fields += list(self.kept_schema)
        return pa.schema(fields)

    def _infer(self, pa, rows: list):
        names = list(dict.fromkeys(k for row in rows for k in row))
        check_kept_names(names, self.masks)
        fields = []
        for name in names:
            try:
                fields.append(pa.field(name, pa.array([row.get(name) for row in rows]).type))
            except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
                raise InputError(f"--keep-columns: the values of {name!r} have no one Arrow type ({exc})") from None
        return pa.schema(fields)

    def arrays(self, pa, offsets, masks, kept) -> list:
        """The extra columns of one chunk, in schema order."""
        out = []
        if self.masks:
            assistant, message = masks
            out += [pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(assistant, pa.bool_())),
                    pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(message, pa.int32()))]
        if self.keep:
            out += self._kept_arrays(pa, kept)
        return out

    def _kept_arrays(self, pa, kept) -> list:
        if not isinstance(kept, list):  # a Parquet input's rows: its own columns
            return [kept.column(f.name).combine_chunks() for f in self.kept_schema]
        unknown = sorted({k for row in kept for k in row} - set(self.kept_schema.names))
        if unknown:
            raise InputError(f"--keep-columns: field {unknown[0]!r} first appears after the first chunk, "
                             "which fixed OUT's columns (give it in the first records, or write JSONL)")
        arrays = []
        for f in self.kept_schema:
            try:
                arrays.append(pa.array([row.get(f.name) for row in kept], type=f.type))
            except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
                raise InputError(f"--keep-columns: a value of {f.name!r} is not of the type of the "
                                 f"first chunk's ({f.type}): {exc}") from None
        return arrays

    # -- JSONL --------------------------------------------------------------------

    def json_suffixes(self, offsets, masks, kept) -> list[str]:
        """One string per record, to close its JSONL object after "length"."""
        n = len(offsets) - 1
        parts = [[] for _ in range(n)]
        if self.masks:
            assistant, message = masks
            for k in range(n):
                a, b = offsets[k], offsets[k + 1]
                bits = ",".join("true" if m else "false" for m in assistant[a:b].tolist())
                parts[k].append(f',"assistant_mask":[{bits}],"message_index":[{",".join(map(str, message[a:b].tolist()))}]')
        if self.keep:
            rows = kept if isinstance(kept, list) else kept.to_pylist()
            taken = set(BASE_COLUMNS) | (set(MASK_COLUMNS) if self.masks else set())
            for k, row in enumerate(rows):
                for name, value in row.items():
                    if name in taken:
                        raise InputError(f"--keep-columns: a record's {name!r} has the name of an output column")
                    parts[k].append("," + json.dumps(name, ensure_ascii=False) + ":"
                                    + json.dumps(value, ensure_ascii=False, default=_json_value))
        return ["".join(p) for p in parts]


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


def record_options(args) -> RecordOptions:
    """The RecordOptions of a `batch` command line."""
    render = (("chat_format", args.chat_format),) if getattr(args, "chat_format", None) else ()
    return RecordOptions(render, bool(getattr(args, "keep_columns", False)))
