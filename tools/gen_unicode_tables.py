#!/usr/bin/env python3
"""Generate pyx/unicode_tables.h: the pre-tokenizer's character classes and NFC data.

    python tools/gen_unicode_tables.py          # rewrites pyx/unicode_tables.h

Deterministic; needs, at generation time only, the pinned references:

* unicodedata2==16.0.0 for the character classes. tokenizers 0.22.1 matches the
  Qwen pattern with Oniguruma 6.9.10, whose \\p{L}, \\p{N} and \\s are Unicode 16.
  (Never the runtime's `unicodedata` nor the `regex` module: their Unicode
  version moves with the Python version.)
* tokenizers==0.22.1 for NFC. Its NFC/NFD come from the
  unicode-normalization-alignments crate, whose tables are older (Unicode 9
  era) than any CPython's, so the normalization data is *probed* from the
  reference itself: NFD and NFC of every scalar value, canonical ordering of
  every pair of non-starters, and NFC of every candidate composition pair.
  unicodedata2 only proposes candidates (one-level decompositions, combining
  class values); every fact that ends up in the tables is checked against the
  reference here, and tests/test_unicode_tables.py / tests/test_normalize.py
  check the built tables again, exhaustively.
"""

import os
import sys

EXPECTED_TOKENIZERS = "0.22.1"
EXPECTED_UCD = "16.0.0"

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_PATH = os.path.join(HERE, "..", "pyx", "unicode_tables.h")

MAX_CP = 0x110000
SCALARS = [c for c in range(MAX_CP) if not 0xD800 <= c < 0xE000]

# Hangul syllables: decomposed and composed algorithmically (Unicode ch. 3.12).
S_BASE, L_BASE, V_BASE, T_BASE = 0xAC00, 0x1100, 0x1161, 0x11A7
L_COUNT, V_COUNT, T_COUNT = 19, 21, 28
S_COUNT = L_COUNT * V_COUNT * T_COUNT

CLASS_L, CLASS_N, CLASS_WS, CLASS_CRLF, CLASS_M = 1, 2, 4, 8, 16

QC_YES, QC_MAYBE, QC_NO = 0, 1, 2
FLAG_SECOND = 4  # may combine with a preceding starter


def load_references():
    import tokenizers
    import unicodedata2

    if tokenizers.__version__ != EXPECTED_TOKENIZERS:
        sys.exit(f"need tokenizers=={EXPECTED_TOKENIZERS}, found {tokenizers.__version__}")
    if unicodedata2.unidata_version != EXPECTED_UCD:
        sys.exit(f"need unicodedata2 with UCD {EXPECTED_UCD}, found {unicodedata2.unidata_version}")
    return tokenizers, unicodedata2


# ---------------------------------------------------------------- classes


def char_classes(ucd):
    """Class bits of every code point as Oniguruma (Unicode 16) sees the pattern."""
    bits = bytearray(MAX_CP)
    for c in SCALARS:
        cat = ucd.category(chr(c))
        b = 0
        if cat in ("Lu", "Ll", "Lt", "Lm", "Lo"):
            b |= CLASS_L
        if cat in ("Nd", "Nl", "No"):
            b |= CLASS_N
        # \p{M} joins letter runs in the Qwen3.5 pattern (Mn, Mc, Me).
        if cat in ("Mn", "Mc", "Me"):
            b |= CLASS_M
        # Oniguruma's \s: TAB..CR, NEL and Z*; not U+001C..U+001F (str.isspace has them).
        if 0x09 <= c <= 0x0D or c == 0x85 or cat in ("Zs", "Zl", "Zp"):
            b |= CLASS_WS
        if c in (0x0A, 0x0D):
            b |= CLASS_CRLF
        bits[c] = b
    return bits


# ---------------------------------------------------------------- NFC probing


def batched(normalizer, strings, chunk=1 << 16):
    """normalize_str of each string, many per call.

    The strings are joined by U+0000: a starter with no decomposition that is
    never the first of a composition pair, so nothing reorders or composes
    across it, and no normalization produces it.
    """
    out = []
    for i in range(0, len(strings), chunk):
        part = strings[i : i + chunk]
        assert not any("\x00" in s for s in part)
        res = normalizer.normalize_str("\x00".join(part)).split("\x00")
        assert len(res) == len(part)
        out.extend(res)
    return out


