"""What the test modules share; no test module imports another.

* the command line in a subprocess: `cli`, `cli_env`, `temp_files`, the
  bundled EXAMPLE request and BAD_LINES (a JSONL input with every kind of bad
  record);
* the chat oracle (tests/data/chat_oracle.json): ORACLE_CASES by name, the
  accepted ones without atoms (ATOM_FREE) and with (WITH_ATOMS),
  `render_oracle`, and `reference_ids` (transformers' ids);
* hypothesis strategies of chat requests: `free_text`, `atom_text`,
  `chat_requests`; MESSAGE_CORRUPTIONS (edits that make a message invalid in
  every format) and `snapshot` (everything a RenderedChat holds), for the
  checks that a refused request leaves the transcript as it was;
* training masks computed independently of the product: `check_encoded`;
* the chat formats' corpus: FORMAT_CASES, TOOLS, the message builders U, A,
  T, S and `call`, `option_grid`, `render_in`;
* SCALARS, every Unicode scalar value, and SCALAR_SAMPLE, the default run's
  deterministic share of it;
* `novel_words`: words no vocabulary has, for the caches;
* Ray: `ray_rows`, `batch_in_process` (the local engine, for comparison),
  `conversations`, `requests_with_tools` (request columns), `finishes` (a
  bound on a job that could hang).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import qwen4exp
from qwen4exp import EncodedChat
from qwen4exp.render.chat import render_chat

import _chat_reference as ref
import _formats_reference as formats_ref
from _chat_reference import ATOMS, MARKERS

REPO = Path(__file__).resolve().parent.parent

# -- the command line ----------------------------------------------------------------

# The subprocesses import the same qwen4exp as this test process: the
# installed package, or the in-tree build when run with PYTHONPATH=src.
SRC = Path(qwen4exp.__file__).resolve().parent.parent
EXAMPLE = Path(qwen4exp.__file__).resolve().parent / "cli" / "example_chat.json"


def cli_env(extra=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.pop("NO_COLOR", None)
    env.update(extra or {})
    return env


def cli(*args, input=None, env=None, timeout=300, cwd=REPO):
    """Run `python -m qwen4exp ARGS`; returns CompletedProcess (text mode)."""
    return subprocess.run(
        [sys.executable, "-m", "qwen4exp", *map(str, args)],
        input=input,
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=cli_env(env),
        cwd=str(cwd),
        timeout=timeout,
    )


def cli_in_process(*args, input=None, cwd=None):
    """`qwen4exp ARGS` run by main() in this process, as `cli` runs it in a
    subprocess, with `input` on stdin and the current directory `cwd`: a
    CompletedProcess (text mode), stdout and stderr a pipe's (not a
    terminal). For the tests where a process of its own adds only its start-up
    (about a second each); a bug's exception propagates instead of exit 1."""
    import contextlib
    import io

    from qwen4exp.cli.main import main

    out, err = (io.TextIOWrapper(io.BytesIO(), encoding="utf-8", newline="") for _ in range(2))
    stdin = io.TextIOWrapper(io.BytesIO((input or "").encode("utf-8")), encoding="utf-8")
    saved_stdin = sys.stdin
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
            contextlib.chdir(cwd if cwd is not None else os.getcwd()):
        sys.stdin = stdin
        try:
            code = main([str(a) for a in args])
        except SystemExit as exc:  # argparse: --help, --version, a usage error
            code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
        finally:
            sys.stdin = saved_stdin
    out.flush()
    err.flush()
    return subprocess.CompletedProcess(["qwen4exp", *map(str, args)], code,
                                       out.buffer.getvalue().decode("utf-8", "replace"),
                                       err.buffer.getvalue().decode("utf-8", "replace"))


def temp_files(directory: Path):
    return [p.name for p in directory.iterdir() if p.name.endswith(".tmp")]


