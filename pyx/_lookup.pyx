# cython: language_level=3
"""The encode loop's slow path and its fixed homes (declarations and the
inline look-ups in _lookup.pxd)."""
from libc.stdint cimport int32_t, uint8_t, uint64_t
from libc.string cimport memcpy, memset

from qwen4exp._native._idvec cimport copy_ids
from qwen4exp._native._bpe cimport BpeModel, Worker, bpe_merge_unknown
from qwen4exp._native._piece_cache cimport (PieceCache, ShortSlot, LongSlot, KEY_INLINE, LONG_KEY_MAX, store_short,
                                    store_long, short_home, short_probe, shared_probe, publish_short, long_find,
                                    long_ids)


cdef void fill_fixed_homes(ShortSlot *fixed, const int32_t *byte_ids) noexcept nogil:
    """The homes no table holds: each byte's line (its slot, answering the
    one-byte piece, then a slot no key matches), then the no-look-up line."""
    cdef Py_ssize_t b
    memset(fixed, 0, FIXED_SLOTS * sizeof(ShortSlot))
    for b in range(256):
        fixed[2 * b].k0 = <uint64_t> b
        fixed[2 * b].k1 = 1ULL << 56  # a one-byte key: the length in the top byte
        fixed[2 * b].ids[0] = byte_ids[b]
        fixed[2 * b].n = 1
        fixed[2 * b + 1].k1 = ~(<uint64_t> 0)
    fixed[NO_LOOKUP].k1 = fixed[NO_LOOKUP + 1].k1 = ~(<uint64_t> 0)


cdef Py_ssize_t encode_slow(const BpeModel *m, Worker *w, const uint8_t *p, Py_ssize_t size, uint64_t k0,
                            uint64_t k1, uint64_t h, const void *home, int32_t *dst) noexcept nogil:
    """A piece whose home line did not answer it, keyed by hash_chunk: the
    rest of the worker's cache, then the shared seed, whose answer the
    worker then keeps; else it is merged (bpe_merge_unknown) and
    remembered in the worker's cache, and a short one is added to the seed too
    (publish_short), where the other workers (a text's other parts, a
    batch's other threads) find it instead of merging it again. Returns
    the number of ids written to dst, or -1 (no memory)."""
    cdef const PieceCache *sd = w.seed
    cdef PieceCache *c = &w.cache
    cdef const ShortSlot *slot = NULL
    cdef const LongSlot *ls
    cdef Py_ssize_t got
    cdef bint hit
    if size <= KEY_INLINE:
        slot = short_probe(c, <ShortSlot *> home, k0, k1)
        if slot.k1 != 0:
            return short_ids(c, slot, dst)
        slot = shared_probe(sd, short_home(sd, h), k0, k1, &hit)
        if hit:
            got = short_ids(sd, slot, dst)
            store_short(c, k0, k1, h, dst, got)
            return got
    elif size <= LONG_KEY_MAX:
        ls = long_find(c, p, size, k0)
        if ls.hash != 0:
            copy_ids(dst, long_ids(c, ls), ls.nids)
            return ls.nids
        ls = long_find(sd, p, size, k0)
        if ls.hash != 0:
            copy_ids(dst, long_ids(sd, ls), ls.nids)
            store_long(c, p, size, k0, dst, ls.nids)
            return ls.nids
    got = bpe_merge_unknown(m, w, p, size, dst)
    if got <= 0:
        return got
    if size <= KEY_INLINE:  # remembered under the key hash_chunk made; the other workers find it in the seed
        store_short(c, k0, k1, h, dst, got)
        publish_short(<PieceCache *> sd, <ShortSlot *> slot, k0, k1, dst, got)
    elif size <= LONG_KEY_MAX:
        store_long(c, p, size, k0, dst, got)  # k0: the long piece's hash
    return got
