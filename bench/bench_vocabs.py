"""Other vocabularies (tests/data/vocabs): Llama 3's tokenizer.json encoded by
qwen4exp (Tokenizer.from_file: the native scanner with Llama 3's digit runs),
Hugging Face `tokenizers` and tiktoken (an Encoding built from the same ranks
and pattern); other files (`--vocab gpt-2,deepseek-llm`: the generic
pre-tokenizer of qwen4exp.vocab.pipeline, then the native BPE) against
`tokenizers` alone, on the file without its added tokens (DATA's reference:
DeepSeek LLM's added tokens include letters such as `ù` that `tokenizers`
would otherwise cut out of any text). MB/s of UTF-8 input on one thread, best of a few rounds,
the first MiB of each corpus; the ids are checked equal first.

    PYTHONPATH=src python bench/bench_vocabs.py [--rounds N] [--corpus code,multilingual] [--vocab llama-bpe]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import common  # noqa: E402  (puts tests/ on sys.path)

VOCABS = os.path.join(HERE, os.pardir, "tests", "data", "vocabs")


def peers(path: str):
    """(qwen4exp, tokenizers, tiktoken) encode functions of one text."""
    import qwen4exp
    import tiktoken
    from _hf_reference import byte_decoder, hf_plain

    ours = qwen4exp.Tokenizer.from_file(path, encode_threads=1)
    hf = hf_plain(path)  # the file without its added tokens: DATA's reference (tests/_hf_reference.py)
    fns = {"qwen4exp": ours.encode, "tokenizers": lambda t: hf.encode(t, add_special_tokens=False).ids}
    doc = json.load(open(path, encoding="utf-8"))
    if doc["model"].get("ignore_merges") and doc["normalizer"] is None:  # Llama 3: tiktoken's own kind
        decoder = byte_decoder()
        ranks = {bytes(decoder[c] for c in tok): i for tok, i in doc["model"]["vocab"].items()}
        pattern = doc["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"]
        enc = tiktoken.Encoding("llama3", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
        fns["tiktoken"] = enc.encode_ordinary
    return fns


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--corpus", default="code,multilingual")
    ap.add_argument("--vocab", default="llama-bpe")
    args = ap.parse_args()
    for vocab in args.vocab.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "tokenizer.json")
            with gzip.open(os.path.join(VOCABS, vocab, "tokenizer.json.gz"), "rb") as f, open(path, "wb") as out:
                out.write(f.read())
            fns = peers(path)
            for corpus in args.corpus.split(","):
                text = common.corpus_text(corpus)[: 1 << 20]
                nbytes = len(text.encode("utf-8"))
                ids = {name: fn(text) for name, fn in fns.items()}
                row = [f"{vocab:12s} {corpus:13s} {nbytes / 1e6:.2f} MB"]
                row += [f"{name} ids equal HF: {ids[name] == ids['tokenizers']}" for name in fns if name != "tokenizers"]
                for name, fn in fns.items():
                    best, _ = common.best_of(fn, text, args.rounds)
                    row.append(f"{name} {nbytes / best / 1e6:.1f} MB/s")
                print(" | ".join(row), flush=True)


if __name__ == "__main__":
    main()
