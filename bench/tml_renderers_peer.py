"""The tml-renderers peer of bench/chat_rows.py, run in its own process.

    PYTHON bench/tml_renderers_peer.py CONVERSATIONS.json

tml-renderers (Thinking Machines' renderer library, 0.2.1) needs torch >= 2.10,
which the benchmark's own environment does not have: chat_rows.py starts this
script with an interpreter that has it (`--tml-python`, e.g. the vLLM
virtual environment) and talks to it in JSON lines. It imports nothing of
qwen4exp or of transformers: only `json` and `tml_renderers`.

Input: {format: [[messages, options], ...]}, the conversations of
bench_formats.format_corpus. First reply: {"version", "ids": {format: [ids,
or {"error": why} where the renderer refused]}}; then, for each `round` line
on stdin, {"round": ...}: one pass over the conversations it
rendered, GC off: {format: {"completion": seconds, "sft": seconds}}, the
conversations with a generation prompt and those without apart (the two
calls below cost very differently).

How a conversation is handed to it (bench/README.md, "Chat rows"):

* the messages go through `chat.OpenAIMessage.from_oss_messages`, its
  documented entry for OpenAI-style dicts (timed, as the renderer's own
  work); before that, untimed, an assistant's `reasoning_content` becomes a
  `{"type": "thinking"}` content part (the shape its `to_oss_messages`
  writes; the plain key is dropped by the conversion) and `tools` a leading
  `tool_declare` message (what its conversion reads as declared tools);
* `add_generation_prompt=True`: `render_for_completion` (the prompt, ending
  with the assistant header); False: `render_for_sft`, the last example's
  input ids (the whole conversation);
* `enable_thinking=False`: the renderer's `disable_thinking()`, except where
  the format's template reads the option only in its generation prompt
  (qwen3, qwen3.5) and there is none: there the thinking renderer, whose
  output the template's then is.
"""

from __future__ import annotations

import gc
import json
import sys
import time

# the renderer class of each format it has
RENDERER_CLASSES = {"qwen3": "Qwen3", "qwen3.5": "Qwen35", "qwen3.8": "Qwen38"}
# formats whose official template reads enable_thinking only in the generation prompt
THINKING_IN_PROMPT_ONLY = frozenset({"qwen3", "qwen3.5"})


def openai_dicts(messages: list, options: dict) -> list:
    """The conversation as the OpenAI-style dicts tml-renderers reads (module doc)."""
    out = []
    if options.get("tools"):
        out.append({"role": "tool_declare", "content": json.dumps(options["tools"], ensure_ascii=False)})
    for m in messages:
        reasoning = m.get("reasoning_content")
        m = {k: v for k, v in m.items() if k != "reasoning_content"}
        if m["role"] == "assistant" and reasoning:
            parts = [{"type": "thinking", "thinking": reasoning}]
            if m.get("content"):
                parts.append({"type": "text", "text": m["content"]})
            m["content"] = parts
        out.append(m)
    return out


class Peer:
    """render(fmt, dicts, options) -> ids, one renderer object per format and thinking mode."""

    def __init__(self):
        from tml_renderers import chat, renderers

        self.chat, self.renderers, self.made = chat, renderers, {}

    def renderer(self, fmt: str, options: dict):
        thinking = options.get("enable_thinking", True)
        if not thinking and fmt in THINKING_IN_PROMPT_ONLY and not options.get("add_generation_prompt"):
            thinking = True
        key = (fmt, bool(thinking))
        if key not in self.made:
            cls = getattr(self.renderers, RENDERER_CLASSES[fmt])
            self.made[key] = cls() if thinking else cls.disable_thinking()
        return self.made[key]

    def render(self, fmt: str, dicts: list, options: dict) -> list:
        renderer = self.renderer(fmt, options)
        messages = self.chat.OpenAIMessage.from_oss_messages(dicts)
        if options.get("add_generation_prompt"):
            spans = renderer.render_for_completion(messages)[0]
        else:
            spans = renderer.render_for_sft(messages)[-1].input_token_spans
        return [t for s in spans for t in s.span.tokens]


def time_pass(peer: Peer, fmt: str, items: list) -> float:
    gc.collect()
    gc.disable()
    try:
        t0 = time.perf_counter()
        for dicts, options in items:
            peer.render(fmt, dicts, options)
        return time.perf_counter() - t0
    finally:
        gc.enable()


def reply(obj) -> None:
    print(json.dumps(obj), flush=True)


def main() -> int:
    with open(sys.argv[1], encoding="utf-8") as f:
        corpora = json.load(f)
    try:
        peer = Peer()
        from importlib.metadata import version

        ver = version("tml-renderers")
    except Exception as exc:  # noqa: BLE001  (not installed, or its torch missing)
        reply({"error": f"tml_renderers: {type(exc).__name__}: {exc}"})
        return 0
    work, ids = {}, {}
    for fmt, corpus in corpora.items():
        if fmt not in RENDERER_CLASSES:
            continue
        work[fmt], ids[fmt] = {"completion": [], "sft": []}, []
        for messages, options in corpus:
            dicts = openai_dicts(messages, options)
            try:
                ids[fmt].append(peer.render(fmt, dicts, options))
            except Exception as exc:  # noqa: BLE001  a refusal is a result: the row counts it
                ids[fmt].append({"error": f"{type(exc).__name__}: {exc}"})
                continue
            work[fmt]["completion" if options.get("add_generation_prompt") else "sft"].append((dicts, options))
    reply({"version": ver, "ids": ids})
    for line in sys.stdin:
        if line.strip() != "round":
            break
        reply({"round": {fmt: {call: time_pass(peer, fmt, items) for call, items in calls.items()}
                         for fmt, calls in work.items()}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
