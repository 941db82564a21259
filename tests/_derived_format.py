"""A chat format added as one file: the test of formats/ being one place.

"qwen3-terse" is Qwen3's format without the thinking mode (like 2507) but
with Qwen3's name for the vocabulary and its own template fingerprint: a
made-up model family that writes Qwen3's bytes. Everything about it is here;
`register()` makes render_chat, the parser, the gate and the command line
speak it, `unregister()` takes it back out (tests share one process).
"""

from __future__ import annotations

from qwen4exp import formats
from qwen4exp.render.validate import Rules
from qwen4exp.formats import ChatFormat, chat_format
from qwen4exp.formats.qwen3 import render_qwen3_2507

NAME = "qwen3-terse"
TEMPLATE = "{# qwen3-terse #}{%- for message in messages %}{{ message.content }}{%- endfor %}"

_base = chat_format("qwen3-2507")
FORMAT = ChatFormat(
    NAME, _base.vocabulary, _base.rules._replace(name=NAME), render_qwen3_2507,
    models="a test-only family (Qwen3-Instruct-2507's bytes under another name)",
    templates={formats.template_digest(TEMPLATE): {}},
    hints=("qwen3-terse",),
)
assert isinstance(FORMAT.rules, Rules)


def register() -> ChatFormat:
    return formats.register(FORMAT)


def unregister() -> None:
    formats.unregister(NAME)
