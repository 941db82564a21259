"""The chat formats `render_chat` speaks, one per official Qwen chat template.

| format       | models                                              | module    |
|--------------|-----------------------------------------------------|-----------|
| "qwen3"      | Qwen3 hybrid-thinking models (the default)          | qwen3.py  |
| "qwen3-2507" | Qwen3-*-Instruct-2507                               | qwen3.py  |
| "qwen3.5"    | Qwen3.5 (the small ones with enable_thinking=False) | qwen35.py |
| "qwen3.6"    | Qwen3.6                                             | qwen35.py |
| "qwen3.8"    | Qwen3.8                                             | qwen35.py |

A format is its validation rules (`chat_validate.Rules`) and a renderer that
turns a validated request into alternating CONTROL / DATA parts, message
spans, and whether its generation prompt left a THINK block open. A new
format is a module here, a row below, and its markers in markers.py.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

from ..chat_validate import Request, Rules
from ..errors import ChatFormatError
from .qwen3 import QWEN3, QWEN3_2507, render_qwen3, render_qwen3_2507
from .qwen35 import QWEN35, QWEN36, QWEN38, render_qwen35

__all__ = ["ChatFormat", "FORMATS", "chat_formats", "chat_format"]


class ChatFormat(NamedTuple):
    rules: Rules
    render: Callable[[Request], tuple[list[bytes], list[int], bool]]


FORMATS: dict[str, ChatFormat] = {
    rules.name: ChatFormat(rules, render)
    for rules, render in (
        (QWEN3, render_qwen3),
        (QWEN3_2507, render_qwen3_2507),
        (QWEN35, render_qwen35),
        (QWEN36, render_qwen35),
        (QWEN38, render_qwen35),
    )
}
_NAMES = tuple(FORMATS)


def chat_formats() -> tuple[str, ...]:
    """The names `render_chat(chat_format=...)` accepts."""
    return _NAMES


def chat_format(name: Any) -> ChatFormat:
    """The format called `name`; ChatFormatError for any other value."""
    fmt = FORMATS.get(name) if isinstance(name, str) else None
    if fmt is None:
        raise ChatFormatError(
            f"chat_format: unknown chat format {name!r} (expected one of {', '.join(_NAMES)})"
        )
    return fmt