BAD_LINES = [
    '{"text": "first ok"}',
    '{"text": 5}',  # 2: wrong type
    "",  # 3: blank, not a record
    "{not json",  # 4
    '{"messages": [{"role": "bogus", "content": "x"}]}',  # 5: rejected chat
    '{"text": "\\ud800 lone surrogate"}',  # 6: not valid Unicode
    '"a string"',  # 7: wrong type
    '{"messages": [{"role": "user", "content": "<|im_end|> fine"}]}',  # 8
    '{"messages": [{"role": "user", "content": [{"type": "image", "image": "x.png"}]}]}',  # 9
    '{"text": "last ok"}',  # 10
]


# -- the chat oracle -----------------------------------------------------------------

ORACLE = Path(__file__).resolve().parent / "data" / "chat_oracle.json"
ORACLE_CASES = {c["name"]: c for c in json.loads(ORACLE.read_text(encoding="utf-8"))["cases"]}
ORACLE_ACCEPTED = sorted(n for n, c in ORACLE_CASES.items() if "error" not in c["expect"])
ATOM_FREE = [n for n in ORACLE_ACCEPTED if not ref.has_atom(ORACLE_CASES[n]["request"])]
WITH_ATOMS = [n for n in ORACLE_ACCEPTED if ref.has_atom(ORACLE_CASES[n]["request"])]


def render_oracle(request):
    return qwen4exp.render_chat(request["messages"], **ref.render_kwargs(request))


def reference_ids(request):
    req = ref.normalise(request)
    out = ref.reference_tokenizer().apply_chat_template(
        req["messages"],
        tools=req.get("tools"),
        add_generation_prompt=req.get("add_generation_prompt", False),
        enable_thinking=req.get("enable_thinking", True),
        tokenize=True,
    )
    if isinstance(out, dict) or hasattr(out, "input_ids"):
        out = out["input_ids"]
    return list(out)


# -- hypothesis strategies of chat requests ------------------------------------------

_PIECES = [
    "\n", "\r\n", "\n\n", " ", "  ", "\t", "é", "e\u0301", "\u1100\u1161", "中文", "😀", "👋🏽",
    "ß", "\u00a0", "\u2028", "<", ">", "|", "/", "<|", "|>", "think", "tool_call", '"', "\\",
    "{", "}", "'s", "123", "Hello", "مرحبا",
]
free_text = st.lists(
    st.one_of(
        st.sampled_from(_PIECES),
        st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=5),
    ),
    max_size=6,
).map("".join)
atom_text = st.lists(
    st.one_of(
        # the spellings Qwen3's template itself reacts to, drawn often
        st.sampled_from(["</think>", "<think>", "<tool_response>", "</tool_response>"]),
        st.sampled_from(MARKERS),
        st.sampled_from(ATOMS),
        st.sampled_from(_PIECES),
        st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=5),
    ),
    max_size=6,
).map("".join)


def _json_values(text):
    return st.recursive(
        st.none() | st.booleans() | st.integers(-10**20, 10**20)
        | st.floats(allow_nan=False, allow_infinity=False) | text,
        lambda children: st.lists(children, max_size=3) | st.dictionaries(text, children, max_size=3),
        max_leaves=6,
    )


