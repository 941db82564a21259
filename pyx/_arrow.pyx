# cython: language_level=3
"""Arrow string arrays in, the buffers of a list<int32> array out: the native
side of Tokenizer.encode_arrow (src/qwen4exp/encode/arrow.py).

Each array's validity bitmap, offsets (int32 for string, int64 for
large_string) and UTF-8 data are read in place through the buffer protocol,
with the array's offset: no Python object per row. Rows are cut into tasks
of about TASK_BYTES that run as streams on the tokenizer's scheduler and
workers (pyx/_scheduler.pyx); a task checks each row's UTF-8, encodes it
(encode_data: NFC, pre-tokenize, BPE) into the task's one id vector and
writes the row's end into the result's offsets. Once every task is done,
each array's ids are copied into one values buffer and its offsets made
absolute. A row that is not valid UTF-8 makes the call fail as a whole.
"""
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from libc.stdint cimport int32_t, int64_t, uint8_t, INT32_MAX
from libc.string cimport memcpy, memset
cimport numpy as cnp

import numpy as np

from qwen4exp._native._alloc cimport q4_malloc, q4_realloc, q4_free
from qwen4exp._native._encoder cimport NativeTokenizer
from qwen4exp._native._scheduler cimport Stream, new_streams, free_streams
from qwen4exp._native._bpe cimport Worker
from qwen4exp._native._idvec cimport IdVec, idvec_free
from qwen4exp._native._faults cimport RC_OK, RC_NO_MEMORY, RC_GEOMETRY
from qwen4exp._native._geometry cimport utf8_invalid_at

cnp.import_array()

cdef enum:
    TASK_BYTES = 65536      # a task is a run of rows of about this many bytes (balance, few allocations)
    TASK_ROWS = 4096        # or of this many rows
    CHECK_EVERY = 262144    # bytes the calling thread encodes between two signal checks
    RC_TOO_MANY_IDS = -100  # a task's ids do not fit int32 offsets


cdef struct Column:
    # One string array (a chunk of a ChunkedArray) and its result.
    const uint8_t *valid    # validity bitmap (bit offset + i), or NULL: no nulls
    const int32_t *offs32   # string: offsets (offset + length + 1 entries)
    const int64_t *offs64   # large_string: offsets
    const uint8_t *data
    Py_ssize_t data_len
    Py_ssize_t offset       # the array's offset, in rows
    Py_ssize_t length
    int32_t *out_offsets    # the result's offsets (length + 1)


cdef struct Task:
    Py_ssize_t column
    Py_ssize_t first        # rows [first, end) of the column
    Py_ssize_t end


cdef struct Job:
    void *tok               # the NativeTokenizer (the caller holds it)
    Column *columns
    Task *tasks
    Py_ssize_t count        # tasks
    Stream *streams


cdef inline bint row_valid(const Column *c, Py_ssize_t i) noexcept nogil:
    cdef Py_ssize_t bit = c.offset + i
    return c.valid == NULL or (c.valid[bit >> 3] >> (bit & 7)) & 1


cdef inline void row_bounds(const Column *c, Py_ssize_t i, int64_t *start, int64_t *end) noexcept nogil:
    if c.offs32 != NULL:
        start[0] = c.offs32[c.offset + i]
        end[0] = c.offs32[c.offset + i + 1]
    else:
        start[0] = c.offs64[c.offset + i]
        end[0] = c.offs64[c.offset + i + 1]


cdef int encode_rows(void *ctx, Worker *w, Stream *st) noexcept nogil:
    """The scheduler's encode callback: one task's rows, each row's end (ids so
    far in the task) written to the column's result offsets."""
    cdef Job *job = <Job *> ctx
    cdef const Task *t = &job.tasks[st - job.streams]
    cdef const Column *c = &job.columns[t.column]
    cdef Py_ssize_t i, bad
    cdef int64_t start, end
    cdef int rc
    for i in range(t.first, t.end):
        if row_valid(c, i):
            row_bounds(c, i, &start, &end)
            if end > start:
                bad = utf8_invalid_at(c.data + start, end - start)
                if bad >= 0:
                    st.bad = i
                    st.geo.offset = bad
                    return RC_GEOMETRY
                rc = (<NativeTokenizer> job.tok).encode_data(w, c.data + start, end - start, &st.ids)
                if rc != RC_OK:
                    return rc
                if st.ids.len > INT32_MAX:
                    return RC_TOO_MANY_IDS
        c.out_offsets[i + 1] = <int32_t> st.ids.len
    return RC_OK


