# cython: language_level=3
"""Building the tokenizer's seed (declarations in _seed.pxd)."""
from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.string cimport memset

from qwen4exp._native._alloc cimport q4_malloc, q4_free
from qwen4exp._native._idvec cimport IdVec, idvec_free, idvec_reserve
from qwen4exp._native._bpe cimport BpeModel, Worker, worker_init, worker_free, bpe_merge
from qwen4exp._native._piece_cache cimport (PieceCache, KEY_INLINE, IDS_INLINE, LONG_KEY_MAX, LONG_IDS_MAX, cache_init,
                                    cache_store, prefetch_home)
from qwen4exp._native._geometry cimport utf8_invalid_at
from qwen4exp._native._normalize cimport utf8_is_nfc
from qwen4exp._native._pretokenize cimport piece_end


cdef inline bint is_ascii(const uint8_t *p, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    cdef uint8_t acc = 0
    for i in range(n):
        acc |= p[i]
    return acc < 0x80


cdef int build_seed(PieceCache *seed, const BpeModel *m, const uint8_t *token_bytes,
                    const int64_t *token_offsets, Py_ssize_t n_vocab, unsigned char letters,
                    const uint8_t *flags) noexcept nogil:
    """Fill seed (zeroed): every token spelling that is one whole piece (valid
    UTF-8, NFC, pre-tokenized as itself under the pattern's `letters`,
    2..LONG_KEY_MAX bytes) valued with what merging it gives; built once,
    then read by every worker and added to by them (publish_short, up to
    seed.publish_room pieces). A first word is then found by lookup when it
    is a token, as most are. flags (NULL: none): the tokens known to merge
    back into themselves, taken without merging. 0, or -1 if allocation
    fails."""
    cdef Worker tmp
    cdef IdVec ids
    cdef int64_t *ends = <int64_t *> q4_malloc(<size_t> (n_vocab + 1) * sizeof(int64_t))
    cdef int32_t *cand = <int32_t *> q4_malloc(<size_t> (n_vocab + 1) * sizeof(int32_t))
    cdef int rc = -1
    memset(&ids, 0, sizeof(IdVec))
    if cand != NULL and ends != NULL and worker_init(&tmp, NULL, 0) == 0:
        rc = fill_seed(seed, m, token_bytes, token_offsets, n_vocab, letters, flags, &tmp, &ids, cand, ends)
        worker_free(&tmp)
    idvec_free(&ids)
    q4_free(cand)
    q4_free(ends)
    return rc


cdef int fill_seed(PieceCache *seed, const BpeModel *m, const uint8_t *token_bytes,
                   const int64_t *token_offsets, Py_ssize_t n_vocab, unsigned char letters,
                   const uint8_t *flags, Worker *tmp, IdVec *ids, int32_t *cand, int64_t *ends) noexcept nogil:
    """build_seed's work: merge the candidates into ids (cand: their token
    ids, ends: where each one's ids end), then size and fill the seed."""
    cdef Py_ssize_t t, n, k, count = 0, n_short = 0, n_long = 0, spill = 0, pool = 0
    cdef const uint8_t *p
    for t in range(n_vocab):
        p = token_bytes + token_offsets[t]
        n = token_offsets[t + 1] - token_offsets[t]
        if n < 2 or n > LONG_KEY_MAX:
            continue
        if not is_ascii(p, n) and (utf8_invalid_at(p, n) >= 0 or not utf8_is_nfc(p, n)):
            continue  # (ASCII is valid UTF-8 and NFC)
        if piece_end(p, n, 0, letters) != n:
            continue
        if idvec_reserve(ids, n) < 0:
            return -1
        if flags != NULL and flags[t]:
            ids.data[ids.len] = <int32_t> t
            k = 1
        else:
            k = bpe_merge(m, tmp, p, n, ids.data + ids.len)
            if k < 0:
                return -1
        ids.len += k
        cand[count] = <int32_t> t
        ends[count] = ids.len
        count += 1
        if n <= KEY_INLINE:
            n_short += 1
            spill += k if k > IDS_INLINE else 0
        elif k <= LONG_IDS_MAX:
            n_long += 1
            pool += ((n + 3) & ~3) + 4 * k
    # Sized at twice its entries (load <= 1/3 short, 1/4 long): every
    # piece a worker's own cache lacks is looked for in the seed, and a
    # sparse table tells a piece it lacks in about one probe, within the
    # line requested. Workers add the short pieces they merge until it is
    # half full (publish_short), with spill room for 4 ids each.
    if cache_init(seed, 2 * n_short + 1, 2 * n_long + 1, spill + 2 * n_short + 64, pool) < 0:
        return -1
    for k in range(count):
        if k + SEED_AHEAD < count:  # the stores land at random in a large table
            t = cand[k + SEED_AHEAD]
            prefetch_home(seed, token_bytes + token_offsets[t], token_offsets[t + 1] - token_offsets[t])
        t = cand[k]
        p = token_bytes + token_offsets[t]
        n = token_offsets[t + 1] - token_offsets[t]
        cache_store(seed, p, n, ids.data + (ends[k - 1] if k else 0), ends[k] - (ends[k - 1] if k else 0))
    seed.publish_room = max(0, <Py_ssize_t> (seed.short_mask + 1) // 2 - seed.short_count)
    return 0