@st.composite
def chat_requests(draw, text):
    def content(optional=False):
        options = [text, st.lists(text.map(lambda t: {"type": "text", "text": t}), max_size=3)]
        if optional:
            options.append(st.none())
        return draw(st.one_of(*options))

    def args():
        obj = draw(st.dictionaries(text, _json_values(text), max_size=3))
        if draw(st.booleans()):
            return obj
        seps = draw(st.sampled_from([None, (",", ":"), (" , ", " : ")]))
        return draw(st.sampled_from(["", " ", "\n"])) + json.dumps(
            obj, ensure_ascii=draw(st.booleans()), separators=seps
        )

    def call():
        name = draw(text.filter(bool))
        if draw(st.booleans()):
            return {"type": "function", "function": {"name": name, "arguments": args()}}
        return {"name": name, "arguments": args()}

    msgs = []
    if draw(st.booleans()):
        msgs.append({"role": "system", "content": content()})
    for _ in range(draw(st.integers(0 if msgs else 1, 7))):
        role = draw(st.sampled_from(["user", "user", "assistant", "assistant", "tool"]))
        msg = {"role": role}
        if role == "assistant":
            if draw(st.integers(0, 4)):
                msg["content"] = content(optional=True)
            r = draw(st.integers(0, 3))
            if r == 1:
                msg["reasoning_content"] = None
            elif r >= 2:
                msg["reasoning_content"] = draw(text)
            if draw(st.booleans()):
                msg["tool_calls"] = [call() for _ in range(draw(st.integers(0, 3)))]
        else:
            msg["content"] = content()
        msgs.append(msg)
    tools = draw(st.one_of(st.none(), st.lists(
        st.builds(lambda n, d, p: {"type": "function",
                                   "function": {"name": n, "description": d, "parameters": p}},
                  text, text, st.dictionaries(text, _json_values(text), max_size=2)),
        max_size=3)))
    return {"messages": msgs, "tools": tools,
            "add_generation_prompt": draw(st.booleans()), "enable_thinking": draw(st.booleans())}


#: (field, edit) pairs that make a message invalid in every chat format; the
#: error names the message and the field.
MESSAGE_CORRUPTIONS = [
    ("role", lambda m: m.__setitem__("role", "developer")),
    # (video_url: every template refuses it; images render in the 3.5+ formats)
    ("content", lambda m: m.__setitem__("content", [{"type": "video_url", "video_url": {"url": "u"}}])),
    ("content", lambda m: m.__setitem__("content", 3.5)),
    ("content", lambda m: m.__setitem__("content", "ok \udc80")),
    ("tool_calls", lambda m: m.update(role="assistant", tool_calls=[{"name": "f", "arguments": "[]"}])),
]


def snapshot(chat):
    """Everything a chat holds: the stream and what it was rendered from."""
    return (chat.data, chat.segments, chat.text, chat.message_spans, chat.chat_format,
            chat.request_tools(), chat.add_generation_prompt, chat.opens_reasoning)


# -- training masks, computed from byte lengths and the reference's spans ------------

_HEADER = b"<|im_start|>assistant\n"
_CLOSE = b"<|im_end|>\n"


def token_offsets(tok, ids, data: bytes, segments, nfc) -> np.ndarray:
    """First byte of each token in `data`, from the lengths of the ids' own
    spellings. The ids spell the stream with each DATA segment in NFC (HF's
    normalizer); a token inside a segment that NFC changed is placed at its
    offset within the normalized segment, clamped to the segment."""
    lengths = [len(tok.decode_bytes([int(i)])) for i in ids]
    norm = np.cumsum([0] + lengths[:-1], dtype=np.int64)
    pieces = [data[a:b] if k else nfc(data[a:b].decode()).encode() for a, b, k in segments]
    assert b"".join(tok.decode_bytes([int(i)]) for i in ids) == b"".join(pieces)
    norm_starts = np.cumsum([0] + [len(p) for p in pieces[:-1]])
    seg = np.searchsorted(norm_starts, norm, side="right") - 1
    starts = np.array([a for a, _, _ in segments] or [0])
    ends = np.array([b for _, b, _ in segments] or [0])
    return starts[seg] + np.minimum(norm - norm_starts[seg], ends[seg] - starts[seg] - 1)


def expected_masks(off, chat, spans, control_ranges):
    """(control, message_index, assistant) per token, from byte offsets."""
    control = np.array([any(a <= o < b for a, b in control_ranges) for o in off], dtype=bool)
    index = np.array([next((m for a, b, m, _ in spans if a <= o < b), -1) for o in off], dtype=np.int32)
    trained = []
    for a, b, _, role in spans:
        if role == "assistant":
            assert chat.data[a : a + len(_HEADER)] == _HEADER and chat.data[b - len(_CLOSE) : b] == _CLOSE
            trained.append((a + len(_HEADER), b - 1))
    assistant = np.array([any(a <= o < b for a, b in trained) for o in off], dtype=bool)
    return control, index, assistant


