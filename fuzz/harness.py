"""The fuzz harnesses and their oracles.

Every harness is a function `run_<name>(data: bytes)` that turns arbitrary
bytes into an input for one public entry point (fuzz/harness_input.py), calls
it, and checks the result against an independent oracle; it raises
`AssertionError` (or lets an unexpected exception escape) when the library
misbehaves. The same functions serve three drivers:

* atheris (fuzz/fuzz_<name>.py: coverage-guided, libFuzzer mutation);
* hypothesis (tests/test_hostile.py: `st.binary()` into the same function);
* the regression replay (tests/test_hostile.py: every file kept under
  tests/data/fuzz_regressions/<name>/).

Oracles (none of them uses qwen4exp's own code; the references live on the
test side, tests/_hf_reference.py and tests/_chat_reference.py):

* encode   - Hugging Face `tokenizers` on tokenizer.json with `added_tokens`
             emptied (docs/FORMAT.md, invariant 3): ids equal; count() equal.
* segments - a Python geometry checker; DATA segments through the HF
             reference, TRUSTED_CONTROL through a Python atom parser over the
             atoms of tokenizer.json; the TokenBuffer is untouched on any error.
* chat     - only ChatFormatError/TextEncodingError may be raised, and
             render_chat_into leaves its target untouched; accepted chats pass
             the chat reference's geometry and provenance checks (twins whose
             caller strings are defused or entirely changed keep the segments;
             every changed byte is DATA), and their ids equal the per-segment
             reference with one added-token id per template marker.
* decode   - the byte spellings read straight from tokenizer.json.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache

from harness_input import REPO, Reader, read_ids, read_request, read_stream, read_text

import numpy as np

import qwen4exp
from qwen4exp import (
    ChatFormatError,
    Kind,
    Qwen4ExpError,
    Segment,
    SegmentError,
    TextEncodingError,
    TokenBuffer,
    UnknownControlError,
)
from qwen4exp.render.chat import render_chat, render_chat_into

from _chat_reference import TwinCollision, check_geometry, check_provenance, control_markers, render_kwargs
from _hf_reference import hf_ids, hf_plain, reference_tables

REGRESSIONS = os.path.join(REPO, "tests", "data", "fuzz_regressions")
HARNESSES = ("encode", "segments", "chat", "decode")
CHAT_ERRORS = (ChatFormatError, TextEncodingError)

__all__ = ["HARNESSES", "RUNNERS", "hf_plain", "reference_tables", "regression_files", "replay_file",
           "replay_json", "tokenizer"]


@lru_cache(maxsize=None)
def tokenizer():
    return qwen4exp.Tokenizer()


@lru_cache(maxsize=None)
def reference_atoms() -> dict[str, int]:
    """Atom spelling -> id, from tokenizer.json (table order: by id)."""
    return {b.decode("utf-8"): i for i, b in sorted(reference_tables()[1].items())}


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
    atoms = reference_atoms()
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
    check_segments(*read_stream(Reader(data), list(tokenizer().atoms)))



# --------------------------------------------------------------------------
# chat


def _renderable_request(messages, kwargs) -> dict:
    """The request as a dict for the chat reference, without the fields the format
    ignores: `reasoning_content` and `tool_calls` belong to assistant turns only."""
    msgs = []
    for msg in messages:
        if msg.get("role") != "assistant":
            msg = {k: v for k, v in msg.items() if k not in ("reasoning_content", "tool_calls")}
        msgs.append(msg)
    return {"messages": msgs, **kwargs}


def _render_request(request: dict):
    return render_chat(request["messages"], **render_kwargs(request))


def check_chat(messages, kwargs) -> None:
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
    # accepted: geometry, and provenance by the test side's chat reference: the
    # harmless and mutated twins (every caller character changed) render with
    # the same segments, and every byte where they differ is DATA.
    if not isinstance(chat.data, bytes):
        raise AssertionError("chat.data is not bytes")
    data, segs = chat.data, chat.segments
    check_geometry(chat)
    try:
        check_provenance(_render_request, _renderable_request(messages, kwargs), chat, parity=False)
    except TwinCollision:
        pass  # two JSON keys differ only in an atom spelling: no faithful harmless twin
    markers = control_markers(chat)
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
