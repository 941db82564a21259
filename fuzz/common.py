"""Shared pieces of the fuzz harnesses: byte -> input decoders and the oracles.

Every harness is a function `run_<name>(data: bytes)` that turns arbitrary
bytes into an input for one public entry point, calls it, and checks the
result against an independent oracle; it raises `AssertionError` (or lets an
unexpected exception escape) when the library misbehaves. The same functions
serve three drivers:

* atheris (fuzz/fuzz_<name>.py: coverage-guided, libFuzzer mutation);
* hypothesis (tests/test_hostile.py: `st.binary()` into the same function);
* the regression replay (tests/test_hostile.py: every file kept under
  tests/data/fuzz_regressions/<name>/).

The byte decoders are plain Python (no atheris), so a kept input replays
anywhere. Inputs are decoded with `Reader`, a deterministic consumer that
yields zeros once the bytes run out.

Oracles:

* encode   - Hugging Face `tokenizers` on tokenizer.json with `added_tokens`
             emptied (SPEC invariant 3): ids equal; count() equal.
* segments - an independent Python geometry checker; DATA segments through
             the HF reference, TRUSTED_CONTROL through a Python atom parser;
             the TokenBuffer is untouched on any error.
* chat     - geometry, provenance (caller strings only in DATA; the sequence
             of control markers is the same as for a "neutral twin" request
             whose caller strings are replaced by placeholders), token ids
             = per-segment reference; only ChatFormatError/TextEncodingError
             may be raised, and render_chat_into leaves its target untouched.
* decode   - the byte spellings read straight from tokenizer.json.
"""

from __future__ import annotations

import json
import importlib.util
import os
import sys
from functools import lru_cache

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SRC = os.path.join(REPO, "src")
# The installed qwen4exp if there is one (or PYTHONPATH=src), else the in-tree build.
if importlib.util.find_spec("qwen4exp") is None and SRC not in sys.path:
    sys.path.insert(0, SRC)
TOKENIZER_JSON = os.path.join(REPO, "vocab", "tokenizer.json")
REGRESSIONS = os.path.join(REPO, "tests", "data", "fuzz_regressions")
HARNESSES = ("encode", "segments", "chat", "decode")

import numpy as np  # noqa: E402

import qwen4exp  # noqa: E402
from qwen4exp import (  # noqa: E402
    ChatFormatError,
    Kind,
    Qwen4ExpError,
    Segment,
    SegmentError,
    TextEncodingError,
    TokenBuffer,
    UnknownControlError,
)

# --------------------------------------------------------------------------
# shared state (one per process)


@lru_cache(maxsize=None)
def tokenizer():
    return qwen4exp.Tokenizer()


@lru_cache(maxsize=None)
def hf_plain():
    from tokenizers import Tokenizer

    with open(TOKENIZER_JSON, encoding="utf-8") as f:
        raw = json.load(f)
    raw["added_tokens"] = []
    return Tokenizer.from_str(json.dumps(raw))


@lru_cache(maxsize=None)
def reference_tables():
    """(spelling bytes per BPE id, {atom id: bytes}) straight from tokenizer.json."""
    with open(TOKENIZER_JSON, encoding="utf-8") as f:
        raw = json.load(f)
    # GPT-2 byte <-> unicode map of the ByteLevel pre-tokenizer.
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    char_to_byte = {chr(c): b for b, c in zip(bs, cs)}
    vocab = raw["model"]["vocab"]
    spell = [b""] * len(vocab)
    for token, i in vocab.items():
        spell[i] = bytes(char_to_byte[ch] for ch in token)
    atoms = {t["id"]: t["content"].encode("utf-8") for t in raw["added_tokens"]}
    return spell, atoms


def hf_ids(text: str) -> list[int]:
    return hf_plain().encode(text, add_special_tokens=False).ids


# --------------------------------------------------------------------------
# byte consumer


