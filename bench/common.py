"""Shared by bench_encode.py (pytest-benchmark) and report.py (plain script):
corpora access, parity checks against the HF reference, timing helpers; and
the chat benches' conversation generator (bench_render.py, bench_formats.py,
bench_chat_encode.py)."""

from __future__ import annotations

import gc
import time
import unicodedata

import peers as _peers  # noqa: F401  (sets the thread env and sys.path first)
import corpora

#: The words of the chat benches' atom-free conversations.
CHAT_WORDS = (
    "the model renders each message with its role and content while tools return json "
    "résumé naïve café 中文 測試 привет мир مرحبا 😀 data control segment stream byte "
    "weather paris rome tokyo temperature forecast search query result answer"
).split()


def _chat_tools(typed: bool) -> list[dict]:
    props = {"city": {"type": "string", "description": "City name"}, "days": {"type": "integer"}}
    if typed:
        props["metric"] = {"type": "boolean"}
    return [
        {"type": "function", "function": {
            "name": f"tool_{k}", "description": " ".join(CHAT_WORDS[k:k + 12]),
            "parameters": {"type": "object", "properties": dict(props), "required": ["city"]}}}
        for k in range(3)
    ]


#: Three tool schemas (city, days); the typed ones also take a boolean "metric".
CHAT_TOOLS = _chat_tools(typed=False)
CHAT_TOOLS_TYPED = _chat_tools(typed=True)

THROUGHPUT_CORPORA = ("code", "multilingual")
LONG_WORD_SIZES = (20_000, 200_000)
LONG_WORD_SCRIPTS = ("latin", "cjk")

# Inputs that other re-implementations got wrong (see shared NOTES-parity.md).
# Those marked non-NFC show which peers normalise.
SPOT_CHECKS = (
    ("whitespace run before a word", "a   b"),
    ("U+0085 is \\s, not [\\r\\n]", "a\x85\x85b"),
    ("U+2029 paragraph separator", "x\u2029\u2029y"),
    ("U+001C..U+001F are not \\s", "a\x1c\x1db"),
    ("combining marks are not \\p{L}", "हिन्दी"),
    ("\\p{N} = Nd, Nl, No", "x ½ Ⅻ ①²"),
    ("ZWSP is neither \\s nor L/N", "\u200bb"),
    ("case-insensitive contractions", "IT'S it'Ll WE'VE"),
    ("'ſ folds to 's", "it'\u017f"),
    ("newline runs", "a\r\n\r\n  b\n \n"),
    ("trailing whitespace", "x  "),
    ("Unicode 16 letter (Garay, U+10D50)", "\U00010d50\U00010d51 a"),
    ("Unicode 17 ideograph (Ext. J, U+323B0)", "\U000323b0\U000323b1 a"),
    ("non-NFC: e + U+0301", "cafe\u0301"),
    ("non-NFC: Kelvin sign", "it'\u212a 5\u212a"),
    ("added-token spelling as data", "<|im_start|>user <think>"),
)


def warm_and_measured(docs: list) -> tuple[list, list]:
    """(warm-up documents, measured documents): every fourth document warms a
    tokenizer up, the other three quarters are measured, fresh to it."""
    return docs[::4], [d for i, d in enumerate(docs) if i % 4]


def time_documents(encode, docs) -> float:
    """Seconds to encode each of docs in turn (GC off)."""
    gc.collect()
    gc.disable()
    try:
        t0 = time.perf_counter()
        for d in docs:
            encode(d)
        return time.perf_counter() - t0
    finally:
        gc.enable()


class RoundChild:
    """A benchmark child process driven one round at a time: each line it writes
    is a JSON object (one with "error" says why it stopped), each "round" line
    it reads asks for one timed round. stderr goes to a file: a pipe nobody
    reads while the child runs could fill and stall it. `error` says why the
    child gave no answer (its last stderr line when it exited)."""

    def __init__(self, cmd: list, env: dict):
        import subprocess
        import tempfile

        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.error = None
        try:
            self.proc = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=self.stderr, text=True)
        except OSError as exc:
            self.proc, self.error = None, f"{cmd[0]}: {exc.strerror}"

    def read(self) -> dict | None:
        import json

        if self.proc is None:
            return None
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            self.stderr.seek(0)
            err = (self.stderr.read().strip().splitlines() or ["exited"])[-1]
            self.error = self.error or err
            return None
        out = json.loads(line)
        if "error" in out:
            self.error = out["error"]
            return None
        return out

    def round(self) -> dict | None:
        if self.error:
            return None
        self.proc.stdin.write("round\n")
        self.proc.stdin.flush()
        return self.read()

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)
        self.stderr.close()


