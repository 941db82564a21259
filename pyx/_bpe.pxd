# Byte-level BPE with merge ranks: merges keyed (left id, right id) -> (rank, new id),
# a bounded per-worker cache of piece bytes -> ids, and a heap for long pieces;
# optionally HF's ignore_merges (a whole-piece vocabulary lookup first).
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from qwen4exp._idvec cimport IdVec

cdef enum:
    CACHE_KEY_MAX = 30      # pieces longer than this are not cached
    CACHE_IDS_MAX = 8       # nor pieces that need more ids than this
    SHORT_PIECE = 96        # below this length the array method beats the heap
    BUCKET_PIECE = 1024     # from this length, rank buckets replace the heap
    SCRATCH_KEEP = 65536    # scratch grown past this for one piece is released after it
    PAIR_BITS = 12          # the per-worker pair-rank cache has 2**PAIR_BITS slots (32 KiB)


cdef enum:
    ID_BITS = 20            # ids and ranks must be < 2**20 (Qwen: 151,669 ids)


cdef struct BpeModel:
    # Open-addressing table of 8-byte slots, (left << 40 | right << 20 | rank),
    # all ones when free: small enough to stay in cache where 16-byte slots
    # would not. The new id of a merge is merge_new[rank].
    uint64_t *slots
    uint64_t mask           # number of slots - 1 (power of two)
    int shift               # 64 - log2(number of slots)
    int32_t *merge_new      # rank -> id of the merged token
    Py_ssize_t n_merges
    bint monotone           # every merge's parts were made by lower ranks (see merge_bucketed)
    int32_t byte_ids[256]   # id of each single-byte token
    # ignore_merges (HF): a piece that is itself a token is that one token.
    # Open addressing over token ids by their bytes; NULL when the flag is off.
    int32_t *whole
    uint64_t whole_mask
    Py_ssize_t whole_max    # longest token, in bytes
    const uint8_t *tok_bytes    # the token spellings (owned by the caller)
    const int64_t *tok_offsets


cdef struct CacheSlot:
    uint64_t hash           # 0: empty
    uint8_t klen
    uint8_t nids
    uint8_t key[CACHE_KEY_MAX]
    int32_t ids[CACHE_IDS_MAX]


cdef struct Worker:
    # Everything one thread mutates while encoding: its cache and scratch space.
    CacheSlot *cache
    uint64_t cache_mask
    int32_t *sym            # symbol ids of the piece being merged
    int32_t *aux            # ranks (array method) / prev links (heap method)
    int32_t *nxt            # next links (heap method)
    uint64_t *heap          # heap: (rank << 32 | position); buckets: (position << 32 | link)
    Py_ssize_t scratch_cap  # capacity of sym/aux/nxt (heap holds 3x)
    int32_t *bucket_head    # rank -> first entry, -1 when empty (allocated on first use)
    uint64_t *bucket_bits   # one bit per non-empty bucket
    uint64_t *pairs         # small direct-mapped cache of merge-table lookups (L1-sized)


cdef int bpe_model_init(BpeModel *m, const int32_t *merges, Py_ssize_t n_merges,
                        const int32_t *byte_ids) noexcept nogil
cdef int bpe_model_ignore_merges(BpeModel *m, const uint8_t *tok_bytes, const int64_t *tok_offsets,
                                 Py_ssize_t n_vocab) noexcept nogil
cdef void bpe_model_free(BpeModel *m) noexcept nogil
cdef int worker_init(Worker *w, Py_ssize_t cache_slots) noexcept nogil
cdef void worker_flush(Worker *w) noexcept nogil
cdef void worker_free(Worker *w) noexcept nogil
cdef int bpe_encode_piece(const BpeModel *m, Worker *w, const uint8_t *p, Py_ssize_t n,
                          IdVec *out) noexcept nogil
