"""The `qwen4exp` reasoning and tool-call parser for vLLM (docs/RUNTIMES.md, "vLLM").

vLLM takes a reasoning parser and a tool parser by name and composes them
into one `Parser` per request. Its default composition hands the two
parsers the output's *text* for a non-streamed reply, and text cannot tell
a TOOL_CALL atom from the same spelling written as ordinary tokens. So
the plugin also wraps `ParserManager._compose_parser`: when either name is
`qwen4exp`, vLLM gets `Qwen4ExpParser`, which reads the output token ids
with qwen4exp's completion parser (docs/FORMAT.md, section 11), one-shot
(`parse`) and streaming (`parse_delta`) alike:

* the prompt it continues is the request rendered again (vllm_render),
  checked against the prompt ids vLLM fed the model: it gives the format,
  the tools' schemas (arguments come typed by them), whether the generation
  prompt opened THINK, and the call ids (the same for a streamed and a
  non-streamed reply);
* a TOOL_CALL inside reasoning stays reasoning text, never a call;
* `is_reasoning_end` and the reasoning token counts come from the atom ids.

`Qwen4ExpReasoningParser` works on its own where vLLM uses only a reasoning
parser (the engine's structured-output check of where reasoning ends);
`Qwen4ExpToolParser` only marks that tool calls are wanted. Their text
methods refuse: they are never called while the composition is installed.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Sequence
from typing import Any

from vllm.entrypoints.generate.base.protocol import (
    DeltaFunctionCall,
    DeltaMessage,
    DeltaToolCall,
    FunctionCall,
)
from vllm.parser.abstract_parser import Parser
from vllm.reasoning import ReasoningParser
from vllm.tool_parsers.abstract_tool_parser import ToolParser

from qwen4exp.encode.core import TEMPLATE_FORMAT
from qwen4exp.markers import Marker

from qwen4exp.runtimes.vllm_render import render_request
from qwen4exp.runtimes.vllm_requests import Atoms as _Atoms
from qwen4exp.runtimes.vllm_requests import output_parser

__all__ = ["Qwen4ExpParser", "Qwen4ExpReasoningParser", "Qwen4ExpToolParser", "install_parser_composition"]

logger = logging.getLogger(__name__)

_TEXT_ONLY = ("the qwen4exp parser reads token ids, and this vLLM called its text-only method; "
              "the parser composition was not installed (see the log at startup)")


def _qwen4exp(tokenizer) -> Any:
    tok = getattr(tokenizer, "qwen4exp_tokenizer", None)
    if tok is None:
        raise TypeError("the qwen4exp parsers need --tokenizer-mode qwen4exp, not a "
                        f"{type(tokenizer).__name__}")
    if tok.chat_format == TEMPLATE_FORMAT:  # the API server refuses this at startup (vllm.parser_flags_problem)
        raise TypeError("the qwen4exp parsers read the Qwen chat formats, and this model folder's chat "
                        "template is none of them; use vLLM's parser for the model's family")
    return tok


class Qwen4ExpReasoningParser(ReasoningParser):
    """Where reasoning ends, from atom ids. The model may open THINK itself
    when the format thinks by default and the request did not turn it off,
    so a prompt that leaves no block open counts as reasoning not yet ended then."""

    def __init__(self, tokenizer, *args, **kwargs) -> None:
        super().__init__(tokenizer, *args, **kwargs)
        tok = _qwen4exp(tokenizer)
        self._atoms = _Atoms(tok)
        options = kwargs.get("chat_template_kwargs") or {}
        thinking = options.get("enable_thinking")
        if thinking is None:
            from qwen4exp.formats import chat_format as format_named

            thinking = tok.render_defaults.get("enable_thinking")
            if thinking is None:
                thinking = format_named(tok.chat_format).thinking_default
        self._may_think = bool(thinking)

    @property
    def reasoning_start_str(self) -> str:
        return Marker.THINK.value

    @property
    def reasoning_end_str(self) -> str:
        return Marker.THINK_END.value

    def is_reasoning_end(self, input_ids: Sequence[int]) -> bool:
        state = self._atoms.reasoning_open(input_ids)
        return (not self._may_think) if state is None else not state

    def is_reasoning_end_streaming(self, input_ids: Sequence[int], delta_ids) -> bool:
        return self._atoms.think_end in delta_ids

    def extract_content_ids(self, input_ids: list[int]) -> list[int]:
        end = self._atoms.think_end
        for k in range(len(input_ids) - 1, -1, -1):
            if input_ids[k] == end:
                return list(input_ids[k + 1:])
        return list(input_ids)

    def count_reasoning_tokens(self, token_ids: Sequence[int]) -> int:
        return self._atoms.reasoning_tokens(token_ids, False)

    def extract_reasoning(self, model_output, request):
        raise RuntimeError(_TEXT_ONLY)

    def extract_reasoning_streaming(self, *args, **kwargs):
        raise RuntimeError(_TEXT_ONLY)


class Qwen4ExpToolParser(ToolParser):
    """Marks that tool calls are parsed (Qwen4ExpParser does the parsing).
    tool_choice "required" and a named tool are not forced by a JSON grammar:
    the model's own calls are parsed as for "auto"."""

    supports_required_and_named = False

    def __init__(self, tokenizer, tools=None) -> None:
        super().__init__(tokenizer, tools)
        _qwen4exp(tokenizer)

    def extract_tool_calls(self, model_output, request):
        raise RuntimeError(_TEXT_ONLY)

    def extract_tool_calls_streaming(self, *args, **kwargs):
        raise RuntimeError(_TEXT_ONLY)


