"""`qwen4exp gate`: the model-free check a runtime runs before it serves a tokenizer.

Without any model it checks, over the packaged chat oracle
(runtimes/gate_oracle.json, derived from the tests' oracle by
tools/gen_gate_oracle.py) and the vocabulary itself:

* vocabulary soundness: all 256 byte tokens; each atom spelling resolves to
  exactly one id, outside the BPE range, spelled by no BPE token; every
  template marker is an atom; no atom is reachable from DATA; decoding round
  trips on a multilingual sample;
* chats, in each chat format (by default every one, over the vocabulary
  checked): each accepted case renders to the oracle's bytes and segments
  for that format (every caller byte DATA), each template marker yields
  exactly its atom id and DATA never yields one; each rejected case raises
  the oracle's error and leaves a prior transcript and token buffer
  byte-identical.

The command `qwen4exp gate` (its options, printing and exit codes) is in
`qwen4exp.cli.gate`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from qwen4exp.vocab import compile as _vocab_compile
from qwen4exp.vocab.files import NotRegularFileError, read_regular_file
from qwen4exp.render.chat import render_chat, render_chat_into
from qwen4exp.formats import chat_format, chat_formats, default_format
from qwen4exp.markers import CONTROL_MARKERS, Marker, MediaMarker
from qwen4exp.errors import JsonError, Qwen4ExpError
from qwen4exp.render.requests import loads_json
from qwen4exp.render.segments import Kind, RenderedChat, Segment
from qwen4exp.encode.tokenizer import TokenBuffer, Tokenizer

ORACLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gate_oracle.json")
# The markers the renderer emits as TRUSTED_CONTROL (docs/FORMAT.md, section 3).
MARKERS = tuple(m.value for m in (*Marker, *MediaMarker) if m.value in CONTROL_MARKERS)
SAMPLE = (
    "The quick brown fox jumps over the lazy dog.", "Größe, naïve café — déjà vu.",
    "Съешь же ещё этих мягких французских булок.", "人工智能正在改变世界。", "日本語のテキストです。",
    "한국어 문장입니다.", "مرحبا بالعالم", "שלום עולם", "हिन्दी भाषा", "ภาษาไทย", "Ελληνικά",
    "emoji 👨‍👩‍👧 🇫🇷 👍🏽", "code: def f(x):\n\treturn x ** 2  # ok\r\n", "   spaces\u00a0and\u3000ideographic  ",
)
_MAX_LISTED = 20  # failures listed per check in the readable report


@dataclass
class Check:
    name: str
    what: str
    checked: int = 0
    failures: list[str] = field(default_factory=list)
    ran: bool = True

    @property
    def ok(self) -> bool:
        return self.ran and not self.failures

    def fail(self, message: str) -> None:
        self.failures.append(message)


@dataclass
class Report:
    subject: str
    cases: int
    checks: list[Check]
    formats: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def to_json(self) -> dict:
        return {
            "ok": self.ok, "tokenizer": self.subject, "cases": self.cases, "chat_formats": list(self.formats),
            "checks": [{"name": c.name, "what": c.what, "ok": c.ok, "ran": c.ran, "checked": c.checked,
                        "failures": c.failures} for c in self.checks],
        }

    def format(self) -> str:
        lines = [f"qwen4exp gate: {self.subject} ({self.cases} oracle cases; chat formats "
                 f"{', '.join(self.formats)})"]
        for c in self.checks:
            status = "PASS" if c.ok else ("NOT RUN" if not c.ran else "FAIL")
            lines.append(f"  {status:7} {c.name:26} {c.what} ({c.checked} checked)")
            for msg in c.failures[:_MAX_LISTED]:
                lines.append(f"          - {msg}")
            if len(c.failures) > _MAX_LISTED:
                lines.append(f"          ... and {len(c.failures) - _MAX_LISTED} more")
        failed = [c.name for c in self.checks if not c.ok]
        lines.append("result: all checks passed" if not failed else f"result: FAILED ({', '.join(failed)})")
        return "\n".join(lines)


@dataclass
class Facts:
    """What a vocabulary declares: the spelling of each BPE id and the atoms."""
    spellings: list[bytes]
    atoms: list[tuple[str, int]]


class GateInputError(Exception):
    """An unreadable tokenizer or oracle file (exit code 3)."""


def facts_of_tokenizer(tok: Tokenizer) -> Facts:
    n = tok.core.n_vocab
    spellings = [tok.decode_bytes([i]) for i in range(n)]
    return Facts(spellings, sorted(tok.atoms.items(), key=lambda a: a[1]))


def facts_of_json(raw: dict, where: str) -> Facts:
    """The same facts read straight from a tokenizer.json (the loader may refuse it)."""
    try:
        vocab = raw["model"]["vocab"]
        added = raw.get("added_tokens") or []
        alphabet = _vocab_compile.byte_level_alphabet()
        spellings = [b""] * len(vocab)
        for piece, i in vocab.items():
            if isinstance(i, int) and 0 <= i < len(vocab):
                spellings[i] = bytes(alphabet.get(c, 0) for c in piece)
        atoms = [(t["content"], t["id"]) for t in added]
    except (KeyError, TypeError, ValueError, AttributeError):
        raise GateInputError(f"{where}: not a tokenizer.json (model.vocab / added_tokens)") from None
    for k, (content, i) in enumerate(atoms):
        # the checks judge ids and spellings; an entry of the wrong type is no tokenizer.json
        if not isinstance(content, str) or isinstance(i, bool) or not isinstance(i, int):
            raise GateInputError(f"{where}: added_tokens[{k}] needs a string content and an int id, "
                                 f"not {type(content).__name__} and {type(i).__name__}")
        try:
            content.encode("utf-8")
        except UnicodeEncodeError:
            raise GateInputError(f"{where}: added_tokens[{k}].content is not valid Unicode "
                                 "(a lone surrogate)") from None
    return Facts(spellings, sorted(atoms, key=lambda a: a[1]))


def vocabulary_checks(facts: Facts) -> list[Check]:
    n = len(facts.spellings)
    by_spelling = {s: i for i, s in enumerate(facts.spellings)}
    bytes_check = Check("vocabulary.byte_tokens", "all 256 single-byte tokens", 256)
    for b in range(256):
        if bytes([b]) not in by_spelling:
            bytes_check.fail(f"byte 0x{b:02x} has no BPE token")
    outside = Check("atoms.outside_bpe", f"each atom is one id outside the BPE range 0..{n - 1}",
                    len(facts.atoms))
    seen: dict[int, str] = {}
    for spelling, i in facts.atoms:
        if 0 <= i < n:
            outside.fail(f"atom {spelling!r} has id {i}, inside the BPE range (token {facts.spellings[i]!r})")
        if i in seen:
            outside.fail(f"atoms {seen[i]!r} and {spelling!r} share id {i}")
        seen.setdefault(i, spelling)
        if spelling.encode("utf-8") in by_spelling:
            outside.fail(f"atom {spelling!r} is also spelled by BPE token {by_spelling[spelling.encode()]}")
    spellings = [s for s, _ in facts.atoms]
    for s in set(spellings):
        if spellings.count(s) > 1:
            outside.fail(f"atom {s!r} has {spellings.count(s)} ids")
    markers = Check("atoms.markers", "every template marker is an atom", len(MARKERS))
    for m in MARKERS:
        if m not in spellings:
            markers.fail(f"template marker {m!r} is not an atom")
    return [bytes_check, outside, markers]


def _control(tok: Tokenizer, text: str):
    data = text.encode("utf-8")
    return tok.encode_segments(data, [Segment(0, len(data), Kind.TRUSTED_CONTROL)]).tolist()


def tokenizer_checks(tok: Tokenizer) -> list[Check]:
    atom_ids = set(tok.atoms.values())
    resolve = Check("atoms.resolve", "each atom spelling, as TRUSTED_CONTROL, is exactly its id")
    from_data = Check("atoms.not_from_data", "no atom id from DATA, whatever it spells")
    for spelling, i in sorted(tok.atoms.items(), key=lambda a: a[1]):
        resolve.checked += 1
        try:
            got = _control(tok, spelling)
        except Qwen4ExpError as exc:
            resolve.fail(f"atom {spelling!r}: {exc}")
            continue
        if got != [i]:
            resolve.fail(f"atom {spelling!r} resolves to {got}, not [{i}]")
        elif tok.decode([i]) != spelling:
            resolve.fail(f"atom {spelling!r} (id {i}) decodes to {tok.decode([i])!r}")
        for text in (spelling, spelling * 2, f"x{spelling}y", f" {spelling}\n", "".join(tok.atoms)):
            from_data.checked += 1
            ids = tok.encode(text)
            leaked = [t for t in ids if t in atom_ids]
            if leaked or tok.decode(ids) != text:
                from_data.fail(f"atom {spelling!r}: DATA {text[:40]!r} gave atom ids {leaked}")
    for spelling, i in tok.atoms.items():
        if i < tok.core.n_vocab:  # DATA yields every BPE id, so this atom id too
            from_data.fail(f"atom {spelling!r}: its id {i} is also BPE token {tok.decode_bytes([i])!r}, "
                           "which DATA can produce")
    roundtrip = Check("decode.roundtrip", "decode(encode(text)) == text on a multilingual sample", len(SAMPLE))
    for text in SAMPLE:
        ids = tok.encode(text)
        if tok.decode(ids) != text:
            roundtrip.fail(f"{text!r} decodes back as {tok.decode(ids)!r}")
        if any(t in atom_ids for t in ids):
            from_data.fail(f"sample {text[:30]!r} gave an atom id")
    return [resolve, from_data, roundtrip]


def _segments(chat: RenderedChat):
    return [[s.start, s.end, s.kind.name] for s in chat.segments]


def _markers(tok: Tokenizer, data: bytes):
    """Atom ids of a TRUSTED_CONTROL segment's bytes, longest spelling first."""
    out, pos = [], 0
    spellings = sorted(tok.atoms, key=len, reverse=True)
    text = data.decode("utf-8")
    while pos < len(text):
        m = next((s for s in spellings if text.startswith(s, pos)), None)
        if m is None or m not in MARKERS:
            return None
        out.append(tok.atoms[m])
        pos += len(m)
    return out


