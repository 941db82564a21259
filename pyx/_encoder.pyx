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
from cpython.list cimport PyList_New, PyList_SET_ITEM
from cpython.long cimport PyLong_FromLong
from cpython.ref cimport Py_INCREF, PyObject
from cpython.tuple cimport PyTuple_GET_ITEM
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_FromStringAndSize
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uint64_t
from libc.string cimport memcpy, memset
cimport numpy as cnp
import numpy as np

from qwen4exp._alloc cimport q4_malloc, q4_free
from qwen4exp._scheduler cimport Stream, new_streams, free_streams, run_streams
from qwen4exp._idvec cimport IdVec, idvec_free, idvec_reserve
from qwen4exp._bpe cimport (BpeModel, Worker, bpe_model_init, bpe_model_ignore_merges, bpe_model_free,
                            worker_init, worker_flush, worker_free, bpe_prefetch, bpe_encode_hashed)
from qwen4exp._atoms cimport AtomTable, atoms_init, atoms_free, atoms_parse
from qwen4exp._faults cimport RC_OK, RC_NO_MEMORY, RC_GEOMETRY, RC_UNKNOWN_CONTROL
from qwen4exp._geometry cimport GeoError, check_geometry
from qwen4exp._normalize cimport utf8_is_nfc, utf8_nfc
from qwen4exp._pretokenize cimport piece_end
from qwen4exp._unicode cimport Q4_L, Q4_M

cnp.import_array()

cdef enum:
    POOL_MAX = 64           # idle workers kept; more concurrent callers get fresh ones


