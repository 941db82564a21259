# A worker's cache of pre-token pieces -> ids, seeded with the vocabulary.
#
# Two open-addressed tables: pieces of up to KEY_INLINE bytes are keyed by
# their bytes packed into two words (no stored hash, no byte compare) in
# 32-byte slots, two per cache line; longer pieces (up to LONG_KEY_MAX) keep
# a hash in 16-byte slots and their bytes and ids in a pool. The same layout
# serves two roles: the tokenizer's seed (every token spelling that is one
# whole piece, valued with what merging it gives), built once and shared by
# every worker, which add the short pieces they merge to it (publish_short)
# up to a bound, without a lock; and each worker's learned cache (the pieces
# it merged), which starts empty and is emptied when it has learned its limit.
from libc.stdint cimport int32_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy, memcmp, memset

cdef enum:
    KEY_INLINE = 15         # pieces this long or shorter have a packed key
    IDS_INLINE = 3          # ids kept in the slot itself; more go to the spill
    LONG_KEY_MAX = 128      # longer pieces are not cached
    LONG_IDS_MAX = 64       # nor pieces that need more ids than this
    SPILL_PER_WORD = 8      # spill room (ids) per learnable word
    GROWTH = 4              # a worker's cache grows to this many times its first size before it is emptied
    POOL_PER_LONG = 96      # pool room (bytes) per learnable long word
    LONG_SHARE = 2          # one learnable long word per this many short ones


cdef struct ShortSlot:
    uint64_t k0             # piece bytes 0..7, zero padded
    uint64_t k1             # bytes 8..14, zero padded; the length in the top byte (0: free slot)
    int32_t ids[IDS_INLINE] # the ids, or ids[0] = their offset in spill when n > IDS_INLINE
    int32_t n


cdef struct LongSlot:
    uint64_t hash           # 0: free slot
    uint32_t offset         # in pool: the key's bytes (rounded up to 4), then the ids
    uint16_t klen
    uint16_t nids


cdef struct PieceCache:
    ShortSlot *short_slots  # 2 MiB aligned when large (huge pages)
    uint64_t short_mask
    int32_t *spill
    Py_ssize_t spill_len
    Py_ssize_t spill_cap
    LongSlot *long_slots
    uint64_t long_mask
    uint8_t *pool
    Py_ssize_t pool_len
    Py_ssize_t pool_cap
    Py_ssize_t short_count  # entries now (seeded + learned)
    Py_ssize_t short_limit  # entries at most before going back to the seed
    Py_ssize_t long_count
    Py_ssize_t long_limit
    Py_ssize_t publish_room # the seed: short pieces workers may still add (publish_short); 0 elsewhere
    Py_ssize_t resets       # times the short table was emptied or moved (slots found before then are gone)
    Py_ssize_t grow_limit   # short pieces it may grow to (cache_grow) before it is emptied instead; 0: never grows
    bint want_grow          # it filled up: grow at the next safe point (the encode loop's next chunk)


cdef int cache_init(PieceCache *c, Py_ssize_t short_limit, Py_ssize_t long_limit, Py_ssize_t spill_cap,
                    Py_ssize_t pool_cap) noexcept nogil
cdef int cache_init_learning(PieceCache *c, Py_ssize_t words) noexcept nogil
cdef void cache_reset(PieceCache *c) noexcept nogil
cdef void cache_grow(PieceCache *c) noexcept nogil
cdef void reset_short(PieceCache *c) noexcept nogil
cdef void reset_long(PieceCache *c) noexcept nogil
cdef void cache_free(PieceCache *c) noexcept nogil
cdef void store_short(PieceCache *c, uint64_t k0, uint64_t k1, uint64_t h, const int32_t *ids,
                      Py_ssize_t k) noexcept nogil
cdef void cache_store(PieceCache *c, const uint8_t *p, Py_ssize_t n, const int32_t *ids,
                      Py_ssize_t k) noexcept nogil
cdef void store_long(PieceCache *c, const uint8_t *p, Py_ssize_t n, uint64_t h, const int32_t *ids,
                     Py_ssize_t k) noexcept nogil
cdef void publish_short(PieceCache *sd, ShortSlot *s, uint64_t k0, uint64_t k1, const int32_t *ids,
                        Py_ssize_t k) noexcept nogil