class Reader:
    """Deterministic consumer of fuzz bytes (zeros after the end)."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def left(self) -> int:
        return len(self.data) - self.pos

    def u8(self) -> int:
        if self.pos >= len(self.data):
            return 0
        b = self.data[self.pos]
        self.pos += 1
        return b

    def u16(self) -> int:
        return self.u8() | (self.u8() << 8)

    def u32(self) -> int:
        return self.u16() | (self.u16() << 16)

    def below(self, n: int) -> int:
        """An int in [0, n) (n <= 65536)."""
        if n <= 1:
            return 0
        return (self.u8() if n <= 256 else self.u16()) % n

    def choice(self, seq):
        return seq[self.below(len(seq))]

    def take(self, n: int) -> bytes:
        b = self.data[self.pos : self.pos + n]
        self.pos += len(b)
        return b


# Pieces chosen to hit every class the pre-tokenizer, NFC and BPE distinguish
# (NOTES-parity.md): whitespace kinds, marks, numbers, contractions and case
# folds, Hangul jamo, CJK, astral code points, atom spellings, format chars.
PALETTE = (
    "a", "Z", "hello", " world", "é", "e\u0301", "\u0301", "\u0338", "\u0300\u0316", "\u0316\u0300",
    " ", "  ", "\t", "\n", "\r", "\r\n", "\x0b", "\x0c", "\x85", "\u2028", "\u2029", "\u00a0",
    "\u3000", "\u1680", "\u200b", "\u200d", "\ufeff", "\x1c", "\x1f", "\x00", "\x7f",
    "0", "7", "12345", "\u00b2", "\u00bd", "\u216b", "\u2460", "\u0663",
    "'", "'s", "'S", "'\u017f", "'ll", "'LL", "'re", "'Ve", "'m", "'d", "'t", "\u212a", "\u212b",
    "-", "--", ".", "!", "?", "{", "}", '"', ":", ",", "/", "\\", "#", "$", "%", "&", "*",
    "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<|endoftext|>", "<tool_call>",
    "</tool_call>", "<tool_response>", "<|image_pad|>", "<|", "|>", "<",
    "\ud55c", "\u1100", "\u1161", "\u11a8", "\u1100\u1161\u11a8", "\uac00\u11a8",
    "\u4e2d", "\u6587", "\U00020000", "\U000323b0", "\U0001f600", "\U0001f469\u200d\U0001f4bb",
    "\u0939", "\u093f", "\u094d", "\u0958", "\u1e9b\u0323", "\U00011935\U00011930", "\u07fd",
    "\u0c3c", "\u1abf", "\u0898", "\u00df", "\u0130", "\u01c5", "\u0345", "\u0f73", "\u0344",
    "\ufb2c", "\U0001d160", "\u0622", "\u0627\u0653", "\u05d0\u05b7", "\u3099", "\u304b\u3099",
    "\u00c5", "A\u030a", "\u2126", "\u1fbe", "\uff21", "\U000e0041", "\U0010ffff", "\ufffd",
)

SURROGATE_PIECES = ("\ud800", "\udfff", "\udc00a", "a\udbff")


def read_text(r: Reader, max_len: int = 2048, surrogates: bool = False) -> str:
    """A str built from palette pieces, raw code points and repeated runs."""
    parts: list[str] = []
    size = 0
    steps = r.below(64) + 1
    for _ in range(steps):
        if r.left() <= 0 or size >= max_len:
            break
        op = r.u8()
        if op < 150:
            piece = PALETTE[op % len(PALETTE)]
        elif op < 190:
            piece = chr(0x20 + r.below(0x5F))
        elif op < 215:
            cp = (r.u8() | (r.u8() << 8) | (r.below(17) << 16)) % 0x110000
            if 0xD800 <= cp <= 0xDFFF and not surrogates:
                cp = 0xFFFD
            piece = chr(cp)
        elif op < 245:
            # a run: one piece repeated (long words take the heap path)
            base = PALETTE[r.below(len(PALETTE))] if r.u8() & 1 else chr(0x20 + r.below(0x5F))
            piece = base * (1 + r.below(300))
        elif op < 250 and surrogates:
            piece = SURROGATE_PIECES[r.below(len(SURROGATE_PIECES))]
        else:
            piece = r.take(r.below(16)).decode("utf-8", "replace")
        parts.append(piece)
        size += len(piece)
    return "".join(parts)[:max_len]


# --------------------------------------------------------------------------
# encode


def check_encode(text: str) -> None:
    tok = tokenizer()
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        for fn in (tok.encode, tok.count):
            try:
                fn(text)
            except TextEncodingError:
                pass
            else:
                raise AssertionError(f"{fn.__name__}() accepted a lone surrogate: {text!r}")
        return
    ids = tok.encode(text)
    ref = hf_ids(text)
    if ids != ref:
        raise AssertionError(f"encode({text!r}) = {ids} but HF gives {ref}")
    n = tok.count(text)
    if n != len(ref):
        raise AssertionError(f"count({text!r}) = {n} but encode gives {len(ref)} ids")


def run_encode(data: bytes) -> None:
    r = Reader(data)
    mode = r.u8()
    if mode < 64:
        text = r.take(r.left()).decode("utf-8", "replace")
    elif mode < 80:
        text = r.take(r.left()).decode("utf-8", "ignore")
    else:
        text = read_text(r, surrogates=mode >= 240)
    check_encode(text)


# --------------------------------------------------------------------------
# segments


def _atom_split(atoms: dict, seg: bytes):
    """Atom ids spelling seg exactly (first atom in table order whose tail parses), or None."""
    table = [(k.encode("utf-8"), v) for k, v in atoms.items()]
    n = len(seg)
    ok = [False] * (n + 1)
    ok[n] = True
    for p in range(n - 1, -1, -1):
        for spelling, _ in table:
            if seg.startswith(spelling, p) and ok[p + len(spelling)]:
                ok[p] = True
                break
    if not ok[0]:
        return None
    out = []
    p = 0
    while p < n:
        for spelling, aid in table:
            if seg.startswith(spelling, p) and ok[p + len(spelling)]:
                out.append(aid)
                p += len(spelling)
                break
    return out


def expected_stream(data, segments):
    """Independent oracle for encode_segments: ("ok", ids) or ("error", exception classes)."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        return "error", (TypeError,)
    data = bytes(data)
    n = len(data)
    if isinstance(segments, (str, bytes)):
        return "error", (TypeError,)
    try:
        segments = list(segments)
    except TypeError:
        return "error", (TypeError,)
    segs = []
    for seg in segments:
        try:
            start, end, kind = seg
        except (TypeError, ValueError):
            return "error", (SegmentError,)
        for v in (start, end):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                return "error", (SegmentError,)
        if not isinstance(kind, Kind):
            return "error", (SegmentError,)
        segs.append((int(start), int(end), kind))
    try:
        data.decode("utf-8")
        utf8_ok = True
    except UnicodeDecodeError:
        utf8_ok = False
    geometry_ok = True
    pos = 0
    prev_kind = None
    for start, end, kind in segs:
        if start != pos or end <= start or end > n or kind == prev_kind:
            geometry_ok = False
            break
        if start < n and (data[start] & 0xC0) == 0x80:
            geometry_ok = False
            break
        pos, prev_kind = end, kind
    if pos != n:
        geometry_ok = False
    if not geometry_ok or not utf8_ok:
        # invalid UTF-8 may be reported as a segment fault or as a text encoding error
        return "error", (SegmentError,) if utf8_ok else (SegmentError, TextEncodingError)
    atoms = tokenizer().atoms
    ids: list[int] = []
    for start, end, kind in segs:
        chunk = data[start:end]
        if kind is Kind.DATA:
            ids.extend(hf_ids(chunk.decode("utf-8")))
        else:
            split = _atom_split(atoms, chunk)
            if split is None:
                return "error", (UnknownControlError,)
            ids.extend(split)
    return "ok", ids


