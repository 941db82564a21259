"""The chat formats `render_chat` speaks, one descriptor per official Qwen chat template.

| format       | models                                              | module    |
|--------------|-----------------------------------------------------|-----------|
| "qwen3"      | Qwen3 hybrid-thinking models                        | qwen3.py  |
| "qwen3-2507" | Qwen3-*-Instruct-2507                               | qwen3.py  |
| "qwen3.5"    | Qwen3.5 (the small ones with enable_thinking=False) | qwen35.py |
| "qwen3.6"    | Qwen3.6                                             | qwen35.py |
| "qwen3.8"    | Qwen3.8                                             | qwen35.py |
| "qwen3-coder"| Qwen3-Coder (XML tools and calls, no thinking)      | qwen3_coder.py |

A format is a `ChatFormat` (formats/_descriptor.py): its name, vocabulary,
validation rules, renderer, and the fingerprints of its official templates.
A new format is a module here that builds its descriptors, listed in
`_MODULES` (or, at run time, passed to `register`); its markers are in
markers.py. Nothing outside this package branches on a format's name.
"""

from __future__ import annotations

import importlib
from typing import Any, Mapping

from qwen4exp.errors import ChatFormatError
from qwen4exp.vocab.vocabulary import DEFAULT_VOCABULARY, VOCABULARIES
from qwen4exp.formats._descriptor import OPTION_NAMES, ChatFormat, template_digest

__all__ = ["ChatFormat", "chat_formats", "chat_format", "register", "unregister", "formats_of_vocabulary",
           "identify_template", "default_format", "OPTION_NAMES", "template_digest"]

# The modules that define the built-in formats, in the order chat_formats() lists them.
_MODULES = ("qwen3", "qwen35", "qwen3_coder")

_REGISTRY: dict[str, ChatFormat] = {}
_ALIASES: dict[str, str] = {}
_NAMES: tuple[str, ...] = ()


def register(fmt: ChatFormat) -> ChatFormat:
    """Add a format to the registry (a name or alias already taken is an error)."""
    global _NAMES
    if not isinstance(fmt, ChatFormat):
        raise TypeError(f"register() takes a ChatFormat, not {type(fmt).__name__}")
    if fmt.vocabulary not in VOCABULARIES:
        raise ChatFormatError(f"chat format {fmt.name!r}: unknown vocabulary {fmt.vocabulary!r}")
    for name in (fmt.name, *fmt.aliases):
        if name in _REGISTRY or name in _ALIASES:
            raise ChatFormatError(f"chat format {name!r} is already registered")
    if fmt.rules.name != fmt.name:
        raise ChatFormatError(f"chat format {fmt.name!r}: its rules are named {fmt.rules.name!r}")
    if fmt.vocabulary_default and any(f.vocabulary_default and f.vocabulary == fmt.vocabulary
                                      for f in _REGISTRY.values()):
        raise ChatFormatError(f"chat format {fmt.name!r}: the {fmt.vocabulary} vocabulary already has a default")
    _REGISTRY[fmt.name] = fmt
    _ALIASES.update(dict.fromkeys(fmt.aliases, fmt.name))
    _NAMES = tuple(_REGISTRY)
    return fmt


def unregister(name: str) -> None:
    """Remove a format added with `register` (the built-in ones stay)."""
    global _NAMES
    fmt = _REGISTRY.get(name)
    if fmt is None or fmt.name in _BUILT_IN:
        raise ChatFormatError(f"chat format {name!r}: not a registered format that can be removed")
    del _REGISTRY[name]
    for alias in fmt.aliases:
        _ALIASES.pop(alias, None)
    _NAMES = tuple(_REGISTRY)


for _module in _MODULES:
    for _fmt in importlib.import_module(f"{__name__}.{_module}").FORMATS:
        register(_fmt)
_BUILT_IN = frozenset(_REGISTRY)


def chat_formats() -> tuple[str, ...]:
    """The names `render_chat(chat_format=...)` accepts."""
    return _NAMES


def chat_format(name: Any) -> ChatFormat:
    """The format called `name` (or one of its aliases); ChatFormatError for any other value."""
    if isinstance(name, ChatFormat):
        return name
    fmt = _REGISTRY.get(_ALIASES.get(name, name)) if isinstance(name, str) else None
    if fmt is None:
        raise ChatFormatError(
            f"chat_format: unknown chat format {name!r} (expected one of {', '.join(_NAMES)})"
        )
    return fmt


def default_format(vocabulary: str = DEFAULT_VOCABULARY) -> ChatFormat:
    """The format a tokenizer of `vocabulary` renders unless told otherwise
    (the default vocabulary's: what render_chat renders without chat_format)."""
    for fmt in _REGISTRY.values():
        if fmt.vocabulary == vocabulary and fmt.vocabulary_default:
            return fmt
    raise ChatFormatError(f"no chat format is the default of the {vocabulary!r} vocabulary")


def formats_of_vocabulary(vocabulary: str) -> tuple[str, ...]:
    """The formats whose models use `vocabulary`."""
    return tuple(name for name, fmt in _REGISTRY.items() if fmt.vocabulary == vocabulary)


def identify_template(template: str) -> tuple[ChatFormat, Mapping[str, Any]]:
    """The format an official chat template (or a known revision) is, and the
    render options it implies; ChatFormatError naming the nearest format and
    the override for any other template."""
    digest = template_digest(template)
    for fmt in _REGISTRY.values():
        if digest in fmt.templates:
            return fmt, dict(fmt.templates[digest])
    near = nearest_format(template)
    hint = (f"it looks closest to {near.name!r}, but differs from that format's official templates"
            if near is not None else "it resembles none of them")
    raise ChatFormatError(
        f"chat template (sha256 {digest[:12]}): not a template qwen4exp renders ({', '.join(_NAMES)}); "
        f"{hint}. If the model speaks one of these formats, say which: "
        f"from_pretrained(path, chat_format={near.name if near else _NAMES[0]!r})"
    )


def nearest_format(template: str) -> ChatFormat | None:
    """The format whose telling substrings best match the template's (Jaccard),
    or None when the template has none of them."""
    features = {h for fmt in _REGISTRY.values() for h in fmt.hints if h in template}
    if not features:
        return None
    best, best_score = None, 0.0
    for fmt in _REGISTRY.values():
        own = set(fmt.hints)
        score = len(own & features) / len(own | features) if own else 0.0
        if score > best_score:
            best, best_score = fmt, score
    return best
