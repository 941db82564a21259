# The native tokenizer (pyx/_encoder.pyx): its state and the nogil entry
# points other native modules call (pyx/_arrow.pyx runs its rows through
# encode_data on the same scheduler and workers).
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t

from qwen4exp._native._scheduler cimport Stream, RunTimes, encode_fn, convert_fn
from qwen4exp._native._idvec cimport IdVec
from qwen4exp._native._bpe cimport BpeModel, Worker
from qwen4exp._native._piece_cache cimport PieceCache, ShortSlot
from qwen4exp._native._lookup cimport FIXED_SLOTS
from qwen4exp._native._atoms cimport AtomTable
from qwen4exp._native._geometry cimport GeoError
from qwen4exp._native._pylist cimport IdInts


cdef class NativeTokenizer:
    cdef BpeModel model
    cdef AtomTable atoms
    cdef const uint8_t *token_bytes
    cdef const int64_t *token_offsets
    cdef readonly Py_ssize_t n_vocab
    cdef readonly Py_ssize_t cache_size  # pieces per worker cache (Tokenizer(cache_size=))
    cdef readonly int encode_threads  # threads one encode() may use (1: never split)
    cdef readonly Py_ssize_t parts_redone  # texts encode_parts normalized whole after its parallel check failed
    cdef readonly Py_ssize_t splits_skipped  # texts encode() kept on one thread while splits back off
    cdef long long split_resume_ns  # encode() splits again from this time (CLOCK_MONOTONIC)
    cdef long long split_backoff_ns  # the last back-off; 0 after splits that paid
    cdef unsigned char letters  # letter-run class of the pattern, and DIGIT_RUNS (see _pretokenize)
    cdef bint nfc               # DATA is NFC-normalized first (False: the file has no normalizer)
    # The shared cache (pyx/_seed.pyx builds it, prefilled with the token
    # spellings): every worker asks it after its own cache and adds to it only
    # through publish_short; empty when cache_size is 0.
    cdef PieceCache shared_cache
    cdef readonly Py_ssize_t shared_cache_words
    cdef Py_ssize_t shared_room   # short pieces workers could add to the shared cache at first
    cdef Worker **pool
    cdef Py_ssize_t pool_len
    cdef object _keep          # numpy arrays whose buffers we point into
    cdef IdInts _id_ints       # the ids' static int objects, for building lists
    # encode()'s ids, kept from call to call so that a call does not allocate
    # them (a heap left fragmented by other libraries makes large mallocs
    # slow): call_ids for a text on one thread, cut_ids for the parts of a
    # split one. Taken and given back under the GIL through their busy flags,
    # so that another thread's call, or a finalizer's call while a list is
    # built, uses vectors of its own instead.
    cdef IdVec call_ids
    cdef bint call_ids_busy
    cdef IdVec cut_ids[16]  # LOCAL_PARTS
    cdef bint cut_ids_busy
    cdef ShortSlot fixed_homes[FIXED_SLOTS]  # the homes of one-byte and uncached pieces (_lookup)

    cdef Worker *acquire(self) except NULL
    cdef Worker *take_worker(self) noexcept
    cdef void release(self, Worker *w) noexcept
    cdef int encode_pieces(self, Worker *w, const uint8_t *s, Py_ssize_t n, IdVec *out) noexcept nogil
    cdef int encode_chunk(self, Worker *w, const uint8_t *s, Py_ssize_t n, Py_ssize_t pos,
                          const Py_ssize_t *ends, Py_ssize_t k, IdVec *out) noexcept nogil
    cdef int encode_data(self, Worker *w, const uint8_t *s, Py_ssize_t n, IdVec *out) noexcept nogil
    cdef int encode_stream(self, Worker *w, const uint8_t *data, Py_ssize_t n, const int64_t *starts,
                           const int64_t *ends, const int8_t *kinds, Py_ssize_t first, Py_ssize_t m,
                           IdVec *out, int64_t *tok_ends, GeoError *geo, Py_ssize_t *bad) noexcept nogil
    cdef int encode_text(self, str text, IdVec *out) except -2
    cdef list encode_parts(self, str text)
    cdef list encode_cut(self, const uint8_t *s, Py_ssize_t n, Py_ssize_t mode)
    cdef void note_split(self, RunTimes *t) noexcept
    cdef list run_batch(self, Stream *streams, Py_ssize_t count, int num_threads, convert_fn convert,
                        Py_ssize_t convert_every, bint largest_first, RunTimes *times=*)
    cdef list run_jobs(self, Stream *streams, Py_ssize_t count, int num_threads, encode_fn encode,
                       convert_fn convert, void *ctx, Py_ssize_t convert_every, bint largest_first,
                       RunTimes *times=*)
    cdef Py_ssize_t atom_index(self, int32_t t) noexcept nogil
