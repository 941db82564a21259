"""What the vLLM plugin makes of vLLM's request data, without importing vLLM
(docs/RUNTIMES.md, "vLLM"): the renderer and the parsers (vllm_render,
vllm_parse) call these, and the fast tests (tests/) run them without vLLM.

* `materialize_messages`: vLLM's request models validate an assistant's
  `tool_calls` and a message's content parts as pydantic `Iterable`s, which
  arrive as one-shot iterators (pydantic's ValidatorIterator) everywhere but
  Chat Completions, which converts them itself (`/tokenize` does not);
* `Atoms`: the atom ids the parsers look for;
* `output_parser`: the completion parser for a request's output, with the
  model's padded embedding rows allowed (they spell nothing, as in HF);
* `template_arguments`: a request's messages and template kwargs for a model
  folder's own Jinja template (chat_format "template"), as vLLM's `hf`
  renderer hands them to apply_chat_template.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from qwen4exp.parse.completion import CompletionParser
from qwen4exp.errors import ChatFormatError, Qwen4ExpError
from qwen4exp.markers import Marker

__all__ = ["Atoms", "materialize_messages", "output_parser", "template_arguments"]

#: The message fields vLLM's request models validate as lazy iterables.
_ITERABLE_FIELDS = ("tool_calls", "content")


def _materialized(value: Any, where: str) -> Any:
    """`value` as a list when it is a one-shot iterable (not a str, bytes,
    dict, list or tuple); pydantic validates an iterator's items as they are
    read, so a malformed item raises here: a ChatFormatError naming it."""
    if value is None or isinstance(value, (str, bytes, dict, list, tuple)) or not hasattr(value, "__iter__"):
        return value
    items = []
    try:
        for item in value:
            items.append(item)
    except Exception as exc:  # noqa: BLE001 - the validator's error, whatever its class
        raise ChatFormatError(f"{where}[{len(items)}] is malformed: {_reason(exc)}") from None
    return items


def _reason(exc: Exception) -> str:
    """What a validator says is wrong with an item: pydantic's first error as
    `field: message` (its own type names left out), else the first line."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            first = errors()[0]
            field = [str(k) for k in first.get("loc", ()) if isinstance(k, str)][-1:]
            return ": ".join([*field, str(first.get("msg", exc))])
        except Exception:  # noqa: BLE001 - not pydantic's shape after all
            pass
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def materialize_messages(messages: Any) -> list:
    """The request's messages as a list, each message's lazy `tool_calls` and
    `content` turned into lists in place (the parsers render the request
    again, and an iterator is read only once; vLLM's Chat Completions request
    does the same). ChatFormatError for an item the request model refuses."""
    if not isinstance(messages, list):
        messages = list(messages)
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict):
            continue
        for key in _ITERABLE_FIELDS:
            value = msg.get(key)
            items = _materialized(value, f"messages[{i}].{key}")
            if items is not value:
                msg[key] = items
    return messages


class Atoms:
    """The atom ids the parsers look for."""

    def __init__(self, tok) -> None:
        atoms = tok.atoms
        self.think = atoms[Marker.THINK.value]
        self.think_end = atoms[Marker.THINK_END.value]
        self.boundaries = frozenset(atoms[m.value] for m in (Marker.IM_START, Marker.IM_END))
        self.atom_ids = frozenset(atoms.values())
        self.tool_call_end = atoms[Marker.TOOL_CALL_END.value]
        self.stops = frozenset(atoms[m.value] for m in (Marker.IM_END, Marker.END_OF_TEXT))

    def reasoning_open(self, ids: Sequence[int]) -> bool | None:
        """Whether `ids` (a prompt, or a prompt and output) leave reasoning
        open at their end: True after a THINK of the last turn, False after its
        THINK_END, None when the last turn has neither."""
        think, end, bounds = self.think, self.think_end, self.boundaries
        for i in reversed(ids):
            if i == end:
                return False
            if i == think:
                return True
            if i in bounds:
                return None
        return None

    def reasoning_tokens(self, ids: Sequence[int], open_at_start: bool) -> int:
        """Output ids of the reasoning block (the prompt's open one, or a THINK
        before any text), its THINK and THINK_END excluded, up to the end of
        the reply."""
        inside, text_seen, count = open_at_start, False, 0
        for i in ids:
            if inside:
                if i == self.think_end or i in self.stops:
                    return count
                count += 1
            elif i == self.think and not text_seen:
                inside = True
            elif i not in self.atom_ids:
                text_seen = True
        return count


