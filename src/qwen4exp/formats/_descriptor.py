"""What a chat format is: one descriptor holds everything that is one format's.

A format module (formats/qwen3.py, formats/qwen35.py, ...) builds one
`ChatFormat` per format it speaks and `formats.register` adds it to the
registry. Everything else (the renderer, the validator, the completion
parser, the gate, the command line, the Ray path, model-folder loading)
reads a format's facts from its descriptor and never branches on its name.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, NamedTuple

from qwen4exp.errors import ChatFormatError
from qwen4exp.render.validate import JSON_CALLS, XML_PYTHON, Request, Rules

__all__ = ["ChatFormat", "RenderedParts", "template_digest", "canonical_template", "fingerprints", "OPTION_NAMES"]

#: The render options a format may have, in the order the help lists them.
OPTION_NAMES = ("enable_thinking", "preserve_thinking", "reasoning_effort", "add_vision_id")

class RenderedParts(NamedTuple):
    """What a format's renderer returns for a validated request."""

    #: The stream's parts, alternating kinds: CONTROL, DATA, CONTROL, ... from the
    #: first part's kind (`first_control`); a boundary between any two.
    parts: list[bytes]
    #: Per message (in request order, the system message included when there is
    #: one), the part indices where its span starts and ends, flat.
    spans: list[int]
    #: Whether the generation prompt left a THINK block open.
    opens_reasoning: bool
    #: The kind of parts[0]: False when the stream opens with DATA.
    first_control: bool = True


Renderer = Callable[[Request], RenderedParts]


def template_digest(template: str) -> str:
    """The fingerprint of a chat template: SHA-256 of `canonical_template`,
    so that two templates share it only when transformers renders them alike
    (a template saved as chat_template.jinja usually ends with a newline that
    tokenizer_config.json's copy lacks; a trailing space, which transformers
    writes at the end of every prompt, is another template)."""
    return hashlib.sha256(canonical_template(template).encode("utf-8", "surrogatepass")).hexdigest()


# The whitespace-control tags that remove all whitespace before them.
_STRIP_BEFORE = ("{%-", "{{-", "{#-")


def canonical_template(template: str) -> str:
    r"""The template without what Jinja, as transformers configures it
    (trim_blocks, keep_trailing_newline off), never renders: line breaks
    spelled \r\n or \r (Jinja reads every one as \n), the one line break
    at the very end (keep_trailing_newline), a line break right after a final
    block tag (trim_blocks), and whitespace before a first tag that strips it
    ("{%-"). Nothing else is changed: any other whitespace is output."""
    text = template.replace("\r\n", "\n").replace("\r", "\n")
    if text.endswith("\n"):
        text = text[:-1]
    if text.endswith("%}\n") and not text.endswith("+%}\n"):
        text = text[:-1]
    stripped = text.lstrip()
    if stripped.startswith(_STRIP_BEFORE):
        text = stripped
    return text


def fingerprints(*digests: str, **implied: Any) -> dict[str, dict[str, Any]]:
    """ChatFormat.templates for templates that imply the same render options."""
    return {d: dict(implied) for d in digests}


@dataclass(frozen=True, eq=False)
class ChatFormat:
    """One chat format: its name, its vocabulary, its rules, its renderer and
    how a model folder's template is recognised as this format."""

    name: str
    #: The bundled vocabulary its models use (qwen4exp.vocab.vocabulary).
    vocabulary: str
    #: What validation needs (trimming, call style, option defaults).
    rules: Rules
    #: Validated request -> (alternating CONTROL/DATA parts, span marks, opens reasoning).
    render: Renderer
    #: The models that speak it (help texts and docs).
    models: str
    #: template_digest() of each official template (and known revision) of the
    #: format -> the render options that template implies (e.g. the Qwen3.5
    #: small models' template turns thinking off by default).
    templates: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: Substrings only this format's templates contain, most telling first:
    #: used to name the nearest format for a template no digest matches.
    hints: tuple[str, ...] = ()
    #: Other names the format answers to.
    aliases: tuple[str, ...] = ()
    #: The format a tokenizer of its vocabulary renders unless told otherwise
    #: (one per vocabulary).
    vocabulary_default: bool = False
    #: Its official template, a file in formats/templates/ (what
    #: `qwen4exp folder` writes into a model folder).
    template_file: str = ""

    # The facts the completion parser (qwen4exp.parse) reads, stated by the
    # format rather than guessed from its call style:
    #: How a tool call's body is written: "json" (one object) or "xml"
    #: (<function=NAME> and <parameter=KEY> blocks); must agree with rules.calls.
    call_syntax: str = "json"
    #: How the tools block describes a tool: "json" (its JSON text) or "xml"
    #: (<name>, <parameter> and <KEY>VALUE</KEY> tags); "xml" needs rules.tool_schema.
    tool_schema_syntax: str = "json"
    #: Newlines the template writes between an assistant's content and its
    #: first tool call (none when the content is empty).
    newlines_before_calls: int = 1
    #: Whether a generation prompt that opens THINK also writes the newline
    #: after it (the 3.5 family), so a completion inside reasoning starts
    #: with the reasoning; otherwise the model writes THINK and the newline.
    prompt_think_newline: bool = False

    def official_template(self) -> str:
        """The text of the format's official chat template."""
        import os

        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates", self.template_file)
        with open(path, encoding="utf-8") as f:
            return f.read()

    def __post_init__(self) -> None:
        if self.call_syntax != ("json" if self.rules.calls == JSON_CALLS else "xml"):
            raise ChatFormatError(f"chat format {self.name!r}: call_syntax {self.call_syntax!r} "
                                  "disagrees with its rules")
        if (self.tool_schema_syntax == "xml") != (self.rules.tool_schema is not None) or \
                self.tool_schema_syntax not in ("json", "xml"):
            raise ChatFormatError(f"chat format {self.name!r}: tool_schema_syntax {self.tool_schema_syntax!r} "
                                  "disagrees with its rules")

    @property
    def options(self) -> tuple[str, ...]:
        """The render options this format has (enable_thinking, ...)."""
        rules = self.rules
        have = (rules.thinking is not None, rules.preserve is not None, rules.effort is not None,
                rules.media)  # add_vision_id: only formats with media parts
        return tuple(name for name, ok in zip(OPTION_NAMES, have) if ok)

    @property
    def thinking_default(self) -> bool:
        """Whether a generation prompt leaves the model thinking unless told
        otherwise (enable_thinking's default; False without a thinking mode)."""
        return bool(self.rules.thinking)

    @property
    def tool_calls(self) -> str:
        """How a tool call is written: "json" (one object) or "xml" (<function=...>)."""
        return self.call_syntax

    @property
    def python_scalars(self) -> bool:
        """Whether an XML call's scalar values are written as Python's str()
        (True, None) rather than as JSON (true, null)."""
        return self.rules.calls == XML_PYTHON

    @property
    def media(self) -> bool:
        """Whether image and video parts render in this format."""
        return bool(getattr(self.rules, "media", False))

    def __repr__(self) -> str:
        return f"ChatFormat({self.name!r}, vocabulary={self.vocabulary!r})"
