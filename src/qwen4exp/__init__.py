"""qwen4exp: provenance-preserving Qwen4Exp chat rendering and Qwen byte-level BPE.

The public surface is `__all__` (and `__version__`); `dir(qwen4exp)` lists
only those. The rules it keeps are in docs/FORMAT.md, the data path in
docs/ARCHITECTURE.md.
"""

from qwen4exp.render.chat import chat_formats, render_chat, render_chat_into
from qwen4exp.parse.completion import CompletionParser, Delta
from qwen4exp.parse.decode_stream import DecodeStream
from qwen4exp.encode.masks import EncodedChat
from qwen4exp.encode.budget import FittedChat
from qwen4exp import errors
from qwen4exp.errors import *  # noqa: F403  (Qwen4ExpError and its subclasses: errors.__all__)
from qwen4exp.markers import Marker
from qwen4exp.render.media import MediaPart, MediaProcessor
from qwen4exp.render.segments import Kind, MessageSpan, RenderedChat, Segment, SegmentBuilder
from qwen4exp.shapes import ChatMessage, OpenAIDelta, ParsedCompletion, Tool, ToolCall
from qwen4exp.render.template import render_template  # jinja2 is imported on first render only
from qwen4exp.encode.tokenizer import TokenBuffer, Tokenizer, vocabularies
from qwen4exp.encode.chat_encoder import ChatEncoder  # after .tokenizer, which it uses

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
        from qwen4exp.vocab._version import package_version

        globals()["__version__"] = version = package_version()
        return version
    raise AttributeError(f"module 'qwen4exp' has no attribute {name!r}")


def __dir__() -> list[str]:
    # Submodules (chat, _encoder, ...) are importable but not the API.
    return sorted([*__all__, "__version__"])