def expectation(case: dict, fmt: str) -> dict | None:
    """What the oracle expects of a case in format `fmt`: its text and segments,
    or its error class and a fragment of the message; None for a format the
    oracle does not know (a format added since), which gets the checks that
    need no expectation: provenance of what renders, transactions of what not."""
    # the oracle's "expect" is the default format's, "formats" every other one's
    return case["expect"] if fmt == default_format().name else case["formats"].get(fmt)


def _expected_error(case: dict, fmt: str) -> bool:
    expect = expectation(case, fmt)
    if expect is not None:
        return "error" in expect
    try:
        render_chat(case["request"]["messages"], **_options(case["request"], fmt))
    except Qwen4ExpError:
        return True
    return False


def accepted_case(tok: Tokenizer, case: dict, check: Check, fmt: str) -> None:
    name, req, expect = case["name"], case["request"], expectation(case, fmt)
    try:
        chat = render_chat(req["messages"], **_options(req, fmt))
    except Qwen4ExpError as exc:
        check.fail(f"case {name}: rejected ({type(exc).__name__}: {exc})")
        return
    if expect is not None and (chat.text != expect["text"] or _segments(chat) != expect["segments"]):
        check.fail(f"case {name}: bytes or segments differ from the oracle (a caller byte not DATA?)")
        return
    try:
        ids = tok.encode_chat(chat).tolist()
    except Qwen4ExpError as exc:
        check.fail(f"case {name}: encode_chat failed ({type(exc).__name__}: {exc})")
        return
    atom_ids = set(tok.atoms.values())
    joined = []
    for s in chat.segments:
        part = chat.data[s.start : s.end]
        seg_ids = tok.encode_segments(part, [Segment(0, len(part), s.kind)]).tolist()
        joined += seg_ids
        if s.kind is Kind.TRUSTED_CONTROL:
            want = _markers(tok, part)
            if want is None or seg_ids != want:
                check.fail(f"case {name}: markers {part!r} at byte {s.start} gave {seg_ids}, not {want}")
        elif any(t in atom_ids for t in seg_ids):
            check.fail(f"case {name}: DATA at bytes {s.start}..{s.end} gave atom ids "
                       f"{[t for t in seg_ids if t in atom_ids]}")
    if ids != joined:
        check.fail(f"case {name}: encode_chat differs from its segments encoded one by one")


