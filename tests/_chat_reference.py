"""Independent checks for the chat renderer (tests/test_chat.py, bench/).

Nothing here imports the renderer. It provides:

* the reference: transformers' `apply_chat_template(tokenize=False)` with the
  Qwen3 template from the bundled vocab/ (offline), on a request normalised to
  what the template can render (content lists joined, a None/absent assistant
  content as "");
* `scan_segments`: the segments an atom-free request must have, derived from
  the reference text alone (every marker occurrence is template-authored when
  no caller string spells an atom);
* caller-string walkers: `caller_strings`, `has_atom`, and `map_caller_strings`
  to build twins of a request (`harmless_twin`: each atom spelling replaced by
  "z" * len; `mutated_twin`: every caller character rotated to a different one
  of the same UTF-8 length, newlines kept);
* `check_geometry`, `check_provenance` and `control_markers`.

tests/test_chat.py and the fuzz harness of the chat renderer (fuzz/harness.py)
both check against it.
"""

from __future__ import annotations

import copy
import json
import os
import re
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VOCAB = ROOT / "vocab"

#: The eight markers the template emits; the only legal TRUSTED_CONTROL spellings.
MARKERS = (
    "<|im_start|>",
    "<|im_end|>",
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
)
_MARKER_RE = re.compile("|".join(re.escape(m) for m in MARKERS))
_CONTROL_RUN_RE = re.compile("(?:" + "|".join(re.escape(m) for m in MARKERS) + ")+")


def _load_atoms() -> tuple[str, ...]:
    cfg = json.loads((VOCAB / "tokenizer_config.json").read_text(encoding="utf-8"))
    return tuple(v["content"] for v in cfg["added_tokens_decoder"].values())


#: Every added-token spelling of the vocabulary (26 of them).
ATOMS = _load_atoms()
_ATOM_RE = re.compile("|".join(re.escape(a) for a in sorted(ATOMS, key=len, reverse=True)))
assert len(ATOMS) == 26 and set(MARKERS) <= set(ATOMS)
assert not any("z" in a for a in ATOMS)  # "z" * n never completes an atom


# --------------------------------------------------------------------------- reference


@lru_cache(maxsize=1)
def reference_tokenizer():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(VOCAB))


def _join(content):
    if isinstance(content, list):
        return "".join(part["text"] for part in content)
    return content


def normalise(request: dict) -> dict:
    """The request as the Jinja template can render it (see module docstring)."""
    messages = []
    for msg in request["messages"]:
        msg = dict(msg)
        content = msg.get("content")
        if content is None:
            msg["content"] = ""
        else:
            msg["content"] = _join(content)
        messages.append(msg)
    out = dict(request)
    out["messages"] = messages
    return out


def reference_text(request: dict) -> str:
    req = normalise(request)
    return reference_tokenizer().apply_chat_template(
        req["messages"],
        tools=req.get("tools"),
        add_generation_prompt=req.get("add_generation_prompt", False),
        enable_thinking=req.get("enable_thinking", True),
        tokenize=False,
    )


def render_kwargs(request: dict) -> dict:
    return {
        "tools": request.get("tools"),
        "add_generation_prompt": request.get("add_generation_prompt", False),
        "enable_thinking": request.get("enable_thinking", True),
    }


def scan_segments(text: str, markers: "re.Pattern[str] | None" = None) -> list[tuple[int, int, int]]:
    """(start, end, kind) over text.encode(); kind 1 = control (what `markers`
    matches, by default the template markers), for an atom-free request."""
    data = text.encode("utf-8")
    segs: list[list[int]] = []

    def add(a: int, b: int, kind: int) -> None:
        if a == b:
            return
        if segs and segs[-1][2] == kind:
            segs[-1][1] = b
        else:
            segs.append([a, b, kind])

    pos = 0
    for m in (markers or _MARKER_RE).finditer(text):
        start = len(text[: m.start()].encode("utf-8"))
        add(pos, start, 0)
        add(start, start + len(m.group().encode("utf-8")), 1)
        pos = start + len(m.group().encode("utf-8"))
    add(pos, len(data), 0)
    return [tuple(s) for s in segs]


