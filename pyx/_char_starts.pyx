# cython: language_level=3
"""Char starts: start byte-level BPE from whole characters where that is exact.

Merging a piece normally starts from one symbol per byte; a 2- or 3-byte
UTF-8 character c (4-byte ones are left as bytes) may instead start as the
single token T_c when

1. c's bytes are a token T_c, and BPE over c's bytes alone gives [T_c]
   (checked at init with the model's own merging);
2. every merge with T_c as an operand ranks above every merge used in 1
   (always so when the table is monotone, every merge's operands made by
   lower ranks, as in Qwen3; Qwen3.6's tiktoken-derived table is not, and a
   few of its characters fail this);
3. at this occurrence no token X+P (X non-empty, P a proper prefix of c's
   bytes) has X equal to the bytes just before c in the piece, and no token
   Q+Y (Y non-empty, Q a proper suffix of c's bytes) has Y equal to the
   bytes just after c. These "fragment" tokens are few (Qwen3: 260 for P,
   127 for Q), and a one-byte test on the neighbour rejects most occurrences.

Why the ids are the same as from bytes (BPE: lowest rank first, leftmost
among equals). In the byte run, take the first merge that joins bytes of c
with bytes outside c before c is one symbol: it joins a symbol outside c
with a symbol inside c that touches c's boundary, so its product is a token
X+P or Q+Y as in 3 -- excluded. Hence until c is whole, merges are either
inside c or outside it; the inside ones are chosen in the order BPE over c
alone chooses them (the global lowest-leftmost choice restricted to c), so by
1 they end in T_c, and the pairs across c's boundary have no merge at all.
An outside merge made before T_c forms was chosen while one of c's own
merges was pending, so it ranks at most the highest of those, and by 2 below
any pair with T_c as an operand: the run that starts from T_c picks exactly
the same outside merges in the same order. Once T_c forms (byte run) the two
runs hold the same symbols, and stay equal. Rule 3 is about bytes, whatever
other characters start as, so starts can be introduced
one at a time: the result equals plain byte-level BPE.

The table is indexed by code point (256 KiB of int32: token id and four flags
saying which of c's keys P or Q have rules at all); rules are grouped by key.
"""
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy, memset
from qwen4exp._native._alloc cimport q4_malloc, q4_free

cdef enum:
    BMP = 0x10000


cdef inline bint is_cont(uint8_t b) noexcept nogil:
    return (b & 0xC0) == 0x80


cdef int left_key(const uint8_t *s, Py_ssize_t n, Py_ssize_t *split) noexcept nogil:
    """If token s[0:n] is X+P (X non-empty, P a proper prefix of a 2- or 3-byte
    character: a lead byte 0xC2..0xEF, then fewer continuation bytes than it
    needs), P's key, X's length in split[0]; else -1."""
    if n >= 2 and 0xC2 <= s[n - 1] <= 0xEF:
        split[0] = n - 1
        return KEY_P1 + s[n - 1] - 0xC0
    if n >= 3 and 0xE0 <= s[n - 2] <= 0xEF and is_cont(s[n - 1]):
        split[0] = n - 2
        return KEY_P2 + (((s[n - 2] & 0x0F) << 6) | (s[n - 1] & 0x3F))
    return -1


cdef int right_key(const uint8_t *s, Py_ssize_t n, Py_ssize_t q) noexcept nogil:
    """If token s[0:n] is Q+Y with Q = s[0:q] (q = 1 or 2 continuation bytes, Y
    non-empty), Q's key; else -1."""
    if n <= q or not is_cont(s[0]):
        return -1
    if q == 1:
        return KEY_Q1 + (s[0] & 0x3F)
    if not is_cont(s[1]):
        return -1
    return KEY_Q2 + (((s[0] & 0x3F) << 6) | (s[1] & 0x3F))