def _options(req: dict, fmt: str) -> dict:
    """render_chat's keywords for an oracle request in `fmt`: the request's options
    that the format has (a format without a thinking mode has no enable_thinking), and the format."""
    keys: tuple[str, ...] = ("tools", "add_generation_prompt")
    if "enable_thinking" in chat_format(fmt).options:
        keys += ("enable_thinking",)
    return {"chat_format": fmt, **{k: req[k] for k in keys if req.get(k) is not None}}


def rejected_case(tok: Tokenizer, case: dict, prior: RenderedChat, buf: TokenBuffer, check: Check,
                  fmt: str) -> None:
    name, req, expect = case["name"], case["request"], expectation(case, fmt)
    before = (prior.data, _segments(prior))
    try:
        render_chat_into(req["messages"], prior, **_options(req, fmt))
        check.fail(f"case {name}: accepted, the oracle expects {expect['error'] if expect else 'an error'}")
    except Qwen4ExpError as exc:
        if expect is not None and (type(exc).__name__ != expect["error"] or expect["match"] not in str(exc)):
            check.fail(f"case {name}: raised {type(exc).__name__}: {exc}, expected {expect['error']} "
                       f"naming {expect['match']!r}")
    if (prior.data, _segments(prior)) != before:
        check.fail(f"case {name}: the prior transcript changed")
    # The token buffer: the request's bytes claimed as TRUSTED_CONTROL are refused.
    ids_before = buf.tolist()
    data = json.dumps(req, ensure_ascii=True).encode()
    try:
        tok.encode_segments_into(data, [Segment(0, len(data), Kind.TRUSTED_CONTROL)], buf)
        check.fail(f"case {name}: its bytes were accepted as TRUSTED_CONTROL")
    except Qwen4ExpError:
        pass
    if buf.tolist() != ids_before:
        check.fail(f"case {name}: the prior token buffer changed")


