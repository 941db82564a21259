# Char starts: BPE may start a multibyte character as its one token instead of
# its bytes where that provably gives the same ids (pyx/_char_starts.pyx has the
# argument). The table is built once per model; first_symbols writes the first
# symbols of a piece.
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t

cdef enum:
    # Rule keys: the proper prefix P (lead byte, or lead + 1 continuation byte
    # of a 3-byte character) or proper suffix Q (last byte, or last 2 bytes)
    # of a character, numbered in one space.
    KEY_P1 = 0              # + lead - 0xC0 (lead 0xC2..0xEF)
    KEY_P2 = 64             # + (lead & 15) << 6 | (c2 & 63) (lead 0xE0..0xEF)
    KEY_Q1 = 1088           # + (last & 63)
    KEY_Q2 = 1152           # + (c2 & 63) << 6 | (c3 & 63)
    N_KEYS = 5248
    # Flags of a table entry above the token id: which of the character's keys
    # have rules (only those are looked at).
    START_ID_MASK = 0xFFFFF
    HAS_P1 = 1 << 20
    HAS_P2 = 1 << 21
    HAS_Q1 = 1 << 22
    HAS_Q2 = 1 << 23
    HAS_ANY = 0xF << 20


# Pure byte-level merging of p[0:n] into dst (room for n ids), as the model
# would merge a piece of bytes; count or -1. top: the highest rank it merged.
ctypedef Py_ssize_t (*MergeBytes)(void *ctx, const uint8_t *p, Py_ssize_t n, int32_t *dst,
                                  int32_t *top) noexcept nogil


cdef struct CharStarts:
    int32_t *table          # code point < 0x10000 -> token id | HAS_* flags, or -1; NULL: starts off
    Py_ssize_t n_starts
    # Fragment rules: slot_of[key] -> slot or -1; a slot's rules are
    # rule_start[slot] .. rule_start[slot + 1] - 1, each a string (X before P,
    # Y after Q) at blob + rule_off[r], rule_len[r] bytes long. bits[4 * slot]
    # has bit b set when some rule's neighbouring byte (X's last, Y's first) is b.
    int16_t *slot_of
    uint64_t *bits
    int32_t *rule_start
    int32_t *rule_off
    int32_t *rule_len
    uint8_t *blob
    Py_ssize_t n_slots
    Py_ssize_t n_rules


cdef int char_starts_init(CharStarts *a, const uint8_t *tok_bytes, const int64_t *tok_offsets,
                         Py_ssize_t n_vocab, const int32_t *first_use, MergeBytes merge,
                         void *ctx) noexcept nogil
cdef void char_starts_free(CharStarts *a) noexcept nogil
cdef bint start_blocked(const CharStarts *a, const uint8_t *p, Py_ssize_t n, Py_ssize_t j,
                       Py_ssize_t width, int32_t flags) noexcept nogil
cdef object char_starts_describe(const CharStarts *a)
cdef list start_symbols(const CharStarts *a, const int32_t *byte_ids, bytes piece)


cdef inline Py_ssize_t first_symbols(const CharStarts *a, const int32_t *byte_ids, const uint8_t *p,
                                   Py_ssize_t n, int32_t *sym) noexcept nogil:
    """Write the first symbols of the piece p[0:n] to sym (room for n): each
    start character that passes its fragment rules as its token, every other
    byte as its byte token. Returns the number of symbols."""
    cdef Py_ssize_t j = 0, k = 0, width
    cdef uint32_t cp
    cdef int32_t e
    cdef uint8_t b
    while j < n:
        b = p[j]
        if b < 0xC2 or b >= 0xF0:
            sym[k] = byte_ids[b]
            k += 1
            j += 1
            continue
        e = -1
        if b < 0xE0:
            width = 2
            if j + 1 < n and (p[j + 1] & 0xC0) == 0x80:
                e = a.table[((b & 0x1F) << 6) | (p[j + 1] & 0x3F)]
        else:
            width = 3
            if j + 2 < n and (p[j + 1] & 0xC0) == 0x80 and (p[j + 2] & 0xC0) == 0x80:
                cp = ((b & 0x0F) << 12) | ((p[j + 1] & 0x3F) << 6) | (p[j + 2] & 0x3F)
                if cp >= 0x800:  # an overlong form is not the character it decodes to
                    e = a.table[cp]
        if e >= 0 and ((e & HAS_ANY) == 0 or not start_blocked(a, p, n, j, width, e)):
            sym[k] = e & START_ID_MASK
            k += 1
            j += width
        else:
            sym[k] = byte_ids[b]
            k += 1
            j += 1
    return k