def is_hangul_syllable(c):
    return S_BASE <= c < S_BASE + S_COUNT


def probe_nfc_data(tokenizers, ucd):
    nfd_norm = tokenizers.normalizers.NFD()
    nfc_norm = tokenizers.normalizers.NFC()
    probe_cps = [c for c in SCALARS if c != 0]
    singles = [chr(c) for c in probe_cps]
    nfd = dict(zip(probe_cps, batched(nfd_norm, singles)))
    nfc = dict(zip(probe_cps, batched(nfc_norm, singles)))
    nfd[0] = nfc[0] = "\x00"
    # The batching trick must agree with one call per string.
    for c in list(range(1, 0x800)) + [0x1F82, 0xAC01, 0xF900, 0x1D160, 0x2F800]:
        assert nfd_norm.normalize_str(chr(c)) == nfd[c], hex(c)
        assert nfc_norm.normalize_str(chr(c)) == nfc[c], hex(c)

    # Combining classes matter only for characters NFD leaves alone (everything
    # else is decomposed before ordering). A character x has ccc != 0 iff it
    # moves in NFD(U+0345 x) (ccc 240, the largest) or NFD(x U+0334) (ccc 1).
    stable = [c for c in probe_cps if nfd[c] == chr(c)]
    hi = batched(nfd_norm, ["\u0345" + chr(c) for c in stable])
    lo = batched(nfd_norm, [chr(c) + "\u0334" for c in stable])
    nonstarters = {0x345, 0x334}
    for c, a, b in zip(stable, hi, lo):
        if a != "\u0345" + chr(c) or b != chr(c) + "\u0334":
            nonstarters.add(c)
    ccc = {c: ucd.combining(chr(c)) for c in nonstarters}
    assert all(ccc.values())
    # Their relative order must be what the Unicode 16 values say, pair by pair.
    marks = sorted(nonstarters)
    pairs = [chr(a) + chr(b) for a in marks for b in marks]
    for s, got in zip(pairs, batched(nfd_norm, pairs)):
        a, b = s
        want = b + a if ccc[ord(a)] > ccc[ord(b)] else s
        assert got == want, (hex(ord(a)), hex(ord(b)))
    # Decomposed characters: Unicode's value (NFD never looks at it; the
    # quick check sees it only on QC=Yes characters, which are starters).
    for c in probe_cps:
        if nfd[c] != chr(c) and ucd.combining(chr(c)):
            ccc[c] = ucd.combining(chr(c))

    # Composition pairs: one-level canonical decompositions into two code
    # points (Unicode 16 proposes; decompositions are stable across versions)
    # that the reference actually composes. Hangul is algorithmic, probed below.
    compositions = {}
    candidates = []
    for c in probe_cps:
        if nfd[c] == chr(c) or is_hangul_syllable(c):
            continue
        d = ucd.decomposition(chr(c))
        assert d and not d.startswith("<"), hex(c)
        parts = [int(x, 16) for x in d.split()]
        # The reference's full decomposition must be the recursive expansion.
        assert "".join(nfd[p] for p in parts) == nfd[c], hex(c)
        if len(parts) == 2:
            candidates.append((c, parts[0], parts[1]))
    composed = batched(nfc_norm, [chr(a) + chr(b) for _, a, b in candidates])
    for (c, a, b), got in zip(candidates, composed):
        if got == chr(c):
            compositions[(a, b)] = c
        # Otherwise excluded: the reference leaves c itself decomposed too.
        assert (got == chr(c)) == (nfc[c] == chr(c)), hex(c)

    # Hangul: L+V and LV+T compose, nothing else near them does.
    lead = [chr(c) for c in range(L_BASE - 2, L_BASE + L_COUNT + 2)]
    vowel = [chr(c) for c in range(V_BASE - 2, V_BASE + V_COUNT + 2)]
    trail = [chr(c) for c in range(T_BASE - 1, T_BASE + T_COUNT + 2)]
    lvs = [chr(S_BASE + i * T_COUNT) for i in range(L_COUNT * V_COUNT)]
    lvs += [chr(S_BASE + 1), chr(S_BASE - 1), chr(S_BASE + S_COUNT)]
    probes = [x + y for x in lead for y in vowel] + [x + y for x in lvs for y in trail]
    for s, got in zip(probes, batched(nfc_norm, probes)):
        assert got == (hangul_compose(ord(s[0]), ord(s[1])) or s), s.encode("unicode_escape")

    return nfd, nfc, ccc, compositions


