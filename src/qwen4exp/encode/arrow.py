"""Arrow in, Arrow out: `Tokenizer.encode_arrow` and the list<int32> arrays
of ids it and `qwen4exp batch` build.

The native side (pyx/_arrow.pyx) reads a string array's buffers in place and
fills the result's offsets and values; this module checks types, hands it
the buffers and wraps what comes back with `pa.Array.from_buffers`, so no
Python object is made per row or per id. pyarrow is optional (the `cli`
extra) and imported only here, on first use.
"""

from __future__ import annotations

from qwen4exp._native._arrow import encode_string_arrays, invalid_utf8_rows
from qwen4exp.errors import Qwen4ExpError, TextEncodingError, surrogate_error

__all__ = ["encode_arrow", "bool_array", "int_array", "list_array", "list_numpy", "offsets_numpy", "offsets_of",
           "joined_rows", "valid_numpy", "invalid_rows", "need_pyarrow"]

LIST_MAX = 2**31 - 1  # values one list<...> array (int32 offsets) can hold


def need_pyarrow(where: str):
    """The pyarrow module, or an ImportError that says how to get it."""
    try:
        import pyarrow
    except ImportError:
        raise ImportError(
            f"{where} needs pyarrow, which is not installed: pip install pyarrow "
            '(or, in a clone of qwen4exp: pip install ".[cli]")'
        ) from None
    return pyarrow


def _string_arrays(pa, strings):
    """strings as (arrays, chunked): the string / large_string arrays to encode."""
    if isinstance(strings, pa.ChunkedArray):
        arrays, chunked = list(strings.chunks), True
        kind = strings.type
    elif isinstance(strings, pa.Array):
        arrays, chunked = [strings], False
        kind = strings.type
    elif isinstance(strings, (list, tuple)):
        return [_array_of_list(pa, strings)], False
    else:
        raise TypeError(
            "encode_arrow() takes a pyarrow string or large_string Array or ChunkedArray, or a list of str, "
            f"not {type(strings).__name__}"
        )
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return arrays, chunked
    if getattr(pa.types, "is_string_view", lambda _: False)(kind):
        return [a.cast(pa.large_string()) for a in arrays], chunked
    raise TypeError(f"encode_arrow() takes an array of strings, not of {kind} (cast it to pa.large_string())")


def _array_of_list(pa, texts):
    """A large_string array of a list of str (None: a null row)."""
    for i, t in enumerate(texts):
        if t is not None and not isinstance(t, str):
            raise TypeError(f"encode_arrow(): strings[{i}] is {type(t).__name__}, not str")
    try:
        return pa.array(texts, type=pa.large_string())
    except UnicodeEncodeError:
        for i, t in enumerate(texts):
            if t is not None:
                try:
                    t.encode("utf-8")
                except UnicodeEncodeError:
                    raise surrogate_error(t, f"encode_arrow(): strings[{i}]") from None
        raise


def _describe(pa, array, large: bool):
    """The native side's view of one array: its buffers, offset and length."""
    bufs = array.buffers()
    if any(b is not None and not b.is_cpu for b in bufs[:3]):
        raise TypeError("encode_arrow() reads arrays in main memory (copy device arrays to the CPU first)")
    validity = bufs[0] if array.null_count else None
    return validity, bufs[1], bufs[2], array.offset, len(array), large


def encode_arrow(native, strings, num_threads: int):
    """Tokenizer.encode_arrow's work (see there); `native` is its NativeTokenizer."""
    pa = need_pyarrow("encode_arrow()")
    arrays, chunked = _string_arrays(pa, strings)
    described = [_describe(pa, a, pa.types.is_large_string(a.type)) for a in arrays]
    results, bad = encode_string_arrays(native, described, num_threads)
    if bad is not None:
        k, row, offset = bad
        row += sum(len(a) for a in arrays[:k])
        raise TextEncodingError(f"encode_arrow(): strings[{row}] is not valid UTF-8 (at byte {offset} of the row)")
    assert results is not None  # None only with bad
    out = [
        list_array(pa, offsets, values, validity, a.null_count)
        for a, (validity, offsets, values) in zip(arrays, results)
    ]
    if chunked:
        return pa.chunked_array(out, type=pa.list_(pa.int32()))
    return out[0]


def list_array(pa, offsets, values, validity=None, null_count: int = 0, kind=None):
    """A list array over int32 offsets and values (numpy arrays or
    sequences; and a validity bitmap from bit 0, or None) of `kind`
    (pa.int32() by default, or pa.bool_()): contiguous numpy buffers of that
    width are used as they are."""
    import numpy as np

    kind = pa.int32() if kind is None else kind
    offsets = np.ascontiguousarray(offsets, dtype=np.int32)
    return pa.Array.from_buffers(
        pa.list_(kind),
        len(offsets) - 1,
        [None if validity is None else pa.py_buffer(validity), pa.py_buffer(offsets)],
        null_count=null_count if validity is not None else 0,
        children=[bool_array(pa, values) if kind == pa.bool_() else int_array(pa, values, kind)],
    )


