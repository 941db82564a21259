"""Chat rows: the same Qwen3 / 3.5 / 3.8 conversations rendered to ids by qwen4exp and its peers.

    PYTHONPATH=src python bench/chat_rows.py [--rounds 3] [--conversations 300] \\
        [--tml-python /path/to/venv/bin/python]
    python bench/report.py --chat ...     # the same section in the report

For each format, bench_formats' conversations (format_corpus) rendered to
ids by

* qwen4exp: `render_chat(..., chat_format=F)` + `Tokenizer.encode_chat`;
* transformers: `apply_chat_template(..., chat_template=TEXT, tokenize=True)`
  with the format's official template: the reference every row is checked
  against;
* renderers (where installed): bench_formats.renderers_render;
* tml-renderers (where an interpreter with it is given): in a process of its
  own, bench/tml_renderers_peer.py (it needs torch >= 2.10).

Every peer is timed on the conversations it renders (those it refuses are
left out) and qwen4exp on the same ones in the same round, best of
`rounds`, GC off; the row shows the ids that equal the template's and how
the others differ. Markdown on stdout, progress on stderr.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_formats as bf  # noqa: E402  (sets the paths and the offline switches)
from bench_formats import ref  # noqa: E402
from peers import _version  # noqa: E402

import common  # noqa: E402

FORMATS = ("qwen3", "qwen3.5", "qwen3.8")
TML_FORMATS = ("qwen3", "qwen3.5", "qwen3.8")  # tml_renderers_peer.RENDERER_CLASSES


def log(*a) -> None:
    print(*a, file=sys.stderr, flush=True)


class TmlChild(common.RoundChild):
    """tml_renderers_peer.py under `python`, driven one round at a time."""

    def __init__(self, python: str, corpora: dict):
        self.tmp = tempfile.TemporaryDirectory(prefix="qwen4exp-bench-chat-")
        path = Path(self.tmp.name) / "conversations.json"
        path.write_text(json.dumps(corpora, ensure_ascii=False), encoding="utf-8")
        # its own site-packages only: nothing of this environment's path
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        super().__init__([python, str(HERE / "tml_renderers_peer.py"), str(path)], env)

    def round(self) -> dict | None:
        got = super().round()
        return got and got["round"]

    def close(self) -> None:
        super().close()
        self.tmp.cleanup()


def in_process_peers(fmt: str, tok, peer) -> dict:
    """name -> render(messages, options) -> ids, for the peers of this process."""
    import qwen4exp

    text = ref.template_text(fmt)
    out = {
        "qwen4exp": lambda m, o: tok.encode_chat(qwen4exp.render_chat(m, chat_format=fmt, **o)),
        "apply_chat_template": lambda m, o: peer.apply_chat_template(m, chat_template=text, tokenize=True, **o),
    }
    if fmt in bf.RENDERER_CONFIGS:
        render = bf.renderers_render(fmt, peer)
        if render is not None:
            out["renderers"] = render
    return out


def outcome(results: list, want: list, newline: list, indices) -> dict:
    """How a peer's ids of the conversations `indices` compare with the
    template's: exact, only the final newline missing, other differences,
    refusals; the indices it rendered."""
    out = {"given": 0, "exact": 0, "newline": 0, "other": 0, "refused": 0, "rendered": []}
    for i in indices:
        got, w = results[i], want[i]
        out["given"] += 1
        if isinstance(got, dict):  # {"error": why}
            out["refused"] += 1
            continue
        out["rendered"].append(i)
        got = [int(t) for t in got]
        key = "exact" if got == w else "newline" if got + newline == w else "other"
        out[key] += 1
    return out


def call_all(render, corpus) -> list:
    out = []
    for m, o in corpus:
        try:
            out.append(render(m, o))
        except Exception as exc:  # noqa: BLE001  a refusal is a result: the row counts it
            out.append({"error": f"{type(exc).__name__}: {exc}"})
    return out


def time_pass(render, items) -> float:
    gc.collect()
    gc.disable()
    try:
        t0 = time.perf_counter()
        for m, o in items:
            render(m, o)
        return time.perf_counter() - t0
    finally:
        gc.enable()


def differ_cell(o: dict) -> str:
    parts = []
    if o["newline"]:
        parts.append(f"{o['newline']} only by the newline after the last `<\\|im_end\\|>`")  # \| inside a table cell
    if o["other"]:
        parts.append(f"{o['other']} otherwise")
    if o["refused"]:
        parts.append(f"{o['refused']} refused")
    return "; ".join(parts)


# tml-renderers' rows: the call each conversation goes to (tml_renderers_peer.py)
TML_CALLS = (("completion", True), ("sft", False))


def section(formats=FORMATS, conversations: int = 300, rounds: int = 3, tml_python: str | None = None,
            log=log) -> list[str]:
    """The markdown lines of the chat rows (module doc)."""
    import qwen4exp

    hf = bf.hf_tokenizers()
    toks = {}
    corpora = {fmt: bf.format_corpus(fmt, conversations) for fmt in formats}
    child = TmlChild(tml_python, {f: c for f, c in corpora.items() if f in TML_FORMATS}) if tml_python else None
    tml = None
    # a row: (format, label, outcome); in-process rows also carry their render function
    rows, funcs = [], {}
    try:
        wants, newlines = {}, {}
        for fmt in formats:
            log(f"chat rows: {fmt}, ids")
            vocab = ref.VOCAB_OF[fmt]
            tok = toks.setdefault(vocab, qwen4exp.Tokenizer(vocab))
            funcs[fmt] = in_process_peers(fmt, tok, hf[vocab])
            wants[fmt] = call_all(funcs[fmt]["apply_chat_template"], corpora[fmt])
            refused = [w["error"] for w in wants[fmt] if isinstance(w, dict)]
            if refused:  # the reference must render every conversation
                raise SystemExit(f"{fmt}: the template refused {len(refused)} conversations: {refused[0]}")
            wants[fmt] = [list(w) for w in wants[fmt]]
            newlines[fmt] = hf[vocab].encode("\n", add_special_tokens=False)
            every = range(len(corpora[fmt]))
            for name, render in funcs[fmt].items():
                rows.append({"fmt": fmt, "name": name, "render": render,
                             "outcome": outcome(call_all(render, corpora[fmt]), wants[fmt], newlines[fmt], every)})
        first = child.read() if child is not None else None  # it rendered meanwhile
        if first:
            tml = first["version"]
            for fmt, ids in first["ids"].items():
                for call, prompt in TML_CALLS:
                    given = [i for i, (_, o) in enumerate(corpora[fmt])
                             if bool(o.get("add_generation_prompt")) == prompt]
                    rows.append({"fmt": fmt, "name": "tml-renderers", "call": call,
                                 "outcome": outcome(ids, wants[fmt], newlines[fmt], given)})
        rows.sort(key=lambda r: formats.index(r["fmt"]))
        for row in rows:
            row["items"] = [corpora[row["fmt"]][i] for i in row["outcome"]["rendered"]]

        def keep(row, key, seconds):
            row[key] = min(row.get(key, float("inf")), seconds)

        for r in range(rounds):
            log(f"chat rows: round {r + 1} of {rounds}")
            local = [row for row in rows if "render" in row]
            for row in local[r % len(local):] + local[:r % len(local)]:
                keep(row, "seconds", time_pass(row["render"], row["items"]))
                keep(row, "qwen4exp", time_pass(funcs[row["fmt"]]["qwen4exp"], row["items"]))
            got = child.round() if child is not None else None
            for row in rows:
                if got and "call" in row:
                    keep(row, "seconds", got[row["fmt"]][row["call"]])
                    keep(row, "qwen4exp", time_pass(funcs[row["fmt"]]["qwen4exp"], row["items"]))
    finally:
        if child is not None:
            child.close()
    return markdown(rows, conversations, rounds, tml, child)


def markdown(rows, conversations, rounds, tml, child) -> list[str]:
    labels = {"qwen4exp": "qwen4exp", "apply_chat_template": f"transformers {_version('transformers')} "
              "`apply_chat_template`", "renderers": f"renderers {_version('renderers')}"}
    lines = [
        f"## Chat rows: render + encode to ids (best of {rounds}, {conversations} conversations per format)",
        "",
        "bench_formats' conversations (system prompts, tools, reasoning, parallel calls with typed "
        "arguments and their results, a generation prompt in about a third), each rendered to ids. "
        "**ids == template**: equal to transformers' `apply_chat_template(tokenize=True)` with the "
        "format's official template (tests/data/chat_templates/), of the conversations the row was "
        "given. Each row is timed on the conversations it rendered (a refused one is left out) and "
        "qwen4exp on the same ones in the same round; **× qwen4exp**: the row's time over qwen4exp's. "
        "tml-renderers runs in a process of its own (`--tml-python`: it needs torch >= 2.10), "
        "`render_for_completion` for the conversations with a generation prompt and `render_for_sft` for "
        "the others (bench/tml_renderers_peer.py says how a conversation is handed to it).",
        "",
        "| format | peer | ids == template | the others | µs per conversation | × qwen4exp | timed on |",
        "| --- | --- | ---: | --- | ---: | ---: | ---: |",
    ]
    for row in rows:
        o = row["outcome"]
        if "seconds" not in row:
            continue
        n = len(o["rendered"])
        label = labels.get(row["name"]) or f"tml-renderers {tml} `render_for_{row['call']}`"
        ratio = "" if row["name"] == "qwen4exp" else f"{row['seconds'] / row['qwen4exp']:.1f}x"
        lines.append(f"| {row['fmt']} | {label} | {o['exact']}/{o['given']} | {differ_cell(o)} | "
                     f"{row['seconds'] / max(n, 1) * 1e6:,.0f} | {ratio} | {n} |")
    lines.append("")
    if not any(row["name"] == "renderers" for row in rows):
        lines.append("- renderers: not installed here, no rows.")
    if child is None:
        lines.append("- tml-renderers: no `--tml-python` (an interpreter with tml-renderers and torch >= 2.10), "
                     "no rows.")
    elif child.error:
        lines.append(f"- tml-renderers: no rows: {child.error}")
    lines.append("")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--conversations", type=int, default=300)
    ap.add_argument("--formats", default=",".join(FORMATS))
    ap.add_argument("--tml-python", default=os.environ.get("BENCH_TML_PYTHON"),
                    help="an interpreter with tml-renderers (and torch >= 2.10); default $BENCH_TML_PYTHON")
    a = ap.parse_args(argv)
    formats = tuple(f.strip() for f in a.formats.split(",") if f.strip())
    unknown = [f for f in formats if f not in ref.FORMATS]
    if unknown:
        ap.error(f"unknown formats {unknown}; known: {', '.join(ref.FORMATS)}")
    sys.stdout.write("\n".join(section(formats, a.conversations, a.rounds, a.tml_python)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