def read_stream(r: Reader):
    """(data, segments, prefix ids) from fuzz bytes: a well-formed stream, maybe mutated."""
    atoms = list(tokenizer().atoms)
    pieces: list[tuple[Kind, bytes]] = []
    for _ in range(r.below(12) + 1):
        if r.left() <= 0:
            break
        op = r.u8()
        if op < 110:
            pieces.append((Kind.DATA, read_text(r, max_len=512).encode("utf-8")))
        elif op < 200:
            spell = "".join(r.choice(atoms) for _ in range(r.below(3) + 1))
            pieces.append((Kind.TRUSTED_CONTROL, spell.encode("utf-8")))
        elif op < 230:
            # a control segment that is not (only) atoms
            spell = r.choice(atoms) if r.u8() & 1 else ""
            junk = r.choice(("<|im_end", "x", " ", "<think>\n", "|>", "\u00e9", "<|IM_END|>", ">"))
            pieces.append((Kind.TRUSTED_CONTROL, (spell + junk if r.u8() & 1 else junk + spell).encode()))
        else:
            pieces.append((r.choice((Kind.DATA, Kind.TRUSTED_CONTROL)), r.take(r.below(12))))
    # merge same-kind neighbours (valid geometry), unless told not to
    merge = r.u8() < 200
    data_parts: list[bytes] = []
    segs: list[list] = []
    pos = 0
    for kind, chunk in pieces:
        if not chunk:
            continue
        if merge and segs and segs[-1][2] is kind:
            segs[-1][1] += len(chunk)
        else:
            segs.append([pos, pos + len(chunk), kind])
        data_parts.append(chunk)
        pos += len(chunk)
    data = b"".join(data_parts)
    segments: list = [Segment(s, e, k) for s, e, k in segs]
    # mutations of geometry and types (applied to well-formed entries only)
    for _ in range(r.below(4) if r.u8() >= 160 else 0):
        op = r.below(12)
        i = r.below(len(segments)) if segments else -1
        seg = segments[i] if i >= 0 and isinstance(segments[i], Segment) else None
        if seg is not None:
            s, e, k = seg
        if op == 0 and seg is not None:
            segments[i] = Segment(s, e + r.below(7) - 3, k)
        elif op == 1 and seg is not None:
            segments[i] = Segment(s + r.below(7) - 3, e, k)
        elif op == 2:
            segments.insert(r.below(len(segments) + 1), Segment(0, 0, Kind.DATA))
        elif op == 3 and segments:
            del segments[i]
        elif op == 4 and seg is not None and e - s >= 2:
            mid = s + 1 + r.below(min(e - s - 1, 65536))
            segments[i : i + 1] = [Segment(s, mid, k), Segment(mid, e, k)]
        elif op == 5 and seg is not None:
            segments[i] = Segment(s, e, Kind.DATA if k is Kind.TRUSTED_CONTROL else Kind.TRUSTED_CONTROL)
        elif op == 6:
            big = r.choice((-1, -(2**63) + 1, 2**31, 2**32 + 1, 2**63 - 1, 2**63, -(2**64), 10**30))
            segments.insert(r.below(len(segments) + 1), Segment(big if r.u8() & 1 else 0, big, Kind.DATA))
        elif op == 7 and seg is not None:
            bad = r.choice((True, 1.0, "1", None, np.int64(e % 2**62), np.uint8(e % 256), 0, 1))
            segments[i] = (s, bad, k) if r.u8() & 1 else (bad, e, k)
        elif op == 8 and seg is not None:
            segments[i] = (s, e, r.choice((0, 1, 2, "DATA", None, Kind(1))))
        elif op == 9 and segments:
            segments[i] = r.choice(((0, 1), (0, 1, Kind.DATA, 4), None, "abc", 5))
        elif op == 10:
            # invalid UTF-8 somewhere in the data
            at = r.below(min(len(data) + 1, 65536))
            data = data[:at] + r.choice((b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xc0\xaf",
                                         b"\xf4\x90\x80\x80", b"\x80")) + data[at:]
        elif op == 11:
            segments = list(reversed(segments))
    prefix = [r.below(151669) for _ in range(r.below(5))]
    return data, segments, prefix


