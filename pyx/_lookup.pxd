# The encode loop's look-ups (pyx/_encoder.pyx, encode_pieces; see
# docs/ARCHITECTURE.md, "Step by step"): a chunk's pieces are keyed and
# located in the worker's cache at once (hash_chunk), each home line is
# requested AHEAD pieces before the piece's turn and looked at LEAD pieces
# before it (look_home); a piece found there is a copy of its ids, the others
# go to encode_slow (the rest of the worker's cache, the seed, a merge).
from libc.stdint cimport int32_t, uint8_t, uint64_t
from libc.string cimport memcpy
from qwen4exp._native._idvec cimport copy_ids

from qwen4exp._native._bpe cimport BpeModel, Worker
from qwen4exp._native._piece_cache cimport (PieceCache, ShortSlot, LongSlot, KEY_INLINE, IDS_INLINE, LONG_KEY_MAX,
                                    pack_key, key_hash, short_home, hash_bytes, q4_pc_prefetch)

cdef enum:
    AHEAD = 16              # a piece's home line is requested this many pieces before its turn
    LEAD = 8                # and looked at this many before (then its seed slot is requested if need be)
    FIXED_SLOTS = 514       # fixed homes: a one-byte piece's line (2 slots per byte), then the no-look-up line
    NO_LOOKUP = 512         # the slot of that last line: pieces too long to cache live there
    NO_KEY0 = 1             # their key is (NO_KEY0, ~0): no slot of the fixed homes matches it


cdef void fill_fixed_homes(ShortSlot *fixed, const int32_t *byte_ids) noexcept nogil


cdef Py_ssize_t encode_slow(const BpeModel *m, Worker *w, const uint8_t *p, Py_ssize_t size, uint64_t k0,
                            uint64_t k1, uint64_t h, const void *home, int32_t *dst) noexcept nogil


cdef inline Py_ssize_t short_ids(const PieceCache *c, const ShortSlot *slot, int32_t *dst) noexcept nogil:
    """Copy a found short slot's ids to dst (3 at once when inline: dst has
    room); returns how many there are."""
    if slot.n <= IDS_INLINE:
        memcpy(dst, slot.ids, IDS_INLINE * sizeof(int32_t))
    else:
        copy_ids(dst, c.spill + slot.ids[0], slot.n)
    return slot.n


cdef inline void hash_chunk(const PieceCache *c, const ShortSlot *fixed, const uint8_t *s, Py_ssize_t n,
                            Py_ssize_t pos, const Py_ssize_t *ends, Py_ssize_t k, uint64_t *key0,
                            uint64_t *key1, uint64_t *hashes, const void **homes) noexcept nogil:
    """For each piece of a chunk: its key, its hash and the first slot to probe
    in the worker's own cache c (homes[i]; the seed's is only needed when
    that one fails). Short pieces: the packed bytes (key1's top byte is the
    length), and one byte's home is its line in `fixed` (fill_fixed_homes),
    which always holds it; long ones: key0 = the hash, key1 = 0; the others
    (too long to cache) have a key no slot holds and the no-look-up line as
    home. The first AHEAD homes are requested as they are found;
    homes[k:k + AHEAD] point at the text, which the encode loop requests
    too, harmlessly."""
    cdef Py_ssize_t i, size, start = pos
    cdef uint64_t h
    cdef ShortSlot *short_slots = c.short_slots   # locals: the stores below may not alias them
    cdef uint64_t short_mask = c.short_mask & ~(<uint64_t> 1)
    cdef LongSlot *long_slots = c.long_slots
    cdef uint64_t long_mask = c.long_mask
    for i in range(k):
        size = ends[i] - start
        if size <= KEY_INLINE:
            pack_key(s + start, size, s + n, &key0[i], &key1[i])
            h = key_hash(key0[i], key1[i])
            hashes[i] = h
            homes[i] = &fixed[2 * (key0[i] & 0xFF)] if size == 1 else &short_slots[h & short_mask]
        elif size <= LONG_KEY_MAX:
            h = hash_bytes(s + start, size)
            key0[i] = hashes[i] = h
            key1[i] = 0
            homes[i] = &long_slots[h & long_mask]
        else:
            key0[i] = NO_KEY0
            key1[i] = ~(<uint64_t> 0)
            hashes[i] = 0
            homes[i] = &fixed[NO_LOOKUP]
        if i < AHEAD:  # requested as soon as known: the first look_home calls come right after this loop
            q4_pc_prefetch(homes[i])
        start = ends[i]
    for i in range(k, k + AHEAD):
        homes[i] = s


cdef inline const ShortSlot *look_home(const PieceCache *sd, const void *home, uint64_t k0, uint64_t k1,
                                       uint64_t h) noexcept nogil:
    """A piece's slot when its home line in the worker's cache holds it (a
    short piece in one of the line's two slots), else NULL; when the line
    does not answer it, the seed's slot is requested. hash_chunk's keys."""
    cdef const ShortSlot *s = <const ShortSlot *> home
    cdef const ShortSlot *f = NULL
    if k1 == 0:
        if (<const LongSlot *> home).hash != k0:
            q4_pc_prefetch(&sd.long_slots[h & sd.long_mask])
        return NULL
    if s[1].k1 == k1 and s[1].k0 == k0:
        f = &s[1]
    if s[0].k1 == k1 and s[0].k0 == k0:
        f = &s[0]
    if f == NULL:
        q4_pc_prefetch(short_home(sd, h))
    return f
