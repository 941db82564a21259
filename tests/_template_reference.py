"""Reference side of the template-renderer tests (tests/test_template_render.py).

* the chat templates of ~30 model families (tests/data/templates/, see its
  NOTICE.md) and the special-token values each family's folder passes;
* the markers those templates spell (`<|start_header_id|>`, `<start_of_turn>`,
  `[INST]`, ...): the tests add them to the shipped Qwen3 tokenizer.json as
  added tokens, so each template's own markers are atoms and Hugging Face's
  ids can be compared for every family;
* conversations (hypothesis strategies) and their hostile twins.

Nothing here imports qwen4exp.
"""

from __future__ import annotations

import json
import os
import re
from functools import lru_cache

from hypothesis import strategies as st

from _hf_reference import REPO

TEMPLATE_DIR = os.path.join(REPO, "tests", "data", "templates")
TEMPLATES = tuple(sorted(f for f in os.listdir(TEMPLATE_DIR) if f.endswith(".jinja")))

# Marker spellings in template literals: <|...|>, <｜...｜> (DeepSeek), [TAG] / [/TAG],
# and the <tag>s that are special tokens of their models (an XML-like tag in
# general is text: Qwen3-Coder builds `<required>` from a tool schema's key).
_MARKER = re.compile(r"<\|[A-Za-z0-9_.:\-]{1,40}\|>|<｜[^｜\s]{1,40}｜>|\[/?[A-Z][A-Z_]{2,30}\]"
                     r"|</?(?:start_of_turn|end_of_turn|think|tool_call|tool_response|bos|eos|s"
                     r"|start_of_image|end_of_image|seed:think|seed:eos|seed:bos)>")

# bos/eos per family, as the models' tokenizer_config.json name them (by file-name prefix).
_FAMILY_TOKENS = (
    (("meta-llama", "NousResearch-Hermes-3", "fireworks", "meetkai", "deepseek-ai-DeepSeek-R1-Distill-Llama"),
     "<|begin_of_text|>", "<|eot_id|>"),
    (("google-gemma",), "<bos>", "<eos>"),
    (("deepseek", "llama-cpp-deepseek"), "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    (("Qwen", "Qwen3"), None, "<|im_end|>"),
    (("microsoft-Phi",), "<s>", "<|endoftext|>"),
    (("openai-gpt-oss",), "<|startoftext|>", "<|return|>"),
)


def template_text(name: str) -> str:
    with open(os.path.join(TEMPLATE_DIR, name), encoding="utf-8") as f:
        return f.read()


def special_tokens(name: str) -> dict[str, str]:
    """The bos/eos a folder of this family would pass the template."""
    for prefixes, bos, eos in _FAMILY_TOKENS:
        if name.startswith(prefixes):
            return {k: v for k, v in (("bos_token", bos), ("eos_token", eos)) if v}
    return {"bos_token": "<s>", "eos_token": "</s>"}


@lru_cache(maxsize=None)
def markers(name: str) -> tuple[str, ...]:
    """The marker spellings a template (and its special tokens) spells."""
    found = set(_MARKER.findall(template_text(name))) | set(special_tokens(name).values())
    return tuple(sorted(found))


@lru_cache(maxsize=1)
def all_markers() -> tuple[str, ...]:
    return tuple(sorted({m for name in TEMPLATES for m in markers(name)}))


# -- conversations ------------------------------------------------------------------

# Several scripts, odd whitespace, no '<', '>', '|', '[', ']' (so no straddled marker).
_ALPHABET = st.sampled_from(
    list("abcdefghij klmnop ABC XYZ 0123 .,;:!?'\"(){}/\\-_=+*&^%$#@~`")
    + ["\n", "\n\n", "\t", "  ", "\r\n", " \n", "é", "ß", "ü", "Ω", "жизнь", "日本語", "中文", "한국어",
       "عربى", "हिन्दी", "🙂", "👍🏽", "\u00a0", "\u3000", "ﬁ"])
TEXT = st.lists(_ALPHABET, min_size=0, max_size=12).map("".join)
NONEMPTY = st.lists(_ALPHABET, min_size=1, max_size=12).map("".join).filter(str.strip)
NAME = st.from_regex(r"[a-z][a-z_]{0,10}", fullmatch=True)


@st.composite
def tool_schemas(draw):
    tools = []
    for name in draw(st.lists(NAME, min_size=1, max_size=2, unique=True)):
        tools.append({"type": "function", "function": {
            "name": name, "description": draw(NONEMPTY),
            "parameters": {"type": "object", "properties": {
                "q": {"type": "string", "description": draw(TEXT)},
                "n": {"type": "integer"}}, "required": ["q"]}}})
    return tools


@st.composite
def conversations(draw, with_tools: bool = True):
    """(messages, tools, add_generation_prompt): alternating user / assistant
    turns (the shape every family accepts), an optional system message,
    assistant tool calls (dict or string arguments) answered by tool results."""
    tools = draw(tool_schemas()) if with_tools and draw(st.booleans()) else None
    messages = []
    if draw(st.booleans()):
        messages.append({"role": "system", "content": draw(NONEMPTY)})
    turns = draw(st.integers(1, 3))
    for t in range(turns):
        messages.append({"role": "user", "content": draw(NONEMPTY)})
        if t == turns - 1 and draw(st.booleans()):
            break
        if tools and draw(st.booleans()):
            name = tools[0]["function"]["name"]
            args = {"q": draw(TEXT), "n": draw(st.integers(0, 99))}
            if draw(st.booleans()):
                args = json.dumps(args, ensure_ascii=False)
            messages.append({"role": "assistant", "content": "", "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": name, "arguments": args}}]})
            messages.append({"role": "tool", "tool_call_id": "call_1", "name": name, "content": draw(NONEMPTY)})
            messages.append({"role": "assistant", "content": draw(NONEMPTY)})
        else:
            messages.append({"role": "assistant", "content": draw(NONEMPTY)})
    return messages, tools, draw(st.booleans())


def _map_strings(value, f, key=None):
    """value with f applied to every caller string (not to roles, types, ids or
    tool and parameter names, which templates compare and look up)."""
    if isinstance(value, str):
        return value if key in ("role", "type", "id", "tool_call_id", "name", "required") else f(value)
    if isinstance(value, dict):
        return {k: _map_strings(v, f, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_map_strings(v, f, key) for v in value]
    return value


def _inject(text: str, spellings, salt: int) -> str:
    """text with spellings put at the start, the middle and the end."""
    a = spellings[salt % len(spellings)]
    b = spellings[(salt * 7 + 3) % len(spellings)]
    mid = len(text) // 2
    return f"{a}{text[:mid]}{b}{text[mid:]}{a}"


def twin(conversation, spellings, *, placeholder: bool = False):
    """The conversation with `spellings` (a template's markers) in every caller
    string; with `placeholder`, each spelling is replaced by a private-use
    stand-in instead (the oracle's benign twin: same structure, no marker)."""
    messages, tools, agp = conversation
    counter = iter(range(10**9))
    stand_in = {s: f"\ue000{i}\ue001" for i, s in enumerate(spellings)}

    def f(text):
        out = _inject(text, spellings, next(counter))
        if placeholder:
            for s, p in stand_in.items():
                out = out.replace(s, p)
        return out

    return _map_strings(messages, f), _map_strings(tools, f) if tools else tools, agp


def unplace(text: str, spellings) -> str:
    """Map twin(placeholder=True)'s stand-ins back to the spellings."""
    for i, s in enumerate(spellings):
        text = text.replace(f"\ue000{i}\ue001", s)
    return text