cdef int32_t start_code_point(const uint8_t *s, Py_ssize_t n) noexcept nogil:
    """The code point if s[0:n] is exactly one well-formed 2- or 3-byte
    character (no surrogate), else -1."""
    cdef int32_t cp
    if n == 2 and 0xC2 <= s[0] <= 0xDF and is_cont(s[1]):
        return ((s[0] & 0x1F) << 6) | (s[1] & 0x3F)
    if n == 3 and 0xE0 <= s[0] <= 0xEF and is_cont(s[1]) and is_cont(s[2]):
        cp = ((s[0] & 0x0F) << 12) | ((s[1] & 0x3F) << 6) | (s[2] & 0x3F)
        if cp >= 0x800 and not 0xD800 <= cp <= 0xDFFF:
            return cp
    return -1


cdef int char_starts_init(CharStarts *a, const uint8_t *tok_bytes, const int64_t *tok_offsets,
                         Py_ssize_t n_vocab, const int32_t *first_use, MergeBytes merge,
                         void *ctx) noexcept nogil:
    """Build the start table and the fragment rules. first_use[t]: the lowest
    rank of a merge with token t as an operand (INT32_MAX if none); merge:
    pure byte-level BPE. 0, or -1 if allocation or merging fails (a is then
    empty)."""
    cdef Py_ssize_t t, n, q, split, blob_len = 0
    cdef int32_t *count = NULL
    cdef int32_t cp, r, top
    cdef int32_t got[3]
    cdef int key
    cdef const uint8_t *s
    memset(a, 0, sizeof(CharStarts))
    a.table = <int32_t *> q4_malloc(BMP * sizeof(int32_t))
    a.slot_of = <int16_t *> q4_malloc(N_KEYS * sizeof(int16_t))
    count = <int32_t *> q4_malloc(N_KEYS * sizeof(int32_t))
    if a.table == NULL or a.slot_of == NULL or count == NULL:
        q4_free(count)
        char_starts_free(a)
        return -1
    memset(a.table, 0xFF, BMP * sizeof(int32_t))
    memset(count, 0, N_KEYS * sizeof(int32_t))
    # Pass 1: start characters (condition 1), and how many rules each key has.
    for t in range(n_vocab):
        s = tok_bytes + tok_offsets[t]
        n = tok_offsets[t + 1] - tok_offsets[t]
        cp = start_code_point(s, n)
        if cp >= 0:
            r = <int32_t> merge(ctx, s, n, got, &top)
            if r < 0:
                q4_free(count)
                char_starts_free(a)
                return -1
            if r == 1 and got[0] == t and t <= START_ID_MASK and top < first_use[t]:  # conditions 1 and 2
                a.table[cp] = <int32_t> t
                a.n_starts += 1
        key = left_key(s, n, &split)
        if key >= 0:
            count[key] += 1
            blob_len += split
        for q in range(1, 3):
            key = right_key(s, n, q)
            if key >= 0:
                count[key] += 1
                blob_len += n - q
    if fill_rules(a, tok_bytes, tok_offsets, n_vocab, count, blob_len) < 0:
        q4_free(count)
        char_starts_free(a)
        return -1
    q4_free(count)
    set_flags(a)
    return 0


cdef int fill_rules(CharStarts *a, const uint8_t *tok_bytes, const int64_t *tok_offsets,
                    Py_ssize_t n_vocab, int32_t *count, Py_ssize_t blob_len) noexcept nogil:
    """Pass 2: lay the rules out by slot (count: rules per key, reused as
    each slot's fill position). 0 or -1."""
    cdef Py_ssize_t t, n, q, split, used = 0
    cdef int key, slot
    cdef int32_t r
    cdef uint8_t b
    cdef const uint8_t *s
    if blob_len >= 0x7FFFFFFF:
        return -1
    for key in range(N_KEYS):
        if count[key] > 0:
            a.n_slots += 1
            a.n_rules += count[key]
    a.rule_start = <int32_t *> q4_malloc(<size_t> (a.n_slots + 1) * sizeof(int32_t))
    a.bits = <uint64_t *> q4_malloc(<size_t> (4 * a.n_slots + 1) * sizeof(uint64_t))
    a.rule_off = <int32_t *> q4_malloc(<size_t> (a.n_rules + 1) * sizeof(int32_t))
    a.rule_len = <int32_t *> q4_malloc(<size_t> (a.n_rules + 1) * sizeof(int32_t))
    a.blob = <uint8_t *> q4_malloc(<size_t> blob_len + 1)
    if a.rule_start == NULL or a.bits == NULL or a.rule_off == NULL or a.rule_len == NULL or a.blob == NULL:
        return -1
    memset(a.bits, 0, <size_t> (4 * a.n_slots + 1) * sizeof(uint64_t))
    slot = 0
    r = 0
    for key in range(N_KEYS):
        a.slot_of[key] = -1
        if count[key] > 0:
            a.slot_of[key] = <int16_t> slot
            a.rule_start[slot] = r
            r += count[key]
            count[key] = a.rule_start[slot]
            slot += 1
    a.rule_start[slot] = r
    for t in range(n_vocab):
        s = tok_bytes + tok_offsets[t]
        n = tok_offsets[t + 1] - tok_offsets[t]
        key = left_key(s, n, &split)
        if key >= 0:
            add_rule(a, count, key, s, split, s[split - 1], &used)
        for q in range(1, 3):
            key = right_key(s, n, q)
            if key >= 0:
                add_rule(a, count, key, s + q, n - q, s[q], &used)
    return 0


