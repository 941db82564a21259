# cython: language_level=3
"""The native tokenizer: one object owning the merge table, the atom table,
the token spellings and a pool of per-thread workers (cache + scratch), and
the Python entry points. Batches run on the scheduler (pyx/_scheduler.pyx),
which calls back into encode_one / convert_list / convert_array here.

Python validates and converts arguments, then each entry point runs one
`with nogil:` loop over C buffers and raises only after leaving it. A worker
is taken from the pool under the GIL and given back after, so threads that
share one tokenizer never share mutable state.
"""
from cpython.unicode cimport PyUnicode_AsUTF8AndSize
from cpython.list cimport PyList_New
from cpython.ref cimport PyObject

cdef extern from "Python.h":
    ctypedef struct PyListObject:
        PyObject **ob_item
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_FromStringAndSize
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uint64_t
from libc.string cimport memcmp, memcpy, memset
cimport numpy as cnp
import os

import numpy as np

from qwen4exp._native._alloc cimport q4_malloc, q4_free
from qwen4exp._native._scheduler cimport (Stream, RunTimes, STREAM_TEXT, STREAM_NFC, STREAM_PART, encode_fn, convert_fn, new_streams,
                                  free_streams, run_streams)
from qwen4exp._native._idvec cimport IdVec, idvec_free, idvec_reserve, copy_ids
from qwen4exp._native._bpe cimport (BpeModel, Worker, bpe_model_init, bpe_model_ignore_merges, bpe_model_free,
                            bpe_model_char_starts, worker_init, worker_flush, worker_free, bpe_merge)
from qwen4exp._native._piece_cache cimport PieceCache, ShortSlot, IDS_INLINE, cache_free, cache_grow, q4_pc_prefetch
from qwen4exp._native._lookup cimport AHEAD, LEAD, FIXED_SLOTS, fill_fixed_homes, hash_chunk, look_home, encode_slow
from qwen4exp._native._seed cimport build_seed
from qwen4exp._native._char_starts cimport char_starts_describe, start_symbols
from qwen4exp._native._atoms cimport AtomTable, atoms_init, atoms_free, atoms_parse
from qwen4exp._native._faults cimport RC_OK, RC_NO_MEMORY, RC_GEOMETRY, RC_UNKNOWN_CONTROL, RC_TOO_LARGE, RC_NO_BYTE_TOKEN
from qwen4exp._native._faults import InitFault
from qwen4exp._native._geometry cimport GeoError, check_geometry
from qwen4exp._native._normalize cimport utf8_nfc, utf8_stable_at
from qwen4exp._native._pretokenize cimport piece_ends, DIGIT_RUNS, BYTE_LEVEL
from qwen4exp._native._parts cimport split_points
from qwen4exp._native._crew cimport now_ns, crew_contended
from qwen4exp._native._unicode cimport Q4_L, Q4_M
from qwen4exp._native._pylist cimport IdInts, idvec_to_list, fill_items
from qwen4exp._native._pylist import shared_id_ints

cnp.import_array()

cdef enum:
    POOL_MAX = 64           # idle workers kept; more concurrent callers get fresh ones
    CHUNK = 256              # pieces split and hashed at once, before their encoding
    TEXT_AHEAD = 4096       # encode_data requests this much of a text at once before its first pass
    SPLIT_MIN = 2048        # encode(): ASCII texts from this many UTF-8 bytes are split across threads,
    SPLIT_MIN_WIDE = 1536   # others (slower a byte: more first-seen words) from this many
                            # (docs/PERFORMANCE.md, "One text on several threads")
    SPLIT_PART = 2048       # into parts of at least this many bytes: one per thread,
    LONG_PART = 65536       # or, for a text of this many bytes a thread or more,
    PARTS_PER_THREAD = 4    # up to this many per thread (balance)
    LOCAL_PARTS = 16        # encode_cut keeps this many parts' bookkeeping on its stack
    NOGIL_MIN = 1024        # encode() of a shorter text keeps the GIL (other threads wait microseconds)
    KEEP_IDS = 1 << 18      # ids a kept vector may hold room for (1 MiB; 17 vectors a tokenizer)
    CONVERT_EVERY = 65536   # encode_batch: bytes the calling thread encodes between two conversion passes
    SPLIT_WAIT_NS = 20000   # a split whose caller waited this long, and longer than it worked, did not pay
    BACKOFF_MIN_NS = 1000000  # then encode() keeps texts on one thread this long, doubled each time
    BACKOFF_MAX_NS = 64000000  # up to this (a split that pays sets it back)


def _cpu_count():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


cdef extern from "Python.h":
    bint PyUnicode_IS_ASCII(object text)  # CPython keeps this flag with every str


_CPUS = _cpu_count()  # threads encode() may use for one text, unless told otherwise
cdef Py_ssize_t _split_min = SPLIT_MIN
cdef Py_ssize_t _split_min_wide = SPLIT_MIN_WIDE


def _set_split_min(Py_ssize_t n, wide=None):
    """Test and bench hook: split ASCII texts from n bytes (not SPLIT_MIN)
    and others from `wide` bytes (default n); returns the old (n, wide)."""
    global _split_min, _split_min_wide
    old = (_split_min, _split_min_wide)
    _split_min = max(n, 2)
    _split_min_wide = max(n if wide is None else wide, 2)
    return old


cdef bint _split_backoff = True


def _set_split_backoff(bint on):
    """Test hook: whether encode() stops splitting for a while after a split
    that did not pay or while the crew reports contention (on by default);
    returns the old setting. Off, every text from SPLIT_MIN bytes is split,
    whatever the machine does."""
    global _split_backoff
    old = _split_backoff
    _split_backoff = on
    return old


