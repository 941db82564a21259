"""qwen4exp: provenance-preserving Qwen4Exp chat rendering and Qwen byte-level BPE."""

from .errors import (
    ChatFormatError,
    Qwen4ExpError,
    SegmentError,
    TextEncodingError,
    UnknownControlError,
)
from .segments import Kind, RenderedChat, Segment, SegmentBuilder
from .tokenizer import TokenBuffer, Tokenizer

__all__ = [
    "Tokenizer",
    "TokenBuffer",
    "Qwen4ExpError",
    "ChatFormatError",
    "SegmentError",
    "UnknownControlError",
    "TextEncodingError",
    "Kind",
    "Segment",
    "RenderedChat",
    "SegmentBuilder",
]
