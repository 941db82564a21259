"""The error types of qwen4exp (docs/FORMAT.md, section 5 "Errors")."""

__all__ = [
    "Qwen4ExpError",
    "ChatFormatError",
    "SegmentError",
    "UnknownControlError",
    "TextEncodingError",
    "BudgetError",
    "RecordError",
    "JsonError",
]


class Qwen4ExpError(ValueError):
    """Base class of every error qwen4exp raises for bad input."""


class ChatFormatError(Qwen4ExpError):
    """A chat request the Qwen4Exp format does not accept (role, order, content, tools, media)."""


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
    """Input that is not strict JSON (qwen4exp.requests.loads_json): bad syntax,
    NaN or Infinity, an out-of-range number, a duplicate key, nesting too deep."""
