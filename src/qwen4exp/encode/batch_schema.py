"""The columns of tokenized records: one output schema for `qwen4exp batch`
(its OUT, Parquet or JSONL) and `qwen4exp.runtimes.ray.tokenize_dataset` (the columns
it adds to a dataset).

    name            Arrow type     holds
    index           int64          batch: the record's 0-based place in the input
    ids             list<int32>    the token ids
    length          int32          how many
    assistant_mask  list<bool>     with masks: true on the ids to train on
    message_index   list<int32>    with masks: the message each id belongs to (-1: none)
    error           string         tokenize_dataset(on_error="skip"): why the row failed (null: it did not)

The token columns (`ids`, `length` and, with masks, `assistant_mask` and
`message_index`) are the same in both, name for name and type for type, in
this order; a text has no assistant turn and no message (all false, all -1).
What differs is how each keeps a record's place: `batch` writes the records
that encoded, each with its `index`, first, and carries the input's other
fields after the token columns (--keep-columns; the failed records go to the
errors file); `tokenize_dataset` keeps every row of the dataset, its own
columns first, and a failed row has empty ids, length 0 and an `error`.

Importing this module imports neither pyarrow nor numpy; its functions take
the pyarrow module as `pa`.
"""

from __future__ import annotations

from typing import Any

__all__ = ["INDEX", "IDS", "LENGTH", "ASSISTANT_MASK", "MESSAGE_INDEX", "ERROR", "token_names", "token_fields",
           "token_arrays", "index_field", "error_field"]

INDEX, IDS, LENGTH, ASSISTANT_MASK, MESSAGE_INDEX, ERROR = (
    "index", "ids", "length", "assistant_mask", "message_index", "error")


def token_names(masks: bool) -> tuple[str, ...]:
    """The token columns' names, in order."""
    return (IDS, LENGTH) + ((ASSISTANT_MASK, MESSAGE_INDEX) if masks else ())


def token_fields(pa: Any, masks: bool) -> list:
    """The token columns' Arrow fields, in order."""
    fields = [pa.field(IDS, pa.list_(pa.int32())), pa.field(LENGTH, pa.int32())]
    if masks:
        fields += [pa.field(ASSISTANT_MASK, pa.list_(pa.bool_())), pa.field(MESSAGE_INDEX, pa.list_(pa.int32()))]
    return fields


def index_field(pa: Any):
    return pa.field(INDEX, pa.int64())


def error_field(pa: Any):
    return pa.field(ERROR, pa.string())


def token_arrays(pa: Any, offsets, ids, masks=None) -> list:
    """The token columns of rows whose ids are `ids[offsets[k]:offsets[k+1]]`
    (int32 offsets from arrow.offsets_of; ids flat), in token_fields order;
    `masks`: (assistant_mask, message_index), flat like ids, or None."""
    import numpy as np

    from qwen4exp.encode.arrow import int_array, list_array

    offsets = np.ascontiguousarray(offsets, dtype=np.int32)
    out = [list_array(pa, offsets, ids), int_array(pa, np.diff(offsets), pa.int32())]
    if masks is not None:
        assistant, message = masks
        out += [list_array(pa, offsets, assistant, kind=pa.bool_()), list_array(pa, offsets, message)]
    return out
