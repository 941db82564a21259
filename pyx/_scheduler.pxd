# The batch scheduler: streams of work, claimed one at a time by the calling
# thread and native helper threads. It knows nothing of tokenization: the
# binding (_encoder) passes an encode callback (nogil) and a convert callback
# (with the GIL, turning one finished stream into a Python object).
from libc.stdint cimport int8_t, int64_t, uint8_t
from qwen4exp._native._idvec cimport IdVec
from qwen4exp._native._geometry cimport GeoError
from qwen4exp._native._bpe cimport Worker

cdef enum:
    STREAM_TEXT = -1        # Stream.m: plain DATA text
    STREAM_NFC = -2         # plain DATA text known to be NFC already
    STREAM_PART = -3        # a part of a DATA text cut before a stable starter: encoded when NFC leaves it
                            # as it is, else `renormalize` is set and no ids are made

cdef struct Stream:
    # One unit of batch work: input bytes (plain DATA text when m < 0, see
    # STREAM_TEXT/STREAM_NFC, else a segmented stream of m segments) in, ids
    # or a fault out.
    const uint8_t *data
    Py_ssize_t n
    const int64_t *starts
    const int64_t *ends
    const int8_t *kinds
    Py_ssize_t m
    int64_t *tok_ends       # NULL, or m entries: ids so far after each segment
    IdVec ids
    int rc
    GeoError geo
    Py_ssize_t bad
    int renormalize         # STREAM_PART: NFC would change this part (its ids were not made)
    int done                # set (release) once ids/rc are final

# Encode one stream into st.ids / st.rc (a Fault, pyx/_faults.pxd).
ctypedef int (*encode_fn)(void *ctx, Worker *w, Stream *st) noexcept nogil
# Store stream k's result in results[k]; True if it ran out of memory.
ctypedef bint (*convert_fn)(void *ctx, Stream *st, list results, Py_ssize_t k) except -1

cdef Stream *new_streams(Py_ssize_t count) except NULL
cdef void free_streams(Stream *streams, Py_ssize_t count) noexcept nogil
# Where the calling thread's time went in a run_streams.
cdef struct RunTimes:
    long long working_ns    # from the start until nothing was left to claim
    long long waiting_ns    # then until every helper was done

cdef list run_streams(Stream *streams, Py_ssize_t count, Worker **workers, Py_ssize_t n_workers,
                      encode_fn encode, convert_fn convert, void *ctx, Py_ssize_t convert_every,
                      bint largest_first, RunTimes *times)