def check_encoded(tok, chat, spans, segments, nfc):
    """encode_chat(return_masks=True) against spans and segments found independently."""
    enc = tok.encode_chat(chat, return_masks=True)
    assert isinstance(enc, EncodedChat)
    ids = tok.encode_chat(chat)
    assert np.array_equal(enc.ids, ids)
    assert enc.ids.dtype == np.int32 and enc.message_index.dtype == np.int32
    assert enc.control_mask.dtype == bool and enc.assistant_mask.dtype == bool
    assert {len(a) for a in enc} == {len(ids)}
    off = token_offsets(tok, ids, chat.data, segments, nfc)
    control_ranges = [(a, b) for a, b, k in segments if k == 1]
    control, index, assistant = expected_masks(off, chat, spans, control_ranges)
    assert np.array_equal(enc.control_mask, control)
    assert np.array_equal(enc.message_index, index)
    assert np.array_equal(enc.assistant_mask, assistant)
    return enc


# -- the chat formats' corpus --------------------------------------------------------

def render_in(request: dict, fmt: str):
    return render_chat(request["messages"], **formats_ref.render_kwargs(request, fmt))


WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Météo actuelle — 天气 🌦",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}, "metric": {"type": "boolean"}},
        "required": ["city"]}}}
RUN = {"type": "function", "function": {
    "name": "run_python", "description": "Run code.\n\tReturns stdout.",
    "parameters": {"type": "object", "properties": {"code": {"type": "string"}}}}}
TOOLS = [WEATHER, RUN]
CODE = 'def f(x):\n\tif x < 0:\n\t\treturn -x  # abs\n    return x ** 2\n\nprint(f(-3))\r\n'


def U(content):
    return {"role": "user", "content": content}


def A(content="", reasoning=None, calls=None):
    msg = {"role": "assistant", "content": content}
    if reasoning is not None:
        msg["reasoning_content"] = reasoning
    if calls is not None:
        msg["tool_calls"] = calls
    return msg


def T(content):
    return {"role": "tool", "content": content}


def S(content):
    return {"role": "system", "content": content}


def call(name, arguments, wrapped=True):
    fn = {"name": name, "arguments": arguments}
    return {"type": "function", "function": fn} if wrapped else fn


TYPED = {"city": "Zürich", "days": 3, "ratio": 0.25, "big": 12345678901234567890, "metric": True,
         "off": False, "unit": None, "tags": ["a", 1, None, True], "where": {"lat": 47.4, "ok": False},
         "note": " spaced \n lines ", "empty": ""}

