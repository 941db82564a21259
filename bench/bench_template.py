"""Render + encode through a model folder's own Jinja template: qwen4exp vs transformers.

    python bench/bench_template.py [--rounds 3] [--conversations 40] [--templates N]

For each template of tests/data/templates/ (llama.cpp's collection, ~30
families), the same generated conversations (tests/_template_reference.py:
system prompts, several turns, tool calls with dict and string arguments and
their results, tools, several scripts) are rendered and tokenized by

* qwen4exp: `render_template(...)` (the provenance-tracking Jinja path) then
  `Tokenizer.encode_chat`, over the test vocabulary (Qwen3 plus every
  template's markers as added tokens);
* transformers: `apply_chat_template(..., chat_template=TEXT, tokenize=True)`
  on a fast tokenizer of the same vocabulary.

The ids are checked equal for every conversation before timing (conversations
transformers refuses are left out). Times are the best of `rounds` passes with
the GC off; the table gives conversations per second per template and the
ratio; the last line the median ratio over templates (target: at least 2x).
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, os.pardir, "tests"))
sys.path.insert(0, os.path.join(HERE, os.pardir, "src"))


def _conversations(n: int):
    from hypothesis import HealthCheck, given, settings

    import _template_reference as R

    out = []

    @settings(max_examples=n, database=None, derandomize=True, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(R.conversations())
    def collect(conversation):
        out.append(conversation)

    collect()
    return out[:n]


def _best(fn, rounds: int) -> float:
    best = float("inf")
    gc.disable()
    try:
        for _ in range(rounds):
            t = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t)
    finally:
        gc.enable()
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--conversations", type=int, default=40)
    ap.add_argument("--templates", type=int, default=0, help="only the first N templates (0: all)")
    args = ap.parse_args()

    from tokenizers import AddedToken
    from tokenizers import Tokenizer as HFTokenizer
    from transformers import PreTrainedTokenizerFast

    import _template_reference as R
    from qwen4exp import Tokenizer, render_template

    hf_core = HFTokenizer.from_file(R.TOKENIZER_JSON)
    have = {t.content for t in hf_core.get_added_tokens_decoder().values()}
    hf_core.add_special_tokens([AddedToken(m, special=True, normalized=False) for m in R.all_markers()
                                if m not in have and hf_core.token_to_id(m) is None])
    path = os.path.join(tempfile.mkdtemp(), "tokenizer.json")
    with open(path, "w", encoding="utf-8") as f:
        f.write(hf_core.to_str())
    tok = Tokenizer.from_file(path)
    hf = PreTrainedTokenizerFast(tokenizer_object=hf_core)
    conversations = _conversations(args.conversations)
    names = R.TEMPLATES[: args.templates] if args.templates else R.TEMPLATES

    print(f"{'template':52} {'convs':>5} {'transformers/s':>14} {'qwen4exp/s':>11} {'ratio':>6}")
    ratios = []
    for name in names:
        text, special = R.template_text(name), R.special_tokens(name)
        usable = []
        for messages, tools, agp in conversations:
            try:
                ref = hf.apply_chat_template(messages, tools=tools, chat_template=text, tokenize=True,
                                             add_generation_prompt=agp, **special)
            except Exception:  # noqa: BLE001 - transformers refuses this shape: left out
                continue
            chat = render_template(text, messages, tools=tools, add_generation_prompt=agp,
                                   special_tokens=special, atoms=tok.atoms)
            assert tok.encode_chat(chat).tolist() == list(ref), name
            usable.append((messages, tools, agp))
        if not usable:
            continue

        def theirs():
            for messages, tools, agp in usable:
                hf.apply_chat_template(messages, tools=tools, chat_template=text, tokenize=True,
                                       add_generation_prompt=agp, **special)

        def ours():
            for messages, tools, agp in usable:
                tok.encode_chat(render_template(text, messages, tools=tools, add_generation_prompt=agp,
                                                special_tokens=special, atoms=tok.atoms))

        t_hf, t_ours = _best(theirs, args.rounds), _best(ours, args.rounds)
        ratios.append(t_hf / t_ours)
        print(f"{name[:52]:52} {len(usable):5d} {len(usable) / t_hf:14.0f} {len(usable) / t_ours:11.0f} "
              f"{t_hf / t_ours:6.2f}")
    print(f"median ratio over {len(ratios)} templates: {statistics.median(ratios):.2f}x "
          f"(min {min(ratios):.2f}x, max {max(ratios):.2f}x)")


if __name__ == "__main__":
    main()