cdef inline Py_ssize_t split_count(Py_ssize_t n, Py_ssize_t threads) noexcept nogil:
    """How many parts encode_parts cuts a text of n bytes into: one per
    thread, since each part costs a hand-off and its own ids to join, and a
    helper that starts at once finishes an equal part about when the caller
    does; a long text gets up to PARTS_PER_THREAD each, claimed as threads
    come free, so that one slow part does not hold up the others."""
    cdef Py_ssize_t per = max(1, min(PARTS_PER_THREAD, n // (threads * LONG_PART)))
    return max(2, min(threads * per, n // SPLIT_PART))


cdef inline void keep_or_free(IdVec *v) noexcept nogil:
    """A kept vector of ids emptied for the next call, or freed when one
    huge text grew it past KEEP_IDS (its room is not held for later)."""
    v.len = 0
    if v.cap > KEEP_IDS:
        idvec_free(v)


cdef class NativeTokenizer:
    # attributes: pyx/_encoder.pxd

    def __cinit__(self):
        memset(&self.model, 0, sizeof(BpeModel))
        memset(&self.atoms, 0, sizeof(AtomTable))
        memset(&self.shared_cache, 0, sizeof(PieceCache))
        self.pool = NULL
        self.pool_len = 0

    def __init__(self, token_bytes, token_offsets, merges, atom_bytes, atom_offsets, atom_ids,
                 Py_ssize_t cache_size=65536, *, bint marks=False, bint ignore_merges=False,
                 int encode_threads=0,
                 self_encoding=None, bint missing_bytes=False, bint digit_runs=False, bint nfc=True,
                 bint byte_level=False):
        """marks: the Qwen3.5 pattern (\\p{M} in letter runs); ignore_merges: HF's flag;
        self_encoding: None, or uint8 per token, 1 where merging the token's own
        bytes gives that token (the compiled vocabulary's flags): the shared cache then
        takes those tokens as they are instead of merging each one.
        missing_bytes: bytes without a token of their own are allowed (a byte
        no valid UTF-8 holds, or one the file's BPE drops): they stand for the
        first single-byte token here, and the caller (qwen4exp.vocab.pipeline)
        removes them from every piece before BPE, as tokenizers drops them.
        digit_runs: Llama 3's pattern (numbers in runs of up to 3, see
        _pretokenize.pxd); nfc: False for a file without a normalizer;
        byte_level: ByteLevel's own pattern (GPT-2's, pyx/_byte_level.pyx) instead."""
        cdef const uint8_t[::1] tb = np.ascontiguousarray(token_bytes, dtype=np.uint8)
        cdef const int64_t[::1] to = np.ascontiguousarray(token_offsets, dtype=np.int64)
        cdef const int32_t[:, ::1] mg = np.ascontiguousarray(merges, dtype=np.int32).reshape(-1, 3)
        cdef const uint8_t[::1] ab = np.ascontiguousarray(atom_bytes, dtype=np.uint8)
        cdef const int64_t[::1] ao = np.ascontiguousarray(atom_offsets, dtype=np.int64)
        cdef const int32_t[::1] ai = np.ascontiguousarray(atom_ids, dtype=np.int32)
        cdef int32_t byte_ids[256]
        cdef const uint8_t[::1] flags
        cdef const uint8_t *flag_ptr = NULL
        cdef Py_ssize_t i, j
        if self_encoding is not None:
            flags = np.ascontiguousarray(self_encoding, dtype=np.uint8)
            if flags.shape[0] != to.shape[0] - 1:
                raise ValueError("self_encoding must hold one flag per token")
            flag_ptr = &flags[0]
        if not 0 <= cache_size <= (1 << 30):
            raise ValueError("cache_size must be from 0 to 2**30")
        self.cache_size = cache_size
        self.encode_threads = encode_threads if encode_threads > 0 else _CPUS
        self.letters = (((Q4_L | Q4_M) if marks else Q4_L) | (DIGIT_RUNS if digit_runs else 0)
                        | (BYTE_LEVEL if byte_level else 0))
        self.nfc = nfc
        self.n_vocab = to.shape[0] - 1
        for i in range(256):
            byte_ids[i] = -1
        for i in range(self.n_vocab):
            if to[i + 1] - to[i] == 1:
                byte_ids[tb[to[i]]] = <int32_t> i
        j = -1
        for i in range(256):
            if byte_ids[i] >= 0 and j < 0:
                j = byte_ids[i]
        for i in range(256):
            if byte_ids[i] < 0:
                if not missing_bytes or j < 0:
                    raise InitFault(RC_NO_BYTE_TOKEN, i)
                byte_ids[i] = <int32_t> j
        fill_fixed_homes(self.fixed_homes, byte_ids)
        self._keep = (tb, to)
        self._id_ints = shared_id_ints(max(self.n_vocab, max(ai) + 1 if ai.shape[0] else 0))
        self.token_bytes = &tb[0]
        self.token_offsets = &to[0]
        with nogil:
            i = bpe_model_init(&self.model, &mg[0, 0] if mg.shape[0] else NULL, mg.shape[0], byte_ids)
            j = atoms_init(&self.atoms, &ab[0] if ab.shape[0] else NULL, &ao[0], &ai[0] if ai.shape[0] else NULL,
                           ai.shape[0])
            if i == 0 and ignore_merges:
                i = bpe_model_ignore_merges(&self.model, &tb[0], &to[0], self.n_vocab)
            if i == 0:
                i = bpe_model_char_starts(&self.model, &mg[0, 0] if mg.shape[0] else NULL, &tb[0], &to[0],
                                         self.n_vocab)
            if i == 0 and j == 0 and cache_size > 0:
                i = build_seed(&self.shared_cache, &self.model, &tb[0], &to[0], self.n_vocab, self.letters, flag_ptr)
                self.shared_cache_words = self.shared_cache.short_count + self.shared_cache.long_count
                self.shared_room = self.shared_cache.publish_room
        if i == RC_TOO_LARGE:
            raise InitFault(RC_TOO_LARGE, 0)
        if i != RC_OK or j != RC_OK:
            raise MemoryError("could not allocate the merge or atom table")
        self.pool = <Worker **> q4_malloc(POOL_MAX * sizeof(Worker *))
        if self.pool == NULL:
            raise MemoryError("could not allocate the worker pool")

    def __dealloc__(self):
        cdef Py_ssize_t k
        if self.pool != NULL:
            for k in range(self.pool_len):
                worker_free(self.pool[k])
                q4_free(self.pool[k])
            q4_free(self.pool)
        bpe_model_free(&self.model)
        atoms_free(&self.atoms)
        cache_free(&self.shared_cache)
        idvec_free(&self.call_ids)
        for k in range(LOCAL_PARTS):
            idvec_free(&self.cut_ids[k])

    def char_starts(self, bytes piece=None):
        """For tests (pyx/_char_starts.pyx): the start table and fragment rules,
        None when off; with piece, the symbols its merging starts from."""
        if piece is None:
            return char_starts_describe(&self.model.starts)
        return start_symbols(&self.model.starts, self.model.byte_ids, piece)

    # -- worker pool ------------------------------------------------------------
    # Only ever touched with the GIL held and without calling back into Python
    # in between, so pushes and pops are atomic for Python threads.

    cdef Worker *acquire(self) except NULL:
        cdef Worker *w = self.take_worker()
        if w == NULL:
            raise MemoryError("could not allocate a tokenizer worker and its cache")
        return w

    cdef Worker *take_worker(self) noexcept:
        """An idle worker, or a new one; NULL when out of memory."""
        cdef Worker *w
        if self.pool_len > 0:
            self.pool_len -= 1
            return self.pool[self.pool_len]
        w = <Worker *> q4_malloc(sizeof(Worker))
        if w == NULL:
            return NULL
        if worker_init(w, &self.shared_cache if self.cache_size > 0 else NULL, self.cache_size) < 0:
            q4_free(w)
            return NULL
        return w

    cdef void release(self, Worker *w) noexcept:
        if w == NULL:
            return
        if self.pool_len < POOL_MAX:
            self.pool[self.pool_len] = w
            self.pool_len += 1
        else:
            worker_free(w)
            q4_free(w)

    def shared_cache_published(self):
        """Test hook: (short pieces workers have added to the shared cache, how
        many they could add at first)."""
        return min(self.shared_room, self.shared_room - self.shared_cache.publish_room), self.shared_room

    def flush_cache(self):
        """Empty the cache of every idle worker."""
        cdef Py_ssize_t k
        for k in range(self.pool_len):
            worker_flush(self.pool[k])

    # -- the nogil loops ---------------------------------------------------------

    cdef int encode_pieces(self, Worker *w, const uint8_t *s, Py_ssize_t n, IdVec *out) noexcept nogil:
        """Pre-tokenize and BPE, a chunk of pieces at a time: split the chunk,
        key each piece and locate its cache slot (hash_chunk), then encode the
        pieces. Each piece's slot is requested AHEAD pieces before its turn
        and looked at LEAD pieces before (look_home), which requests the
        shared cache's slot only when the worker's line does not hold the piece; the
        turn of a piece found there is a copy of its ids. The others take
        encode_slow."""
        cdef Py_ssize_t ends[CHUNK]
        cdef Py_ssize_t pos = 0, k
        cdef int rc
        while pos < n:
            k = piece_ends(s, n, pos, self.letters, ends, CHUNK)
            rc = self.encode_chunk(w, s, n, pos, ends, k, out)
            if rc != RC_OK:
                return rc
            pos = ends[k - 1]
        return RC_OK

    cdef int encode_chunk(self, Worker *w, const uint8_t *s, Py_ssize_t n, Py_ssize_t pos,
                          const Py_ssize_t *ends, Py_ssize_t k, IdVec *out) noexcept nogil:
        """encode_pieces' work on one chunk: the k pieces s[pos:ends[0]],
        s[ends[0]:ends[1]], ... (k <= CHUNK), whoever found their ends (the
        Qwen scanner, or a generic pre-tokenizer through encode_split)."""
        cdef uint64_t key0[CHUNK]
        cdef uint64_t key1[CHUNK]
        cdef const void *homes[CHUNK + AHEAD]
        cdef const ShortSlot *found[CHUNK]
        cdef uint64_t hashes[CHUNK]
        cdef const PieceCache *sd = w.seed
        cdef PieceCache *c = &w.cache
        cdef Py_ssize_t start, i, j, got, resets
        cdef const ShortSlot *f
        cdef int32_t *dst
        # Ids never outnumber bytes; 4 spare for the 16-byte copy of a hit.
        if idvec_reserve(out, ends[k - 1] - pos + 4) < 0:
            return RC_NO_MEMORY
        dst = out.data + out.len
        if sd == NULL:  # no caching: every piece merged (bpe_merge takes one byte as it is)
            start = pos
            for i in range(k):
                got = bpe_merge(&self.model, w, s + start, ends[i] - start, dst)
                if got < 0:
                    out.len = dst - out.data
                    return RC_NO_MEMORY
                dst += got
                start = ends[i]
            out.len = dst - out.data
            return RC_OK
        if c.want_grow:  # it filled up during the chunk before: no slot found ahead is held now
            cache_grow(c)
        hash_chunk(c, self.fixed_homes, s, n, pos, ends, k, key0, key1, hashes, homes)
        for j in range(min(k, LEAD)):
            found[j] = look_home(sd, homes[j], key0[j], key1[j], hashes[j])
        resets = c.resets
        for i in range(k):
            q4_pc_prefetch(homes[i + AHEAD])
            j = i + LEAD
            if j < k:
                found[j] = look_home(sd, homes[j], key0[j], key1[j], hashes[j])
            f = found[i]
            if f != NULL:
                memcpy(dst, f.ids, 4 * sizeof(int32_t))  # the 3 inline ids and n: one load
                if f.n > IDS_INLINE:
                    copy_ids(dst, c.spill + f.ids[0], f.n)
                dst += f.n
                continue
            start = ends[i - 1] if i else pos
            got = encode_slow(&self.model, w, s + start, ends[i] - start, key0[i], key1[i], hashes[i],
                              homes[i], dst)
            if got < 0:
                out.len = dst - out.data
                return RC_NO_MEMORY
            dst += got
            if c.resets != resets:  # the worker's cache was emptied: the slots found ahead are gone
                resets = c.resets
                for j in range(i + 1, min(k, i + 1 + LEAD)):
                    found[j] = look_home(sd, homes[j], key0[j], key1[j], hashes[j])
        out.len = dst - out.data
        return RC_OK

    cdef int encode_data(self, Worker *w, const uint8_t *s, Py_ssize_t n, IdVec *out) noexcept nogil:
        """DATA: NFC (one pass that copies nothing when the text already is), pre-tokenize, BPE."""
        cdef unsigned char *normal = NULL
        cdef Py_ssize_t m, k
        cdef int rc
        if not self.nfc:
            return self.encode_pieces(w, s, n, out)
        for k in range(0, min(n, TEXT_AHEAD), 64):  # all at once: NFC's first pass would meet them one miss at a time
            q4_pc_prefetch(s + k)
        m = utf8_nfc(s, n, &normal)
        if m < 0:
            return RC_NO_MEMORY
        if normal == NULL:
            return self.encode_pieces(w, s, n, out)
        rc = self.encode_pieces(w, normal, m, out)
        q4_free(normal)
        return rc

    cdef int encode_stream(self, Worker *w, const uint8_t *data, Py_ssize_t n, const int64_t *starts,
                           const int64_t *ends, const int8_t *kinds, Py_ssize_t first, Py_ssize_t m,
                           IdVec *out, int64_t *tok_ends, GeoError *geo, Py_ssize_t *bad) noexcept nogil:
        """Validate the geometry of segments first..m-1, then tokenize each on its
        own; when tok_ends is not NULL, tok_ends[k - first] = len(out) after segment k."""
        cdef Py_ssize_t k
        cdef int rc
        if check_geometry(data, n, starts, ends, kinds, first, m, geo) < 0:
            return RC_GEOMETRY
        for k in range(first, m):
            if kinds[k] == 0:
                rc = self.encode_data(w, data + starts[k], ends[k] - starts[k], out)
                if rc < 0:
                    return rc
            else:
                rc = atoms_parse(&self.atoms, data + starts[k], ends[k] - starts[k], out, bad)
                if rc == RC_UNKNOWN_CONTROL:
                    geo.segment = k
                    geo.offset = starts[k] + bad[0]
                if rc != RC_OK:
                    return rc
            if tok_ends != NULL:
                tok_ends[k - first] = out.len
        return RC_OK

    # -- Python entry points ---------------------------------------------------

    cdef int encode_text(self, str text, IdVec *out) except -2:
        """encode_data over text's UTF-8 (UnicodeEncodeError on lone surrogates)."""
        cdef Py_ssize_t n
        cdef const char *s = PyUnicode_AsUTF8AndSize(text, &n)
        cdef Worker *w = self.acquire()
        cdef int rc
        if n < NOGIL_MIN:  # a few microseconds: releasing and taking the GIL back would cost 2-3% of them
            rc = self.encode_data(w, <const uint8_t *> s, n, out)
        else:
            with nogil:
                rc = self.encode_data(w, <const uint8_t *> s, n, out)
        self.release(w)
        return rc

    def encode(self, str text):
        """Ids of `text` as DATA (list of int). A text from SPLIT_MIN bytes
        (SPLIT_MIN_WIDE if not ASCII) is split at piece boundaries and its
        parts encoded on several threads (encode_parts); a shorter one goes
        into the kept call_ids unless another call holds them."""
        cdef IdVec out
        cdef IdVec *ids = &out
        cdef bint kept = not self.call_ids_busy
        cdef Py_ssize_t n
        PyUnicode_AsUTF8AndSize(text, &n)  # cached with the str: encode_text reuses it
        if self.encode_threads > 1 and n >= (_split_min if PyUnicode_IS_ASCII(text) else _split_min_wide):
            if (not self.split_resume_ns or now_ns() >= self.split_resume_ns) and not (_split_backoff and crew_contended()):
                return self.encode_parts(text)
            self.splits_skipped += 1
        memset(&out, 0, sizeof(IdVec))
        if kept:
            self.call_ids_busy = True
            ids = &self.call_ids
        try:
            if self.encode_text(text, ids) < 0:
                raise MemoryError("out of memory while tokenizing")
            return idvec_to_list(ids, self._id_ints)
        finally:
            if kept:
                keep_or_free(ids)
                self.call_ids_busy = False
            else:
                idvec_free(ids)

    cdef list encode_parts(self, str text):
        """encode() on up to encode_threads threads (the crew's): the text is
        cut into parts where split_points finds a boundary that is a piece
        boundary; the pre-tokenizer decides a piece from where it starts, and
        BPE works piece by piece, so the parts' ids joined are the text's ids
        (docs/ARCHITECTURE.md, "Texts across threads"). That holds for the
        NFC text. When every cut is before a stable starter, NFC of the text
        is NFC of each part joined, so each worker checks its own part in
        parallel (STREAM_PART); a text whose parts all come back unchanged is
        NFC and its parts are those of its NFC. Else, or when a part would
        change, the text is normalized whole first and cut again."""
        cdef Py_ssize_t n, m
        cdef const uint8_t *s = <const uint8_t *> PyUnicode_AsUTF8AndSize(text, &n)
        cdef unsigned char *normal = NULL
        cdef list out
        if not self.nfc:
            return self.encode_cut(s, n, STREAM_NFC)
        out = self.encode_cut(s, n, STREAM_PART)
        if out is not None:
            return out
        self.parts_redone += 1
        with nogil:
            m = utf8_nfc(s, n, &normal)
        if m < 0:
            raise MemoryError("out of memory while normalizing")
        try:
            if normal != NULL:
                s, n = normal, m
            return self.encode_cut(s, n, STREAM_NFC)
        finally:
            q4_free(normal)

    cdef list encode_cut(self, const uint8_t *s, Py_ssize_t n, Py_ssize_t mode):
        """encode_parts' run: cut s into parts, encode them on the crew and join
        their ids into one list. mode STREAM_NFC: s is NFC; STREAM_PART: s may
        not be, and None is returned, nothing encoded, when a cut is not
        before a stable starter, or after the run when a part is not NFC.
        The usual few parts live on this stack, and each part's ids get their
        whole room here before the run (a part has no more ids than bytes),
        so that no helper allocates what this thread frees."""
        cdef Stream local_streams[LOCAL_PARTS]
        cdef int64_t local_bounds[LOCAL_PARTS + 1]
        cdef Py_ssize_t k, count, total, at
        cdef Stream *streams = NULL
        cdef int64_t *bounds = local_bounds
        cdef bint whole = True, pooled = False
        cdef list out
        cdef RunTimes times
        count = split_count(n, self.encode_threads)
        try:
            if count > LOCAL_PARTS:
                bounds = <int64_t *> q4_malloc(<size_t> (count + 1) * sizeof(int64_t))
                if bounds == NULL:
                    raise MemoryError("out of memory while splitting a text")
            with nogil:
                count = split_points(s, n, count, self.letters, bounds)
                if mode == STREAM_PART:
                    for k in range(1, count):
                        if not utf8_stable_at(s, n, bounds[k]):
                            whole = False
                            break
            if not whole:
                return None
            if count > LOCAL_PARTS:
                streams = new_streams(count)
            else:
                streams = local_streams
                memset(streams, 0, <size_t> count * sizeof(Stream))
                if not self.cut_ids_busy:  # the vectors of the last call, with their room
                    self.cut_ids_busy = pooled = True
                    for k in range(count):
                        streams[k].ids = self.cut_ids[k]
                        memset(&self.cut_ids[k], 0, sizeof(IdVec))
            for k in range(count):
                streams[k].data = s + bounds[k]
                streams[k].n = bounds[k + 1] - bounds[k]
                streams[k].m = mode
                if idvec_reserve(&streams[k].ids, streams[k].n + 4) < 0:  # 4: room for a hit's 16-byte copy
                    raise MemoryError("out of memory while splitting a text")
            self.run_batch(streams, count, self.encode_threads, keep_ids, SPLIT_PART, False, &times)
            self.note_split(&times)
            total = 0
            for k in range(count):
                if streams[k].renormalize:
                    return None
                total += streams[k].ids.len
            out = PyList_New(total)
            at = 0
            for k in range(count):
                fill_items(&(<PyListObject *> out).ob_item[at], &streams[k].ids, self._id_ints)
                at += streams[k].ids.len
            return out
        finally:
            if streams == local_streams:
                for k in range(count):
                    if pooled:
                        self.cut_ids[k] = streams[k].ids
                        keep_or_free(&self.cut_ids[k])
                    else:
                        idvec_free(&streams[k].ids)
                if pooled:
                    self.cut_ids_busy = False
            elif streams != NULL:
                free_streams(streams, count)
            if bounds != local_bounds:
                q4_free(bounds)

    cdef void note_split(self, RunTimes *t) noexcept:
        """After a split text: a caller that waited long for a helper (one
        the kernel preempted, on a busy machine, holds its part for a time
        slice: milliseconds) and longer than it worked would have been done
        sooner alone. encode() then keeps texts on one thread for a while,
        twice as long after each such split, and tries again; a split that
        paid ends the back-off (docs/PERFORMANCE.md, "A busy machine")."""
        if t.waiting_ns > SPLIT_WAIT_NS and t.waiting_ns > t.working_ns and _split_backoff:
            self.split_backoff_ns = min(max(2 * self.split_backoff_ns, BACKOFF_MIN_NS), BACKOFF_MAX_NS)
            self.split_resume_ns = now_ns() + self.split_backoff_ns
        else:
            self.split_backoff_ns = 0
            self.split_resume_ns = 0

    def _note_split(self, long long working_ns, long long waiting_ns):
        """Test hook: note_split as if a split text's caller had worked and
        waited this long; returns how long encode() now keeps texts on one
        thread (ns; 0: it splits)."""
        cdef RunTimes t
        t.working_ns, t.waiting_ns = working_ns, waiting_ns
        self.note_split(&t)
        return max(0, self.split_resume_ns - now_ns()) if self.split_resume_ns else 0

    def part_bounds(self, bytes data, Py_ssize_t count):
        """Test hook: the part boundaries encode_parts would use for NFC UTF-8
        `data` cut in up to `count` parts (a list of byte offsets, 0 ... n)."""
        cdef Py_ssize_t n = PyBytes_GET_SIZE(data), k
        cdef int64_t *bounds = <int64_t *> q4_malloc(<size_t> (max(count, 1) + 1) * sizeof(int64_t))
        if bounds == NULL:
            raise MemoryError("out of memory while splitting a text")
        try:
            k = split_points(<const uint8_t *> PyBytes_AS_STRING(data), n, max(count, 1), self.letters, bounds)
            return [bounds[i] for i in range(k + 1)]
        finally:
            q4_free(bounds)

    def count(self, str text):
        """Number of ids `encode(text)` would return, without building the list."""
        cdef IdVec out
        memset(&out, 0, sizeof(IdVec))
        try:
            if self.encode_text(text, &out) < 0:
                raise MemoryError("out of memory while tokenizing")
            return out.len
        finally:
            idvec_free(&out)

    def encode_split(self, bytes data, const int64_t[::1] ends, const int64_t[::1] groups):
        """Ids of pieces a generic pre-tokenizer found (qwen4exp.vocab.pipeline): the
        pieces data[0:ends[0]], data[ends[0]:ends[1]], ... (increasing, each
        non-empty, the last one ending the data), merged through the caches
        as encode's are. `groups`: increasing piece counts; after that many
        pieces, the ids so far are recorded. Returns (int32 ids, int64 ids
        so far at each group)."""
        cdef Py_ssize_t n = PyBytes_GET_SIZE(data), count = ends.shape[0], g = groups.shape[0]
        cdef const uint8_t *s = <const uint8_t *> PyBytes_AS_STRING(data)
        cdef Py_ssize_t chunk[CHUNK]
        cdef Py_ssize_t i, k, pos = 0, gi = 0, prev = 0
        cdef IdVec out
        cdef Worker *w
        cdef int rc = RC_OK
        for i in range(count):
            if ends[i] <= prev or ends[i] > n:
                raise ValueError("encode_split: piece ends must increase within the data")
            prev = ends[i]
        if prev != n:
            raise ValueError("encode_split: the last piece must end the data")
        prev = 0
        for i in range(g):
            if groups[i] < prev or groups[i] > count:
                raise ValueError("encode_split: groups must be increasing piece counts")
            prev = groups[i]
        marks = np.empty(g, dtype=np.int64)
        cdef int64_t[::1] mv = marks
        w = self.acquire()
        memset(&out, 0, sizeof(IdVec))
        try:
            with nogil:
                i = 0
                while i < count and rc == RC_OK:
                    while gi < g and groups[gi] == i:
                        mv[gi] = out.len
                        gi += 1
                    # a chunk stops at the next group mark so that each mark sees its ids
                    k = min(CHUNK, count - i)
                    if gi < g and groups[gi] - i < k:
                        k = groups[gi] - i
                    for pos in range(k):
                        chunk[pos] = ends[i + pos]
                    rc = self.encode_chunk(w, s, n, ends[i - 1] if i else 0, chunk, k, &out)
                    i += k
                while gi < g:
                    mv[gi] = out.len
                    gi += 1
            if rc != RC_OK:
                raise MemoryError("out of memory while tokenizing")
            return idvec_to_array(&out), marks
        finally:
            self.release(w)
            idvec_free(&out)

    def encode_segments(self, bytes data, const int64_t[::1] starts, const int64_t[::1] ends,
                        const int8_t[::1] kinds):
        """Ids of a segmented stream as a new int32 array.

        Returns (array, None) on success or (None, fault tuple) on a geometry /
        unknown-control fault (see fault_tuple); MemoryError on allocation failure.
        """
        cdef Py_ssize_t n = PyBytes_GET_SIZE(data), m = starts.shape[0], bad = 0
        cdef const uint8_t *s = <const uint8_t *> PyBytes_AS_STRING(data)
        cdef IdVec out
        cdef GeoError geo
        cdef Worker *w
        cdef int rc
        if ends.shape[0] != m or kinds.shape[0] != m:
            raise ValueError("starts, ends and kinds must have one entry per segment")
        w = self.acquire()
        memset(&out, 0, sizeof(IdVec))
        with nogil:
            rc = self.encode_stream(w, s, n, &starts[0] if m else NULL, &ends[0] if m else NULL,
                                    &kinds[0] if m else NULL, 0, m, &out, NULL, &geo, &bad)
        self.release(w)
        try:
            if rc == RC_NO_MEMORY:
                raise MemoryError("out of memory while tokenizing segments")
            if rc != RC_OK:
                return None, fault_tuple(rc, &geo)
            return idvec_to_array(&out), None
        finally:
            idvec_free(&out)

    def encode_bounds(self, bytes data, tuple bounds, bint first_control, Py_ssize_t first,
                      bint want_ends):
        """Ids of segments first.. of a stream given as its boundaries (0, ...,
        len(data)) with alternating kinds, the first one TRUSTED_CONTROL when
        first_control: a RenderedChat's own form, with no arrays to build.

        Returns (ids, tok_ends, fault): tok_ends (int64, one per encoded
        segment: ids so far after it) only when want_ends; on a geometry /
        unknown-control fault ids is None and fault a tuple (see fault_tuple).
        Segments before `first` are not checked: the caller encoded the same
        bytes before (see check_geometry).
        """
        cdef Py_ssize_t n = PyBytes_GET_SIZE(data), m = len(bounds) - 1, k, bad = 0
        cdef const uint8_t *s = <const uint8_t *> PyBytes_AS_STRING(data)
        cdef int64_t *b
        cdef int8_t *kinds
        cdef int64_t[::1] ends_view
        cdef int64_t *tok_ends = NULL
        cdef IdVec out
        cdef GeoError geo
        cdef Worker *w
        cdef int rc
        if m < 0 or not 0 <= first <= m:
            raise ValueError("bounds must hold at least 0, and 0 <= first <= segments")
        b = <int64_t *> q4_malloc(<size_t> (m + 1) * (sizeof(int64_t) + sizeof(int8_t)))
        if b == NULL:
            raise MemoryError("out of memory preparing segments")
        kinds = <int8_t *> (b + m + 1)
        memset(&out, 0, sizeof(IdVec))
        try:
            for k in range(m + 1):
                b[k] = bounds[k]
            for k in range(m):
                kinds[k] = (k + first_control) & 1
            tok_array = None
            if want_ends:
                tok_array = np.empty(m - first, dtype=np.int64)
                if m > first:
                    ends_view = tok_array
                    tok_ends = &ends_view[0]
            w = self.acquire()
            with nogil:
                rc = self.encode_stream(w, s, n, b, b + 1, kinds, first, m, &out, tok_ends, &geo, &bad)
            self.release(w)
            if rc == RC_NO_MEMORY:
                raise MemoryError("out of memory while tokenizing segments")
            if rc != RC_OK:
                return None, None, fault_tuple(rc, &geo)
            return idvec_to_array(&out), tok_array, None
        finally:
            idvec_free(&out)
            q4_free(b)

    def encode_batch(self, list texts, int num_threads):
        """Ids of each text (DATA), computed on num_threads threads without the GIL."""
        cdef Py_ssize_t count = len(texts), k, n
        cdef Stream *streams
        cdef const char *s
        if count == 0:
            return []
        streams = new_streams(count)
        try:
            for k in range(count):
                s = PyUnicode_AsUTF8AndSize(texts[k], &n)
                streams[k].data = <const uint8_t *> s
                streams[k].n = n
                streams[k].m = STREAM_TEXT
            return self.run_batch(streams, count, num_threads, convert_list, CONVERT_EVERY, True)
        finally:
            free_streams(streams, count)

    def encode_streams(self, list items, int num_threads):
        """Batch of segmented streams: items are (data, starts, ends, kinds) with
        bytes and int64/int64/int8 contiguous arrays, optionally a fifth: an
        int64 array of one entry per segment that receives the ids so far
        after each segment. Returns, per item, either an int32 array or a
        fault tuple (code, segment, offset) as in encode_segments. Raises
        MemoryError if any stream ran out of memory."""
        cdef Py_ssize_t count = len(items), k
        cdef Stream *streams
        cdef const int64_t[::1] st_view
        cdef const int64_t[::1] en_view
        cdef const int8_t[::1] ki_view
        cdef int64_t[::1] te_view
        cdef bytes data
        if count == 0:
            return []
        streams = new_streams(count)
        try:
            for k in range(count):
                item = items[k]
                data, starts, ends, kinds = item[:4]
                st_view = starts
                en_view = ends
                ki_view = kinds
                if en_view.shape[0] != st_view.shape[0] or ki_view.shape[0] != st_view.shape[0]:
                    raise ValueError("starts, ends and kinds must have one entry per segment")
                if len(item) > 4:
                    te_view = item[4]
                    if te_view.shape[0] != st_view.shape[0]:
                        raise ValueError("tok_ends must have one entry per segment")
                    if te_view.shape[0]:
                        streams[k].tok_ends = &te_view[0]
                streams[k].data = <const uint8_t *> PyBytes_AS_STRING(data)
                streams[k].n = PyBytes_GET_SIZE(data)
                streams[k].m = st_view.shape[0]
                if streams[k].m:
                    streams[k].starts = &st_view[0]
                    streams[k].ends = &en_view[0]
                    streams[k].kinds = &ki_view[0]
            # items keeps every buffer alive until we return
            return self.run_batch(streams, count, num_threads, convert_array, CONVERT_EVERY, True)
        finally:
            free_streams(streams, count)


    cdef list run_batch(self, Stream *streams, Py_ssize_t count, int num_threads, convert_fn convert,
                        Py_ssize_t convert_every, bint largest_first, RunTimes *times=NULL):
        """Run the streams on up to num_threads threads (pyx/_scheduler.pyx),
        one pooled worker each, and return what `convert` makes of each
        (largest_first: see run_streams)."""
        return self.run_jobs(streams, count, num_threads, encode_one, convert, <void *> self, convert_every,
                             largest_first, times)

    cdef list run_jobs(self, Stream *streams, Py_ssize_t count, int num_threads, encode_fn encode,
                       convert_fn convert, void *ctx, Py_ssize_t convert_every, bint largest_first,
                       RunTimes *times=NULL):
        """run_batch with another encode callback and its context (pyx/_arrow.pyx)."""
        cdef Py_ssize_t want = max(1, min(num_threads, count)), n = 1, k
        cdef Worker *single = self.acquire()
        cdef Worker **workers = <Worker **> q4_malloc(<size_t> want * sizeof(Worker *))
        if workers == NULL:
            workers = &single  # no room for more workers: this thread does it all
            want = 1
        workers[0] = single
        while n < want:
            workers[n] = self.take_worker()
            if workers[n] == NULL:
                break  # the threads that have a worker share the work
            n += 1
        try:
            return run_streams(streams, count, workers, n, encode, convert, ctx, convert_every, largest_first, times)
        finally:
            for k in range(n - 1, -1, -1):  # workers[0] back on top: each thread keeps its worker's memory
                self.release(workers[k])
            if workers != &single:
                q4_free(workers)

    def decode_bytes(self, const int32_t[::1] ids):
        """Concatenated spellings of ids; returns (bytes, -1) or (None, index of a bad id)."""
        cdef Py_ssize_t k, total = 0, m = ids.shape[0], a, pos = 0
        cdef int32_t t
        cdef bytes out
        cdef char *dst
        cdef Py_ssize_t bad = -1
        with nogil:
            for k in range(m):
                t = ids[k]
                if 0 <= t < self.n_vocab:
                    total += self.token_offsets[t + 1] - self.token_offsets[t]
                else:
                    a = self.atom_index(t)
                    if a < 0:
                        bad = k
                        break
                    total += self.atoms.offsets[a + 1] - self.atoms.offsets[a]
        if bad >= 0:
            return None, bad
        out = PyBytes_FromStringAndSize(NULL, total)
        dst = PyBytes_AS_STRING(out)
        with nogil:
            for k in range(m):
                t = ids[k]
                if 0 <= t < self.n_vocab:
                    a = self.token_offsets[t + 1] - self.token_offsets[t]
                    memcpy(dst + pos, self.token_bytes + self.token_offsets[t], <size_t> a)
                else:
                    a = self.atom_index(t)
                    memcpy(dst + pos, self.atoms.blob + self.atoms.offsets[a],
                           <size_t> (self.atoms.offsets[a + 1] - self.atoms.offsets[a]))
                    a = self.atoms.offsets[a + 1] - self.atoms.offsets[a]
                pos += a
        return out, -1

    def token_lengths(self):
        """int32 array: the byte length of each id's spelling (0 for ids that are
        neither a token nor an atom), indexed by id."""
        cdef Py_ssize_t k, a
        cdef Py_ssize_t size = len(self._id_ints)
        out = np.zeros(size, dtype=np.int32)
        cdef int32_t[::1] v = out
        for k in range(min(self.n_vocab, size)):
            v[k] = <int32_t> (self.token_offsets[k + 1] - self.token_offsets[k])
        for a in range(self.atoms.n):
            if 0 <= self.atoms.ids[a] < size:
                v[self.atoms.ids[a]] = <int32_t> (self.atoms.offsets[a + 1] - self.atoms.offsets[a])
        return out

    cdef Py_ssize_t atom_index(self, int32_t t) noexcept nogil:
        cdef Py_ssize_t a
        for a in range(self.atoms.n):
            if self.atoms.ids[a] == t:
                return a
        return -1


def utf8_cached(text):
    """text's UTF-8 bytes, through the UTF-8 form CPython keeps with the str
    (PyUnicode_AsUTF8AndSize): a string rendered again, as a conversation's
    history is at every turn, is converted once. UnicodeEncodeError on lone
    surrogates, as str.encode. A str subclass is read as a str: none of its
    methods run."""
    cdef Py_ssize_t n
    cdef const char *s = PyUnicode_AsUTF8AndSize(text, &n)
    return PyBytes_FromStringAndSize(s, n)


def common_prefix(bytes a, bytes b):
    """Length of the longest common prefix of a and b."""
    cdef Py_ssize_t n = min(PyBytes_GET_SIZE(a), PyBytes_GET_SIZE(b)), i = 0
    cdef const uint8_t *p = <const uint8_t *> PyBytes_AS_STRING(a)
    cdef const uint8_t *q = <const uint8_t *> PyBytes_AS_STRING(b)
    with nogil:
        while i + 256 <= n and memcmp(p + i, q + i, 256) == 0:
            i += 256
        while i < n and p[i] == q[i]:
            i += 1
    return i


cdef int encode_one(void *ctx, Worker *w, Stream *st) noexcept nogil:
    """The scheduler's encode callback: one stream, DATA text or segmented."""
    cdef unsigned char *normal = NULL
    if st.m == STREAM_NFC:
        return (<NativeTokenizer> ctx).encode_pieces(w, st.data, st.n, &st.ids)
    if st.m == STREAM_PART:
        if utf8_nfc(st.data, st.n, &normal) < 0:
            return RC_NO_MEMORY
        if normal != NULL:  # NFC changes this part: encode_parts normalizes the whole text instead
            q4_free(normal)
            st.renormalize = 1
            return RC_OK
        return (<NativeTokenizer> ctx).encode_pieces(w, st.data, st.n, &st.ids)
    if st.m < 0:
        return (<NativeTokenizer> ctx).encode_data(w, st.data, st.n, &st.ids)
    return (<NativeTokenizer> ctx).encode_stream(w, st.data, st.n, st.starts, st.ends, st.kinds, 0,
                                                 st.m, &st.ids, st.tok_ends, &st.geo, &st.bad)


cdef bint keep_ids(void *ctx, Stream *st, list results, Py_ssize_t k) except -1:
    """encode_parts' convert callback: the ids stay in the stream, to be
    joined into one list once every part is done."""
    return st.rc == RC_NO_MEMORY


cdef bint convert_list(void *ctx, Stream *st, list results, Py_ssize_t k) except -1:
    """The scheduler's convert callback for encode_batch: a list of ints."""
    if st.rc == RC_NO_MEMORY:
        return True
    results[k] = idvec_to_list(&st.ids, (<NativeTokenizer> ctx)._id_ints)
    idvec_free(&st.ids)
    return False


cdef bint convert_array(void *ctx, Stream *st, list results, Py_ssize_t k) except -1:
    """The scheduler's convert callback for encode_streams: an int32 array or a fault tuple."""
    if st.rc == RC_NO_MEMORY:
        return True
    results[k] = fault_tuple(st.rc, &st.geo) if st.rc != RC_OK else idvec_to_array(&st.ids)
    idvec_free(&st.ids)
    return False


cdef tuple fault_tuple(int rc, GeoError *geo):
    """(Fault, GeoCode or 0, segment, offset): what qwen4exp.encode.tokenizer.fault_error reads."""
    return (rc, int(geo.code) if rc == RC_GEOMETRY else 0, geo.segment, geo.offset)


cdef object idvec_to_array(IdVec *v):
    cdef cnp.ndarray arr = np.empty(v.len, dtype=np.int32)
    if v.len:
        memcpy(cnp.PyArray_DATA(arr), v.data, <size_t> v.len * sizeof(int32_t))
    return arr