#: The bound on padded rows when vLLM gives no model config: every id the
#: engine samples is one of the model's rows (vLLM checks prompt ids itself).
_ANY_ROW = 2**31 - 1


def output_parser(tok, chat, prompt_ids: Sequence[int] | None, tools: Any,
                  embedding_rows: int | None) -> tuple[CompletionParser, bool]:
    """(the parser of the ids a model writes after a request's prompt, whether
    that prompt left reasoning open).

    `chat` is the request rendered again when that gives exactly the ids the
    model was fed (else None): with a generation prompt it gives the format,
    the tools and the call ids. Without one (`add_generation_prompt: false`,
    a valid request: the model continues the chat's last message) and without
    `chat`, the parser gets the format, the tools and whether reasoning is
    open, read from the prompt ids. Ids of the model's padded embedding rows
    (up to `embedding_rows`) spell nothing and are listed in `notes`."""
    rows = _ANY_ROW if embedding_rows is None else embedding_rows
    atoms = Atoms(tok)
    if chat is not None:
        if chat.add_generation_prompt:
            return tok.completion_parser(chat, embedding_rows=rows), chat.opens_reasoning
        if tools is None:
            tools = chat.request_tools()
        if prompt_ids is None:
            prompt_ids = tok.encode_chat(chat).tolist()
    opened = bool(prompt_ids is not None and atoms.reasoning_open(prompt_ids))
    if tools is not None:
        tools = [t.model_dump() if hasattr(t, "model_dump") else t for t in tools]
    try:
        parser = tok.completion_parser(chat_format=tok.chat_format, tools=tools, in_reasoning=opened,
                                       embedding_rows=rows)
    except (Qwen4ExpError, TypeError, ValueError):  # tools of a shape the formats do not read
        parser = tok.completion_parser(chat_format=tok.chat_format, in_reasoning=opened, embedding_rows=rows)
    return parser, opened


#: chat_template_kwargs that are not template variables (vLLM's hf renderer
#: drops the first three), or that are passed by their own name.
_NOT_TEMPLATE_VARIABLES = frozenset({"chat_template", "tokenize", "return_dict", "continue_final_message",
                                     "add_generation_prompt", "tools"})
#: Content parts vLLM reads as text (the Responses API's two besides "text").
_TEXT_PARTS = frozenset({"text", "input_text", "output_text"})


def template_arguments(tok, messages: list, kwargs: dict, *, reads_parts: bool) -> tuple[list, dict]:
    """(messages, options) for `tok.render_chat` when `tok` renders its model
    folder's own template, from a request's messages (lists, see
    materialize_messages) and its chat_template_kwargs, as vLLM's `hf` renderer
    hands them to transformers' apply_chat_template: every kwarg a template
    variable (`documents`, `enable_thinking`, ...; the template ignores those
    it does not read), `tools` as sent; a `developer` turn as `system` unless
    the template names that role; `reasoning` also as `reasoning_content`;
    text parts joined by newlines unless the template reads content parts
    (`reads_parts`, vLLM's "openai" content format). ChatFormatError for a
    part that is not text (the renderer passes text only)."""
    template = tok.core.template.template
    options: dict[str, Any] = {"add_generation_prompt": kwargs.get("add_generation_prompt", True)}
    tools = kwargs.get("tools")
    if tools is not None:
        options["tools"] = [t.model_dump() if hasattr(t, "model_dump") else t for t in tools]
    for key, value in kwargs.items():
        if key not in _NOT_TEMPLATE_VARIABLES:
            options[key] = value
    developer = '"developer"' in template or "'developer'" in template
    out = []
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict):
            out.append(msg)  # render_chat names what is wrong with it
            continue
        msg = dict(msg)
        if msg.get("role") == "developer" and not developer:
            msg["role"] = "system"
        if msg.get("reasoning") is not None and msg.get("reasoning_content") is None:
            msg["reasoning_content"] = msg["reasoning"]
        content = msg.get("content")
        if isinstance(content, list):
            texts = []
            for j, part in enumerate(content):
                kind = part.get("type") if isinstance(part, dict) else None
                if kind not in _TEXT_PARTS or not isinstance(part.get("text"), str):
                    raise ChatFormatError(f"messages[{i}].content[{j}]: {kind!r} parts are not supported "
                                          "(the qwen4exp renderer passes text only)")
                texts.append(part["text"])
            msg["content"] = ([{**p, "type": "text"} for p in content] if reads_parts
                              else "\n".join(texts))
        out.append(msg)
    return out, options
