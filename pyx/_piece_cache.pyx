# cython: language_level=3
"""Piece caches (declarations and the inline probes in _piece_cache.pxd):
allocation, emptying, and storing a merged piece.

A worker's cache that fills up grows first: it is marked, keeps taking pieces
up to a load of 3/4, and at the encode loop's next chunk (no slot found
ahead is held then) its tables double and its entries move over
(cache_grow), up to GROWTH times its first size; a long run over a large
corpus keeps its words instead of merging them again after every emptying,
and a short-lived tokenizer never pays for large tables. Full at that size
means emptied, not evicted: it costs one clear of a table, the shared seed
still answers every vocabulary spelling, and the probes carry no eviction
bookkeeping. Tables are allocated on 2 MiB boundaries when large so that
the kernel can back them with huge pages: their probes are random, and with
4 KiB pages most would also miss the TLB.
"""
from libc.stdint cimport int32_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy, memset
from qwen4exp._native._alloc cimport q4_malloc, q4_malloc_huge, q4_free, q4_free_huge, q4_drop_huge


cdef uint64_t table_size(Py_ssize_t entries, Py_ssize_t num, Py_ssize_t den, uint64_t least) noexcept nogil:
    """Smallest power of two >= least holding `entries` at a load of at most den/num."""
    cdef uint64_t size = least
    while size * <uint64_t> den < <uint64_t> entries * <uint64_t> num:
        size <<= 1
    return size


cdef int cache_init(PieceCache *c, Py_ssize_t short_limit, Py_ssize_t long_limit, Py_ssize_t spill_cap,
                    Py_ssize_t pool_cap) noexcept nogil:
    """An empty cache for short_limit short and long_limit long pieces; 0, or
    -1 if allocation fails (c is then empty and may be freed)."""
    cdef uint64_t n_short = table_size(short_limit, 3, 2, 64)   # load <= 2/3
    cdef uint64_t n_long = table_size(long_limit, 2, 1, 16)     # load <= 1/2
    memset(c, 0, sizeof(PieceCache))
    if short_limit > (1LL << 40) or long_limit > (1LL << 40) or pool_cap > 0xFFFFFFFFLL:
        return -1
    c.short_mask = n_short - 1  # set first: cache_free sizes the tables by them
    c.long_mask = n_long - 1
    c.short_slots = <ShortSlot *> q4_malloc_huge(n_short * sizeof(ShortSlot))
    c.long_slots = <LongSlot *> q4_malloc_huge(n_long * sizeof(LongSlot))
    c.spill = <int32_t *> q4_malloc(<size_t> spill_cap * sizeof(int32_t))
    c.pool = <uint8_t *> q4_malloc(<size_t> pool_cap)
    if c.short_slots == NULL or c.long_slots == NULL or c.spill == NULL or c.pool == NULL:
        cache_free(c)
        return -1
    c.short_limit = short_limit
    c.long_limit = long_limit
    c.spill_cap = spill_cap
    c.pool_cap = pool_cap
    return 0  # the tables come zeroed (free slots), untouched until used


cdef int cache_init_learning(PieceCache *c, Py_ssize_t words) noexcept nogil:
    """An empty cache that learns up to `words` short pieces (and half as
    many long ones), then grows up to GROWTH times that, before it is emptied."""
    cdef Py_ssize_t longs = words // LONG_SHARE + 1
    cdef int rc = cache_init(c, words, longs, SPILL_PER_WORD * words, POOL_PER_LONG * longs)
    if rc == 0:
        c.grow_limit = GROWTH * words
    return rc