# --------------------------------------------------------------------------- caller strings


def _json_strings(value):
    """Every string in a JSON value (keys and values)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            if isinstance(k, str):
                yield k
            yield from _json_strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _json_strings(v)


def _calls(msg):
    for call in msg.get("tool_calls") or ():
        yield call["function"] if "function" in call else call


def caller_strings(request: dict) -> list[str]:
    """Every caller string the renderer writes (content lists joined, JSON rendered)."""
    req = normalise(request)
    out = []
    for msg in req["messages"]:
        out.append(msg["content"])
        if msg.get("reasoning_content") is not None:
            out.append(msg["reasoning_content"])
        for fn in _calls(msg):
            out.extend(json_call_strings(fn))
    out.extend(tools_strings(request.get("tools")))
    return out


def json_call_strings(fn: dict):
    """A JSON tool call's caller strings: the name, the arguments as written
    (a JSON string verbatim, else dumped) and every string inside them."""
    args = fn["arguments"]
    yield fn["name"]
    if isinstance(args, str):
        yield args
    else:
        yield json.dumps(args, ensure_ascii=False)
        yield from _json_strings(args)


def tools_strings(tools):
    """The tool schemas' caller strings: each schema dumped, and every string inside it."""
    for tool in tools or ():
        yield json.dumps(tool, ensure_ascii=False)
        yield from _json_strings(tool)


def has_atom(request: dict) -> bool:
    return any(_ATOM_RE.search(s) for s in caller_strings(request))


class TwinCollision(Exception):
    """Two keys of one JSON object map to the same twin key (the harmless map
    "z"*len is not injective): that request has no faithful twin."""


def _map_json(value, fn):
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, dict):
        out = {(fn(k) if isinstance(k, str) else k): _map_json(v, fn) for k, v in value.items()}
        if len(out) != len(value):
            raise TwinCollision(sorted(map(str, value)))
        return out
    if isinstance(value, (list, tuple)):
        return [_map_json(v, fn) for v in value]
    return value


