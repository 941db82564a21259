"""Other vocabularies (tests/data/vocabs): Llama 3's tokenizer.json encoded by
qwen4exp (Tokenizer.from_file: the native scanner with Llama 3's digit runs),
Hugging Face `tokenizers` and tiktoken (an Encoding built from the same ranks
and pattern); other files (`--vocab gpt-2,deepseek-llm`: the generic
pre-tokenizer of qwen4exp.vocab.pipeline, then the native BPE) against
`tokenizers` alone, on the file without its added tokens (DATA's reference:
DeepSeek LLM's added tokens include letters such as `ù` that `tokenizers`
would otherwise cut out of any text), and the fast peers that load the same file
(fastokens, gigatoken, when installed). MB/s of UTF-8 input, wall clock with each library's
default threads, best of a few rounds,
the first MiB of each corpus; the ids are checked equal first.

    PYTHONPATH=src python bench/bench_vocabs.py [--rounds N] [--corpus code,multilingual] [--vocab llama-bpe]
"""

from __future__ import annotations

import argparse
import gzip
import gc
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import common  # noqa: E402  (puts tests/ on sys.path)
import corpora  # noqa: E402

VOCABS = os.path.join(HERE, os.pardir, "tests", "data", "vocabs")


def peers(path: str):
    """name -> a function that builds a new encoder object and returns (its
    encode of one text, its batch encode of a list of texts or None): qwen4exp,
    tokenizers, tiktoken (Llama 3 only) and the fast peers installed."""
    import qwen4exp
    import tiktoken
    from _hf_reference import byte_decoder, hf_plain

    def ours():
        tok = qwen4exp.Tokenizer.from_file(path)  # its default threads, as each peer has its own
        return tok.encode, tok.encode_batch

    def hf():
        h = hf_plain(path)  # the file without its added tokens: DATA's reference (tests/_hf_reference.py)
        return (lambda t: h.encode(t, add_special_tokens=False).ids,
                lambda ts: [e.ids for e in h.encode_batch(ts, add_special_tokens=False)])

    fns = {"qwen4exp": ours, "tokenizers": hf}
    doc = json.load(open(path, encoding="utf-8"))
    if doc["model"].get("ignore_merges") and doc["normalizer"] is None:  # Llama 3: tiktoken's own kind
        decoder = byte_decoder()
        ranks = {bytes(decoder[c] for c in tok): i for tok, i in doc["model"]["vocab"].items()}
        pattern = doc["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"]

        def tik():
            enc = tiktoken.Encoding("llama3", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
            return enc.encode_ordinary, enc.encode_ordinary_batch

        fns["tiktoken"] = tik
    # the fast peers that load a tokenizer.json (the `bench` extra), on the same file
    # without its added tokens; left out when not installed
    plain = os.path.join(os.path.dirname(path), "plain.json")
    with open(plain, "w", encoding="utf-8") as f:
        json.dump({**doc, "added_tokens": []}, f)
    try:
        import fastokens

        def fast():
            t = fastokens.Tokenizer.from_file(plain)
            return (lambda s: t.encode(s, add_special_tokens=False).ids,
                    lambda ts: [e.ids for e in t.encode_batch(ts, add_special_tokens=False)])

        fns["fastokens"] = fast
    except ImportError:
        pass
    try:
        import gigatoken

        def giga():
            t = gigatoken.Tokenizer(plain)
            return t.encode, lambda ts: t.encode_batch([x.encode("utf-8") for x in ts])

        fns["gigatoken"] = giga
    except ImportError:
        pass
    return fns


def fresh_documents(make, docs, rounds: int) -> float:
    """Best seconds of one call per document over three quarters of docs, each
    round a new object warmed on the other quarter: texts it has not seen."""
    warm, timed = docs[::4], [d for k, d in enumerate(docs) if k % 4]
    best = float("inf")
    for _ in range(rounds):
        encode, _batch = make()
        for d in warm:
            encode(d)
        gc.collect()
        gc.disable()
        try:
            t0 = time.perf_counter()
            for d in timed:
                encode(d)
            best = min(best, time.perf_counter() - t0)
        finally:
            gc.enable()
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--corpus", default="code,multilingual")
    ap.add_argument("--vocab", default="llama-bpe")
    ap.add_argument("--peers", help="a comma list of the peers to run (default: all installed)")
    args = ap.parse_args()
    print(f"CPU: {common.cpu_model()}")
    for vocab in args.vocab.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "tokenizer.json")
            with gzip.open(os.path.join(VOCABS, vocab, "tokenizer.json.gz"), "rb") as f, open(path, "wb") as out:
                out.write(f.read())
            makers = peers(path)
            if args.peers:
                makers = {n: m for n, m in makers.items() if n in args.peers.split(",") or n == "tokenizers"}
            built = {name: make() for name, make in makers.items()}
            for corpus in args.corpus.split(","):
                text = common.corpus_text(corpus)[: 1 << 20]
                docs = corpora.DOCUMENTS[corpus]()
                nbytes = len(text.encode("utf-8"))
                fresh_bytes = sum(len(d.encode("utf-8")) for k, d in enumerate(docs) if k % 4)
                doc_bytes = sum(len(d.encode("utf-8")) for d in docs)
                reference = [built["tokenizers"][0](d) for d in docs]
                ref_whole = built["tokenizers"][0](text)
                print(f"\n{vocab} {corpus}: whole {nbytes / 1e6:.2f} MB; {len(docs)} documents, "
                      f"{doc_bytes / 1e6:.2f} MB", flush=True)
                print("| peer | ids == HF | whole MB/s | warm, fresh documents MB/s | encode_batch MB/s |")
                print("| --- | :---: | ---: | ---: | ---: |")
                speed = {}
                for name, (encode, batch) in built.items():
                    same = list(encode(text)) == ref_whole and all(
                        list(encode(d)) == r for d, r in zip(docs, reference))
                    same = same and [list(x) for x in batch(docs)] == reference
                    whole = nbytes / common.best_of(encode, text, args.rounds)[0] / 1e6
                    if name == "tokenizers":  # one call on 1 MiB is HF's slow case; its documents say more
                        fresh = fresh_bytes / fresh_documents(makers[name], docs, 1) / 1e6
                    else:
                        fresh = fresh_bytes / fresh_documents(makers[name], docs, args.rounds) / 1e6
                    btime = common.best_of(batch, docs, args.rounds)[0]
                    speed[name] = (whole, fresh, doc_bytes / btime / 1e6)
                    print(f"| {name} | {'yes' if same else '**no**'} | {speed[name][0]:.1f} | "
                          f"{speed[name][1]:.1f} | {speed[name][2]:.1f} |", flush=True)
                q = speed["qwen4exp"]
                for name, s in speed.items():
                    if name != "qwen4exp":
                        print(f"- qwen4exp / {name}: whole {q[0] / s[0]:.2f}x, warm fresh documents "
                              f"{q[1] / s[1]:.2f}x, batch {q[2] / s[2]:.2f}x")


if __name__ == "__main__":
    main()