cdef void cache_grow(PieceCache *c) noexcept nogil:
    """Double the tables of a cache marked want_grow and move its entries
    over (the spill and pool are copied as they are, so ids and keys keep
    their offsets); resets counts it, since every slot moves. When the
    bigger tables cannot be had, the cache is emptied and grows no more."""
    cdef PieceCache n
    cdef uint64_t i
    cdef ShortSlot *s
    cdef LongSlot *l
    cdef LongSlot *t
    c.want_grow = False
    if cache_init(&n, min(2 * c.short_limit, c.grow_limit), 2 * c.long_limit, 2 * c.spill_cap,
                  2 * c.pool_cap) < 0:
        c.grow_limit = 0
        cache_reset(c)
        return
    for i in range(c.short_mask + 1):
        s = &c.short_slots[i]
        if s.k1 != 0:
            memcpy(short_find(&n, s.k0, s.k1, key_hash(s.k0, s.k1)), s, sizeof(ShortSlot))
    for i in range(c.long_mask + 1):
        l = &c.long_slots[i]
        if l.hash != 0:
            t = &n.long_slots[l.hash & n.long_mask]
            while t.hash != 0:
                t = &n.long_slots[(t - n.long_slots + 1) & n.long_mask]
            t[0] = l[0]
    memcpy(n.spill, c.spill, <size_t> c.spill_len * sizeof(int32_t))
    memcpy(n.pool, c.pool, <size_t> c.pool_len)
    n.spill_len, n.pool_len = c.spill_len, c.pool_len
    n.short_count, n.long_count = c.short_count, c.long_count
    n.grow_limit = c.grow_limit if n.short_limit < c.grow_limit else 0
    n.resets = c.resets + 1
    q4_drop_huge(c.short_slots, <size_t> (c.short_mask + 1) * sizeof(ShortSlot))  # outgrown: not kept as spares
    q4_drop_huge(c.long_slots, <size_t> (c.long_mask + 1) * sizeof(LongSlot))
    c.short_slots = NULL
    c.long_slots = NULL
    cache_free(c)
    c[0] = n


cdef void cache_reset(PieceCache *c) noexcept nogil:
    reset_short(c)
    reset_long(c)


cdef void reset_short(PieceCache *c) noexcept nogil:
    """Empty the short table (and its spill): each table is emptied on its
    own when it fills, so a run of long words keeps the short ones."""
    memset(c.short_slots, 0, <size_t> (c.short_mask + 1) * sizeof(ShortSlot))
    c.short_count = c.spill_len = 0
    c.resets += 1


cdef void reset_long(PieceCache *c) noexcept nogil:
    memset(c.long_slots, 0, <size_t> (c.long_mask + 1) * sizeof(LongSlot))
    c.long_count = c.pool_len = 0


cdef void cache_free(PieceCache *c) noexcept nogil:
    q4_free_huge(c.short_slots, <size_t> (c.short_mask + 1) * sizeof(ShortSlot))
    q4_free_huge(c.long_slots, <size_t> (c.long_mask + 1) * sizeof(LongSlot))
    q4_free(c.spill)
    q4_free(c.pool)
    memset(c, 0, sizeof(PieceCache))


cdef enum:
    ROOM = 0                # store the piece
    NO_ROOM = 1             # skip it: the cache grows at the next chunk
    EMPTY_FIRST = 2         # empty the table, then store it


cdef inline int room_for(PieceCache *c, Py_ssize_t count, Py_ssize_t limit, uint64_t mask,
                         bint out_of_space) noexcept nogil:
    """What a store does with one of the tables (count entries of at most
    limit, mask + 1 slots; out_of_space: its spill or pool cannot take the
    ids): the same rule for both. A cache that may still grow is marked to
    grow at the next chunk and meanwhile stores while the table is under 3/4
    full and there is space; one that may not is emptied."""
    if count < limit and not out_of_space:
        return ROOM
    if c.grow_limit > c.short_limit:
        c.want_grow = True
        return NO_ROOM if count * 4 >= <Py_ssize_t> (mask + 1) * 3 or out_of_space else ROOM
    return EMPTY_FIRST


cdef void store_short(PieceCache *c, uint64_t k0, uint64_t k1, uint64_t h, const int32_t *ids,
                      Py_ssize_t k) noexcept nogil:
    """cache_store for a short piece already keyed (k0, k1) and hashed (h)."""
    cdef ShortSlot *s
    cdef Py_ssize_t need = k if k > IDS_INLINE else 0
    cdef int room
    if need > c.spill_cap:
        return
    s = short_find(c, k0, k1, h)
    if s.k1 != 0:
        return
    room = room_for(c, c.short_count, c.short_limit, c.short_mask, c.spill_len + need > c.spill_cap)
    if room == NO_ROOM:
        return
    if room == EMPTY_FIRST:
        reset_short(c)
        s = short_find(c, k0, k1, h)
        if s.k1 != 0:
            return
    s.k0 = k0
    s.k1 = k1
    s.n = <int32_t> k
    if need:
        s.ids[0] = <int32_t> c.spill_len
        memcpy(c.spill + c.spill_len, ids, <size_t> k * sizeof(int32_t))
        c.spill_len += k
    else:
        memcpy(s.ids, ids, <size_t> k * sizeof(int32_t))
    c.short_count += 1