cdef inline void add_rule(CharStarts *a, int32_t *fill, int key, const uint8_t *x, Py_ssize_t n,
                          uint8_t neighbour, Py_ssize_t *used) noexcept nogil:
    cdef int slot = a.slot_of[key]
    cdef int32_t r = fill[key]
    fill[key] += 1
    a.rule_off[r] = <int32_t> used[0]
    a.rule_len[r] = <int32_t> n
    memcpy(a.blob + used[0], x, <size_t> n)
    used[0] += n
    a.bits[4 * slot + (neighbour >> 6)] |= 1ULL << (neighbour & 63)


cdef void set_flags(CharStarts *a) noexcept nogil:
    """Mark each start character with the keys (P1, P2, Q1, Q2) that have rules."""
    cdef int32_t cp, e
    cdef uint8_t c1, c2, c3
    for cp in range(0x80, BMP):
        e = a.table[cp]
        if e < 0:
            continue
        if cp < 0x800:
            c1 = 0xC0 | (cp >> 6)
            c2 = 0x80 | (cp & 0x3F)
            if a.slot_of[KEY_P1 + c1 - 0xC0] >= 0:
                e |= HAS_P1
            if a.slot_of[KEY_Q1 + (c2 & 0x3F)] >= 0:
                e |= HAS_Q1
        else:
            c1 = 0xE0 | (cp >> 12)
            c2 = 0x80 | ((cp >> 6) & 0x3F)
            c3 = 0x80 | (cp & 0x3F)
            if a.slot_of[KEY_P1 + c1 - 0xC0] >= 0:
                e |= HAS_P1
            if a.slot_of[KEY_P2 + (((c1 & 0x0F) << 6) | (c2 & 0x3F))] >= 0:
                e |= HAS_P2
            if a.slot_of[KEY_Q1 + (c3 & 0x3F)] >= 0:
                e |= HAS_Q1
            if a.slot_of[KEY_Q2 + (((c2 & 0x3F) << 6) | (c3 & 0x3F))] >= 0:
                e |= HAS_Q2
        a.table[cp] = e


cdef void char_starts_free(CharStarts *a) noexcept nogil:
    q4_free(a.table)
    q4_free(a.slot_of)
    q4_free(a.bits)
    q4_free(a.rule_start)
    q4_free(a.rule_off)
    q4_free(a.rule_len)
    q4_free(a.blob)
    memset(a, 0, sizeof(CharStarts))


cdef inline bint left_match(const CharStarts *a, int key, const uint8_t *p, Py_ssize_t j) noexcept nogil:
    """Some rule X of key (a P) has X == p[j - len(X):j]."""
    cdef int slot = a.slot_of[key]
    cdef uint8_t b = p[j - 1]
    cdef int32_t r, L
    if slot < 0 or not (a.bits[4 * slot + (b >> 6)] >> (b & 63)) & 1:
        return False
    for r in range(a.rule_start[slot], a.rule_start[slot + 1]):
        L = a.rule_len[r]
        if L <= j and memcmp(a.blob + a.rule_off[r], p + j - L, <size_t> L) == 0:
            return True
    return False