cdef class NativeTokenizer:
    cdef BpeModel model
    cdef AtomTable atoms
    cdef const uint8_t *token_bytes
    cdef const int64_t *token_offsets
    cdef readonly Py_ssize_t n_vocab
    cdef readonly Py_ssize_t cache_words
    cdef unsigned char letters  # letter-run class of the pattern (see _pretokenize)
    cdef Worker **pool
    cdef Py_ssize_t pool_len
    cdef object _keep          # numpy arrays whose buffers we point into
    cdef tuple _id_objects     # one shared int object per id, for building lists

    def __cinit__(self):
        memset(&self.model, 0, sizeof(BpeModel))
        memset(&self.atoms, 0, sizeof(AtomTable))
        self.pool = NULL
        self.pool_len = 0

    def __init__(self, token_bytes, token_offsets, merges, atom_bytes, atom_offsets, atom_ids,
                 Py_ssize_t cache_words=32768, *, bint marks=False, bint ignore_merges=False):
        """marks: the Qwen3.5 pattern (\\p{M} in letter runs); ignore_merges: HF's flag."""
        cdef const uint8_t[::1] tb = np.ascontiguousarray(token_bytes, dtype=np.uint8)
        cdef const int64_t[::1] to = np.ascontiguousarray(token_offsets, dtype=np.int64)
        cdef const int32_t[:, ::1] mg = np.ascontiguousarray(merges, dtype=np.int32).reshape(-1, 3)
        cdef const uint8_t[::1] ab = np.ascontiguousarray(atom_bytes, dtype=np.uint8)
        cdef const int64_t[::1] ao = np.ascontiguousarray(atom_offsets, dtype=np.int64)
        cdef const int32_t[::1] ai = np.ascontiguousarray(atom_ids, dtype=np.int32)
        cdef int32_t byte_ids[256]
        cdef Py_ssize_t i, j
        if cache_words < 0 or (cache_words & (cache_words - 1)) != 0:
            raise ValueError("cache_words must be 0 or a power of two")
        self.cache_words = cache_words
        self.letters = (Q4_L | Q4_M) if marks else Q4_L
        self.n_vocab = to.shape[0] - 1
        for i in range(256):
            byte_ids[i] = -1
        for i in range(self.n_vocab):
            if to[i + 1] - to[i] == 1:
                byte_ids[tb[to[i]]] = <int32_t> i
        for i in range(256):
            if byte_ids[i] < 0:
                raise ValueError(f"vocabulary has no token for byte 0x{i:02x}")
        self._keep = (tb, to)
        self._id_objects = tuple(range(max(self.n_vocab, max(ai) + 1 if ai.shape[0] else 0)))
        self.token_bytes = &tb[0]
        self.token_offsets = &to[0]
        with nogil:
            i = bpe_model_init(&self.model, &mg[0, 0] if mg.shape[0] else NULL, mg.shape[0], byte_ids)
            j = atoms_init(&self.atoms, &ab[0] if ab.shape[0] else NULL, &ao[0], &ai[0] if ai.shape[0] else NULL,
                           ai.shape[0])
            if i == 0 and ignore_merges:
                i = bpe_model_ignore_merges(&self.model, &tb[0], &to[0], self.n_vocab)
        if i == -2:
            raise ValueError("vocabulary too large: ids and merges must be below 2**20")
        if i < 0 or j < 0:
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
        if worker_init(w, self.cache_words) < 0:
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

    def flush_cache(self):
        """Empty the cache of every idle worker."""
        cdef Py_ssize_t k
        for k in range(self.pool_len):
            worker_flush(self.pool[k])

    # -- the nogil loops ---------------------------------------------------------

    cdef int encode_pieces(self, Worker *w, const uint8_t *s, Py_ssize_t n, IdVec *out) noexcept nogil:
        """Pre-tokenize and BPE, two pieces ahead: a piece's cache slot is
        requested (bpe_prefetch) two pieces before it is encoded, so that a
        run of cache hits does not wait on memory."""
        cdef Py_ssize_t start = 0, e0, e1 = n, e2 = n
        cdef uint64_t h0, h1 = 0, h2 = 0
        if n == 0:
            return RC_OK
        e0 = piece_end(s, n, 0, self.letters)
        h0 = bpe_prefetch(w, s, e0)
        if e0 < n:
            e1 = piece_end(s, n, e0, self.letters)
            h1 = bpe_prefetch(w, s + e0, e1 - e0)
        while True:
            if e1 < n:
                e2 = piece_end(s, n, e1, self.letters)
                h2 = bpe_prefetch(w, s + e1, e2 - e1)
            if bpe_encode_hashed(&self.model, w, s + start, e0 - start, h0, out) < 0:
                return RC_NO_MEMORY
            if e0 >= n:
                return RC_OK
            start, e0, h0 = e0, e1, h1
            e1, h1 = e2, h2

    cdef int encode_data(self, Worker *w, const uint8_t *s, Py_ssize_t n, IdVec *out) noexcept nogil:
        """DATA: NFC (skipped when the quick check says the text already is), pre-tokenize, BPE."""
        cdef unsigned char *normal = NULL
        cdef Py_ssize_t m
        cdef int rc
        if utf8_is_nfc(s, n):
            return self.encode_pieces(w, s, n, out)
        m = utf8_nfc(s, n, &normal)
        if m < 0:
            return RC_NO_MEMORY
        rc = self.encode_pieces(w, normal, m, out)
        q4_free(normal)
        return rc

    cdef int encode_stream(self, Worker *w, const uint8_t *data, Py_ssize_t n, const int64_t *starts,
                           const int64_t *ends, const int8_t *kinds, Py_ssize_t m, IdVec *out,
                           GeoError *geo, Py_ssize_t *bad) noexcept nogil:
        """Validate the whole geometry, then tokenize each segment on its own."""
        cdef Py_ssize_t k
        cdef int rc
        if check_geometry(data, n, starts, ends, kinds, m, geo) < 0:
            return RC_GEOMETRY
        for k in range(m):
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
        return RC_OK

    # -- Python entry points ---------------------------------------------------

    cdef int encode_text(self, str text, IdVec *out) except -2:
        """encode_data over text's UTF-8 (UnicodeEncodeError on lone surrogates)."""
        cdef Py_ssize_t n
        cdef const char *s = PyUnicode_AsUTF8AndSize(text, &n)
        cdef Worker *w = self.acquire()
        cdef int rc
        with nogil:
            rc = self.encode_data(w, <const uint8_t *> s, n, out)
        self.release(w)
        return rc

    def encode(self, str text):
        """Ids of `text` as DATA (list of int)."""
        cdef IdVec out
        memset(&out, 0, sizeof(IdVec))
        try:
            if self.encode_text(text, &out) < 0:
                raise MemoryError("out of memory while tokenizing")
            return idvec_to_list(&out, self._id_objects)
        finally:
            idvec_free(&out)

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
                                    &kinds[0] if m else NULL, m, &out, &geo, &bad)
        self.release(w)
        try:
            if rc == RC_NO_MEMORY:
                raise MemoryError("out of memory while tokenizing segments")
            if rc != RC_OK:
                return None, fault_tuple(rc, &geo)
            return idvec_to_array(&out), None
        finally:
            idvec_free(&out)

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
                streams[k].m = -1
            return self.run_batch(streams, count, num_threads, True)
        finally:
            free_streams(streams, count)

    def encode_streams(self, list items, int num_threads):
        """Batch of segmented streams: items are (data, starts, ends, kinds) with
        bytes and int64/int64/int8 contiguous arrays. Returns, per item, either
        an int32 array or a fault tuple (code, segment, offset) as in
        encode_segments. Raises MemoryError if any stream ran out of memory."""
        cdef Py_ssize_t count = len(items), k
        cdef Stream *streams
        cdef const int64_t[::1] st_view
        cdef const int64_t[::1] en_view
        cdef const int8_t[::1] ki_view
        cdef bytes data
        if count == 0:
            return []
        streams = new_streams(count)
        try:
            for k in range(count):
                data, starts, ends, kinds = items[k]
                st_view = starts
                en_view = ends
                ki_view = kinds
                if en_view.shape[0] != st_view.shape[0] or ki_view.shape[0] != st_view.shape[0]:
                    raise ValueError("starts, ends and kinds must have one entry per segment")
                streams[k].data = <const uint8_t *> PyBytes_AS_STRING(data)
                streams[k].n = PyBytes_GET_SIZE(data)
                streams[k].m = st_view.shape[0]
                if streams[k].m:
                    streams[k].starts = &st_view[0]
                    streams[k].ends = &en_view[0]
                    streams[k].kinds = &ki_view[0]
            # items keeps every buffer alive until we return
            return self.run_batch(streams, count, num_threads, False)
        finally:
            free_streams(streams, count)


    cdef list run_batch(self, Stream *streams, Py_ssize_t count, int num_threads, bint as_lists):
        """Run the streams on up to num_threads threads (pyx/_scheduler.pyx),
        one pooled worker each, and return their results as lists of ints
        (as_lists) or int32 arrays / fault tuples."""
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
            return run_streams(streams, count, workers, n, encode_one,
                               convert_list if as_lists else convert_array, <void *> self)
        finally:
            for k in range(n):
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

    cdef Py_ssize_t atom_index(self, int32_t t) noexcept nogil:
        cdef Py_ssize_t a
        for a in range(self.atoms.n):
            if self.atoms.ids[a] == t:
                return a
        return -1


