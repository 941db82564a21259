# cython: language_level=3
"""Byte-level BPE over merge ranks (HF `tokenizers` semantics).

With ignore_merges (as TikTokenConverter's tokenizer.json files set it) a
piece whose bytes are a token is that token, whatever the merges would make;
only other pieces are merged.

At every step the adjacent pair with the lowest merge rank is merged, the
leftmost one among equals. Short pieces use an array of pair ranks (cheap,
cache friendly); long pieces use a linked list with lazily invalidated
entries, queued in rank buckets scanned once forward (O(n), for merge tables
whose ranks only grow within a word, as Qwen's do) or else in a 4-ary
min-heap of (rank, position) (O(n log n)). So one 200,000-byte word stays
linear.

Merging starts from one symbol per byte, except that a multibyte character
starts as its own token where that provably changes nothing (char starts,
pyx/_char_starts.pyx): fewer symbols, fewer merges and rank lookups.

The encode loop (pyx/_encoder.pyx) answers most pieces from the worker's
piece cache (pyx/_piece_cache.pxd) and merges the others with
bpe_merge_unknown (pyx/_lookup.pyx, encode_slow).
"""
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t, INT32_MAX
from libc.string cimport memcpy, memcmp, memmove, memset
from cpython.pyport cimport PY_SSIZE_T_MAX
from qwen4exp._native._alloc cimport q4_malloc, q4_malloc_huge, q4_free_huge, q4_realloc, q4_free, doubled_capacity
from qwen4exp._native._piece_cache cimport (PieceCache, LONG_KEY_MAX, cache_init_learning, cache_reset, cache_free,
                                    hash_bytes)
from qwen4exp._native._char_starts cimport CharStarts, char_starts_init, char_starts_free, first_symbols
from qwen4exp._native._faults cimport RC_NO_MEMORY, RC_TOO_LARGE
from qwen4exp._native._idvec cimport copy_ids

cdef uint64_t EMPTY_SLOT = 0xFFFFFFFFFFFFFFFFULL
cdef uint64_t GOLDEN = 0x9E3779B97F4A7C15ULL
cdef uint64_t FIELD = (1ULL << ID_BITS) - 1


cdef inline uint64_t pair_key(int32_t a, int32_t b) noexcept nogil:
    return (<uint64_t> a << ID_BITS) | <uint64_t> b


cdef inline uint64_t filter_bit(uint64_t key) noexcept nogil:
    """The filter's bit for a pair key (a hash unrelated to the table's)."""
    return (key * 0xC2B2AE3D27D4EB4FULL) >> (64 - FILTER_BITS)


cdef inline int32_t merge_rank(const BpeModel *m, int32_t a, int32_t b) noexcept nogil:
    """Rank of merging (a, b), INT32_MAX if there is no such merge. Pairs of
    low ids (the bytes and the first merges, which most words begin with) are
    one load from the dense grid, rows sharing cache lines; others ask the
    filter, whose clear bit answers most pairs that do not merge (about half
    of the look-ups in prose) without the table, then probe the hash table."""
    cdef uint64_t key, i, slot, bit
    if <uint32_t> (a | b) < (1U << GRID_BITS):
        return m.grid[(a << GRID_BITS) | b]
    key = pair_key(a, b)
    bit = filter_bit(key)
    if not (m.filter[bit >> 6] >> (bit & 63)) & 1:
        return INT32_MAX
    i = (key * GOLDEN) >> m.shift
    while True:
        slot = m.slots[i]
        if (slot >> ID_BITS) == key:
            return <int32_t> (slot & FIELD)
        if slot == EMPTY_SLOT:
            return INT32_MAX
        i = (i + 1) & m.mask


cdef inline void prefetch_rank(const BpeModel *m, int32_t a, int32_t b) noexcept nogil:
    """Start loading what merge_rank(m, a, b) will read first."""
    if <uint32_t> (a | b) < (1U << GRID_BITS):
        q4_prefetch(&m.grid[(a << GRID_BITS) | b])
    else:
        q4_prefetch(&m.filter[filter_bit(pair_key(a, b)) >> 6])
        q4_prefetch(&m.slots[(pair_key(a, b) * GOLDEN) >> m.shift])