def _map_json_text(text: str, fn) -> str:
    """Apply fn to the raw characters inside the string literals of JSON text,
    leaving escapes and everything outside literals alone (the text stays valid)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c != '"':
            out.append(c)
            i += 1
            continue
        out.append(c)
        i += 1
        run = []
        while i < n and text[i] != '"':
            if text[i] == "\\":
                out.append(fn("".join(run)))
                run = []
                width = 6 if text[i + 1 : i + 2] == "u" else 2
                out.append(text[i : i + width])
                i += width
            else:
                run.append(text[i])
                i += 1
        out.append(fn("".join(run)))
        if i < n:
            out.append('"')
            i += 1
    return "".join(out)


def map_caller_strings(request: dict, fn) -> dict:
    """A copy of the normalised request with fn applied to every caller string."""
    req = copy.deepcopy(normalise(request))
    for msg in req["messages"]:
        msg["content"] = fn(msg["content"])
        if msg.get("reasoning_content") is not None:
            msg["reasoning_content"] = fn(msg["reasoning_content"])
        for call in msg.get("tool_calls") or ():
            f = call["function"] if "function" in call else call
            f["name"] = fn(f["name"])
            args = f["arguments"]
            f["arguments"] = _map_json_text(args, fn) if isinstance(args, str) else _map_json(args, fn)
    if req.get("tools"):
        req["tools"] = [_map_json(t, fn) for t in req["tools"]]
    return req


def _defuse(s: str) -> str:
    return _ATOM_RE.sub(lambda m: "z" * len(m.group()), s)


def harmless_twin(request: dict) -> dict:
    """Same request, each atom spelling in caller text replaced by "z" * its length."""
    return map_caller_strings(request, _defuse)


_ASCII_ROT = [chr(c) for c in range(0x20, 0x7F) if chr(c) not in '"\\']
_ASCII_NEXT = {c: _ASCII_ROT[(k + 1) % len(_ASCII_ROT)] for k, c in enumerate(_ASCII_ROT)}


def _rotate_char(c: str) -> str:
    o = ord(c)
    if o < 0x80:
        return _ASCII_NEXT.get(c, c)  # newlines, CR, tabs, quotes, backslash: kept
    if o < 0x800:
        return chr(0x80 + (o - 0x80 + 1) % 0x780)
    if o < 0x10000:
        if 0xD800 <= o <= 0xDFFF:
            return c
        o = o + 1
        if o == 0xD800:
            o = 0xE000
        elif o == 0x10000:
            o = 0x800
        return chr(o)
    return chr(0x10000 + (o - 0x10000 + 1) % 0x100000)


def _rotate(s: str) -> str:
    return "".join(map(_rotate_char, s))


def mutated_twin(request: dict) -> dict:
    """Same request, every caller character rotated (same UTF-8 length, newlines kept)."""
    return map_caller_strings(request, _rotate)


# --------------------------------------------------------------------------- checks


def check_geometry(chat) -> None:
    """Non-empty, contiguous, covering, merged, on UTF-8 boundaries; controls are markers."""
    data, segs = chat.data, chat.segments
    assert chat.text.encode("utf-8") == data
    assert data.decode("utf-8") == chat.text
    if not data:
        assert segs == ()
        return
    assert segs, "a non-empty stream needs segments"
    pos = 0
    prev = None
    for seg in segs:
        start, end, kind = seg
        assert start == pos, f"gap/overlap at {start} (expected {pos})"
        assert end > start, f"empty segment at {start}"
        assert int(kind) in (0, 1)
        assert prev is None or int(kind) != prev, f"unmerged neighbours at {start}"
        assert start == 0 or (data[start] & 0xC0) != 0x80, f"boundary inside UTF-8 at {start}"
        chunk = data[start:end].decode("utf-8")
        if int(kind) == 1:
            assert _CONTROL_RUN_RE.fullmatch(chunk), f"control {chunk!r} is not markers"
        prev, pos = int(kind), end
    assert pos == len(data), "segments do not cover the stream"


def control_markers(chat) -> list[str]:
    """The template markers of the TRUSTED_CONTROL segments, in order (one added-token
    id each when tokenized)."""
    out: list[str] = []
    for s in chat.segments:
        if int(s.kind) == 1:
            out.extend(_MARKER_RE.findall(chat.data[s.start : s.end].decode("utf-8")))
    return out


def plain_segments(chat) -> list[tuple[int, int, int]]:
    return [(s.start, s.end, int(s.kind)) for s in chat.segments]


def data_mask(chat) -> bytearray:
    mask = bytearray(len(chat.data))
    for s in chat.segments:
        if int(s.kind) == 0:
            mask[s.start : s.end] = b"\x01" * (s.end - s.start)
    return mask


def check_provenance(render, request: dict, chat, *, parity: bool = True) -> None:
    """The structure never depends on what caller text spells, and caller bytes are DATA.

    `render(request)` renders a request dict. Two twins are rendered:
    the harmless twin (atom spellings -> "z"*len) must give the same segments,
    and (being atom-free) match the reference text and its scanned segments;
    the mutated twin (every caller character changed, same byte length) must
    give the same segments, and every byte where it differs from `chat` —
    caller bytes by construction — must lie in DATA.
    """
    segs = plain_segments(chat)
    mask = data_mask(chat)

    for twin_req in (harmless_twin(request), mutated_twin(request)):
        twin = render(twin_req)
        assert plain_segments(twin) == segs
        assert len(twin.data) == len(chat.data)
        for i, (a, b) in enumerate(zip(chat.data, twin.data)):
            if a != b:
                assert mask[i], f"caller byte at {i} is not DATA"

    harmless = harmless_twin(request)
    assert not has_atom(harmless)
    if parity:
        ref = reference_text(harmless)
        assert render(harmless).text == ref
        assert scan_segments(ref) == segs

    # Every atom spelling typed by the caller is DATA in `chat`.
    hdata = render(harmless).data
    for i, (a, b) in enumerate(zip(chat.data, hdata)):
        if a != b:
            assert mask[i]