def chat_checks(tok: Tokenizer, cases: list[dict], fmt: str) -> list[Check]:
    """The oracle's chat checks in format `fmt`: chat[FMT].accepted and chat[FMT].rejected."""
    accepted = Check(f"chat[{fmt}].accepted", "caller bytes DATA, each template marker exactly its atom id")
    rejected = Check(f"chat[{fmt}].rejected",
                     "rejected requests leave the prior transcript and token buffer as they were")
    errors = {c["name"]: _expected_error(c, fmt) for c in cases}
    good = [c for c in cases if not errors[c["name"]]]
    prior = render_chat(good[0]["request"]["messages"], **_options(good[0]["request"], fmt)) if good \
        else RenderedChat()
    buf = TokenBuffer()
    try:
        tok.encode_segments_into(prior.data, prior.segments, buf)
    except Qwen4ExpError as exc:
        rejected.fail(f"the prior transcript ({good[0]['name'] if good else 'empty'}) does not encode: {exc}")
    for case in cases:
        if errors[case["name"]]:
            rejected.checked += 1
            rejected_case(tok, case, prior, buf, rejected, fmt)
        else:
            accepted.checked += 1
            accepted_case(tok, case, accepted, fmt)
    return [accepted, rejected]


def load_oracle(path: str = ORACLE) -> list[dict]:
    try:
        with open(path, encoding="utf-8") as f:
            cases = json.load(f)["cases"]
        shaped = all(isinstance(c["name"], str) and "messages" in c["request"] and isinstance(c["expect"], dict)
                     and isinstance(c["formats"], dict) for c in cases)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise GateInputError(f"oracle {path}: unreadable ({exc})") from None
    if not shaped or not cases:
        raise GateInputError(f"oracle {path}: not a list of cases with name, request, expect and formats")
    return cases


def run_gate(tok: Tokenizer | None, *, facts: Facts | None = None, subject: str = "",
             load_error: str | None = None, oracle: str = ORACLE,
             formats: tuple[str, ...] | None = None) -> Report:
    """All checks; with `tok` None (the file did not load) only the vocabulary's own.
    The chat checks run in each of `formats` (default: every chat format); an
    unknown name is a ChatFormatError."""
    if formats is None:  # the tokenizer's own formats (a format of another vocabulary cannot encode)
        formats = tok.chat_formats() if tok is not None else chat_formats()
    formats = tuple(formats)
    for fmt in formats:
        if tok is not None:
            tok.core.chat_format_of(fmt, "gate --chat-format")
        else:
            chat_format(fmt)
    cases = load_oracle(oracle)
    if facts is None:
        if tok is None:
            raise TypeError("run_gate() needs a tokenizer or the vocabulary's facts")
        facts = facts_of_tokenizer(tok)
    checks = vocabulary_checks(facts)
    load = Check("load", "the tokenizer loads", 1)
    if load_error is not None:
        load.fail(load_error)
    checks.insert(0, load)
    if tok is not None:
        checks += tokenizer_checks(tok)
        for fmt in formats:
            checks += chat_checks(tok, cases, fmt)
    else:
        names = ["atoms.resolve", "atoms.not_from_data", "decode.roundtrip"]
        names += [f"chat[{fmt}].{kind}" for fmt in formats for kind in ("accepted", "rejected")]
        for name in names:
            checks.append(Check(name, "needs a loaded tokenizer", ran=False))
    return Report(subject, len(cases), checks, formats)


def gate_tokenizer_file(path: str, formats: tuple[str, ...] | None = None) -> Report:
    """Gate a tokenizer.json (or a directory holding one), the chat checks in each
    of `formats` (default: every chat format); GateInputError if unreadable."""
    if os.path.isdir(path):
        path = os.path.join(path, "tokenizer.json")
    try:
        raw = loads_json(read_regular_file(path))  # strict: no NaN, no Infinity, bounded nesting
    except OSError as exc:
        raise GateInputError(f"{path}: unreadable ({exc.strerror or exc})") from None
    except NotRegularFileError as exc:
        raise GateInputError(str(exc)) from None
    except JsonError as exc:
        raise GateInputError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise GateInputError(f"{path}: not a tokenizer.json (a JSON {type(raw).__name__}, not an object)")
    facts = facts_of_json(raw, path)
    try:
        tok = Tokenizer.from_file(path)
    except (Qwen4ExpError, OSError) as exc:
        return run_gate(None, facts=facts, subject=path, load_error=str(exc), formats=formats)
    return run_gate(tok, facts=facts, subject=path, formats=formats)
