"""qwen4exp: provenance-preserving Qwen4Exp chat rendering and Qwen byte-level BPE.

The public surface is `__all__` (and `__version__`); `dir(qwen4exp)` lists
only those. The rules it keeps are in docs/FORMAT.md, the data path in
docs/ARCHITECTURE.md.
"""

from typing import TYPE_CHECKING

from qwen4exp import errors
from qwen4exp.errors import *  # noqa: F403  (Qwen4ExpError and its subclasses: errors.__all__)
from qwen4exp.render.segments import Kind, MessageSpan, RenderedChat, Segment, SegmentBuilder
from qwen4exp.encode.tokenizer import TokenBuffer, Tokenizer, vocabularies

# The rest of the public names load on first use (PEP 562), so that
# `import qwen4exp` costs what encoding needs (tests/test_import_cost.py).
_LAZY = {
    "render_chat": "qwen4exp.render.chat", "render_chat_into": "qwen4exp.render.chat",
    "chat_formats": "qwen4exp.render.chat", "render_template": "qwen4exp.render.template",
    "CompletionParser": "qwen4exp.parse.completion", "Delta": "qwen4exp.parse.completion",
    "DecodeStream": "qwen4exp.parse.decode_stream", "EncodedChat": "qwen4exp.encode.masks",
    "FittedChat": "qwen4exp.encode.budget", "ChatEncoder": "qwen4exp.encode.chat_encoder",
    "Marker": "qwen4exp.markers", "MediaPart": "qwen4exp.render.media", "MediaProcessor": "qwen4exp.render.media",
    "ChatMessage": "qwen4exp.shapes", "Tool": "qwen4exp.shapes", "ParsedCompletion": "qwen4exp.shapes",
    "ToolCall": "qwen4exp.shapes", "OpenAIDelta": "qwen4exp.shapes",
}

if TYPE_CHECKING:  # what a type checker sees: the same names, imported
    from qwen4exp.encode.budget import FittedChat
    from qwen4exp.encode.chat_encoder import ChatEncoder
    from qwen4exp.encode.masks import EncodedChat
    from qwen4exp.markers import Marker
    from qwen4exp.parse.completion import CompletionParser, Delta
    from qwen4exp.parse.decode_stream import DecodeStream
    from qwen4exp.render.chat import chat_formats, render_chat, render_chat_into
    from qwen4exp.render.media import MediaPart, MediaProcessor
    from qwen4exp.render.template import render_template
    from qwen4exp.shapes import ChatMessage, OpenAIDelta, ParsedCompletion, Tool, ToolCall

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
    module = _LAZY.get(name)
    if module is not None:
        import importlib

        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value
    # __version__ on first use: importlib.metadata costs about 20 ms at import.
    if name == "__version__":
        from qwen4exp.vocab._version import package_version

        globals()["__version__"] = version = package_version()
        return version
    raise AttributeError(f"module 'qwen4exp' has no attribute {name!r}")


def __dir__() -> list[str]:
    # Submodules (chat, _encoder, ...) are importable but not the API.
    return sorted([*__all__, "__version__"])