FORMAT_CASES = {
    "system_whitespace": [S("  You are a helpful assistant.\n\n "), U(" Hi there \n"), A("\nHello!  ")],
    "unicode_whitespace": [S("\u3000\xa0system\x1c\u2028"), U("\x85 user \u2003"),
                           A("\u205f answer \t", reasoning="\u3000 why \n")],
    "multilingual": [U("Bonjour ! 你好，世界。 مرحبا 👋🏽 Привет"),
                     A("Salut — 你好 — مرحبا", reasoning="思考一下… réfléchir"),
                     U("한국어로 답해 주세요 e\u0301"), A("네, 알겠습니다.")],
    "code": [S("You write Python."), U("Fix this:\n```python\n" + CODE + "```"),
             A("```python\n" + CODE + "```", reasoning="The sign check\n\tis wrong.")],
    "reasoning_turns": [U("q1"), A("a1", reasoning="r1"), U("q2"), A("a2", reasoning="\n r2 \n"),
                        U("q3")],
    "parallel_typed_calls": [
        S("Use tools."), U("Weather in Zürich and code?"),
        A("Let me check.", reasoning="Two calls.",
          calls=[call("get_weather", TYPED), call("run_python", {"code": CODE}, wrapped=False),
                 call("get_weather", {})]),
        T('{"temp": 21}'), T(" stdout: 9 \n"), T("[]"),
        A("It is 21°C; the code prints 9.", reasoning="Both came back.")],
    "string_arguments": [
        U("call"), A("", calls=[call("get_weather", '{"city":"Paris","days":2,"metric":false}'),
                                call("run_python", '\n {"code": "print(\\"hi\\")\\n", "x": [1, {"y": null}]} ')]),
        T("ok"), A("done")],
    "multi_step_tools": [
        U("Plan a trip."), A("", reasoning="step 1", calls=[call("get_weather", {"city": "Rome"})]),
        T("sunny"), A("", reasoning="", calls=[call("get_weather", {"city": "Oslo"})]), T("rain"),
        A("Go to Rome.", reasoning="Rome is sunny.")],
    "tool_first": [T("orphan result"), U("what was that?"), A("A tool result.")],
    "tool_first_grouped": [T("one"), T("two"), U("q"), A("a")],
    "empty_assistant_after_query": [U("q"), A(""), U("again"), A(None, calls=[call("run_python", {"code": ""})])],
    "content_lists": [S([{"type": "text", "text": " part one "}, {"type": "text", "text": "two "}]),
                      U([{"type": "text", "text": "a"}, {"type": "text", "text": " b "}]),
                      A([{"type": "text", "text": "reply"}]), T([{"type": "text", "text": "res"}]),
                      U("end")],
    "whitespace_only_system": [S(" \n\t "), U("hello")],
    "empty_system": [S(""), U("hello"), A("hi", reasoning="r")],
    "single_user": [U("Just one question?")],
}

# Option grids: every combination a format has (None = the format's default).
GENERATION_PROMPT = (False, True)


_VALUES = {"enable_thinking": (None, True, False), "preserve_thinking": (None, True, False),
           "reasoning_effort": (None, "xhigh", "medium", "low")}


def option_grid(fmt: str, full: bool = False):
    """Option sets of a format: every combination (`full`), or a covering set in
    which every value of every option meets every value of enable_thinking."""
    names = formats_ref.FORMAT_OPTIONS[fmt]
    grid = [{}, {"enable_thinking": False}] if fmt == "qwen3-2507" else [{}]  # False: what it does anyway
    for name in names if full else names[:1]:
        grid = [dict(g, **{name: v}) for g in grid for v in _VALUES[name]]
    grid = [dict(g, add_generation_prompt=agp) for g in grid for agp in GENERATION_PROMPT]
    if full:
        return grid
    out = []
    for name in names[1:]:  # each further option's values against enable_thinking's
        for k, value in enumerate(_VALUES[name]):
            out += [dict(g, **{name: value}) for g in grid[k % 2 :: 2]]
    return out or grid


# -- Unicode scalar values ------------------------------------------------------------

SCALARS = [cp for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]
# Where behaviour may change: UTF-8 lengths, Latin-1, the combining marks, the
# large uniform blocks (CJK, Hangul, private use), the surrogates' neighbours,
# the end of the BMP and of each plane.
_EDGES = (0x7F, 0x80, 0xFF, 0x100, 0x2FF, 0x300, 0x36F, 0x370, 0x7FF, 0x800, 0x3400, 0x4DBF, 0x4E00,
          0x9FFF, 0xA000, 0xAC00, 0xD7A3, 0xD7B0, 0xD7FF, 0xE000, 0xF8FF, 0xF900, 0xFFFD, 0xFFFF,
          0x10000, 0x1F600, 0x1FFFF, 0x20000, 0x2FFFF, 0x30000, 0xE0000, 0xE01EF, 0xFFFFF, 0x10FFFF)
