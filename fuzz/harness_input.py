"""Byte decoders of the fuzz harnesses: arbitrary bytes -> a hostile input.

Plain Python (no atheris), deterministic: `Reader` yields zeros once the bytes
run out, so every kept input replays anywhere, byte for byte the same input.
Changing a decoder changes what the kept regressions under
tests/data/fuzz_regressions/ decode to: append new branches, do not reorder.
The harnesses that call these are in fuzz/harness.py.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SRC = os.path.join(REPO, "src")
# The installed qwen4exp if there is one (or PYTHONPATH=src), else the in-tree build.
if importlib.util.find_spec("qwen4exp") is None and SRC not in sys.path:
    sys.path.insert(0, SRC)
# The test side's references (tests/_hf_reference.py, tests/_chat_reference.py),
# appended so that they never shadow anything.
if os.path.join(REPO, "tests") not in sys.path:
    sys.path.append(os.path.join(REPO, "tests"))

import numpy as np  # noqa: E402

import _hf_reference  # noqa: E402
from qwen4exp import Kind, Segment  # noqa: E402

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
# segments


def read_stream(r: Reader, atoms: list[str]):
    """(data, segments, prefix ids) from fuzz bytes: a well-formed stream, maybe mutated.

    `atoms`: the atom spellings, in the tokenizer's table order (kept inputs replay with it)."""
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



# --------------------------------------------------------------------------
# chat

ROLES = ("system", "user", "assistant", "tool", "developer", "", "User", None, 3)


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



# --------------------------------------------------------------------------
# decode

_DECODE_BAD_TYPES = (1.0, "1", None, True, b"x", [1])


def read_ids(r: Reader):
    """An id container: list/tuple/ndarray/generator, mostly valid ids, some hostile."""
    n_vocab = len(_hf_reference.reference_tables()[0])
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


