"""qwen4exp: provenance-preserving Qwen4Exp chat rendering and Qwen byte-level BPE.

The public surface is `__all__` (and `__version__`); `dir(qwen4exp)` lists
only those. The rules it keeps are in docs/FORMAT.md, the data path in
docs/ARCHITECTURE.md.
"""

from .chat import chat_formats, render_chat, render_chat_into
from .completion import CompletionParser, Delta
from .decode_stream import DecodeStream
from .masks import EncodedChat
from .budget import FittedChat
from . import errors
from .errors import *  # noqa: F403  (Qwen4ExpError and its subclasses: errors.__all__)
from .markers import Marker
from .media import MediaPart, MediaProcessor
from .segments import Kind, MessageSpan, RenderedChat, Segment, SegmentBuilder
from .shapes import ChatMessage, OpenAIDelta, ParsedCompletion, Tool, ToolCall
from .template_render import render_template  # jinja2 is imported on first render only
from .tokenizer import TokenBuffer, Tokenizer, vocabularies
from .chat_encoder import ChatEncoder  # after .tokenizer, which it uses

__all__ = [
    "render_chat",
    "render_chat_into",
    "chat_formats",
    "render_template",
    "Tokenizer",
    "TokenBuffer",
    "EncodedChat",
    "ChatEncoder",
    "vocabularies",
    *errors.__all__,  # Qwen4ExpError and every subclass
    "FittedChat",
    "Kind",
    "Segment",
    "MessageSpan",
    "RenderedChat",
    "SegmentBuilder",
    "CompletionParser",
    "Delta",
    "DecodeStream",
    "Marker",
    "MediaPart",
    "MediaProcessor",
    # the dict shapes, for type checkers (the rest are in qwen4exp.shapes)
    "ChatMessage",
    "Tool",
    "ParsedCompletion",
    "ToolCall",
    "OpenAIDelta",
]


def __getattr__(name: str):
    # __version__ on first use: importlib.metadata costs about 20 ms at import.
    if name == "__version__":
        from ._version import package_version

        globals()["__version__"] = version = package_version()
        return version
    raise AttributeError(f"module 'qwen4exp' has no attribute {name!r}")


def __dir__() -> list[str]:
    # Submodules (chat, _encoder, ...) are importable but not the API.
    return sorted([*__all__, "__version__"])