cdef bint finish_when_done(void *ctx, Stream *st, list results, Py_ssize_t k) except -1:
    """The convert callback, called for each task in order as it is done (the
    helpers meanwhile encode the next ones): after a column's last task, when
    every task of the column succeeded and its ids fit int32 offsets, its
    values array is made and filled (finish_column) and kept in results[k];
    the caller takes it from there. Returns whether the task ran out of
    memory."""
    cdef Job *job = <Job *> ctx
    cdef const Task *tasks = job.tasks
    cdef Py_ssize_t column = tasks[k].column, first = k, total = 0, t
    cdef cnp.ndarray values
    if st.rc == RC_NO_MEMORY:
        return True
    if k + 1 < job.count and tasks[k + 1].column == column:
        return False  # not the column's last task
    while first > 0 and tasks[first - 1].column == column:
        first -= 1
    for t in range(first, k + 1):
        if job.streams[t].rc != RC_OK:
            return False  # the caller reports it
        total += job.streams[t].ids.len
    if total > INT32_MAX:
        return False  # the caller reports it
    values = np.empty(total, dtype=np.int32)
    with nogil:
        finish_column(&job.columns[column], job.streams, tasks, first, k + 1, <int32_t *> cnp.PyArray_DATA(values))
    results[k] = values
    return False


cdef Py_ssize_t plan_tasks(Column *columns, Py_ssize_t ncols, Task **tasks_out) noexcept nogil:
    """Cut every column's rows into tasks; check that each valid row's bounds
    lie within its data. Returns the number of tasks, -1 when out of memory,
    or -2 - (the column) whose offsets are out of bounds."""
    cdef Task *tasks = NULL
    cdef void *grown
    cdef Py_ssize_t count = 0, cap = 0, k, i, first, nbytes
    cdef int64_t start, end
    cdef const Column *c
    for k in range(ncols):
        c = &columns[k]
        first = 0
        nbytes = 0
        for i in range(c.length + 1):
            if i > first and (i == c.length or nbytes >= TASK_BYTES or i - first >= TASK_ROWS):
                if count == cap:
                    cap = cap * 2 if cap else 64
                    grown = q4_realloc(tasks, <size_t> cap * sizeof(Task))
                    if grown == NULL:
                        q4_free(tasks)
                        return -1
                    tasks = <Task *> grown
                tasks[count].column = k
                tasks[count].first = first
                tasks[count].end = i
                count += 1
                first = i
                nbytes = 0
            if i < c.length and row_valid(c, i):
                row_bounds(c, i, &start, &end)
                if start < 0 or end < start or end > c.data_len:
                    q4_free(tasks)
                    return -2 - k
                nbytes += end - start
    tasks_out[0] = tasks
    return count


cdef void finish_column(Column *c, Stream *streams, const Task *tasks, Py_ssize_t first_task,
                        Py_ssize_t end_task, int32_t *values) noexcept nogil:
    """Make the column's offsets absolute and copy its tasks' ids into values."""
    cdef Py_ssize_t k, i
    cdef int32_t base = 0
    c.out_offsets[0] = 0
    for k in range(first_task, end_task):
        if base:
            for i in range(tasks[k].first, tasks[k].end):
                c.out_offsets[i + 1] += base
        if streams[k].ids.len:
            memcpy(values + base, streams[k].ids.data, <size_t> streams[k].ids.len * sizeof(int32_t))
        base += <int32_t> streams[k].ids.len
        idvec_free(&streams[k].ids)


