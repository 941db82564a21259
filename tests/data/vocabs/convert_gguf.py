"""How tests/data/vocabs/*/tokenizer.json.gz were made: tokenizer.json files
built from llama.cpp's vocabulary GGUFs (vendor/llama.cpp/models/ggml-vocab-*.gguf
in the llama-cpp-python 0.3.36 sdist: tokens, merges, token types) with the
normalizer and pre-tokenizer of the Hugging Face originals. Checked: HF
tokenizers on each file gives llama.cpp's ids (.gguf.out) for its texts
(.gguf.inp, copied here as llama-cpp.inp/.out).

usage: python convert_gguf.py SRC_MODELS_DIR OUT_DIR   (needs the `gguf` package)
"""
import json, os, sys
from gguf import GGUFReader

SRC, OUT = sys.argv[1], sys.argv[2]
HERE = os.path.dirname(os.path.abspath(__file__))

def bl(add_prefix_space=False, use_regex=True):
    return {"type": "ByteLevel", "add_prefix_space": add_prefix_space, "trim_offsets": True, "use_regex": use_regex}
def split(rx, behavior="Isolated", invert=False):
    return {"type": "Split", "pattern": {"Regex": rx}, "behavior": behavior, "invert": invert}
def digits(ind):
    return {"type": "Digits", "individual_digits": ind}
def seq(*steps):
    return {"type": "Sequence", "pretokenizers": list(steps)}

LLAMA3 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
DS_LETTERS = "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+"
DS_PUNCT = "\\s?[!-/:-~！-／：-～‘-‟　-。]+"
CJK = "[一-龥ࠀ-一가-퟿]+"

# DeepSeek LLM's regexes, read from llama.cpp's src/llama-vocab.cpp (typed in, the
# letter class's Greek singletons would be NFC-normalized into empty ranges)
_DS = json.load(open(os.path.join(HERE, "deepseek_llm_regexes.json"), encoding="utf-8"))
DS_LETTERS, DS_PUNCT, CJK = _DS[1], _DS[2], _DS[4]
PIPELINES = {
    "gpt-2": (None, bl(), False),
    "llama-bpe": (None, seq(split(LLAMA3), bl(use_regex=False)), True),
    "starcoder": (None, seq(digits(True), bl()), False),
    "refact": (None, seq(digits(True), bl()), False),
    "command-r": ({"type": "NFC"}, seq(digits(True), bl()), False),
    "falcon": (None, seq({"type": "Punctuation", "behavior": "Contiguous"}, bl(), digits(False),
                         split("[0-9][0-9][0-9]")), False),
    "deepseek-llm": ({"type": "Sequence", "normalizers": []},
                     seq(split("[\r\n]"), split(DS_LETTERS), split(DS_PUNCT), split("\\s+$"), split(CJK),
                         digits(False), bl(use_regex=False)), False),
    "deepseek-coder": ({"type": "Sequence", "normalizers": []},
                       seq(split("[\r\n]"), split("\\s?\\p{L}+"), split("\\s?\\p{P}+"), split(CJK),
                           digits(True), bl(use_regex=False)), False),
    "mpt": ({"type": "NFC"}, bl(), False),
}

def field(r, k):
    f = r.fields.get(k)
    return None if f is None else f.contents()

for name, (norm, pre, ignore) in PIPELINES.items():
    r = GGUFReader(os.path.join(SRC, f"ggml-vocab-{name}.gguf"))
    tokens = field(r, "tokenizer.ggml.tokens")
    types = field(r, "tokenizer.ggml.token_type")
    merges = field(r, "tokenizer.ggml.merges")
    last_normal = max(i for i, t in enumerate(types) if t == 1)
    vocab = {tokens[i]: i for i in range(last_normal + 1)}
    assert len(vocab) == last_normal + 1, name
    added = []
    for i, (tok, t) in enumerate(zip(tokens, types)):
        if t in (3, 4):
            added.append({"id": i, "content": tok, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": t == 4, "special": t == 3})
    doc = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": added,
        "normalizer": norm, "pre_tokenizer": pre, "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": ignore, "vocab": vocab, "merges": list(merges)},
    }
    os.makedirs(os.path.join(OUT, name), exist_ok=True)
    with open(os.path.join(OUT, name, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False)
    print(name, len(tokens), "vocab", len(vocab), "added", len(added), [a["id"] for a in added][:5],
          "unused", sum(1 for t in types if t not in (1, 3, 4)))