def cpu_model() -> str:
    """The CPU as lscpu names it: model name, family and model, logical CPUs
    (every report records it: ratios differ between CPU vendors and generations)."""
    fields = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        import platform

        return platform.processor() or platform.machine()
    import os

    return (f"{fields.get('model name', '?')} (family {fields.get('cpu family', '?')}, "
            f"model {fields.get('model', '?')}), {os.cpu_count()} logical CPUs")


def corpus_text(name: str) -> str:
    return corpora.CORPORA[name]()


def corpus_bytes(name: str) -> int:
    return len(corpus_text(name).encode("utf-8"))


def best_of(fn, arg, rounds: int):
    """(best seconds, last result) of ``rounds`` calls; GC off while timing."""
    best = float("inf")
    out = None
    for _ in range(max(1, rounds)):
        gc.collect()
        gc.disable()
        try:
            t0 = time.perf_counter()
            out = fn(arg)
            dt = time.perf_counter() - t0
        finally:
            gc.enable()
        best = min(best, dt)
    return best, out


def documents_parity(encode, reference, names=("code", "multilingual", "whitespace")):
    """{corpus: (documents that differ, documents)} of ``encode`` against
    ``reference``, document by document."""
    out = {}
    for name in names:
        docs = corpora.DOCUMENTS[name]()
        bad = sum(1 for d in docs if list(encode(d)) != list(reference(d)))
        out[name] = (bad, len(docs))
    return out


def spot_check_failures(encode, reference):
    """Labels of SPOT_CHECKS on which ``encode`` differs from ``reference``."""
    bad = []
    for label, text in SPOT_CHECKS:
        try:
            same = list(encode(text)) == list(reference(text))
        except Exception as exc:  # noqa: BLE001
            bad.append(f"{label} (raised {type(exc).__name__})")
            continue
        if not same:
            bad.append(label)
    return bad


def all_nfc() -> bool:
    return all(unicodedata.is_normalized("NFC", corpus_text(n)) for n in corpora.CORPORA)


def chat_text(rng, lo: int, hi: int) -> str:
    return " ".join(rng.choice(CHAT_WORDS) for _ in range(rng.randint(lo, hi)))


def _call_arguments(rng, typed: bool) -> dict:
    args = {"city": rng.choice(CHAT_WORDS), "days": rng.randint(1, 9)}
    if typed:
        args["metric"] = rng.random() < 0.5
    return args


def chat_conversation(rng, *, typed: bool = False, padded_system: bool = False,
                      thinking: bool = True):
    """(messages, render options) of one atom-free conversation: an optional
    system prompt, tools in half of them, 1 to 10 user turns, some answered by
    parallel calls and their results, reasoning on the assistant turns.
    `typed`: the tools and calls also carry a boolean (the XML formats write
    it their own way); `padded_system`: the system prompt starts with a space
    and ends with a newline (the 3.5+ formats trim it); `thinking`: draw
    enable_thinking (off for a format without the option)."""
    msgs = []
    if rng.random() < 0.7:
        system = chat_text(rng, 5, 40)
        msgs.append({"role": "system", "content": " " + system + "\n" if padded_system else system})
    use_tools = rng.random() < 0.5
    for _ in range(rng.choice([1, 2, 3, 5, 10])):
        msgs.append({"role": "user", "content": chat_text(rng, 5, 80)})
        if use_tools and rng.random() < 0.5:
            calls = [{"type": "function", "function": {
                "name": f"tool_{rng.randrange(3)}", "arguments": _call_arguments(rng, typed)}}
                for _ in range(rng.randint(1, 3))]
            msgs.append({"role": "assistant", "content": "", "reasoning_content": chat_text(rng, 5, 30),
                         "tool_calls": calls})
            for _ in calls:
                msgs.append({"role": "tool", "content": '{"result": "%s"}' % chat_text(rng, 3, 30)})
        msgs.append({"role": "assistant", "content": chat_text(rng, 5, 120),
                     "reasoning_content": chat_text(rng, 0, 40)})
    tools = CHAT_TOOLS_TYPED if typed else CHAT_TOOLS
    opts = {"tools": tools if use_tools else None, "add_generation_prompt": rng.random() < 0.3}
    if thinking:
        opts["enable_thinking"] = rng.random() < 0.5
    return msgs, opts