class Qwen4ExpParser(Parser):
    """One request's output, parsed from its token ids (see the module)."""

    reasoning_parser_cls = Qwen4ExpReasoningParser
    tool_parser_cls = Qwen4ExpToolParser

    def __init__(self, tokenizer, tools=None, *args, model_config=None, **kwargs) -> None:
        if type(self).reasoning_parser_cls is None:
            raise TypeError("--tool-call-parser qwen4exp reads reasoning and tool calls together: add "
                            "--reasoning-parser qwen4exp")
        super().__init__(tokenizer, tools, *args, model_config=model_config, **kwargs)
        self._vllm_tokenizer = tokenizer
        self._tok = _qwen4exp(tokenizer)
        self._atoms = _Atoms(self._tok)
        self._kwargs = dict(kwargs.get("chat_template_kwargs") or {})
        self._prompt_ids: list[int] | None = None
        self._stream: Any = None  # the CompletionParser of parse_delta
        self._streamed = {"content": "", "reasoning": ""}
        self._pending: dict[int, list] = {}  # parse_delta: the parser's call index -> its deltas so far
        self._sent_calls = 0
        self._opens_reasoning = False
        # The model's embedding rows: ids past the tokenizer's below it are the
        # model's to write (Qwen3: 151,936 rows for 151,669 ids).
        rows = getattr(model_config, "get_vocab_size", None)
        try:
            self._embedding_rows: int | None = int(rows()) if rows is not None else None
        except Exception:  # noqa: BLE001 - a config without one: any row is allowed
            self._embedding_rows = None

    # -- the prompt --------------------------------------------------------------

    def set_prompt_token_ids(self, prompt_token_ids: Sequence[int]) -> None:
        self._prompt_ids = list(prompt_token_ids)

    def _completion_parser(self, request):
        """A CompletionParser for the output after this request's prompt
        (vllm_requests.output_parser): the request rendered again when that
        gives exactly the ids the model was fed, else the format and tools
        with reasoning read from the prompt ids."""
        tok, ids = self._tok, self._prompt_ids
        kwargs = dict(self._kwargs)
        tools = getattr(request, "tools", None)
        if tools is not None and "tools" not in kwargs:
            kwargs["tools"] = tools
        messages = getattr(request, "messages", None)
        chat = None
        if messages is not None:
            try:
                chat, rendered = render_request(self._vllm_tokenizer, messages, kwargs)
            except Exception:  # noqa: BLE001 - the prompt came from elsewhere: fall back below
                chat, rendered = None, None
            if chat is not None and ids is not None and rendered != ids:
                chat = None
        parser, self._opens_reasoning = output_parser(tok, chat, ids, tools, self._embedding_rows)
        return parser

    def _noted(self, message: dict) -> None:
        """Log the ids of the model's padded rows the reply had (they spell nothing)."""
        # Only the padded rows' notes have an id (a re-render note has none).
        notes = [n for n in message.get("notes") or () if "id" in n]
        if notes:
            logger.info("qwen4exp: the reply has %d id(s) of the model's padded embedding rows (past the "
                        "tokenizer's %d ids, e.g. %d); they spell nothing", len(notes),
                        self._tok.vocab_size, notes[0]["id"])

    def _calls_wanted(self, request, enable_auto_tools: bool = True) -> bool:
        return (self._tool_parser is not None and enable_auto_tools
                and getattr(request, "tool_choice", None) != "none")

    # -- one-shot ----------------------------------------------------------------

    def is_reasoning_end(self, input_ids: list[int]) -> bool:
        return self._reasoning_parser.is_reasoning_end(input_ids)

    def parse(self, model_output: str, request, enable_auto_tools: bool = False,
              model_output_token_ids: Sequence[int] = ()):
        parser = self._completion_parser(request)
        parser.feed(list(model_output_token_ids))
        message = parser.finish()
        self._noted(message)
        calls = None
        if message["tool_calls"] and self._calls_wanted(request, enable_auto_tools):
            calls = [FunctionCall(id=c["id"], name=c["function"]["name"], arguments=c["function"]["arguments"])
                     for c in message["tool_calls"]]
        content = message["content"]
        if calls and not content:
            content = None
        return message["reasoning_content"] or None, content, calls

    def count_reasoning_tokens(self, token_ids: Sequence[int]) -> int:
        return self._atoms.reasoning_tokens(token_ids, self._opens_reasoning)

    # -- streaming ---------------------------------------------------------------

    def parse_delta(self, delta_text: str, delta_token_ids: list[int], request,
                    prompt_token_ids: list[int] | None = None, *, finished: bool) -> DeltaMessage | None:
        """Content and reasoning stream as the parser releases them. A tool
        call streams once it is complete (its TOOL_CALL_END, checked on a copy
        of the parser), so that the streamed calls are always the one-shot
        reply's: a call cut off by max_tokens, or malformed, is sent in
        neither (parse_completion reports it in invalid_tool_calls)."""
        if self._stream is None:
            if prompt_token_ids is not None:
                self._prompt_ids = list(prompt_token_ids)
            self._stream = self._completion_parser(request)
        stream = self._stream
        texts: dict[str, list[str]] = {"content": [], "reasoning": []}
        for delta in stream.feed(list(delta_token_ids)):
            if delta.kind == "tool_call":
                self._pending.setdefault(delta.index, []).append(delta)
            else:
                texts[delta.kind].append(delta.text)
        calls: list[DeltaToolCall] = []
        if finished:
            message = stream.finish()
            self._noted(message)
            # Held text (final newlines of a cut-off reply) is only in the message.
            for kind, key in (("content", "content"), ("reasoning", "reasoning_content")):
                sent = self._streamed[kind] + "".join(texts[kind])
                full = message[key] or ""
                if len(full) > len(sent) and full.startswith(sent):
                    texts[kind].append(full[len(sent):])
            calls = self._complete_calls(message)
        elif self._pending and self._atoms.tool_call_end in delta_token_ids:
            calls = self._complete_calls(copy.copy(stream).finish())
        content, reasoning = "".join(texts["content"]), "".join(texts["reasoning"])
        self._streamed["content"] += content
        self._streamed["reasoning"] += reasoning
        if not self._calls_wanted(request):
            calls = []
        if not getattr(request, "include_reasoning", True):
            reasoning = ""
        if not (content or reasoning or calls):
            return None
        return DeltaMessage(content=content or None, reasoning=reasoning or None, tool_calls=calls)

    def _complete_calls(self, message: dict) -> list[DeltaToolCall]:
        """The pending calls that `message` (the reply so far) holds as valid
        calls, as OpenAI deltas numbered in the order they are sent."""
        done = {c["id"] for c in message["tool_calls"]}
        out: list[DeltaToolCall] = []
        for index in sorted(self._pending):
            deltas = self._pending[index]
            if deltas[0].call_id not in done:
                continue
            del self._pending[index]
            first = deltas[0]
            out.append(DeltaToolCall(index=self._sent_calls, id=first.call_id, type="function",
                                     function=DeltaFunctionCall(name=first.name,
                                                                arguments="".join(d.text for d in deltas))))
            self._sent_calls += 1
        return out