def offsets_of(lengths, hint: str = ""):
    """The int32 offsets of a list array whose rows are `lengths` long
    (len(lengths) + 1 of them, from 0). Qwen4ExpError when they add up to
    more than a list array holds (2**31 - 1 values); `hint` says what to do."""
    import numpy as np

    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if offsets[-1] > LIST_MAX:
        raise Qwen4ExpError(f"{int(offsets[-1]):,} values in one list array, over Arrow's {LIST_MAX:,}"
                            + (f": {hint}" if hint else ""))
    return offsets.astype(np.int32)


def joined_rows(rows, dtype, hint: str = ""):
    """(offsets, values) of a list array whose rows are `rows` (numpy arrays
    or sequences; None is an empty row): offsets_of their lengths, and their
    values of numpy `dtype` end to end."""
    import itertools

    import numpy as np

    lengths = np.fromiter((0 if x is None else len(x) for x in rows), dtype=np.int64, count=len(rows))
    offsets = offsets_of(lengths, hint)
    filled = [x for x in rows if x is not None and len(x)]
    if all(isinstance(x, np.ndarray) for x in filled):
        values = np.concatenate(filled).astype(dtype, copy=False) if filled else np.zeros(0, dtype=dtype)
    else:
        values = np.fromiter(itertools.chain.from_iterable(x.tolist() if isinstance(x, np.ndarray) else x
                                                           for x in filled), dtype=dtype, count=int(offsets[-1]))
    return offsets, values


def int_array(pa, values, kind):
    """An integer Arrow array (`kind`: pa.int32() or pa.int64()) without nulls
    over a numpy array's buffer, made contiguous and of that width first.
    pa.array(numpy array) would do it too, but imports pandas to look for
    pandas objects first (a quarter of a second, once per process)."""
    import numpy as np

    values = np.ascontiguousarray(values, dtype=np.int64 if kind == pa.int64() else np.int32)
    return pa.Array.from_buffers(kind, len(values), [None, pa.py_buffer(values)], null_count=0)


def bool_array(pa, mask):
    """A boolean Arrow array without nulls of a numpy bool array (a filter
    mask), its bits packed here (see int_array for why not pa.array)."""
    import numpy as np

    mask = np.asarray(mask, dtype=bool)
    return pa.Array.from_buffers(pa.bool_(), len(mask), [None, pa.py_buffer(np.packbits(mask, bitorder="little"))],
                                 null_count=0)


def valid_numpy(column):
    """Which rows of an Array or ChunkedArray are not null, as a numpy bool
    array read from the validity bitmaps (see list_numpy for why)."""
    import numpy as np

    chunks = getattr(column, "chunks", None)
    parts = []
    for a in (column,) if chunks is None else chunks:
        if not a.null_count:
            parts.append(np.ones(len(a), dtype=bool))
            continue
        bits = np.frombuffer(a.buffers()[0], dtype=np.uint8)
        parts.append(np.unpackbits(bits, bitorder="little")[a.offset:a.offset + len(a)].astype(bool))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=bool)


def offsets_numpy(array):
    """The offsets of a list<int32>, string or large_string Array (len + 1 of
    them, for its slice) as a numpy view of its buffer: int64 for
    large_string, else int32."""
    import numpy as np
    import pyarrow as pa

    kind = np.dtype(np.int64 if pa.types.is_large_string(array.type) else np.int32)
    return np.frombuffer(array.buffers()[1], dtype=kind, count=len(array) + 1, offset=kind.itemsize * array.offset)


def list_numpy(ids):
    """(offsets, values) of a list<int32> Array as numpy int32 views of its
    buffers: offsets index values, as in Arrow. Read from the buffers rather
    than with Array.to_numpy, which imports pandas (a quarter of a second
    that a batch job would pay once)."""
    import numpy as np

    offsets = offsets_numpy(ids)
    child = ids.values
    values = np.frombuffer(child.buffers()[1], dtype=np.int32, count=len(child), offset=4 * child.offset) \
        if len(child) else np.zeros(0, dtype=np.int32)
    return offsets, values


def invalid_rows(strings):
    """The rows of a string array or chunked array that are not null and not
    valid UTF-8 (an int64 numpy array), for callers that route them elsewhere
    and encode the rest."""
    pa = need_pyarrow("invalid_rows()")
    arrays, _ = _string_arrays(pa, strings)
    return invalid_utf8_rows([_describe(pa, a, pa.types.is_large_string(a.type)) for a in arrays])