def hangul_compose(a, b):
    """The composite of a+b by the Hangul rule, as a 1-char str, or None."""
    if L_BASE <= a < L_BASE + L_COUNT and V_BASE <= b < V_BASE + V_COUNT:
        return chr(S_BASE + ((a - L_BASE) * V_COUNT + (b - V_BASE)) * T_COUNT)
    if is_hangul_syllable(a) and (a - S_BASE) % T_COUNT == 0 and T_BASE < b < T_BASE + T_COUNT:
        return chr(a + b - T_BASE)
    return None


def nfc_properties(nfd, nfc, ccc, compositions):
    """Per code point: (ccc, flags, full decomposition or None, composition list)."""
    seconds = {b for _, b in compositions}
    seconds |= set(range(V_BASE, V_BASE + V_COUNT)) | set(range(T_BASE + 1, T_BASE + T_COUNT))
    firsts = {}
    for (a, b), c in sorted(compositions.items()):
        firsts.setdefault(a, []).append((b, c))
    props = {}
    for c in SCALARS:
        decomp = None
        if nfd[c] != chr(c) and not is_hangul_syllable(c):
            decomp = tuple(ord(x) for x in nfd[c])
        # Quick check derived from the same data: No = cannot survive NFC on
        # its own; Maybe = may combine with what precedes it.
        qc = QC_YES
        if nfc[c] != chr(c):
            qc = QC_NO
        elif c in seconds:
            qc = QC_MAYBE
        flags = qc | (FLAG_SECOND if c in seconds else 0)
        props[c] = (ccc.get(c, 0), flags, decomp, tuple(firsts.get(c, ())))

    # Invariants the native code relies on.
    for c in SCALARS:
        cc, flags, decomp, _ = props[c]
        # Segments start at QC=Yes starters: nothing before such a character can
        # reorder or compose with what its decomposition begins with.
        if flags & 3 == QC_YES and cc == 0:
            first = decomp[0] if decomp else c
            assert props[first][0] == 0 and not props[first][1] & FLAG_SECOND, hex(c)
        # Decomposed output fits in 3 code points per 2 input UTF-8 bytes.
        assert 2 * len(nfd[c]) <= 3 * len(chr(c).encode("utf-8")), hex(c)
        if decomp:
            assert len(decomp) <= 4 and all(props[d][2] is None for d in decomp), hex(c)
        assert not (flags & FLAG_SECOND and flags & 3 == QC_NO), hex(c)
    # Every code point below U+0300 is a QC=Yes starter (the UTF-8 fast paths
    # skip bytes < 0xCC on that basis).
    assert all(props[c][0] == 0 and props[c][1] == QC_YES for c in range(0x300)), "fast path"
    return props


# ---------------------------------------------------------------- emitting


def two_stage(values, limit, shifts=range(4, 10), width2=1):
    """Best (size) two-stage split of values[0:limit]: (shift, stage1, stage2)."""
    best = None
    for shift in shifts:
        size = 1 << shift
        padded = list(values[:limit]) + [0] * (-limit % size)
        blocks, stage1, stage2 = {}, [], []
        for i in range(0, len(padded), size):
            block = tuple(padded[i : i + size])
            if block not in blocks:
                blocks[block] = len(blocks)
                stage2.extend(block)
            stage1.append(blocks[block])
        width1 = 1 if len(blocks) <= 256 else 2
        cost = len(stage1) * width1 + len(stage2) * width2
        if best is None or cost < best[0]:
            best = (cost, shift, stage1, stage2)
    return best[1:]