cdef void copy_bits(const uint8_t *src, Py_ssize_t bit, Py_ssize_t n, uint8_t *dst) noexcept nogil:
    """dst[0:(n + 7) // 8] = the n bits of src from bit `bit`, from bit 0."""
    cdef Py_ssize_t i
    memset(dst, 0, <size_t> ((n + 7) >> 3))
    if bit & 7 == 0:
        memcpy(dst, src + (bit >> 3), <size_t> ((n + 7) >> 3))
        return
    for i in range(n):
        if (src[(bit + i) >> 3] >> ((bit + i) & 7)) & 1:
            dst[i >> 3] |= <uint8_t> (1 << (i & 7))


cdef class OpenArrays:
    """The columns of Arrow string arrays: arrays holds, per array,
    (validity, offsets, data, offset, length, large), the first three its
    buffers (objects with the buffer protocol, such as pyarrow Buffers;
    validity None when the array has no nulls, data None when it has no
    bytes), offset and length its slice, large True for int64 offsets. The
    buffers are held until the object is freed. ValueError when a buffer is
    too short for its rows."""
    cdef Py_buffer *views
    cdef Py_ssize_t held
    cdef Column *columns
    cdef Py_ssize_t n

    def __cinit__(self, list arrays):
        cdef Py_ssize_t k
        cdef Column *c
        cdef const uint8_t *p
        self.n = len(arrays)
        self.views = <Py_buffer *> q4_malloc(<size_t> max(3 * self.n, 1) * sizeof(Py_buffer))
        self.columns = <Column *> q4_malloc(<size_t> max(self.n, 1) * sizeof(Column))
        if self.views == NULL or self.columns == NULL:
            raise MemoryError("out of memory preparing Arrow arrays")
        memset(self.columns, 0, <size_t> max(self.n, 1) * sizeof(Column))
        for k in range(self.n):
            valid, offs, data, offset, length, large = arrays[k]
            c = &self.columns[k]
            c.offset, c.length = offset, length
            if c.offset < 0 or c.length < 0:
                raise ValueError(f"array {k}: negative offset or length")
            c.valid = self.open(valid)
            if c.valid != NULL and self.views[self.held - 1].len * 8 < c.offset + c.length:
                raise ValueError(f"array {k}: its validity bitmap is shorter than its rows")
            if c.length == 0:
                c.valid = NULL  # nothing to read: an empty array may have no buffers at all
                continue
            p = self.open(offs)
            if p == NULL or self.views[self.held - 1].len < (c.offset + c.length + 1) * (8 if large else 4):
                raise ValueError(f"array {k}: its offsets buffer is shorter than its rows")
            if large:
                c.offs64 = <const int64_t *> p
            else:
                c.offs32 = <const int32_t *> p
            c.data = self.open(data)
            c.data_len = self.views[self.held - 1].len if data is not None else 0

    cdef const uint8_t *open(self, object obj) except? NULL:
        """The bytes of obj (None: NULL) through the buffer protocol, held."""
        if obj is None:
            return NULL
        PyObject_GetBuffer(obj, &self.views[self.held], PyBUF_SIMPLE)
        self.held += 1
        return <const uint8_t *> self.views[self.held - 1].buf

    def __dealloc__(self):
        cdef Py_ssize_t k
        if self.views != NULL:
            for k in range(self.held):
                PyBuffer_Release(&self.views[k])
        q4_free(self.views)
        q4_free(self.columns)