cdef extern from *:
    """
    #include <string.h>
    static inline uint64_t q4_pc_load8(const unsigned char *p) {
        uint64_t w;
        memcpy(&w, p, 8);
        return w;
    }
    /* The n bytes at p (1 <= n <= 8) as one word, reading only p[0:n]: the
       first and last four (overlapping below 8), or first, middle and last
       byte below 4. For a given n this determines every byte. */
    static inline uint64_t q4_pc_word_of(const unsigned char *p, Py_ssize_t n) {
        uint32_t a, b;
        if (n >= 4) {
            memcpy(&a, p, 4);
            memcpy(&b, p + n - 4, 4);
            return ((uint64_t) b << 32) | a;
        }
        return (uint64_t) p[0] | ((uint64_t) p[n >> 1] << 8) | ((uint64_t) p[n - 1] << 16);
    }
    #define q4_pc_prefetch(p) __builtin_prefetch((p), 0, 3)
    /* The seed's short slots are read by every thread while workers add to
       it: a slot is claimed (k1: 0 -> Q4_PC_CLAIMED, no length byte is 0xFF),
       filled, then published by storing its k1 with release order; readers
       load k1 with acquire order before anything else of the slot. */
    #define Q4_PC_CLAIMED 0xFF00000000000000ULL
    #define q4_pc_load_acquire(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
    #define q4_pc_store_release(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
    #define q4_pc_fetch_add(p, v) __atomic_fetch_add((p), (v), __ATOMIC_RELAXED)
    #define q4_pc_load_room(p) __atomic_load_n((p), __ATOMIC_RELAXED)
    static inline int q4_pc_claim(uint64_t *p) {
        uint64_t expect = 0;
        return __atomic_compare_exchange_n(p, &expect, Q4_PC_CLAIMED, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
    }
    """
    uint64_t q4_pc_load8(const uint8_t *p) nogil
    uint64_t q4_pc_word_of(const uint8_t *p, Py_ssize_t n) nogil
    void q4_pc_prefetch(const void *p) nogil
    uint64_t Q4_PC_CLAIMED
    uint64_t q4_pc_load_acquire(const uint64_t *p) nogil
    void q4_pc_store_release(uint64_t *p, uint64_t v) nogil
    Py_ssize_t q4_pc_fetch_add(Py_ssize_t *p, Py_ssize_t v) nogil
    Py_ssize_t q4_pc_load_room(const Py_ssize_t *p) nogil
    bint q4_pc_claim(uint64_t *p) nogil


cdef extern from *:
    """
    /* pack_key's masks by piece length: the bytes of word 0 and of word 1. */
    static const uint64_t q4_pc_mask0[16] = {
        0, 0xFFULL, 0xFFFFULL, 0xFFFFFFULL, 0xFFFFFFFFULL, 0xFFFFFFFFFFULL, 0xFFFFFFFFFFFFULL,
        0xFFFFFFFFFFFFFFULL, ~0ULL, ~0ULL, ~0ULL, ~0ULL, ~0ULL, ~0ULL, ~0ULL, ~0ULL};
    static const uint64_t q4_pc_mask1[16] = {
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFFULL, 0xFFFFULL, 0xFFFFFFULL, 0xFFFFFFFFULL, 0xFFFFFFFFFFULL,
        0xFFFFFFFFFFFFULL, 0xFFFFFFFFFFFFFFULL};
    """
    const uint64_t *q4_pc_mask0
    const uint64_t *q4_pc_mask1


cdef inline void pack_key(const uint8_t *p, Py_ssize_t n, const uint8_t *end, uint64_t *k0,
                          uint64_t *k1) noexcept nogil:
    """The key of piece p[0:n], 1 <= n <= KEY_INLINE; bytes up to `end` may be
    read (16 at once when there are that many, without a call). Masks from a
    table, not a branch on the length: lengths mix unpredictably."""
    cdef uint8_t buf[16]
    cdef uint64_t a, b
    if end - p >= 16:
        a = q4_pc_load8(p)
        b = q4_pc_load8(p + 8)
    else:
        memset(buf, 0, 16)
        memcpy(buf, p, <size_t> n)
        a = q4_pc_load8(buf)
        b = q4_pc_load8(buf + 8)
    k0[0] = a & q4_pc_mask0[n]
    k1[0] = (b & q4_pc_mask1[n]) | (<uint64_t> n << 56)