cdef void publish_short(PieceCache *sd, ShortSlot *s, uint64_t k0, uint64_t k1, const int32_t *ids,
                        Py_ssize_t k) noexcept nogil:
    """Add a short piece a worker merged to the shared seed, so that the other
    workers find it there instead of merging it again. s: the free slot where
    the worker's probe (shared_probe) stopped; the piece goes there or to the
    next free slot, unless another thread added it meanwhile. Bounded by
    publish_room (the seed stays at most half full) and by the spill's room;
    the seed is never emptied, so what it holds stays valid for every reader.
    Any thread may call it; slots are claimed with an atomic exchange."""
    cdef Py_ssize_t at = 0
    cdef uint64_t seen
    if k < 1 or q4_pc_load_room(&sd.publish_room) <= 0:
        return
    if q4_pc_fetch_add(&sd.publish_room, -1) <= 0:
        return
    if k > IDS_INLINE:
        at = q4_pc_fetch_add(&sd.spill_len, k)
        if at + k > sd.spill_cap:
            return
        memcpy(sd.spill + at, ids, <size_t> k * sizeof(int32_t))
    while True:
        seen = q4_pc_load_acquire(&s.k1)
        if seen == 0 and q4_pc_claim(&s.k1):
            break
        if seen == k1 and s.k0 == k0:
            return  # added by another thread meanwhile
        if seen != 0:
            s = &sd.short_slots[(s - sd.short_slots + 1) & sd.short_mask]
    s.k0 = k0
    s.n = <int32_t> k
    if k > IDS_INLINE:
        s.ids[0] = <int32_t> at
    else:
        memcpy(s.ids, ids, <size_t> k * sizeof(int32_t))
    q4_pc_store_release(&s.k1, k1)


cdef void cache_store(PieceCache *c, const uint8_t *p, Py_ssize_t n, const int32_t *ids,
                      Py_ssize_t k) noexcept nogil:
    """Remember that piece p[0:n] (2 <= n) is ids[0:k]. When the cache is full,
    empty it first; a piece that would not fit even then is not stored."""
    cdef uint64_t k0, k1
    if n <= KEY_INLINE:
        pack_key(p, n, p + n, &k0, &k1)
        store_short(c, k0, k1, key_hash(k0, k1), ids, k)
    elif n <= LONG_KEY_MAX:
        store_long(c, p, n, hash_bytes(p, n), ids, k)


cdef void store_long(PieceCache *c, const uint8_t *p, Py_ssize_t n, uint64_t h, const int32_t *ids,
                     Py_ssize_t k) noexcept nogil:
    """cache_store for a long piece (KEY_INLINE < n <= LONG_KEY_MAX) already
    hashed (h = hash_bytes(p, n))."""
    cdef LongSlot *l
    cdef Py_ssize_t room, need
    cdef int space
    if k > LONG_IDS_MAX:
        return
    room = (n + 3) & ~(<Py_ssize_t> 3)
    need = room + k * <Py_ssize_t> sizeof(int32_t)
    if need > c.pool_cap:
        return
    l = long_find(c, p, n, h)
    if l.hash != 0:
        return
    space = room_for(c, c.long_count, c.long_limit, c.long_mask, c.pool_len + need > c.pool_cap)
    if space == NO_ROOM:
        return
    if space == EMPTY_FIRST:
        reset_long(c)
        l = long_find(c, p, n, h)
        if l.hash != 0:
            return
    l.hash = h
    l.offset = <uint32_t> c.pool_len
    l.klen = <uint16_t> n
    l.nids = <uint16_t> k
    memcpy(c.pool + c.pool_len, p, <size_t> n)
    memcpy(c.pool + c.pool_len + room, ids, <size_t> k * sizeof(int32_t))
    c.pool_len += need
    c.long_count += 1