def encode_string_arrays(NativeTokenizer tok, list arrays, int num_threads):
    """Ids of every row of Arrow string arrays (see OpenArrays), as list<int32>
    buffers. Returns (results, bad): results, per array, (validity, offsets,
    values), the result's validity bitmap as a uint8 array from bit 0 (None
    when the input's was None) and its int32 offsets and values as numpy
    arrays; or results None and bad = (array, row, byte) of the first row
    that is not valid UTF-8 (rows of earlier arrays first). ValueError when
    an array's buffers are too short for its rows or one array's ids do not
    fit int32 offsets; MemoryError when out of memory."""
    cdef OpenArrays opened = OpenArrays(arrays)
    cdef Column *columns = opened.columns
    cdef Py_ssize_t ncols = opened.n, k, count = 0, t, first
    cdef Task *tasks = NULL
    cdef Stream *streams = NULL
    cdef Job job
    cdef Column *c
    cdef cnp.ndarray values
    cdef int32_t[::1] offsets_view
    cdef uint8_t[::1] bits_view
    out_offsets, out_valid = [], []
    for k in range(ncols):
        c = &columns[k]
        out = np.empty(c.length + 1, dtype=np.int32)
        offsets_view = out
        c.out_offsets = &offsets_view[0]
        c.out_offsets[0] = 0
        out_offsets.append(out)
        bits = None
        if c.valid != NULL:
            bits = np.empty((c.length + 7) >> 3, dtype=np.uint8)
            bits_view = bits
            copy_bits(c.valid, c.offset, c.length, &bits_view[0])
        out_valid.append(bits)
    with nogil:
        count = plan_tasks(columns, ncols, &tasks)
    if count == -1:
        raise MemoryError("out of memory preparing Arrow arrays")
    if count < -1:
        raise ValueError(f"array {-2 - count}: a row's offsets lie outside its data buffer")
    finished = None  # per task: its column's values once the column is joined (finish_when_done)
    try:
        if count:
            streams = new_streams(count)
            for t in range(count):
                streams[t].n = row_bytes(&columns[tasks[t].column], tasks[t].first, tasks[t].end)
            job.tok = <void *> tok
            job.columns = columns
            job.tasks = tasks
            job.streams = streams
            job.count = count
            finished = tok.run_jobs(streams, count, num_threads, encode_rows, finish_when_done, <void *> &job,
                                    CHECK_EVERY, False)  # columns are joined in order
            for t in range(count):
                if streams[t].rc == RC_GEOMETRY:
                    return None, (tasks[t].column, streams[t].bad, streams[t].geo.offset)
                if streams[t].rc == RC_TOO_MANY_IDS:
                    raise ValueError(f"array {tasks[t].column}: more than 2**31 - 1 ids in one array; "
                                     "cut it into smaller chunks")
        results = []
        t = 0
        for k in range(ncols):
            first = t
            while t < count and tasks[t].column == k:
                t += 1
            if t == first:  # no rows: no task
                values = np.empty(0, dtype=np.int32)
            else:
                values = finished[t - 1]  # joined during the run (finish_when_done)
                if values is None:  # every task succeeded (checked above): too many ids to join
                    raise ValueError(f"array {k}: more than 2**31 - 1 ids in one array; cut it into smaller chunks")
            results.append((out_valid[k], out_offsets[k], values))
        return results, None
    finally:
        if streams != NULL:
            free_streams(streams, count)
        q4_free(tasks)


def invalid_utf8_rows(list arrays):
    """The rows (numbered over all the arrays, see OpenArrays) that are not
    null and not valid UTF-8, as an int64 array."""
    cdef OpenArrays opened = OpenArrays(arrays)
    cdef Py_ssize_t k, i, base = 0
    cdef int64_t start, end
    cdef const Column *c
    bad = []
    for k in range(opened.n):
        c = &opened.columns[k]
        for i in range(c.length):
            if row_valid(c, i):
                row_bounds(c, i, &start, &end)
                if start < 0 or end < start or end > c.data_len:
                    raise ValueError(f"array {k}: a row's offsets lie outside its data buffer")
                if end > start and utf8_invalid_at(c.data + start, end - start) >= 0:
                    bad.append(base + i)
        base += c.length
    return np.array(bad, dtype=np.int64)


cdef Py_ssize_t row_bytes(const Column *c, Py_ssize_t first, Py_ssize_t end) noexcept nogil:
    """Bytes of rows [first, end) (nulls count as their offsets say: a budget only)."""
    cdef int64_t a, b, x, y
    row_bounds(c, first, &a, &x)
    row_bounds(c, end - 1, &y, &b)
    return <Py_ssize_t> (b - a) if b >= a else 0