cdef inline int32_t merged_id(const BpeModel *m, int32_t r) noexcept nogil:
    """Id of the token merge rank r makes."""
    if m.id_base >= 0:
        return r + m.id_base
    return m.merge_new[r]


cdef int bpe_model_init(BpeModel *m, const int32_t *merges, Py_ssize_t n_merges,
                        const int32_t *byte_ids) noexcept nogil:
    """Build the merge table: RC_OK, RC_NO_MEMORY, or RC_TOO_LARGE when an id or
    the number of merges does not fit ID_BITS (m is then empty)."""
    cdef uint64_t size = 1024
    cdef int bits = 10
    cdef Py_ssize_t r
    cdef uint64_t key, i, bit
    memset(m, 0, sizeof(BpeModel))
    if n_merges >= <Py_ssize_t> FIELD:
        return RC_TOO_LARGE
    for r in range(3 * n_merges):
        if merges[r] < 0 or merges[r] >= <int32_t> FIELD:
            return RC_TOO_LARGE
    while size * 6 < <uint64_t> n_merges * 10:  # load factor <= 0.6
        size <<= 1
        bits += 1
    m.mask = size - 1  # set first: bpe_model_free sizes the table by it
    m.slots = <uint64_t *> q4_malloc_huge(size * sizeof(uint64_t))
    m.merge_new = <int32_t *> q4_malloc(<size_t> (n_merges + 1) * sizeof(int32_t))
    m.grid = <int32_t *> q4_malloc(<size_t> (1 << (2 * GRID_BITS)) * sizeof(int32_t))
    m.filter = <uint64_t *> q4_malloc_huge(<size_t> (1 << FILTER_BITS) // 8)
    if m.slots == NULL or m.merge_new == NULL or m.grid == NULL or m.filter == NULL:
        bpe_model_free(m)
        return RC_NO_MEMORY
    memset(m.slots, 0xFF, size * sizeof(uint64_t))
    for r in range(1 << (2 * GRID_BITS)):
        m.grid[r] = INT32_MAX
    m.mask = size - 1
    m.shift = 64 - bits
    memcpy(m.byte_ids, byte_ids, 256 * sizeof(int32_t))
    m.n_merges = n_merges
    m.monotone = merges_are_monotone(merges, n_merges)
    m.id_base = merges[2] if n_merges > 0 else -1
    for r in range(n_merges):
        m.merge_new[r] = merges[3 * r + 2]
        if m.merge_new[r] != r + m.id_base:
            m.id_base = -1
        key = pair_key(merges[3 * r], merges[3 * r + 1])
        i = (key * GOLDEN) >> m.shift
        while m.slots[i] != EMPTY_SLOT and (m.slots[i] >> ID_BITS) != key:
            i = (i + 1) & m.mask
        if m.slots[i] != EMPTY_SLOT:
            continue  # a repeated merge keeps its first (lowest) rank, as HF does
        m.slots[i] = (key << ID_BITS) | <uint64_t> r
        bit = filter_bit(key)
        m.filter[bit >> 6] |= 1ULL << (bit & 63)
        if <uint32_t> (merges[3 * r] | merges[3 * r + 1]) < (1U << GRID_BITS):
            m.grid[(merges[3 * r] << GRID_BITS) | merges[3 * r + 1]] = <int32_t> r
    return 0


cdef bint merges_are_monotone(const int32_t *merges, Py_ssize_t n_merges) noexcept nogil:
    """True if every merge combines tokens made only by lower-ranked merges.

    Then a merge of rank r only ever creates pairs of rank > r, so the ranks
    merged in one word never decrease and a forward scan over rank buckets
    visits them in the order the heap would (checked for Qwen: it holds).
    """
    cdef Py_ssize_t r, limit = 0
    cdef int32_t *made_at
    cdef bint ok = True
    for r in range(3 * n_merges):
        if merges[r] + 1 > limit:
            limit = merges[r] + 1
    made_at = <int32_t *> q4_malloc(<size_t> limit * sizeof(int32_t))
    if made_at == NULL:
        return False  # the heap method is always correct
    memset(made_at, 0xFF, <size_t> limit * sizeof(int32_t))
    for r in range(n_merges):
        made_at[merges[3 * r + 2]] = <int32_t> r  # the last (highest) rank that makes it
    for r in range(n_merges):
        if made_at[merges[3 * r]] >= r or made_at[merges[3 * r + 1]] >= r:
            ok = False
            break
    q4_free(made_at)
    return ok


cdef int bpe_model_ignore_merges(BpeModel *m, const uint8_t *tok_bytes, const int64_t *tok_offsets,
                                 Py_ssize_t n_vocab) noexcept nogil:
    """Turn on ignore_merges: index the n_vocab token spellings (kept by the
    caller for the model's lifetime) by their bytes. 0, or -1 if allocation fails."""
    cdef uint64_t size = 1024
    cdef uint64_t i
    cdef Py_ssize_t t, n
    while size < <uint64_t> n_vocab * 2:
        size <<= 1
    m.whole = <int32_t *> q4_malloc(size * sizeof(int32_t))
    if m.whole == NULL:
        return -1
    memset(m.whole, 0xFF, size * sizeof(int32_t))
    m.whole_mask = size - 1
    m.tok_bytes = tok_bytes
    m.tok_offsets = tok_offsets
    m.whole_max = 0
    for t in range(n_vocab):
        n = tok_offsets[t + 1] - tok_offsets[t]
        if n > m.whole_max:
            m.whole_max = n
        i = (hash_bytes(tok_bytes + tok_offsets[t], n) >> 1) & m.whole_mask  # bit 0 is always set
        while m.whole[i] >= 0:
            i = (i + 1) & m.whole_mask
        m.whole[i] = <int32_t> t
    return 0


cdef inline int32_t whole_token(const BpeModel *m, const uint8_t *p, Py_ssize_t n, uint64_t h) noexcept nogil:
    """Id of the token spelled by p[0:n] (h = hash_bytes(p, n)), or -1."""
    cdef uint64_t i = (h >> 1) & m.whole_mask
    cdef int32_t t
    while True:
        t = m.whole[i]
        if t < 0:
            return -1
        if (m.tok_offsets[t + 1] - m.tok_offsets[t] == n
                and memcmp(m.tok_bytes + m.tok_offsets[t], p, <size_t> n) == 0):
            return t
        i = (i + 1) & m.whole_mask


cdef struct MergeCtx:
    const BpeModel *m
    Worker *w


cdef Py_ssize_t merge_plain(void *ctx, const uint8_t *p, Py_ssize_t n, int32_t *dst,
                            int32_t *top) noexcept nogil:
    """Byte-level BPE of a short p[0:n] (< SHORT_PIECE), bypassing
    ignore_merges and char starts; top: the highest rank merged."""
    cdef MergeCtx *c = <MergeCtx *> ctx
    cdef Py_ssize_t j, k
    if n >= SHORT_PIECE or reserve_scratch(c.w, n) < 0:
        return -1
    for j in range(n):
        c.w.sym[j] = c.m.byte_ids[p[j]]
    k = merge_short(c.m, c.w, n)
    memcpy(dst, c.w.sym, <size_t> k * sizeof(int32_t))
    top[0] = c.w.top_rank
    return k


cdef int bpe_model_char_starts(BpeModel *m, const int32_t *merges, const uint8_t *tok_bytes,
                              const int64_t *tok_offsets, Py_ssize_t n_vocab) noexcept nogil:
    """Turn on char starts (pyx/_char_starts.pyx) for the n_vocab tokens (merges:
    as given to bpe_model_init). 0, or -1 if allocation fails."""
    cdef CharStarts built
    cdef Worker tmp
    cdef MergeCtx ctx
    cdef int32_t *first_use = first_uses(merges, m.n_merges, tok_bytes, tok_offsets, n_vocab)
    cdef int rc = -1
    if first_use == NULL:
        return -1
    if worker_init(&tmp, NULL, 0) == 0:
        ctx.m = m
        ctx.w = &tmp
        rc = char_starts_init(&built, tok_bytes, tok_offsets, n_vocab, first_use, merge_plain, &ctx)
        worker_free(&tmp)
    q4_free(first_use)
    if rc == 0:
        m.starts = built  # only now: merge_plain ran without them
    return rc


cdef int32_t *first_uses(const int32_t *merges, Py_ssize_t n_merges, const uint8_t *tok_bytes,
                         const int64_t *tok_offsets, Py_ssize_t n_vocab) noexcept nogil:
    """For each token that may spell one 2- or 3-byte character, the lowest
    rank of a merge with it as an operand (INT32_MAX if none; other tokens:
    INT32_MAX). A bitmap of those tokens keeps the pass over the merges from
    writing all over the array. NULL if allocation fails."""
    cdef int32_t *first_use = <int32_t *> q4_malloc(<size_t> (n_vocab + 1) * sizeof(int32_t))
    cdef uint64_t *wanted = <uint64_t *> q4_malloc(<size_t> ((n_vocab >> 6) + 1) * sizeof(uint64_t))
    cdef Py_ssize_t t, n, r, k
    cdef int32_t x
    if first_use == NULL or wanted == NULL:
        q4_free(first_use)
        q4_free(wanted)
        return NULL
    memset(wanted, 0, <size_t> ((n_vocab >> 6) + 1) * sizeof(uint64_t))
    for t in range(n_vocab):
        first_use[t] = INT32_MAX
        n = tok_offsets[t + 1] - tok_offsets[t]
        if (n == 2 or n == 3) and 0xC2 <= tok_bytes[tok_offsets[t]] < 0xF0:
            wanted[t >> 6] |= 1ULL << (t & 63)
    for r in range(n_merges):
        for k in range(2):
            x = merges[3 * r + k]
            if x < n_vocab and (wanted[x >> 6] >> (x & 63)) & 1 and first_use[x] == INT32_MAX:
                first_use[x] = <int32_t> r
    q4_free(wanted)
    return first_use


cdef void bpe_model_free(BpeModel *m) noexcept nogil:
    q4_free_huge(m.slots, <size_t> (m.mask + 1) * sizeof(uint64_t))
    q4_free(m.merge_new)
    q4_free(m.grid)
    q4_free_huge(m.filter, <size_t> (1 << FILTER_BITS) // 8)
    q4_free(m.whole)
    char_starts_free(&m.starts)
    m.slots = NULL
    m.merge_new = NULL
    m.grid = NULL
    m.filter = NULL
    m.whole = NULL


cdef int worker_init(Worker *w, const PieceCache *seed, Py_ssize_t learn) noexcept nogil:
    """A worker that reads the shared seed and learns up to `learn` words on
    its own (seed NULL: no caching)."""
    memset(w, 0, sizeof(Worker))
    if seed != NULL:
        if cache_init_learning(&w.cache, learn) < 0:
            worker_free(w)
            return -1
        w.seed = seed
    return 0


cdef void worker_flush(Worker *w) noexcept nogil:
    if w.cache.short_slots != NULL:
        cache_reset(&w.cache)


cdef void worker_free(Worker *w) noexcept nogil:
    cache_free(&w.cache)
    q4_free(w.bucket_head)
    q4_free(w.bucket_bits)
    release_scratch(w)
    memset(w, 0, sizeof(Worker))


cdef void release_scratch(Worker *w) noexcept nogil:
    q4_free(w.sym)
    q4_free(w.prev)
    q4_free(w.nxt)
    q4_free(w.queue.heap)
    w.sym = w.prev = w.nxt = NULL
    w.queue.heap = NULL
    w.scratch_cap = 0


cdef int reserve_scratch(Worker *w, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t cap
    cdef void *p
    if n <= w.scratch_cap:
        return 0
    cap = doubled_capacity(w.scratch_cap, n, 256)
    # Each buffer is swapped in as soon as it is grown, so a failure half-way
    # leaves every pointer valid (scratch_cap only moves once all succeeded).
    p = q4_realloc(w.sym, <size_t> cap * sizeof(int32_t))
    if p == NULL:
        return -1
    w.sym = <int32_t *> p
    p = q4_realloc(w.prev, <size_t> cap * sizeof(int32_t))
    if p == NULL:
        return -1
    w.prev = <int32_t *> p
    p = q4_realloc(w.nxt, <size_t> cap * sizeof(int32_t))
    if p == NULL:
        return -1
    w.nxt = <int32_t *> p
    p = q4_realloc(w.queue.heap, <size_t> cap * 3 * sizeof(uint64_t))
    if p == NULL:
        return -1
    w.queue.heap = <uint64_t *> p
    w.scratch_cap = cap
    return 0


cdef inline int32_t pair_entry(const BpeModel *m, const int32_t *sym, int32_t j, int32_t right) noexcept nogil:
    """merge_short's entry for the pair at j: rank << POS_BITS | j (so that the
    smallest entry is the lowest rank, leftmost among equals), or INT32_MAX."""
    cdef int32_t r = merge_rank(m, sym[j], sym[right])
    return INT32_MAX if r == INT32_MAX else (r << POS_BITS) | j


cdef Py_ssize_t merge_short(const BpeModel *m, Worker *w, Py_ssize_t k) noexcept nogil:
    """Array method for short pieces (k < SHORT_PIECE): merges w.sym[0:k] in
    place and returns the number of symbols left. Each live symbol's pair
    with its right neighbour has one entry, rank and position packed in one
    int, so one branch-free scan finds the next merge; symbols stay where
    they are, linked through small next/prev arrays, so a merge moves nothing
    and only the two pairs it touches are looked up again."""
    cdef int32_t *sym = w.sym
    cdef int32_t *entry = w.short_rank
    cdef uint8_t nxt[SHORT_PIECE]
    cdef uint8_t prv[SHORT_PIECE]
    cdef Py_ssize_t j, out
    cdef int32_t best, pos, right, left, r, top = -1
    if k < 2:
        return k
    for j in range(k - 1):  # independent loads: let them all be in flight at once
        prefetch_rank(m, sym[j], sym[j + 1])
    for j in range(k):
        nxt[j] = <uint8_t> (j + 1)
        prv[j] = <uint8_t> (j - 1) if j > 0 else 0xFF
    for j in range(k - 1):
        entry[j] = pair_entry(m, sym, <int32_t> j, <int32_t> (j + 1))
    for j in range(k - 1, max(k, 16)):
        entry[j] = INT32_MAX  # the last symbol has no pair; the fixed-size scan reads 16 entries
    while True:
        best = q4_min16_i32(entry) if k <= 16 else q4_min_i32(entry, k)
        if best == INT32_MAX:
            break
        pos = best & ((1 << POS_BITS) - 1)
        r = best >> POS_BITS
        top = r if r > top else top  # for the char starts' check (_char_starts)
        right = nxt[pos]
        sym[pos] = merged_id(m, r)
        entry[right] = INT32_MAX  # the right symbol is gone, and its pair with it
        nxt[pos] = nxt[right]
        if nxt[pos] < k:
            prv[nxt[pos]] = <uint8_t> pos
            entry[pos] = pair_entry(m, sym, pos, nxt[pos])
        else:
            entry[pos] = INT32_MAX
        left = prv[pos]
        if left != 0xFF:
            entry[left] = pair_entry(m, sym, left, pos)
    w.top_rank = top
    out = 0
    j = 0
    while j < k:
        sym[out] = sym[j]
        out += 1
        j = nxt[j]
    return out


# A 4-ary min-heap: half the depth of a binary heap and children that share a
# cache line, which matters once a long word's heap outgrows the caches.

cdef inline void heap_push(uint64_t *heap, Py_ssize_t *size, uint64_t v) noexcept nogil:
    cdef Py_ssize_t i = size[0]
    cdef Py_ssize_t parent
    size[0] = i + 1
    while i > 0:
        parent = (i - 1) >> 2
        if heap[parent] <= v:
            break
        heap[i] = heap[parent]
        i = parent
    heap[i] = v


cdef inline uint64_t heap_pop(uint64_t *heap, Py_ssize_t *size) noexcept nogil:
    cdef uint64_t top = heap[0]
    cdef Py_ssize_t n = size[0] - 1
    cdef uint64_t last = heap[n]
    cdef Py_ssize_t i = 0, child, best, c, stop
    size[0] = n
    while True:
        child = 4 * i + 1
        if child >= n:
            break
        best = child
        stop = child + 4 if child + 4 <= n else n
        for c in range(child + 1, stop):
            if heap[c] < heap[best]:
                best = c
        if heap[best] >= last:
            break
        heap[i] = heap[best]
        i = best
    heap[i] = last
    return top


cdef inline void link_symbols(Worker *w, Py_ssize_t k) noexcept nogil:
    """Doubly link w.sym[0:k] through w.prev and w.nxt."""
    cdef Py_ssize_t j
    for j in range(k):
        w.prev[j] = <int32_t> (j - 1)
        w.nxt[j] = <int32_t> (j + 1) if j + 1 < k else -1


cdef inline void join_pair(const BpeModel *m, Worker *w, int32_t pos, int32_t r, int32_t *left_rank,
                           int32_t *right_rank) noexcept nogil:
    """Merge the pair at pos (rank r) in the linked symbol list; give the ranks
    of the two pairs it creates (INT32_MAX where there is none)."""
    cdef int32_t *sym = w.sym
    cdef int32_t *prv = w.prev
    cdef int32_t *nxt = w.nxt
    cdef int32_t right = nxt[pos]
    cdef int32_t new_id = merged_id(m, r)
    sym[pos] = new_id
    sym[right] = -1
    nxt[pos] = nxt[right]
    if nxt[right] >= 0:
        prv[nxt[right]] = pos
    left_rank[0] = merge_rank(m, sym[prv[pos]], new_id) if prv[pos] >= 0 else INT32_MAX
    right_rank[0] = merge_rank(m, new_id, sym[nxt[pos]]) if nxt[pos] >= 0 else INT32_MAX


cdef void merge_long(const BpeModel *m, Worker *w, Py_ssize_t k) noexcept nogil:
    """Heap method: merges w.sym[0:k] in place; dead symbols get id -1.

    The heap holds at most one entry per live pair plus stale ones, and each
    merge pushes at most two, so 2k entries always suffice.
    """
    cdef int32_t *sym = w.sym
    cdef int32_t *prv = w.prev
    cdef int32_t *nxt = w.nxt
    cdef uint64_t *heap = w.queue.heap
    cdef Py_ssize_t size = 0, j
    cdef int32_t r, pos, right, left_rank, right_rank
    cdef uint64_t top
    link_symbols(w, k)
    for j in range(k - 1):
        r = merge_rank(m, sym[j], sym[j + 1])
        if r != INT32_MAX:
            heap_push(heap, &size, (<uint64_t> r << 32) | <uint64_t> j)
    while size > 0:
        top = heap_pop(heap, &size)
        pos = <int32_t> (top & 0xFFFFFFFFULL)
        r = <int32_t> (top >> 32)
        right = nxt[pos]
        if sym[pos] < 0 or right < 0:
            continue
        if merge_rank(m, sym[pos], sym[right]) != r:
            continue  # stale: this pair changed since the entry was pushed
        join_pair(m, w, pos, r, &left_rank, &right_rank)
        if left_rank != INT32_MAX:
            heap_push(heap, &size, (<uint64_t> left_rank << 32) | <uint64_t> prv[pos])
        if right_rank != INT32_MAX:
            heap_push(heap, &size, (<uint64_t> right_rank << 32) | <uint64_t> pos)


cdef int reserve_buckets(const BpeModel *m, Worker *w) noexcept nogil:
    cdef Py_ssize_t words = (m.n_merges >> 6) + 1
    if w.bucket_head != NULL:
        return 0
    w.bucket_head = <int32_t *> q4_malloc(<size_t> (m.n_merges + 1) * sizeof(int32_t))
    w.bucket_bits = <uint64_t *> q4_malloc(<size_t> words * sizeof(uint64_t))
    if w.bucket_head == NULL or w.bucket_bits == NULL:
        q4_free(w.bucket_head)
        q4_free(w.bucket_bits)
        w.bucket_head = NULL
        w.bucket_bits = NULL
        return -1
    memset(w.bucket_head, 0xFF, <size_t> (m.n_merges + 1) * sizeof(int32_t))
    memset(w.bucket_bits, 0, <size_t> words * sizeof(uint64_t))
    return 0


cdef extern from *:
    """
    #define q4_prefetch(p) __builtin_prefetch((p), 0, 3)
    /* Smallest of a[0:n] (INT32_MAX when n == 0), as a plain C loop: the
       compiler makes it branch-free (Cython's conditional expression would
       be a branch per element). merge_short scans its entries once per merge. */
    static inline int32_t q4_min_i32(const int32_t *a, Py_ssize_t n) {
        int32_t m = INT32_MAX;
        for (Py_ssize_t i = 0; i < n; i++)
            m = a[i] < m ? a[i] : m;
        return m;
    }
    /* Smallest of a[0:16]: most pieces merge_short sees have at most 16
       symbols; a fixed-size scan has no loop exit to mispredict. */
    #if defined(__SSE2__)
    #include <emmintrin.h>
    static inline __m128i q4_min4(__m128i x, __m128i y) {
        __m128i lt = _mm_cmplt_epi32(x, y);
        return _mm_or_si128(_mm_and_si128(lt, x), _mm_andnot_si128(lt, y));
    }
    static inline int32_t q4_min16_i32(const int32_t *a) {
        __m128i m = q4_min4(q4_min4(_mm_loadu_si128((const __m128i *) a), _mm_loadu_si128((const __m128i *) (a + 4))),
                            q4_min4(_mm_loadu_si128((const __m128i *) (a + 8)), _mm_loadu_si128((const __m128i *) (a + 12))));
        m = q4_min4(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(1, 0, 3, 2)));
        m = q4_min4(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(2, 3, 0, 1)));
        return _mm_cvtsi128_si32(m);
    }
    #else
    static inline int32_t q4_min16_i32(const int32_t *a) { return q4_min_i32(a, 16); }
    #endif
    """
    void q4_prefetch(const void *p) nogil
    int32_t q4_min_i32(const int32_t *a, Py_ssize_t n) nogil
    int32_t q4_min16_i32(const int32_t *a) nogil


cdef extern from *:
    """
    #define q4_lowest_bit(x) ((Py_ssize_t) __builtin_ctzll(x))
    """
    Py_ssize_t q4_lowest_bit(uint64_t x) nogil


cdef inline void bucket_push(Worker *w, Py_ssize_t *count, Py_ssize_t *top_word, int32_t r,
                             int32_t pos) noexcept nogil:
    w.queue.buckets[count[0]] = (<uint64_t> <uint32_t> pos << 32) | <uint32_t> w.bucket_head[r]
    w.bucket_head[r] = <int32_t> count[0]
    count[0] += 1
    w.bucket_bits[r >> 6] |= 1ULL << (r & 63)
    if (r >> 6) > top_word[0]:
        top_word[0] = r >> 6


cdef inline void merge_pair(const BpeModel *m, Worker *w, int32_t pos, int32_t r, Py_ssize_t *count,
                            Py_ssize_t *top_word) noexcept nogil:
    """Merge the pair at pos (rank r) and queue the two pairs it creates."""
    cdef int32_t left_rank, right_rank
    join_pair(m, w, pos, r, &left_rank, &right_rank)
    if left_rank != INT32_MAX:
        bucket_push(w, count, top_word, left_rank, w.prev[pos])
    if right_rank != INT32_MAX:
        bucket_push(w, count, top_word, right_rank, pos)


cdef void merge_bucketed(const BpeModel *m, Worker *w, Py_ssize_t k) noexcept nogil:
    """Linear-time method for long pieces of a monotone merge table.

    Ranks never decrease while one word is merged (merges_are_monotone), so
    one forward scan over per-rank buckets replaces the heap. Within a rank,
    order only matters where pairs overlap, which for one pair (x, y) means
    a run of identical symbols x == y: such a run is merged left to right
    from its start, as the heap's (rank, position) order would.
    """
    cdef int32_t *sym = w.sym
    cdef int32_t *prv = w.prev
    cdef int32_t *nxt = w.nxt
    cdef Py_ssize_t count = 0, top_word = 0, word, j
    cdef int32_t r, e, pos, q, x
    cdef uint64_t entry, ahead = 0
    link_symbols(w, k)
    for j in range(min(k - 1, RANK_AHEAD)):
        prefetch_rank(m, sym[j], sym[j + 1])
    for j in range(k - 1):
        if j + RANK_AHEAD < k - 1:  # the pairs' look-ups are independent: keep RANK_AHEAD in flight
            prefetch_rank(m, sym[j + RANK_AHEAD], sym[j + RANK_AHEAD + 1])
        r = merge_rank(m, sym[j], sym[j + 1])
        if r != INT32_MAX:
            bucket_push(w, &count, &top_word, r, <int32_t> j)
    word = 0
    while word <= top_word:
        if w.bucket_bits[word] == 0:
            word += 1
            continue
        r = <int32_t> ((word << 6) | q4_lowest_bit(w.bucket_bits[word]))
        w.bucket_bits[word] &= w.bucket_bits[word] - 1
        e = w.bucket_head[r]
        w.bucket_head[r] = -1
        if e >= 0:
            ahead = w.queue.buckets[e]
        while e >= 0:
            entry = ahead
            pos = <int32_t> (entry >> 32)
            e = <int32_t> <uint32_t> (entry & 0xFFFFFFFFULL)
            if e >= 0:  # the chain's next entry, its symbols and the entry after start loading while this one merges
                ahead = w.queue.buckets[e]
                q4_prefetch(&sym[ahead >> 32])
                q4_prefetch(&nxt[ahead >> 32])
                if <int32_t> <uint32_t> (ahead & 0xFFFFFFFFULL) >= 0:
                    q4_prefetch(&w.queue.buckets[<int32_t> <uint32_t> (ahead & 0xFFFFFFFFULL)])
            if sym[pos] < 0 or nxt[pos] < 0 or merge_rank(m, sym[pos], sym[nxt[pos]]) != r:
                continue  # stale
            x = sym[pos]
            if sym[nxt[pos]] != x:
                merge_pair(m, w, pos, r, &count, &top_word)
                continue
            q = pos
            while prv[q] >= 0 and sym[prv[q]] == x:
                q = prv[q]
            while q >= 0 and nxt[q] >= 0 and sym[q] == x and sym[nxt[q]] == x:
                merge_pair(m, w, q, r, &count, &top_word)
                q = nxt[q]


cdef Py_ssize_t bpe_merge(const BpeModel *m, Worker *w, const uint8_t *p, Py_ssize_t n,
                          int32_t *dst) noexcept nogil:
    """Write the BPE ids of the n >= 1 bytes at p to dst (room for n ids) and
    return how many; -1 if an allocation failed. No cache is involved."""
    return merge_piece(m, w, p, n, dst, True)


cdef Py_ssize_t merge_piece(const BpeModel *m, Worker *w, const uint8_t *p, Py_ssize_t n,
                            int32_t *dst, bint maybe_token) noexcept nogil:
    """bpe_merge; maybe_token False when p is known not to be a token (the
    seed would have answered it), which skips ignore_merges' look-up."""
    cdef Py_ssize_t j, k
    cdef int32_t t
    if n == 1:
        dst[0] = m.byte_ids[p[0]]
        return 1
    if maybe_token and m.whole != NULL and n <= m.whole_max:
        t = whole_token(m, p, n, hash_bytes(p, n))
        if t >= 0:
            dst[0] = t
            return 1
    if reserve_scratch(w, n) < 0:
        return -1
    if m.starts.table != NULL:
        k = first_symbols(&m.starts, m.byte_ids, p, n, w.sym)
    else:
        for j in range(n):
            w.sym[j] = m.byte_ids[p[j]]
        k = n
    return merge_symbols(m, w, k, n, dst)


cdef Py_ssize_t merge_symbols(const BpeModel *m, Worker *w, Py_ssize_t k, Py_ssize_t n,
                              int32_t *dst) noexcept nogil:
    """Merge the k first symbols w.sym[0:k] of an n-byte piece into dst; the
    method goes by k. Returns the number of ids, or -1."""
    cdef Py_ssize_t j
    if k < SHORT_PIECE:
        k = merge_short(m, w, k)
        copy_ids(dst, w.sym, k)
    else:
        if k >= BUCKET_PIECE and m.monotone:
            if reserve_buckets(m, w) < 0:
                return -1
            merge_bucketed(m, w, k)
        else:
            merge_long(m, w, k)
        k = 0
        j = 0
        while j >= 0:
            dst[k] = w.sym[j]
            k += 1
            j = w.nxt[j]
    if n > SCRATCH_KEEP:
        release_scratch(w)  # a huge word must not pin its ~36 bytes per byte of scratch
    return k


cdef Py_ssize_t bpe_merge_unknown(const BpeModel *m, Worker *w, const uint8_t *p, Py_ssize_t n,
                                  int32_t *dst) noexcept nogil:
    """bpe_merge for a piece the seed lacks (up to LONG_KEY_MAX bytes): every
    token spelling that is one NFC piece is in the seed, so it is no token and
    ignore_merges' look-up is skipped."""
    return merge_piece(m, w, p, n, dst, n > LONG_KEY_MAX)