cdef inline bint right_match(const CharStarts *a, int key, const uint8_t *p, Py_ssize_t n,
                             Py_ssize_t e) noexcept nogil:
    """Some rule Y of key (a Q) has Y == p[e:e + len(Y)]."""
    cdef int slot = a.slot_of[key]
    cdef uint8_t b = p[e]
    cdef int32_t r, L
    if slot < 0 or not (a.bits[4 * slot + (b >> 6)] >> (b & 63)) & 1:
        return False
    for r in range(a.rule_start[slot], a.rule_start[slot + 1]):
        L = a.rule_len[r]
        if L <= n - e and memcmp(a.blob + a.rule_off[r], p + e, <size_t> L) == 0:
            return True
    return False


cdef bint start_blocked(const CharStarts *a, const uint8_t *p, Py_ssize_t n, Py_ssize_t j,
                       Py_ssize_t width, int32_t flags) noexcept nogil:
    """Rule 3 for the start character at p[j:j + width] (flags: its HAS_* bits): True if a
    fragment token could form across its boundary from its neighbours."""
    cdef Py_ssize_t e = j + width
    if j > 0:
        if flags & HAS_P1 and left_match(a, KEY_P1 + p[j] - 0xC0, p, j):
            return True
        if flags & HAS_P2 and left_match(a, KEY_P2 + (((p[j] & 0x0F) << 6) | (p[j + 1] & 0x3F)), p, j):
            return True
    if e < n:
        if flags & HAS_Q1 and right_match(a, KEY_Q1 + (p[e - 1] & 0x3F), p, n, e):
            return True
        if flags & HAS_Q2 and right_match(a, KEY_Q2 + (((p[e - 2] & 0x3F) << 6) | (p[e - 1] & 0x3F)),
                                          p, n, e):
            return True
    return False


cdef bytes key_bytes(int key):
    """The fragment (P or Q) a key names."""
    if key < KEY_P2:
        return bytes([0xC0 + key - KEY_P1])
    if key < KEY_Q1:
        key -= KEY_P2
        return bytes([0xE0 | (key >> 6), 0x80 | (key & 0x3F)])
    if key < KEY_Q2:
        return bytes([0x80 | (key - KEY_Q1)])
    key -= KEY_Q2
    return bytes([0x80 | (key >> 6), 0x80 | (key & 0x3F)])


cdef object char_starts_describe(const CharStarts *a):
    """For tests: None when starts are off, else {"starts": {code point: id},
    "prefix": {P: sorted X}, "suffix": {Q: sorted Y}}."""
    cdef int key, slot
    cdef int32_t r
    cdef Py_ssize_t cp
    if a.table == NULL:
        return None
    starts = {cp: a.table[cp] & START_ID_MASK for cp in range(BMP) if a.table[cp] >= 0}
    prefix, suffix = {}, {}
    for key in range(N_KEYS):
        slot = a.slot_of[key]
        if slot < 0:
            continue
        strings = sorted(a.blob[a.rule_off[r]:a.rule_off[r] + a.rule_len[r]]
                         for r in range(a.rule_start[slot], a.rule_start[slot + 1]))
        (prefix if key < KEY_Q1 else suffix)[key_bytes(key)] = strings
    return {"starts": starts, "prefix": prefix, "suffix": suffix}


cdef list start_symbols(const CharStarts *a, const int32_t *byte_ids, bytes piece):
    """For tests: the symbols merging piece starts from (bytes when starts are off)."""
    cdef const uint8_t *p = piece
    cdef Py_ssize_t n = len(piece), j, k
    cdef int32_t *sym = <int32_t *> q4_malloc(<size_t> (n + 1) * sizeof(int32_t))
    if sym == NULL:
        raise MemoryError("no memory for the symbols of a piece")
    if a.table != NULL:
        k = first_symbols(a, byte_ids, p, n, sym)
    else:
        for j in range(n):
            sym[j] = byte_ids[p[j]]
        k = n
    out = [sym[j] for j in range(k)]
    q4_free(sym)
    return out