def install_parser_composition(name: str) -> bool:
    """Make vLLM's ParserManager build `Qwen4ExpParser` when a parser name is
    `name` (and leave every other combination to vLLM). Idempotent; False,
    with an error logged, when this vLLM composes parsers some other way."""
    try:
        from vllm.parser.parser_manager import ParserManager
    except ImportError as exc:
        logger.error("qwen4exp: no vllm.parser.parser_manager (%s): the qwen4exp parsers would only see "
                     "text, and refuse to run", exc)
        return False
    current = ParserManager.__dict__.get("_compose_parser")
    original = getattr(current, "__func__", None)
    if original is None:
        logger.error("qwen4exp: ParserManager._compose_parser is missing in this vLLM; the qwen4exp "
                     "parsers would only see text, and refuse to run")
        return False
    if getattr(original, "_qwen4exp", False):
        return True

    def _compose_parser(cls, *args, **kwargs):
        tool_name = kwargs.get("tool_parser_name")
        reasoning_name = kwargs.get("reasoning_parser_name")
        if name not in (tool_name, reasoning_name):
            return original(cls, *args, **kwargs)
        others = {tool_name, reasoning_name} - {name, None, ""}
        if others:
            raise TypeError(f"the qwen4exp parser reads reasoning and tool calls together; it cannot be "
                            f"combined with {', '.join(sorted(map(str, others)))}")
        reasoning = Qwen4ExpReasoningParser if reasoning_name == name else None
        tools = Qwen4ExpToolParser if tool_name == name and kwargs.get("enable_auto_tools") else None
        if reasoning is None and tools is None:
            return None
        return type("Qwen4ExpParser", (Qwen4ExpParser,),
                    {"reasoning_parser_cls": reasoning, "tool_parser_cls": tools})

    _compose_parser._qwen4exp = True  # type: ignore[attr-defined]
    ParserManager._compose_parser = classmethod(_compose_parser)
    return True
