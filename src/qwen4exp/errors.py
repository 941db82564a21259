"""The error types of qwen4exp (docs/FORMAT.md, section 5 "Errors"), and the
one place they are built from a native result code or a Python check: the
native core returns codes (pyx/_faults.pxd, pyx/_geometry.pxd) and never
imports this layer; the Python modules call the builders below.
"""

from qwen4exp._native._faults import Fault
from qwen4exp._native._geometry import GeoCode

__all__ = [
    "Qwen4ExpError",
    "ChatFormatError",
    "MediaError",
    "SegmentError",
    "UnknownControlError",
    "TextEncodingError",
    "BudgetError",
    "RecordError",
    "JsonError",
    "VocabularyError",
]


class Qwen4ExpError(ValueError):
    """Base class of every error qwen4exp raises for bad input."""


class ChatFormatError(Qwen4ExpError):
    """A chat request the chosen chat format does not accept (role, order, content, tools,
    media, an option the format lacks)."""


class MediaError(ChatFormatError):
    """An image or video part that cannot be rendered or counted: a bad size or
    grid, no size where `expand_media` needs one, bad processor parameters."""


class SegmentError(Qwen4ExpError):
    """Segment geometry is wrong: gap, overlap, empty, out of range, unmerged neighbours,
    a boundary inside a UTF-8 sequence, or an unknown kind."""


class UnknownControlError(Qwen4ExpError):
    """A TRUSTED_CONTROL segment that is not exactly a concatenation of known atoms."""


class TextEncodingError(Qwen4ExpError):
    """Text that is not valid Unicode / UTF-8 (for example a lone surrogate)."""


class BudgetError(Qwen4ExpError):
    """A conversation whose minimum (the system message and the last user turn)
    does not fit the token budget given to `Tokenizer.fit_chat`."""


class RecordError(Qwen4ExpError):
    """A chat request or batch record of the wrong shape or type: not an object
    or a list of messages, no "messages", a "text" that is not a string."""


class JsonError(RecordError):
    """Input that is not strict JSON (qwen4exp.render.requests.loads_json): bad syntax,
    NaN or Infinity, an out-of-range number, a duplicate key, nesting too deep."""


class VocabularyError(Qwen4ExpError):
    """A vocabulary that cannot be used: a tokenizer.json that is not a
    Qwen-family byte-level BPE or is malformed, or a compiled vocabulary that
    is damaged (inconsistent arrays, another format version or checksum)."""


# -- builders: one wording per failure -------------------------------------------

# One message per native geometry code (pyx/_geometry.pxd, GeoCode).
_GEOMETRY_MESSAGES = {
    GeoCode.GEO_BAD_UTF8: "bytes are not valid UTF-8 at byte {offset}",
    GeoCode.GEO_NO_SEGMENTS: "data is {n} bytes but no segments cover it",
    GeoCode.GEO_EMPTY: "segment {segment} is empty (starts at byte {offset})",
    GeoCode.GEO_GAP: "gap before segment {segment}: bytes from {offset} are not covered",
    GeoCode.GEO_OVERLAP: "segment {segment} overlaps the previous one (starts at byte {offset})",
    GeoCode.GEO_PAST_END: "segment {segment} ends at byte {offset}, past the end of the data ({n} bytes)",
    GeoCode.GEO_SHORT: "segments end at byte {offset} but the data is {n} bytes",
    GeoCode.GEO_BAD_KIND: "segment {segment} has an unknown kind",
    GeoCode.GEO_UNMERGED: "segment {segment} has the same kind as the previous one (merge them); "
    "starts at byte {offset}",
    GeoCode.GEO_SPLIT_CHAR: "segment {segment} starts at byte {offset}, inside a UTF-8 sequence",
}


def fault_error(fault, data: bytes, starts, ends) -> Qwen4ExpError:
    """The exception for a native fault tuple (Fault, GeoCode, segment, offset)
    of segments [starts[k], ends[k]) over `data`."""
    code, geo, segment, offset = fault
    if code == Fault.RC_UNKNOWN_CONTROL:
        seg = data[starts[segment] : ends[segment]]
        return UnknownControlError(
            f"segment {segment} (TRUSTED_CONTROL, bytes {starts[segment]}..{ends[segment]}) is not "
            f"a concatenation of known atoms: no atom matches at byte {offset} "
            f"({seg[offset - starts[segment]:][:24]!r})"
        )
    if code == Fault.RC_GEOMETRY:
        return SegmentError(_GEOMETRY_MESSAGES[geo].format(segment=segment, offset=offset, n=len(data)))
    raise AssertionError(f"unexpected native fault {fault!r}")


def init_error(code: int, detail: int) -> VocabularyError:
    """The exception for a failed NativeTokenizer build (_faults.InitFault)."""
    if code == Fault.RC_TOO_LARGE:
        return VocabularyError("vocabulary too large: ids and merges must be below 2**20")
    if code == Fault.RC_NO_BYTE_TOKEN:
        return VocabularyError(f"vocabulary has no token for byte 0x{detail:02x}")
    raise AssertionError(f"unexpected native init fault {code!r}")


def id_error(id, index: int, where: str, n_vocab: int) -> Exception:
    """The error for ids[index], which is not a token id of a vocabulary of
    `n_vocab` BPE ids (TypeError when it is not an int at all)."""
    if isinstance(id, bool) or not hasattr(id, "__index__"):
        return TypeError(f"{where}: ids must be ints, not {type(id).__name__} (at index {index})")
    return Qwen4ExpError(
        f"{where}: id {id} at index {index} is not in the vocabulary "
        f"(valid: 0..{n_vocab - 1} and the atom ids)"
    )


def surrogate_error(text: str, where: str, at: int | None = None) -> TextEncodingError:
    """The error for `text`, which UTF-8 cannot encode: the lone surrogate at
    character `at` (the first one when not given)."""
    if at is None:
        at = next((i for i, ch in enumerate(text) if 0xD800 <= ord(ch) <= 0xDFFF), None)
        if at is None:  # not reached for a str: only surrogates fail to encode
            return TextEncodingError(f"{where}: text cannot be encoded as UTF-8")
    return TextEncodingError(
        f"{where}: not valid Unicode (lone surrogate U+{ord(text[at]):04X} at character {at}); "
        "encode it as a valid code point first"
    )
