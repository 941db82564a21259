"""qwen4exp: provenance-preserving Qwen4Exp chat rendering and Qwen byte-level BPE."""

from .chat import render_chat, render_chat_into
from .errors import (
    ChatFormatError,
    Qwen4ExpError,
    SegmentError,
    TextEncodingError,
    UnknownControlError,
)
from .segments import Kind, RenderedChat, Segment, SegmentBuilder
from .tokenizer import TokenBuffer, Tokenizer, vocabularies

__all__ = [
    "render_chat",
    "render_chat_into",
    "Tokenizer",
    "TokenBuffer",
    "vocabularies",
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
