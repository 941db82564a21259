"""Turn pieces the renderers write the same way (the format modules of this package).

Each appends to a renderer's list of parts, which strictly alternate
CONTROL, DATA, ... (formats/_control.py); a call leaves it ending in DATA.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from qwen4exp.render.validate import TOOL, Message
from qwen4exp.formats._control import (
    IM_END, IM_START, TOOL_CALL, TOOL_CALL_END, TOOL_CALL_END_IM_END, TOOL_RESPONSE_END, TOOL_RESPONSE_END_IM_END,
)

__all__ = ["write_calls", "close_tool_response", "text_user_turn"]


def text_user_turn(content: bytes) -> tuple[bytes, ...]:
    """A user turn of text: its parts, CONTROL first."""
    return (IM_START, b"user\n" + content, IM_END, b"\n")


def write_calls(parts: list[bytes], calls: Sequence[tuple[bytes, bytes]],
                body: Callable[[bytes, bytes], bytes]) -> None:
    """An assistant turn's tool calls, each `body(name, arguments)` between the
    TOOL_CALL markers, one newline between calls, and the turn's end."""
    for k, (name, arguments) in enumerate(calls):
        if k:
            parts += (TOOL_CALL_END, b"\n")
        parts += (TOOL_CALL, body(name, arguments))
    parts += (TOOL_CALL_END_IM_END, b"\n")


def close_tool_response(parts: list[bytes], msgs: Sequence[Message], i: int) -> None:
    """After tool message i's result: the shared user turn ends with the last
    tool message of a run; before another one only the block closes."""
    if i == len(msgs) - 1 or msgs[i + 1].role != TOOL:
        parts += (TOOL_RESPONSE_END_IM_END, b"\n")
    else:
        parts.append(TOOL_RESPONSE_END)