cdef int encode_one(void *ctx, Worker *w, Stream *st) noexcept nogil:
    """The scheduler's encode callback: one stream, DATA text or segmented."""
    if st.m < 0:
        return (<NativeTokenizer> ctx).encode_data(w, st.data, st.n, &st.ids)
    return (<NativeTokenizer> ctx).encode_stream(w, st.data, st.n, st.starts, st.ends, st.kinds, st.m,
                                                 &st.ids, &st.geo, &st.bad)


cdef bint convert_list(void *ctx, Stream *st, list results, Py_ssize_t k) except -1:
    """The scheduler's convert callback for encode_batch: a list of ints."""
    if st.rc == RC_NO_MEMORY:
        return True
    results[k] = idvec_to_list(&st.ids, (<NativeTokenizer> ctx)._id_objects)
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
    """(Fault, GeoCode or 0, segment, offset): what qwen4exp.tokenizer.fault_error reads."""
    return (rc, int(geo.code) if rc == RC_GEOMETRY else 0, geo.segment, geo.offset)


cdef list idvec_to_list(IdVec *v, tuple id_objects):
    """Python list of the ids, sharing one int object per id (no allocation per item)."""
    cdef list out = PyList_New(v.len)
    cdef Py_ssize_t k, limit = len(id_objects)
    cdef PyObject *item
    cdef object fresh
    for k in range(v.len):
        if 0 <= v.data[k] < limit:
            item = PyTuple_GET_ITEM(id_objects, v.data[k])
            Py_INCREF(<object> item)
        else:
            fresh = PyLong_FromLong(v.data[k])
            Py_INCREF(fresh)
            item = <PyObject *> fresh
        PyList_SET_ITEM(out, k, <object> item)  # steals the reference taken above
    return out


cdef object idvec_to_array(IdVec *v):
    cdef cnp.ndarray arr = np.empty(v.len, dtype=np.int32)
    if v.len:
        memcpy(cnp.PyArray_DATA(arr), v.data, <size_t> v.len * sizeof(int32_t))
    return arr
