"""One-byte mutations of every reference chat template against transformers'
rendering of the mutated template.

A model folder's template binds to a native format by its fingerprint
(formats/_descriptor.py `template_digest`). A fingerprint that ignored the
surrounding whitespace bound "the official template + a trailing space" to
the format, which then rendered without the space transformers writes at the
end of every prompt. Here each mutation (a byte inserted, deleted or
replaced at many positions; whitespace added at either end) is either
refused (ChatFormatError: a template qwen4exp does not render) or bound, and
then the format's rendering must be byte-identical to what transformers
renders from the mutated text. The default run takes two templates (one per
vocabulary, one implying thinking off), every 211th position and the commonest
whitespace at the ends (each bound template costs transformers a compile,
~0.1 s); `slow` every template, every position and more whitespace.

The conversations end with the last query's turn: the training variants
write earlier turns' reasoning, which the format they are bound to (for
TRL's assistant masks) does not.
"""

from __future__ import annotations

import os

import pytest

import qwen4exp
from qwen4exp import formats
from qwen4exp.errors import ChatFormatError

import _model_folders
from transformers.utils.chat_template_utils import render_jinja_template

TEMPLATE_FILES = sorted(f for f in os.listdir(_model_folders.TEMPLATES) if f.endswith(".jinja"))
REQUESTS = [
    ([{"role": "user", "content": "Hi"}], True),
    ([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2+2?"},
      {"role": "assistant", "content": "4", "reasoning_content": "Add them."}], False),
]
# Bytes put in or over the template: whitespace Jinja treats in each of its ways, and text.
INSERTED = [b" ", b"\n", b"\r", b"\t", b"x", b"{", b"%", b"-", b"\x0b"]
REPLACING = [b" ", b"\n", b"\r", b"x"]
ENDS = [" ", "\n", "\n\n", "\n\n\n", "\r\n", "\n "]
MORE_ENDS = ["\r\n\r\n", "\r", "\t", " \n", "\n\t\n", "\u00a0", "\u3000", "\x0b", "\x0c", "\u2028"]
DEFAULT_RUN = ["qwen3.jinja", "qwen3_5_nothink.jinja"]


def _text(name: str) -> str:
    with open(os.path.join(_model_folders.TEMPLATES, name), encoding="utf-8") as f:
        return f.read()


def mutations(template: str, step: int, ends: list[str]):
    """(what, mutated text) for every mutation at every `step`th byte position
    and the last few, then whitespace at the ends."""
    raw = template.encode("utf-8")
    n = len(raw)
    for p in sorted({*range(0, n + 1, step), *range(6), *range(max(n - 6, 0), n + 1)}):
        for b in INSERTED:
            yield f"insert {b!r} at {p}", raw[:p] + b + raw[p:]
        if p < n:
            yield f"delete at {p}", raw[:p] + raw[p + 1:]
            for b in REPLACING:
                if raw[p:p + 1] != b:
                    yield f"replace at {p} by {b!r}", raw[:p] + b + raw[p + 1:]
    for w in ends:
        for text in (w + template, template + w, w + template + w):
            yield f"whitespace {w!r} at the ends", text.encode("utf-8")


def rendered_alike(template: str, fmt, implied) -> None:
    """The format's rendering equals transformers' rendering of `template`."""
    for messages, prompt in REQUESTS:  # what apply_chat_template(tokenize=False) renders
        want = render_jinja_template([messages], chat_template=template, add_generation_prompt=prompt)[0][0]
        got = qwen4exp.render_chat(messages, chat_format=fmt.name, add_generation_prompt=prompt, **implied)
        assert got.text == want


def check_template(name: str, step: int, ends: list[str]) -> int:
    """Every mutation of template `name` refused or rendered as transformers
    does; the number bound."""
    bound = 0
    for what, raw in mutations(_text(name), step, ends):
        try:
            template = raw.decode("utf-8")
        except UnicodeDecodeError:
            continue  # not text: a folder's reader refuses it (test_hostile_folders)
        try:
            fmt, implied = formats.identify_template(template)
        except ChatFormatError:
            continue
        bound += 1
        try:
            rendered_alike(template, fmt, implied)
        except AssertionError as exc:
            raise AssertionError(f"{name}, {what}: bound to {fmt.name} but rendered otherwise") from exc
    return bound


@pytest.mark.parametrize("name", DEFAULT_RUN)
def test_mutated_templates_bind_only_when_rendered_alike(name):
    rendered_alike(_text(name), *formats.identify_template(_text(name)))  # the template itself
    # a line break at the end is not rendered by Jinja: some mutations bind
    assert check_template(name, 211, ENDS) >= len(ENDS)


@pytest.mark.slow
@pytest.mark.parametrize("name", TEMPLATE_FILES)
def test_every_position_of_every_template(name):
    rendered_alike(_text(name), *formats.identify_template(_text(name)))
    assert check_template(name, 1, ENDS + MORE_ENDS) >= len(ENDS)