#: The default run's share of the exhaustive scalar sweeps (`slow`): every
#: 97th scalar value, all of ASCII, and each edge above with its neighbours.
SCALAR_SAMPLE = sorted(
    set(SCALARS[::97]) | set(range(0x80))
    | {cp for e in _EDGES for cp in (e - 1, e, e + 1) if 0 <= cp < 0x110000 and not 0xD800 <= cp <= 0xDFFF}
)


# -- caches ----------------------------------------------------------------------------

def novel_words(count: int, seed: int, alphabet: str = "bcdfghjklmnpqrstvwxz") -> list[str]:
    """Distinct words unlikely to be tokens (consonant runs), 5 to 9 letters."""
    rng = random.Random(seed)
    words = set()
    while len(words) < count:
        words.add("".join(rng.choice(alphabet) for _ in range(rng.randint(5, 9))))
    return sorted(words)


# ---------------------------------------------------------------- Ray


def ray_rows(ds):
    """The rows of a Ray dataset, in order, as one Arrow table."""
    import pyarrow as pa
    import ray

    return pa.concat_tables(ray.get(ds.to_arrow_refs()))


def batch_in_process(capsys, *args):
    """Run `qwen4exp batch ARGS` in this process: (exit code, stderr lines
    that name records)."""
    from qwen4exp.cli.main import main

    capsys.readouterr()
    code = main(["batch", *map(str, args)])
    err = capsys.readouterr().err.splitlines()
    return code, [x for x in err if x.startswith("qwen4exp batch:") and " records: " not in x]


def conversations(n):
    """n conversations from the multilingual corpus: system, user, an assistant
    turn with reasoning and a tool call, and a tool result spelling <|im_end|>."""
    import corpora

    ml = corpora.multilingual_documents()
    return [
        [{"role": "system", "content": "be brief"},
         {"role": "user", "content": ml[i][:400]},
         {"role": "assistant", "content": ml[i + 1][:200], "reasoning_content": f"step {i}",
          "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}]},
         {"role": "tool", "content": "<|im_end|> result"}]
        for i in range(n)
    ]


def requests_with_tools(n):
    """n requests as columns: messages, tools on about half the rows (None
    elsewhere), add_generation_prompt and enable_thinking varying."""
    with open(EXAMPLE, encoding="utf-8") as f:
        tools = json.load(f)["tools"]
    other = [{"type": "function", "function": {"name": "lookup", "description": "find <tool_call> docs",
                                               "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}]
    convs = conversations(n)
    return {
        "messages": convs,
        "tools": [tools if i % 2 else (other if i % 5 == 0 else None) for i in range(n)],
        "add_generation_prompt": [i % 3 == 0 for i in range(n)],
        "enable_thinking": [None if i % 4 == 0 else i % 4 == 1 for i in range(n)],
    }


def finishes(fn, seconds=600):
    """fn()'s result; fails (instead of hanging the run) if it has not returned
    after `seconds` (a bound for a broken build, not a measurement)."""
    import threading

    box = []
    worker = threading.Thread(target=lambda: box.append(fn()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert box, f"still running after {seconds} s: the job hangs"
    return box[0]


def property_tests(check, strategy, examples: int, sweep: int):
    """A hypothesis test of `check(toks, *case)` over `strategy`'s cases in the
    default run (`examples` of them) and its long variant under `slow` (`sweep`)."""
    def make(n):
        @settings(max_examples=n, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
        @given(case=strategy)
        def test(toks, case):
            check(toks, *case)
        return test
    return make(examples), pytest.mark.slow(make(sweep))


#: A short agent conversation with one tool, atom-free (so that the reference's
#: added-token matching is exact): the CLI and model-folder tests' request.
WEATHER_REQUEST = {
    "messages": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Weather in Paris, please."},
        {"role": "assistant", "content": "", "reasoning_content": "Call the tool.",
         "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
        {"role": "tool", "content": '{"temperature": 18}'},
        {"role": "assistant", "content": "18 °C."},
        {"role": "user", "content": "Thanks!"},
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather.",
                                                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
}
