"""qwen4exp: provenance-preserving Qwen4Exp chat rendering and Qwen byte-level BPE."""

from .chat import render_chat, render_chat_into
from .encoded import EncodedChat
from .errors import (
    ChatFormatError,
    Qwen4ExpError,
    SegmentError,
    TextEncodingError,
    UnknownControlError,
)
from .segments import Kind, MessageSpan, RenderedChat, Segment, SegmentBuilder
from .tokenizer import TokenBuffer, Tokenizer
from .chat_encoder import ChatEncoder  # after .tokenizer, which it uses

__all__ = [
    "render_chat",
    "render_chat_into",
    "Tokenizer",
    "TokenBuffer",
    "EncodedChat",
    "ChatEncoder",
    "Qwen4ExpError",
    "ChatFormatError",
    "SegmentError",
    "UnknownControlError",
    "TextEncodingError",
    "Kind",
    "Segment",
    "MessageSpan",
    "RenderedChat",
    "SegmentBuilder",
]