cdef inline uint64_t key_hash(uint64_t k0, uint64_t k1) noexcept nogil:
    cdef uint64_t h = k0 * 0x9E3779B97F4A7C15ULL + k1 * 0xC2B2AE3D27D4EB4FULL
    return h ^ (h >> 29)


cdef inline ShortSlot *short_home(const PieceCache *c, uint64_t h) noexcept nogil:
    """The first slot a key of hash h may be in: the first of its cache line, so
    that one prefetched line holds the two slots probed first."""
    return &c.short_slots[h & c.short_mask & ~(<uint64_t> 1)]


cdef inline ShortSlot *short_probe(const PieceCache *c, ShortSlot *s, uint64_t k0, uint64_t k1) noexcept nogil:
    """From s (its short_home), the slot holding key (k0, k1), or the free slot
    where it would go."""
    while not ((s.k1 == k1 and s.k0 == k0) or s.k1 == 0):
        s = &c.short_slots[(s - c.short_slots + 1) & c.short_mask]
    return s


cdef inline ShortSlot *shared_probe(const PieceCache *c, ShortSlot *s, uint64_t k0, uint64_t k1,
                                    bint *hit) noexcept nogil:
    """short_probe in the seed, which other threads may be adding to: each
    slot's k1 is read first, with acquire order, so a slot found is whole.
    *hit says which of the two the returned slot is, from that one read: the
    caller must not look at k1 again, since another thread may claim a free
    slot at any moment (and fill it with another key, or not yet at all)."""
    cdef uint64_t seen
    while True:
        seen = q4_pc_load_acquire(&s.k1)
        if seen == 0:
            hit[0] = False
            return s
        if seen == k1 and s.k0 == k0:
            hit[0] = True
            return s
        s = &c.short_slots[(s - c.short_slots + 1) & c.short_mask]


cdef inline ShortSlot *short_find(const PieceCache *c, uint64_t k0, uint64_t k1, uint64_t h) noexcept nogil:
    """The slot holding key (k0, k1) of hash h, or the free slot where it would go."""
    return short_probe(c, short_home(c, h), k0, k1)


cdef inline uint64_t hash_bytes(const uint8_t *p, Py_ssize_t n) noexcept nogil:
    """Hash of p[0:n], n >= 1, never 0 (the long table's key; _bpe's token
    index uses it too). Pieces are short: no call, no byte loop."""
    cdef uint64_t h = <uint64_t> n * 0x9E3779B97F4A7C15ULL
    cdef Py_ssize_t i = 0
    if n <= 8:
        h = (h ^ q4_pc_word_of(p, n)) * 0xBF58476D1CE4E5B9ULL
    else:
        while i + 8 < n:
            h = (h ^ q4_pc_load8(p + i)) * 0xBF58476D1CE4E5B9ULL
            h ^= h >> 31
            i += 8
        h = (h ^ q4_pc_load8(p + n - 8)) * 0x94D049BB133111EBULL  # the last 8, overlapping
    h ^= h >> 29
    h *= 0x9E3779B97F4A7C15ULL
    h ^= h >> 32
    return h | 1


cdef inline LongSlot *long_find(const PieceCache *c, const uint8_t *p, Py_ssize_t n, uint64_t h) noexcept nogil:
    """The slot holding piece p[0:n] (hash h), or the free slot where it would go."""
    cdef uint64_t i = h & c.long_mask
    cdef LongSlot *s
    while True:
        s = &c.long_slots[i]
        if s.hash == 0 or (s.hash == h and s.klen == n and memcmp(c.pool + s.offset, p, <size_t> n) == 0):
            return s
        i = (i + 1) & c.long_mask


cdef inline void prefetch_home(const PieceCache *c, const uint8_t *p, Py_ssize_t n) noexcept nogil:
    """Start loading the first slot piece p[0:n] would probe (for a store soon)."""
    cdef uint64_t k0, k1
    if 2 <= n <= KEY_INLINE:
        pack_key(p, n, p + n, &k0, &k1)
        q4_pc_prefetch(short_home(c, key_hash(k0, k1)))
    elif KEY_INLINE < n <= LONG_KEY_MAX:
        q4_pc_prefetch(&c.long_slots[hash_bytes(p, n) & c.long_mask])


cdef inline const int32_t *long_ids(const PieceCache *c, const LongSlot *s) noexcept nogil:
    return <const int32_t *> (c.pool + s.offset + ((s.klen + 3) & ~3))