def check_segments(data, segments, prefix=()) -> None:
    tok = tokenizer()
    verdict, payload = expected_stream(data, segments)
    out = TokenBuffer(capacity=r_capacity(len(prefix)))
    if prefix:
        out._append(np.asarray(prefix, dtype=np.int32))
    before = out.tolist()
    before_buf = out._buf.copy()
    try:
        tok.encode_segments_into(data, segments, out)
    except Exception as exc:  # noqa: BLE001 - classified below
        if out.tolist() != before or not np.array_equal(out._buf[: len(before)], before_buf[: len(before)]):
            raise AssertionError(f"buffer changed by a failing call ({type(exc).__name__}: {exc})")
        if verdict == "ok":
            raise AssertionError(f"valid stream rejected: {type(exc).__name__}: {exc}") from exc
        if not isinstance(exc, payload):
            raise AssertionError(
                f"expected {[c.__name__ for c in payload]}, got {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(exc, (Qwen4ExpError, TypeError)):
            raise
        return
    if verdict != "ok":
        raise AssertionError(f"invalid stream accepted (expected {[c.__name__ for c in payload]})")
    got = out.tolist()
    if got != list(before) + payload:
        raise AssertionError(f"ids {got[len(before):]} != expected {payload}")
    arr = tok.encode_segments(data, segments)
    if arr.dtype != np.int32 or arr.tolist() != payload:
        raise AssertionError("encode_segments() disagrees with encode_segments_into()")


def r_capacity(n: int) -> int:
    return 16 if n < 16 else n


def run_segments(data: bytes) -> None:
    check_segments(*read_stream(Reader(data)))


# --------------------------------------------------------------------------
# chat

ROLES = ("system", "user", "assistant", "tool", "developer", "", "User", None, 3)
CHAT_ERRORS = (ChatFormatError, TextEncodingError)


def _json_value(r: Reader, depth: int = 0):
    op = r.below(10 if depth < 4 else 6)
    if op == 0:
        return None
    if op == 1:
        return bool(r.u8() & 1)
    if op == 2:
        return r.choice((0, -1, 7, 2**31, 10**20, -(2**63)))
    if op == 3:
        return r.choice((0.5, -0.0, 1e300, float("nan"), float("inf")))
    if op in (4, 5):
        return read_text(r, max_len=64, surrogates=True)
    if op in (6, 7):
        return [_json_value(r, depth + 1) for _ in range(r.below(4))]
    return {_json_key(r): _json_value(r, depth + 1) for _ in range(r.below(4))}


def _json_key(r: Reader):
    return r.choice(("type", "name", "description", "parameters", "properties", "required", "a", "\u00e9",
                     "<think>", "\ud800", 1, None, 1.5, True))


def _content(r: Reader):
    op = r.u8()
    if op < 200:
        return read_text(r, max_len=256, surrogates=op < 3)
    if op < 235:
        parts = []
        for _ in range(r.below(4)):
            k = r.u8()
            if k < 215:
                parts.append({"type": "text", "text": read_text(r, max_len=64, surrogates=k < 3)})
            elif k < 225:
                parts.append({"type": r.choice(("image", "image_url", "video", "audio", "input_audio", "video_url",
                                                "file", "", None, 3)), "text": "x"})
            elif k < 235:
                parts.append({"type": "text", "text": _json_value(r)})
            elif k < 245:
                parts.append({"type": _json_value(r), "text": "x"})
            else:
                parts.append(_json_value(r))
        return parts
    if op < 243:
        return None
    return _json_value(r)


def _tool_call(r: Reader):
    op = r.u8()
    name = read_text(r, max_len=24, surrogates=op < 4) if r.u8() < 230 else _json_value(r)
    a = r.u8()
    if a < 100:
        args = {_json_key(r): _json_value(r) for _ in range(r.below(4))}
    elif a < 200:
        args = r.choice(('{"a": 1}', "{}", '{"x": "<tool_call>"}', '{"a": NaN}', "[1]", "", "{", '{"a":1} ',
                         '  {"q": "\\u00e9"}', '{"a": 1e400}', "null", '{"\\ud800": 1}'))
    else:
        args = _json_value(r)
    fn = {"name": name, "arguments": args}
    if r.u8() & 4:
        del fn["arguments"]
    shape = r.below(6)
    if shape == 0:
        return fn
    if shape < 4:
        return {"type": "function", "function": fn}
    if shape == 4:
        return {"type": r.choice(("function", "tool", None, [])), "function": fn if r.u8() & 1 else _json_value(r)}
    return _json_value(r)


def read_request(r: Reader):
    """(messages, kwargs) of a JSON-like chat request, mostly well-formed."""
    if r.u8() >= 248:
        # raw JSON text as the request
        try:
            obj = json.loads(r.take(r.left()).decode("utf-8", "replace"))
        except (ValueError, RecursionError):
            obj = None
        if isinstance(obj, dict):
            return obj.get("messages"), {k: v for k, v in obj.items()
                                         if k in ("tools", "add_generation_prompt", "enable_thinking")}
        return obj, {}
    messages = []
    for i in range(r.below(8) + 1):
        if r.left() <= 0 and messages:
            break
        op = r.u8()
        if op < 230:
            role = ("system" if i == 0 and op < 40 else
                    ROLES[1 + r.below(3)] if op < 245 else r.choice(ROLES))
        else:
            role = r.choice(ROLES)
        msg = {"role": role}
        if r.u8() < 245:
            msg["content"] = _content(r)
        if role == "assistant" or r.u8() >= 250:
            k = r.u8()
            if k < 100:
                msg["reasoning_content"] = read_text(r, max_len=128, surrogates=k < 4)
            elif k < 110:
                msg["reasoning_content"] = _json_value(r)
            k = r.u8()
            if k < 90:
                msg["tool_calls"] = [_tool_call(r) for _ in range(r.below(3) + 1)]
            elif k < 100:
                msg["tool_calls"] = _json_value(r)
        if r.u8() >= 250:
            msg = _json_value(r)
        messages.append(msg)
    kwargs = {}
    k = r.u8()
    if k < 80:
        tools = []
        for _ in range(r.below(3) + 1):
            tools.append({"type": "function", "function": {"name": read_text(r, max_len=16),
                                                            "description": read_text(r, max_len=64, surrogates=k < 2),
                                                            "parameters": _json_value(r)}}
                         if r.u8() < 220 else _json_value(r))
        kwargs["tools"] = tools
    elif k < 90:
        kwargs["tools"] = _json_value(r)
    k = r.u8()
    if k < 250:
        kwargs["add_generation_prompt"] = bool(k & 1)
        kwargs["enable_thinking"] = bool(k & 2)
    else:
        kwargs["add_generation_prompt"] = _json_value(r)
    return messages, kwargs


def _marker_split(seg: bytes):
    from qwen4exp.chat import CONTROL_MARKERS

    return _atom_split({m: i for i, m in enumerate(sorted(CONTROL_MARKERS))}, seg)


def caller_strings(messages, tools) -> list[str]:
    """Every caller string the rendered stream must carry in DATA (as rendered)."""
    from qwen4exp.chat_validate import tojson

    out: list[str] = []
    n = len(messages)
    last_query = next((i for i in range(n - 1, -1, -1) if messages[i]["role"] == "user"), n - 1)
    for i, msg in enumerate(messages):
        content = msg.get("content")
        if isinstance(content, str):
            out.append(content)
        elif isinstance(content, list):
            out.extend(p["text"] for p in content)
        reasoning = msg.get("reasoning_content")
        # reasoning is rendered only after the last query (as in Qwen3's template)
        if msg["role"] != "assistant":
            continue  # reasoning_content and tool_calls of other roles are ignored
        if isinstance(reasoning, str) and i > last_query and (i == n - 1 or reasoning):
            out.append(reasoning)
        for call in msg.get("tool_calls") or ():
            fn = call.get("function", call)
            out.append(fn["name"])
            args = fn["arguments"]
            out.append(args if isinstance(args, str) else tojson(args))
    for tool in tools or ():
        out.append(tojson(tool))
    return [s.strip("\n") for s in out if s.strip("\n")]


def neutral_twin(messages, tools):
    """The same request with every caller string replaced by a placeholder of the same emptiness."""

    def ph(s: str) -> str:
        return "x" if s else ""

    twin = []
    for msg in messages:
        m = {"role": msg["role"]}
        content = msg.get("content")
        if isinstance(content, str):
            m["content"] = ph(content)
        elif isinstance(content, list):
            m["content"] = [{"type": "text", "text": ph("".join(p["text"] for p in content))}]
        elif "content" in msg:
            m["content"] = content
        if "reasoning_content" in msg and msg["role"] == "assistant":
            rc = msg["reasoning_content"]
            m["reasoning_content"] = ph(rc) if isinstance(rc, str) else rc
        if msg.get("tool_calls") and msg["role"] == "assistant":
            m["tool_calls"] = [{"name": "f", "arguments": {}} for _ in msg["tool_calls"]]
        twin.append(m)
    return twin, ([{}] * len(tools) if tools else tools)


def check_chat(messages, kwargs) -> None:
    from qwen4exp.chat import render_chat, render_chat_into

    tok = tokenizer()
    target = qwen4exp.RenderedChat()
    seed_chat = None
    try:
        seed_chat = render_chat([{"role": "user", "content": "seed"}])
        render_chat_into([{"role": "user", "content": "seed"}], target)
    except Exception as exc:  # noqa: BLE001
        raise AssertionError(f"render_chat fails on a trivial request: {exc!r}") from exc
    try:
        chat = render_chat(messages, **kwargs)
    except CHAT_ERRORS as exc:
        try:
            render_chat_into(messages, target, **kwargs)
        except CHAT_ERRORS:
            pass
        else:
            raise AssertionError("render_chat_into accepted what render_chat rejected") from exc
        if target != seed_chat or target.text != seed_chat.text:
            raise AssertionError("render_chat_into changed its target on a failing call") from exc
        return
    render_chat_into(messages, target, **kwargs)
    if target != chat or target.text != chat.text:
        raise AssertionError("render_chat_into and render_chat disagree")
    # accepted: geometry
    data, segs = chat.data, chat.segments
    if not isinstance(data, bytes) or chat.text != data.decode("utf-8"):
        raise AssertionError("chat.text is not chat.data decoded")
    pos = 0
    prev = None
    for i, (s, e, k) in enumerate(segs):
        if s != pos or e <= s or k is prev or not isinstance(k, Kind):
            raise AssertionError(f"bad geometry at segment {i}: {segs[max(0, i - 1): i + 1]}")
        if (data[s] & 0xC0) == 0x80:
            raise AssertionError(f"segment {i} starts inside a UTF-8 sequence")
        pos, prev = e, k
    if pos != len(data) or (data and not segs):
        raise AssertionError("segments do not cover the stream")
    # provenance: control segments are only template markers ...
    markers: list[int] = []
    for s, e, k in segs:
        if k is Kind.TRUSTED_CONTROL:
            split = _marker_split(data[s:e])
            if split is None:
                raise AssertionError(f"control segment {data[s:e]!r} is not made of template markers")
            markers.extend(split)
    # ... caller strings lie inside DATA ...
    data_runs = [data[s:e] for s, e, k in segs if k is Kind.DATA]
    tools = kwargs.get("tools")
    for text in caller_strings(messages, tools):
        b = text.encode("utf-8")
        if not any(b in run for run in data_runs):
            raise AssertionError(f"caller string {text[:80]!r} is not inside one DATA segment")
    # ... and structure never depends on what caller text spells.
    twin_msgs, twin_tools = neutral_twin(messages, tools)
    twin = render_chat(twin_msgs, **{**kwargs, "tools": twin_tools} if "tools" in kwargs else kwargs)
    twin_markers = []
    for s, e, k in twin.segments:
        if k is Kind.TRUSTED_CONTROL:
            twin_markers.extend(_marker_split(twin.data[s:e]))
    if markers != twin_markers:
        raise AssertionError("the control markers depend on caller text (neutral twin differs)")
    # tokens: DATA through the reference, each marker one atom id
    ids = tok.encode_chat(chat)
    verdict, expected = expected_stream(data, segs)
    if verdict != "ok" or ids.tolist() != expected:
        raise AssertionError("encode_chat disagrees with the per-segment reference")
    atom_ids = set(tok.atoms.values())
    if sum(1 for t in ids.tolist() if t in atom_ids) != len(markers):
        raise AssertionError("number of added-token ids != number of template markers")


def run_chat(data: bytes) -> None:
    check_chat(*read_request(Reader(data)))


# --------------------------------------------------------------------------
# decode

_DECODE_BAD_TYPES = (1.0, "1", None, True, b"x", [1])


def read_ids(r: Reader):
    """An id container: list/tuple/ndarray/generator, mostly valid ids, some hostile."""
    n_vocab = len(reference_tables()[0])
    ids: list = []
    for _ in range(r.below(64)):
        if r.left() <= 0:
            break
        op = r.u8()
        if op < 170:
            ids.append(r.u32() % n_vocab)
        elif op < 200:
            ids.append(151643 + r.below(26))
        elif op < 215:
            ids.append(r.choice((n_vocab + 26, 151669, 151642, 2**31 - 1, 2**31, -1, -(2**31), 2**32,
                                 2**63, -(2**64), 10**40, 152000, 151668 + 1)))
        elif op < 225:
            ids.append(r.choice(_DECODE_BAD_TYPES))
        elif op < 240:
            ids.append(np.int64(r.u32() % n_vocab) if r.u8() & 1 else np.uint16(r.u16()))
        else:
            # bytes of one multi-byte char split across tokens (U+FFFD handling)
            ids.extend(r.choice(([1, 2], [127, 94], [126, 222], [160, 223], [226, 224])))
    shape = r.below(10)
    if shape < 4:
        return ids
    if shape == 4:
        return tuple(ids)
    if shape == 5:
        return iter(ids)
    try:
        dtype = (np.int32, np.int64, np.uint64, np.int16, np.uint8, np.float64, np.bool_)[r.below(7)]
        arr = np.array([i if isinstance(i, (int, np.integer)) and not isinstance(i, bool) else 0
                        for i in ids], dtype=object)
        arr = arr.astype(dtype)
    except (OverflowError, ValueError, TypeError):
        return ids
    if shape == 9 and arr.size >= 2:
        arr = arr[::2]  # non-contiguous
    if shape == 8:
        arr = arr.reshape(1, -1)  # 2-D
    return arr


def expected_decode(ids):
    """("ok", bytes) or ("error", classes) for decode_bytes(ids)."""
    spell, atoms = reference_tables()
    if isinstance(ids, np.ndarray):
        if ids.ndim != 1 or ids.dtype.kind not in "iu":
            return "error", (TypeError,)
        values = ids.tolist()
    elif isinstance(ids, (str, bytes)):
        return "error", (TypeError,)
    else:
        values = list(ids)
    faults = set()
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            faults.add(TypeError)
            continue
        v = int(v)
        if 0 <= v < len(spell):
            out.append(spell[v])
        elif v in atoms:
            out.append(atoms[v])
        else:
            faults.add(Qwen4ExpError)
    if faults:  # the first fault in order is reported; any of these classes will do
        return "error", tuple(faults)
    return "ok", b"".join(out)


def check_decode(ids) -> None:
    tok = tokenizer()
    one_shot = not isinstance(ids, (list, tuple, np.ndarray))
    if one_shot:  # an iterator: the oracle reads a copy
        ids = list(ids)
    verdict, payload = expected_decode(ids)
    try:
        got = tok.decode_bytes(iter(ids) if one_shot else ids)
    except (Qwen4ExpError, TypeError) as exc:
        if verdict == "ok":
            raise AssertionError(f"valid ids rejected: {type(exc).__name__}: {exc}") from exc
        if not isinstance(exc, payload):
            raise AssertionError(f"expected {[c.__name__ for c in payload]}, got {type(exc).__name__}") from exc
        if not str(exc):
            raise AssertionError("error without a message")
        return
    if verdict != "ok":
        raise AssertionError(f"invalid ids accepted (expected {[c.__name__ for c in payload]})")
    if got != payload:
        raise AssertionError(f"decode_bytes gives {got!r}, expected {payload!r}")
    text = tok.decode(iter(ids) if one_shot else ids)
    if text != payload.decode("utf-8", "replace"):
        raise AssertionError("decode() is not decode_bytes() with U+FFFD replacement")


def run_decode(data: bytes) -> None:
    check_decode(read_ids(Reader(data)))


RUNNERS = {"encode": run_encode, "segments": run_segments, "chat": run_chat, "decode": run_decode}


def replay_json(harness: str, case: dict) -> None:
    """Replay a hand-kept regression case (JSON form) of one harness."""
    if harness == "encode":
        check_encode(case["text"])
    elif harness == "segments":
        data = bytes.fromhex(case["data_hex"]) if "data_hex" in case else case["data"].encode("utf-8")
        segs = [Segment(s, e, Kind[k]) if isinstance(k, str) and k in Kind.__members__ else (s, e, k)
                for s, e, k in case["segments"]]
        check_segments(data, segs, case.get("prefix", ()))
    elif harness == "chat":
        check_chat(case["messages"], case.get("kwargs", {}))
    elif harness == "decode":
        check_decode(case["ids"])
    else:
        raise ValueError(f"unknown harness {harness!r}")


def regression_files(harness: str | None = None):
    """(harness, path) of every kept regression input."""
    out = []
    for h in HARNESSES if harness is None else (harness,):
        d = os.path.join(REGRESSIONS, h)
        if os.path.isdir(d):
            out.extend((h, os.path.join(d, f)) for f in sorted(os.listdir(d)) if not f.startswith("."))
    return out


def replay_file(harness: str, path: str) -> None:
    if path.endswith(".json"):
        with open(path, encoding="utf-8") as f:
            case = json.load(f)
        replay_json(harness, case)
    else:
        with open(path, "rb") as f:
            RUNNERS[harness](f.read())