def wrap(items, per_line):
    return "\n".join(
        "    " + ",".join(items[i : i + per_line]) + "," for i in range(0, len(items), per_line)
    )


def c_array(ctype, name, values, per_line=24):
    fmt = "0x{:X}" if ctype == "uint32_t" else "{}"
    body = wrap([fmt.format(v) for v in values], per_line)
    return f"static const {ctype} {name}[{len(values)}] = {{\n{body}\n}};\n"


def int_type(values):
    m = max(values) if values else 0
    return "uint8_t" if m < 256 else "uint16_t" if m < 65536 else "uint32_t"


def last_nonzero(values):
    last = max((i for i, v in enumerate(values) if v), default=0)
    return last + 1


def emit(bits, props):
    out = []
    w = out.append
    w(
        "/* Generated by tools/gen_unicode_tables.py -- do not edit; rerun it instead.\n"
        " *\n"
        f" * Character classes of the Qwen pre-tokenizer pattern from unicodedata2=={EXPECTED_UCD}\n"
        f" * (Unicode {EXPECTED_UCD}, as Oniguruma 6.9.10 in tokenizers=={EXPECTED_TOKENIZERS}):\n"
        " *   Q4_L = \\p{L}, Q4_N = \\p{N}, Q4_WS = \\s (TAB..CR, U+0085, Zs, Zl, Zp), Q4_CRLF = \\r or \\n,\n"
        " *   Q4_M = \\p{M} (used by the Qwen3.5 pattern only).\n"
        f" * NFC data probed from tokenizers=={EXPECTED_TOKENIZERS}'s NFD/NFC (the\n"
        " * unicode-normalization-alignments crate, Unicode 9 era tables): full canonical\n"
        " * decompositions, combining classes, composition pairs (exclusions left out),\n"
        " * and the quick check derived from them. Hangul is algorithmic.\n"
        " * Static const data and static inline functions only (C99): nothing to init.\n"
        " */\n"
        "#ifndef Q4_UNICODE_TABLES_H\n"
        "#define Q4_UNICODE_TABLES_H\n\n"
        "#include <stdint.h>\n\n"
    )

    # ---- classes
    w("/* ---------------------------------------------------------------- classes */\n\n")
    w("#define Q4_L 1\n#define Q4_N 2\n#define Q4_WS 4\n#define Q4_CRLF 8\n#define Q4_M 16\n\n")
    limit = last_nonzero(bits)
    shift, s1, s2 = two_stage(bits, limit)
    limit = len(s1) << shift
    w(c_array("uint8_t", "q4_cclass_latin1", list(bits[:256]), 32))
    # The pre-tokenizer's per-byte fast path: ASCII classes, and Q4_HI on every
    # byte of a multi-byte sequence (decode it and use q4_cclass instead).
    w("/* Per UTF-8 byte: the class of an ASCII byte, Q4_HI for any byte >= 0x80. */\n")
    w("#define Q4_HI 128\n")
    w(c_array("uint8_t", "q4_byte_class", list(bits[:128]) + [128] * 128, 32))
    w(f"#define Q4_CCLASS_SHIFT {shift}\n")
    w(f"#define Q4_CCLASS_LIMIT 0x{limit:X}u /* every code point from here on is 0 */\n")
    w(c_array(int_type(s1), "q4_cclass_stage1", s1, 32))
    w(c_array("uint8_t", "q4_cclass_stage2", s2, 32))
    w(
        "\n/* Class bits of code point cp (Q4_L | Q4_N | Q4_WS | Q4_CRLF | Q4_M). */\n"
        "static inline unsigned char q4_cclass(uint32_t cp) {\n"
        "    if (cp < 256) return q4_cclass_latin1[cp];\n"
        "    if (cp >= Q4_CCLASS_LIMIT) return 0;\n"
        "    return q4_cclass_stage2[((uint32_t)q4_cclass_stage1[cp >> Q4_CCLASS_SHIFT]\n"
        "                             << Q4_CCLASS_SHIFT) | (cp & ((1u << Q4_CCLASS_SHIFT) - 1))];\n"
        "}\n\n"
    )

    # ---- NFC records
    pool, comp_second, comp_result = [], [], []
    pool_index, rec_index, recs = {}, {}, []
    per_cp = [0] * MAX_CP

    def record(key):
        if key not in rec_index:
            rec_index[key] = len(recs)
            recs.append(key)
        return rec_index[key]

    record((0, QC_YES, 0, 0))
    for c in SCALARS:
        cc, flags, decomp, comps = props[c]
        dfield = 0
        if decomp:
            if decomp not in pool_index:
                pool_index[decomp] = len(pool)
                pool.extend(decomp)
            dfield = pool_index[decomp] << 3 | len(decomp)
        cfield = 0
        if comps:
            cfield = len(comp_second) << 5 | len(comps)
            assert len(comps) < 32
            for b, r in comps:
                comp_second.append(b)
                comp_result.append(r)
        per_cp[c] = record((cc, flags, dfield, cfield))
    assert len(pool) < (1 << 13) and len(comp_second) < (1 << 11) and len(recs) < 65536

    w("/* ---------------------------------------------------------------- NFC */\n\n")
    w(
        "/* Per code point: combining class; quick check (QC_MASK bits) and whether it may\n"
        " * combine with a preceding starter; full canonical decomposition as\n"
        " * (offset << 3 | length) into q4_nf_decomp_pool, 0 if none; compositions it\n"
        " * starts as (offset << 5 | count) into q4_nf_comp_second/_result, 0 if none. */\n"
        "typedef struct { uint8_t ccc; uint8_t flags; uint16_t decomp; uint16_t comp; } q4_nf_rec;\n\n"
        "#define Q4_NF_QC_YES 0\n#define Q4_NF_QC_MAYBE 1\n#define Q4_NF_QC_NO 2\n"
        "#define Q4_NF_QC_MASK 3\n"
        "#define Q4_NF_SECOND 4\n\n"
        "#define Q4_HANGUL_S_BASE 0xAC00u\n#define Q4_HANGUL_L_BASE 0x1100u\n"
        "#define Q4_HANGUL_V_BASE 0x1161u\n#define Q4_HANGUL_T_BASE 0x11A7u\n"
        "#define Q4_HANGUL_L_COUNT 19u\n#define Q4_HANGUL_V_COUNT 21u\n"
        "#define Q4_HANGUL_T_COUNT 28u\n#define Q4_HANGUL_N_COUNT 588u\n"
        "#define Q4_HANGUL_S_COUNT 11172u\n\n"
    )
    items = ["{%d,%d,%d,%d}" % r for r in recs]
    w(f"static const q4_nf_rec q4_nf_recs[{len(recs)}] = {{\n{wrap(items, 8)}\n}};\n")
    limit = last_nonzero(per_cp)
    shift, s1, s2 = two_stage(per_cp, limit, width2=2)
    limit = len(s1) << shift
    w(f"#define Q4_NF_SHIFT {shift}\n")
    w(f"#define Q4_NF_LIMIT 0x{limit:X}u /* every code point from here on is record 0 */\n")
    w(c_array(int_type(s1), "q4_nf_stage1", s1, 32))
    w(c_array("uint16_t", "q4_nf_stage2", s2, 24))
    w(c_array("uint32_t", "q4_nf_decomp_pool", pool, 16))
    w(c_array("uint32_t", "q4_nf_comp_second", comp_second, 16))
    w(c_array("uint32_t", "q4_nf_comp_result", comp_result, 16))
    w(
        "\n/* The NFC record of code point cp (Hangul syllables: record 0, handled by the\n"
        " * functions below). */\n"
        "static inline const q4_nf_rec *q4_nf_rec_of(uint32_t cp) {\n"
        "    if (cp >= Q4_NF_LIMIT) return &q4_nf_recs[0];\n"
        "    return &q4_nf_recs[q4_nf_stage2[((uint32_t)q4_nf_stage1[cp >> Q4_NF_SHIFT] << Q4_NF_SHIFT)\n"
        "                                    | (cp & ((1u << Q4_NF_SHIFT) - 1))]];\n"
        "}\n\n"
        "static inline int q4_is_hangul_syllable(uint32_t cp) {\n"
        "    return cp - Q4_HANGUL_S_BASE < Q4_HANGUL_S_COUNT;\n"
        "}\n\n"
        "/* Full canonical decomposition of cp into out[0..3]; returns its length (1 when\n"
        " * cp does not decompose: out[0] = cp). */\n"
        "static inline unsigned q4_nf_decompose(uint32_t cp, const q4_nf_rec *rec, uint32_t out[4]) {\n"
        "    if (q4_is_hangul_syllable(cp)) {\n"
        "        uint32_t s = cp - Q4_HANGUL_S_BASE, t = s % Q4_HANGUL_T_COUNT;\n"
        "        out[0] = Q4_HANGUL_L_BASE + s / Q4_HANGUL_N_COUNT;\n"
        "        out[1] = Q4_HANGUL_V_BASE + (s % Q4_HANGUL_N_COUNT) / Q4_HANGUL_T_COUNT;\n"
        "        if (!t) return 2;\n"
        "        out[2] = Q4_HANGUL_T_BASE + t;\n"
        "        return 3;\n"
        "    }\n"
        "    if (!rec->decomp) { out[0] = cp; return 1; }\n"
        "    const uint32_t *d = q4_nf_decomp_pool + (rec->decomp >> 3);\n"
        "    unsigned n = rec->decomp & 7u;\n"
        "    for (unsigned i = 0; i < n; i++) out[i] = d[i];\n"
        "    return n;\n"
        "}\n\n"
        "/* The primary composite of starter a followed by b, or 0 if they do not compose. */\n"
        "static inline uint32_t q4_nf_compose(uint32_t a, uint32_t b) {\n"
        "    if (a - Q4_HANGUL_L_BASE < Q4_HANGUL_L_COUNT) {\n"
        "        if (b - Q4_HANGUL_V_BASE < Q4_HANGUL_V_COUNT)\n"
        "            return Q4_HANGUL_S_BASE + ((a - Q4_HANGUL_L_BASE) * Q4_HANGUL_V_COUNT\n"
        "                                       + (b - Q4_HANGUL_V_BASE)) * Q4_HANGUL_T_COUNT;\n"
        "        return 0;\n"
        "    }\n"
        "    if (q4_is_hangul_syllable(a)) {\n"
        "        /* LV + T (T_BASE itself is no trailing consonant) */\n"
        "        if ((a - Q4_HANGUL_S_BASE) % Q4_HANGUL_T_COUNT == 0\n"
        "            && b - Q4_HANGUL_T_BASE - 1u < Q4_HANGUL_T_COUNT - 1u)\n"
        "            return a + (b - Q4_HANGUL_T_BASE);\n"
        "        return 0;\n"
        "    }\n"
        "    uint16_t comp = q4_nf_rec_of(a)->comp;\n"
        "    const uint32_t *second = q4_nf_comp_second + (comp >> 5);\n"
        "    for (unsigned i = 0, n = comp & 31u; i < n; i++)\n"
        "        if (second[i] == b) return q4_nf_comp_result[(comp >> 5) + i];\n"
        "    return 0;\n"
        "}\n\n"
        "#endif /* Q4_UNICODE_TABLES_H */\n"
    )
    return "".join(out)


def main():
    tokenizers, ucd = load_references()
    bits = char_classes(ucd)
    nfd, nfc, ccc, compositions = probe_nfc_data(tokenizers, ucd)
    props = nfc_properties(nfd, nfc, ccc, compositions)
    text = emit(bits, props)
    with open(OUT_PATH, "w", encoding="ascii", newline="\n") as f:
        f.write(text)
    print(f"wrote {os.path.normpath(OUT_PATH)}: {len(text)} bytes, "
          f"{len(compositions)} composition pairs")


if __name__ == "__main__":
    main()
