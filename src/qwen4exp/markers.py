"""The template markers of the Qwen chat formats: one table for both directions.

Every spelling a renderer may write as TRUSTED_CONTROL, and every atom the
completion parser treats as structure, is a member of `Marker`. The renderer
(formats/), the training masks, the parser and the gate all read this table;
no other module spells a marker. Which atom id a marker has depends on the
vocabulary (`Tokenizer.atoms`), not on this table.
"""

from __future__ import annotations

from enum import Enum

__all__ = ["Marker", "MediaMarker", "CONTROL_MARKERS"]


class Marker(str, Enum):
    """A template marker: its value is its spelling."""

    IM_START = "<|im_start|>"  # opens a turn: "<|im_start|>ROLE\n"
    IM_END = "<|im_end|>"  # closes a turn; a completion's normal end
    END_OF_TEXT = "<|endoftext|>"  # a completion's other end (never rendered)
    THINK = "<think>"  # opens reasoning
    THINK_END = "</think>"  # closes reasoning
    TOOL_CALL = "<tool_call>"  # opens a call body (JSON in Qwen3, XML in 3.5+)
    TOOL_CALL_END = "</tool_call>"
    TOOL_RESPONSE = "<tool_response>"  # wraps a tool result inside a user turn
    TOOL_RESPONSE_END = "</tool_response>"

    def __str__(self) -> str:
        return self.value

    @property
    def data(self) -> bytes:
        """The marker's UTF-8 spelling."""
        return self.value.encode()


class MediaMarker(str, Enum):
    """The markers of a media placeholder (qwen4exp.render.media): written only for a
    structured image or video part, never a completion's structure."""

    VISION_START = "<|vision_start|>"
    VISION_END = "<|vision_end|>"
    IMAGE_PAD = "<|image_pad|>"  # one per merged patch once expanded
    VIDEO_PAD = "<|video_pad|>"

    def __str__(self) -> str:
        return self.value


#: The spellings a renderer ever emits as TRUSTED_CONTROL.
CONTROL_MARKERS = frozenset(
    m.value for m in (*Marker, *MediaMarker) if m is not Marker.END_OF_TEXT
)
