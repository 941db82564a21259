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

    PYTHONPATH=src python bench/bench_vocabs.py [--rounds N] [--processes N] [--corpus code,multilingual] [--vocab llama-bpe]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile

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
    warm, timed = common.warm_and_measured(docs)
    best = float("inf")
    for _ in range(rounds):
        encode, _batch = make()
        for d in warm:
            encode(d)
        best = min(best, common.time_documents(encode, timed))
    return best


def child(path: str, name: str, corpus: str, rounds: int, reference_file: str) -> None:
    """One peer in a process of its own (another library's threads and freed heap
    would otherwise slow the one timed after it, docs/PERFORMANCE.md): its ids
    checked against the reference, then its three speeds, as one JSON line."""
    make = peers(path)[name]
    encode, batch = make()
    text = common.corpus_text(corpus)[: 1 << 20]
    docs = corpora.DOCUMENTS[corpus]()
    with open(reference_file, encoding="utf-8") as f:
        ref = json.load(f)
    same = (list(encode(text)) == ref["whole"] and all(list(encode(d)) == r for d, r in zip(docs, ref["docs"]))
            and [list(x) for x in batch(docs)] == ref["docs"])
    nbytes = len(text.encode("utf-8"))
    fresh_bytes = sum(len(d.encode("utf-8")) for d in common.warm_and_measured(docs)[1])
    doc_bytes = sum(len(d.encode("utf-8")) for d in docs)
    slow = name == "tokenizers"  # one call on 1 MiB is HF's slow case: one round of each
    whole = nbytes / common.best_of(encode, text, 1 if slow else rounds)[0] / 1e6
    fresh = fresh_bytes / fresh_documents(make, docs, 1 if slow else rounds) / 1e6
    btime = common.best_of(batch, docs, 1 if slow else rounds)[0]
    print(json.dumps({"same": same, "speeds": [whole, fresh, doc_bytes / btime / 1e6]}), flush=True)


def run_child(*args: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3, help="rounds per measurement in each process")
    ap.add_argument("--processes", type=int, default=2,
                    help="processes per peer, interleaved (the best is kept)")
    ap.add_argument("--corpus", default="code,multilingual")
    ap.add_argument("--vocab", default="llama-bpe")
    ap.add_argument("--peers", help="a comma list of the peers to run beside qwen4exp and tokenizers (default: all installed)")
    ap.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        path, name, corpus, rounds, reference_file = args.child
        child(path, name, corpus, int(rounds), reference_file)
        return
    print(f"CPU: {common.cpu_model()}")
    for vocab in args.vocab.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "tokenizer.json")
            with gzip.open(os.path.join(VOCABS, vocab, "tokenizer.json.gz"), "rb") as f, open(path, "wb") as out:
                out.write(f.read())
            names = [n for n in peers(path) if not args.peers or n in (*args.peers.split(","), "qwen4exp", "tokenizers")]
            for corpus in args.corpus.split(","):
                text = common.corpus_text(corpus)[: 1 << 20]
                docs = corpora.DOCUMENTS[corpus]()
                reference_file = os.path.join(tmp, f"reference-{corpus}.json")
                encode_hf = peers(path)["tokenizers"]()[0]
                with open(reference_file, "w", encoding="utf-8") as f:
                    json.dump({"whole": encode_hf(text), "docs": [encode_hf(d) for d in docs]}, f)
                del encode_hf
                speed: dict = {}
                same: dict = {}
                for _ in range(args.processes):
                    for name in names:
                        got = run_child(path, name, corpus, str(args.rounds), reference_file)
                        same[name] = same.get(name, True) and got["same"]
                        old = speed.get(name, [0.0, 0.0, 0.0])
                        speed[name] = [max(a, b) for a, b in zip(old, got["speeds"])]
                print(f"\n{vocab} {corpus}: whole {len(text.encode('utf-8')) / 1e6:.2f} MB; {len(docs)} documents, "
                      f"{sum(len(d.encode('utf-8')) for d in docs) / 1e6:.2f} MB")
                print("| peer | ids == HF | whole MB/s | warm, fresh documents MB/s | encode_batch MB/s |")
                print("| --- | :---: | ---: | ---: | ---: |")
                for name in names:
                    s = speed[name]
                    print(f"| {name} | {'yes' if same[name] else '**no**'} | {s[0]:.1f} | {s[1]:.1f} | {s[2]:.1f} |")
                q = speed["qwen4exp"]
                for name in names:
                    if name != "qwen4exp":
                        s = speed[name]
                        print(f"- qwen4exp / {name}: whole {q[0] / s[0]:.2f}x, warm fresh documents "
                              f"{q[1] / s[1]:.2f}x, batch {q[2] / s[2]:.2f}x", flush=True)


if __name__ == "__main__":
    main()
