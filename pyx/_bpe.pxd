# Byte-level BPE with merge ranks: merges keyed (left id, right id) -> (rank, new id),
# an array method for short pieces and linked-list methods for long ones (rank
# buckets, O(n); else a heap); optionally HF's ignore_merges (a whole-piece
# vocabulary lookup first). A worker owns its scratch space and its piece
# cache (pyx/_piece_cache.pxd), which the encode loop probes itself.
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from qwen4exp._native._piece_cache cimport PieceCache
from qwen4exp._native._char_starts cimport CharStarts

cdef enum:
    SHORT_PIECE = 96        # below this length the array method beats the heap (< 2**POS_BITS)
    POS_BITS = 7            # merge_short packs rank << POS_BITS | position in one int32
    BUCKET_PIECE = 1024     # from this length, rank buckets replace the heap
    SCRATCH_KEEP = 65536    # scratch grown past this for one piece is released after it
    RANK_AHEAD = 16         # merge_bucketed's first pass requests a pair's rank this many pairs ahead


cdef enum:
    ID_BITS = 20            # ids and ranks must be < 2**20 (Qwen: 151,669 ids)
    GRID_BITS = 9           # pairs of ids below 2**GRID_BITS are ranked by a dense grid (1 MiB)
    FILTER_BITS = 21        # the merge table's filter: 2**FILTER_BITS bits (256 KiB)


cdef struct BpeModel:
    # Open-addressing table of 8-byte slots, (left << 40 | right << 20 | rank),
    # all ones when free: small enough to stay in cache where 16-byte slots
    # would not. The new id of a merge is merge_new[rank], or rank + id_base
    # when the vocabulary numbers merged tokens in rank order (Qwen does).
    uint64_t *slots
    uint64_t mask           # number of slots - 1 (power of two)
    int32_t *grid           # rank of (a, b) at a << GRID_BITS | b for a, b < 2**GRID_BITS; INT32_MAX: none
    uint64_t *filter        # one bit per hash of a pair (filter_bit), set for every merge's pair:
                            # a clear bit says "no merge" from a table that stays in L2
    int shift               # 64 - log2(number of slots)
    int32_t *merge_new      # rank -> id of the merged token
    int32_t id_base         # merge_new[r] == r + id_base for every r, or -1
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
    # Multibyte characters that start merging as one token (pyx/_char_starts.pxd);
    # table NULL when off.
    CharStarts starts


cdef union MergeQueue:
    # One buffer, read by whichever long-piece method runs.
    uint64_t *heap          # merge_long: (rank << 32 | position) entries of a 4-ary heap
    uint64_t *buckets       # merge_bucketed: (position << 32 | next entry of its rank) entries


cdef struct Worker:
    # Everything one thread mutates while encoding: its cache and scratch space.
    const PieceCache *seed  # the tokenizer's seed, shared (NULL: no caching); workers add only through publish_short
    PieceCache cache        # what this worker learned; all NULL when the tokenizer caches nothing
    int32_t short_rank[SHORT_PIECE]  # array method: each pair's rank << POS_BITS | position
    int32_t top_rank        # array method: the highest rank it merged (char starts' init)
    int32_t *sym            # symbol ids of the piece being merged
    int32_t *prev           # linked methods: previous live symbol, -1 at the start
    int32_t *nxt            # linked methods: next live symbol, -1 at the end
    MergeQueue queue        # holds 3x scratch_cap entries
    Py_ssize_t scratch_cap  # capacity of sym/prev/nxt
    int32_t *bucket_head    # rank -> first entry, -1 when empty (allocated on first use)
    uint64_t *bucket_bits   # one bit per non-empty bucket


cdef int bpe_model_init(BpeModel *m, const int32_t *merges, Py_ssize_t n_merges,
                        const int32_t *byte_ids) noexcept nogil
cdef int bpe_model_ignore_merges(BpeModel *m, const uint8_t *tok_bytes, const int64_t *tok_offsets,
                                 Py_ssize_t n_vocab) noexcept nogil
cdef int bpe_model_char_starts(BpeModel *m, const int32_t *merges, const uint8_t *tok_bytes,
                              const int64_t *tok_offsets, Py_ssize_t n_vocab) noexcept nogil
cdef void bpe_model_free(BpeModel *m) noexcept nogil
cdef int worker_init(Worker *w, const PieceCache *seed, Py_ssize_t learn) noexcept nogil
cdef void worker_flush(Worker *w) noexcept nogil
cdef void worker_free(Worker *w) noexcept nogil
cdef Py_ssize_t bpe_merge(const BpeModel *m, Worker *w, const uint8_t *p, Py_ssize_t n,
                          int32_t *dst) noexcept nogil
cdef Py_ssize_t bpe_merge_unknown(const BpeModel *m, Worker *w, const uint8_t *p, Py_ssize_t n,
                                  int32_t *dst) noexcept nogil
