"""The dict shapes of the public API, as `TypedDict`s for type checkers.

Requests (`render_chat`, `Tokenizer.render_chat`, `fit_chat`, ...) are
OpenAI-style messages and tools (docs/FORMAT.md, section 3); what comes back
from a completion is an OpenAI-style assistant message and stream deltas
(section 11). These classes only describe the shapes: the functions keep
taking any mapping, and validation at run time (`ChatFormatError`, naming the
field) is what decides. Their `__required_keys__` and `__optional_keys__` are
exact at run time on every supported Python (optional keys live in a
`total=False` base, not behind `NotRequired`, which 3.10 lacks).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, List, Literal, Optional, TypedDict, Union

__all__ = [
    "TextPart",
    "ImagePart",
    "ImageUrlPart",
    "VideoPart",
    "ContentPart",
    "ToolCallFunctionParam",
    "ToolCallParam",
    "FlatToolCallParam",
    "SystemMessage",
    "UserMessage",
    "AssistantMessage",
    "ToolMessage",
    "ChatMessage",
    "MessageLike",
    "ToolFunction",
    "Tool",
    "ToolLike",
    "ToolCallFunction",
    "ToolCall",
    "InvalidToolCall",
    "CompletionError",
    "CompletionNote",
    "ParsedCompletion",
    "DeltaFunction",
    "DeltaToolCall",
    "OpenAIDelta",
]


# -- request: content parts ---------------------------------------------------


class TextPart(TypedDict):
    type: Literal["text"]
    text: str


class _MediaSizes(TypedDict, total=False):
    # What an image or video part may say of its size (qwen4exp.render.media): width
    # and height together, or the [t, h, w] grid of patches (a video needs it).
    width: int
    height: int
    grid: Sequence[int]


class _ImagePartBase(_MediaSizes):
    type: Literal["image"]


class ImagePart(_ImagePartBase, total=False):
    """A structured image (formats with media); `image` is not read."""

    image: Any


class _ImageUrlPartBase(_MediaSizes):
    type: Literal["image_url"]


class ImageUrlPart(_ImageUrlPartBase, total=False):
    image_url: Any  # OpenAI's {"url": ...}; not read


class _VideoPartBase(_MediaSizes):
    type: Literal["video"]


class VideoPart(_VideoPartBase, total=False):
    video: Any  # not read


ContentPart = Union[TextPart, ImagePart, ImageUrlPart, VideoPart]


# -- request: messages ---------------------------------------------------------


class ToolCallFunctionParam(TypedDict):
    name: str
    # a JSON object: a dict, or a string that parses as one (the wire format)
    arguments: Union[str, Mapping[str, Any]]


class _ToolCallParamBase(TypedDict):
    function: ToolCallFunctionParam


class ToolCallParam(_ToolCallParamBase, total=False):
    """An assistant's tool call in the OpenAI form (`id` is not rendered)."""

    type: Literal["function"]
    id: str


class FlatToolCallParam(ToolCallFunctionParam, total=False):
    """The other accepted form: name and arguments at the top."""

    type: Literal["function"]


class _SystemMessageBase(TypedDict):
    role: Literal["system"]


class SystemMessage(_SystemMessageBase, total=False):
    content: Union[str, Sequence[TextPart]]


class _UserMessageBase(TypedDict):
    role: Literal["user"]


class UserMessage(_UserMessageBase, total=False):
    content: Union[str, Sequence[ContentPart]]


class _AssistantMessageBase(TypedDict):
    role: Literal["assistant"]


class AssistantMessage(_AssistantMessageBase, total=False):
    """A request's assistant turn (history, or what `parse_completion` gave)."""

    content: Union[str, Sequence[ContentPart], None]
    reasoning_content: Optional[str]
    tool_calls: Sequence[Union[ToolCallParam, FlatToolCallParam]]


class _ToolMessageBase(TypedDict):
    role: Literal["tool"]


class ToolMessage(_ToolMessageBase, total=False):
    content: Union[str, Sequence[ContentPart]]
    tool_call_id: str  # not rendered
    name: str  # not rendered


# -- request: tools ------------------------------------------------------------


class _ToolFunctionBase(TypedDict):
    name: str


class ToolFunction(_ToolFunctionBase, total=False):
    description: str
    parameters: Mapping[str, Any]  # a JSON schema


class Tool(TypedDict):
    type: Literal["function"]
    function: ToolFunction


#: A tools entry: a `Tool`, or any JSON-schema mapping (rendered as given).
ToolLike = Union[Tool, Mapping[str, Any]]


# -- completion: the parsed assistant message (docs/FORMAT.md, section 11) ----


class ToolCallFunction(TypedDict):
    name: str
    arguments: str  # JSON text of the arguments, as the template writes them


class ToolCall(TypedDict):
    id: str  # "call_" + 24 letters and digits
    type: Literal["function"]
    function: ToolCallFunction


class InvalidToolCall(TypedDict):
    index: int  # its place among the tool calls (Delta.index)
    text: str  # the whole body
    error: str


class CompletionError(TypedDict):
    position: int  # index into the ids
    error: str
    text: str


class _CompletionNoteBase(TypedDict):
    position: int  # index into the ids
    note: str  # what the note says (information, not a fault)


class CompletionNote(_CompletionNoteBase, total=False):
    """A re-render note (at the message's end atom: how a re-render of the
    message differs from the completion) carries `text`; a padded-row note
    (embedding_rows=) the row's `id`."""

    text: str
    id: int


class _ParsedCompletionBase(TypedDict):
    role: Literal["assistant"]
    content: str
    reasoning_content: Optional[str]  # None when no reasoning was opened
    tool_calls: List[ToolCall]





class ParsedCompletion(_ParsedCompletionBase, total=False):
    """`Tokenizer.parse_completion` and `CompletionParser.finish()`: `notes`
    only when there is something to know (ids of a padded embedding row,
    with embedding_rows=; a re-render that would not write the completion
    exactly), information, not a fault; `invalid_tool_calls` and `errors`
    only when something was wrong."""

    notes: List[CompletionNote]
    invalid_tool_calls: List[InvalidToolCall]
    errors: List[CompletionError]


#: A request message. A parsed completion is one too: appended to the
#: history it renders back to the ids the model wrote (docs/FORMAT.md, section 11).
ChatMessage = Union[SystemMessage, UserMessage, AssistantMessage, ToolMessage, ParsedCompletion]
#: What a message parameter accepts: the shapes above, or any mapping
#: (a json.load result), checked when rendered.
MessageLike = Union[ChatMessage, Mapping[str, Any]]


# -- streaming: Delta.openai() --------------------------------------------------


class DeltaFunction(TypedDict, total=False):
    name: str  # on a call's first delta
    arguments: str  # "" on the first delta, then fragments


class _DeltaToolCallBase(TypedDict):
    index: int
    function: DeltaFunction


class DeltaToolCall(_DeltaToolCallBase, total=False):
    id: str  # on a call's first delta
    type: Literal["function"]  # on a call's first delta


class OpenAIDelta(TypedDict, total=False):
    """`Delta.openai()`: the `choices[0].delta` of an OpenAI-compatible
    stream, exactly one of these keys."""

    content: str
    reasoning_content: str
    tool_calls: List[DeltaToolCall]
