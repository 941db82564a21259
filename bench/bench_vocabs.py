"""Other vocabularies: Llama 3's tokenizer.json (tests/data/vocabs/llama-bpe)
encoded by qwen4exp (Tokenizer.from_file: the generic pre-tokenizer of
qwen4exp._pipeline, then the native BPE), Hugging Face `tokenizers` and
tiktoken (an Encoding built from the same ranks and pattern), MB/s of UTF-8
input on one thread, best of a few rounds; the ids are checked equal first.

    PYTHONPATH=src python bench/bench_vocabs.py [--rounds N] [--corpus code,multilingual]
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

LLAMA3 = os.path.join(HERE, os.pardir, "tests", "data", "vocabs", "llama-bpe", "tokenizer.json.gz")


def peers(path: str):
    """(qwen4exp, tokenizers, tiktoken) encode functions of one text."""
    import qwen4exp
    import tiktoken
    from tokenizers import Tokenizer as HFTokenizer

    from _hf_reference import byte_decoder

    doc = json.load(open(path, encoding="utf-8"))
    decoder = byte_decoder()
    ranks = {bytes(decoder[c] for c in tok): i for tok, i in doc["model"]["vocab"].items()}
    pattern = doc["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"]
    enc = tiktoken.Encoding("llama3", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
    ours = qwen4exp.Tokenizer.from_file(path, encode_threads=1)
    hf = HFTokenizer.from_file(path)
    hf.add_special_tokens([])
    return {
        "qwen4exp": ours.encode,
        "tokenizers": lambda t: hf.encode(t, add_special_tokens=False).ids,
        "tiktoken": enc.encode_ordinary,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--corpus", default="code,multilingual")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "tokenizer.json")
        with gzip.open(LLAMA3, "rb") as f, open(path, "wb") as out:
            out.write(f.read())
        fns = peers(path)
        for corpus in args.corpus.split(","):
            text = common.corpus_text(corpus)[: 1 << 20]
            nbytes = len(text.encode("utf-8"))
            ids = {name: fn(text) for name, fn in fns.items()}
            same = ids["qwen4exp"] == ids["tokenizers"]
            row = [f"{corpus:13s} {nbytes / 1e6:.2f} MB", f"ids equal HF: {same}",
                   f"tiktoken equal: {ids['tiktoken'] == ids['tokenizers']}"]
            for name, fn in fns.items():
                best, _ = common.best_of(fn, text, args.rounds)
                row.append(f"{name} {nbytes / best / 1e6:.1f} MB/s")
            print(" | ".join(row), flush=True)


if __name__ == "__main__":
    main()
