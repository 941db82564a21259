# cython: language_level=3
"""The output side's per-id work, native because a profile of the Python
version showed interpreter overhead as the whole cost of one-id feeds.

* `held_from` / `Utf8Stream`: incremental UTF-8 that holds only a proper
  prefix of a well-formed sequence (Unicode table 3-7), so U+FFFD comes as
  soon as bytes can no longer complete (CPython's incremental decoder holds
  b"\\xed\\xa0" until the end);
* `DecodeStreamCore.step`;
* `ParserCore`: the completion parser's state machine. Grammar, whitespace
  rules and the error model are documented in src/qwen4exp/completion.py,
  which also validates tool call bodies (once per call, in Python).

Errors: this module imports nothing of the Python layer. A bad id or a feed
after the end calls the Python subclass's `_bad_id(id, index)` /
`_finished()` (decode_stream.py, completion.py), which build the exception
with qwen4exp.errors.
"""
import numpy as np

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.unicode cimport PyUnicode_DecodeUTF8

cdef enum:
    START = 0
    REASONING = 1
    CONTENT = 2
    TOOL = 3
    DONE = 4

cdef enum:
    OPEN_THINK = 0
    CLOSE_THINK = 1
    OPEN_CALL = 2
    CLOSE_CALL = 3
    END = 4
    OTHER = 5

# roles by name, for completion.py
ROLES = {"open_think": OPEN_THINK, "close_think": CLOSE_THINK, "open_call": OPEN_CALL,
         "close_call": CLOSE_CALL, "end": END, "other": OTHER}
_MODE_NAMES = {START: "content", REASONING: "reasoning", CONTENT: "content", TOOL: "a tool call"}
_ARRAY_PATH_MIN = 64  # from this many ids, feed() finds atoms and decodes runs with numpy


@cython.freelist(64)
cdef class Delta:
    """New text of one channel: `kind` is "reasoning", "content" or "tool_call";
    `index` is the tool call's place (0, 1, ...) for "tool_call", else None.
    Compares, hashes and unpacks like the tuple (kind, text, index)."""

    def __init__(self, str kind not None, str text not None, index=None):
        self.kind = kind
        self.text = text
        self.index = index

    def __repr__(self):
        return f"Delta(kind={self.kind!r}, text={self.text!r}, index={self.index!r})"

    def __eq__(self, other):
        if not isinstance(other, Delta):
            return NotImplemented
        cdef Delta o = <Delta> other
        return self.kind == o.kind and self.text == o.text and self.index == o.index

    def __hash__(self):
        return hash((self.kind, self.text, self.index))

    def __iter__(self):
        return iter((self.kind, self.text, self.index))

    def __reduce__(self):
        return (Delta, (self.kind, self.text, self.index))


cdef inline Delta new_delta(str kind, str text, object index):
    cdef Delta d = Delta.__new__(Delta)
    d.kind = kind
    d.text = text
    d.index = index
    return d


cdef inline bint second_ok(unsigned char lead, unsigned char b) noexcept nogil:
    if lead == 0xE0:
        return 0xA0 <= b <= 0xBF
    if lead == 0xED:
        return 0x80 <= b <= 0x9F
    if lead == 0xF0:
        return 0x90 <= b <= 0xBF
    if lead == 0xF4:
        return 0x80 <= b <= 0x8F
    return 0x80 <= b <= 0xBF


cdef Py_ssize_t held_from(const unsigned char *p, Py_ssize_t n) noexcept nogil:
    """Where the unfinished character at the end of p[:n] starts (n: none)."""
    if n == 0 or p[n - 1] < 0x80:
        return n
    cdef Py_ssize_t i = n - 1
    cdef Py_ssize_t stop = n - 4 if n >= 4 else -1
    while i > stop and 0x80 <= p[i] <= 0xBF:
        i -= 1
    if i == stop:  # only continuation bytes: nothing can start here
        return n
    cdef unsigned char lead = p[i]
    cdef Py_ssize_t need = 0
    if 0xC2 <= lead <= 0xDF:
        need = 2
    elif 0xE0 <= lead <= 0xEF:
        need = 3
    elif 0xF0 <= lead <= 0xF4:
        need = 4
    if n - i >= need:
        return n
    if n - i >= 2 and not second_ok(lead, p[i + 1]):
        return n
    return i


cdef class Utf8Stream:
    """Incremental UTF-8 decoding that holds only bytes that can still complete."""

    def __cinit__(self):
        self.pending = b""

    cdef str take(self, bytes data):
        if PyBytes_GET_SIZE(self.pending):
            data = self.pending + data
            self.pending = b""
        cdef Py_ssize_t n = PyBytes_GET_SIZE(data)
        cdef const char *p = PyBytes_AS_STRING(data)
        cdef Py_ssize_t cut = held_from(<const unsigned char *> p, n)
        if cut < n:
            self.pending = data[cut:]
        return PyUnicode_DecodeUTF8(p, cut, "replace")

    cdef str end(self):
        cdef bytes pending = self.pending
        self.pending = b""
        return PyUnicode_DecodeUTF8(PyBytes_AS_STRING(pending), PyBytes_GET_SIZE(pending), "replace")

    def decode(self, bytes data not None):
        """The text that `data` (after what came before) completes."""
        return self.take(data)

    def flush(self):
        """U+FFFD for an unfinished character (the bytes end here), else ""."""
        return self.end()


cdef class DecodeStreamCore(Utf8Stream):

    def __init__(self, list table not None):
        self.table = table
        self.count = 0

    def step(self, id):
        """The text that became complete with `id` ("" while a character is unfinished)."""
        cdef list table = self.table
        cdef object data = None
        cdef Py_ssize_t i
        if type(id) is int:
            if 0 <= id < len(table):
                i = id
                data = table[i]
        elif not isinstance(id, bool) and hasattr(id, "__index__"):
            if 0 <= id < len(table):
                i = id.__index__()
                data = table[i]
        if data is None:
            raise self._bad_id(id, self.count)
        self.count += 1
        return self.take(<bytes> data)


cdef class ParserCore:

    def __init__(self, tables, dict roles not None, decode_run, decode_text, tool_call,
                 bint in_reasoning):
        self.utf8 = Utf8Stream()
        self.parse = tables.parse
        self.spelled = tables.text
        self.is_atom = tables.is_atom
        self.has_gaps = tables.has_gaps
        self.roles = roles
        self.decode_run = decode_run
        self.decode_text = decode_text
        self.tool_call = tool_call
        self.reasoning = None
        self.content = []
        self.body = []
        self.calls = []
        self.invalid = []
        self.errors = []
        self.trailing = []
        self.ncalls = 0
        self.count = 0
        self.result = None
        self._where = "feed()"
        self.held = False
        if in_reasoning:
            self.enter(REASONING, 1)
        else:
            self.enter(START, 0)

    # -- feeding -------------------------------------------------------------

    def feed(self, ids):
        """Parse the next ids (an int, a sequence of ints or a 1-D int array);
        return the new deltas. Raises Qwen4ExpError, changing nothing, for an id
        that is not in the vocabulary."""
        cdef list out = []
        cdef Py_ssize_t i
        cdef object data
        if type(ids) is int and self.mode != DONE and self.result is None and 0 <= ids < len(self.parse):
            i = ids  # one id: the generate loop's case
            data = self.parse[i]
            if data is not None:  # None: a gap in the ids, reported below
                if type(data) is bytes:
                    self.text(<bytes> data, out)
                else:
                    self.atom(i, self.count, out)
                self.count += 1
                return out
        if self.result is not None:
            raise self._finished()
        ids = self.checked(ids)
        if self.mode == DONE:
            self.trailing.extend(ids.tolist() if isinstance(ids, np.ndarray) else ids)
        elif isinstance(ids, np.ndarray):
            self.feed_array(ids, out)
        else:
            self.feed_list(<list> ids, out)
        self.count += len(ids)
        return out

    cdef checked(self, ids):
        """`ids` as a list of ints (short) or an int64 array (long), all valid."""
        cdef Py_ssize_t n = len(self.parse)
        cdef list parse = self.parse
        if type(ids) is int:
            ids = [ids]
        elif isinstance(ids, np.integer):  # one id straight from a numpy sampler
            ids = [int(ids)]
        elif isinstance(ids, np.ndarray):
            if ids.ndim != 1 or ids.dtype.kind not in "iu":
                raise TypeError(f"{self._where} takes a 1-D array of integer ids")
            ids = ids.astype(np.int64, copy=False)
        else:
            if isinstance(ids, (str, bytes)) or not hasattr(ids, "__iter__"):
                raise TypeError(f"{self._where} takes ids (an int or a sequence of ints), not {type(ids).__name__}")
            ids = list(ids)
            if set(map(type, ids)) - {int}:
                for k, i in enumerate(ids):
                    if isinstance(i, bool) or not hasattr(i, "__index__"):
                        raise self._bad_id(i, self.count + k)
                ids = [i.__index__() for i in ids]
        if len(ids):
            if isinstance(ids, np.ndarray):
                bad = (ids < 0) | (ids >= n)
                if self.has_gaps and not bad.any():
                    bad = np.array([parse[i] is None for i in ids.tolist()])
                if bad.any():
                    k = int(np.flatnonzero(bad)[0])
                    raise self._bad_id(int(ids[k]), self.count + k)
            elif min(ids) < 0 or max(ids) >= n or (self.has_gaps and None in [parse[i] for i in ids]):
                k = next(k for k, i in enumerate(ids) if not 0 <= i < n or parse[i] is None)
                raise self._bad_id(ids[k], self.count + k)
        if type(ids) is list and len(ids) >= _ARRAY_PATH_MIN:
            ids = np.array(ids, dtype=np.int64)  # validated: fits
        return ids

    cdef feed_list(self, list ids, list out):
        cdef list parse = self.parse
        cdef list run = []
        cdef Py_ssize_t k, i, m = len(ids)
        cdef object data
        for k in range(m):
            i = ids[k]
            data = parse[i]
            if type(data) is bytes:
                run.append(data)
                continue
            if run:
                self.text(b"".join(run), out)
                run = []
            self.atom(i, self.count + k, out)
            if self.mode == DONE:
                self.trailing.extend(ids[k + 1 :])
                return
        if run:
            self.text(b"".join(run), out)

    cdef feed_array(self, ids, list out):
        cdef list at = np.flatnonzero(self.is_atom[ids]).tolist()
        cdef Py_ssize_t start = 0, n = len(ids)
        at.append(n)
        for k in at:
            if k > start:
                data, _ = self.decode_run(ids[start:k].astype(np.int32))
                self.text(data, out)
            if k == n:
                return
            self.atom(int(ids[k]), self.count + k, out)
            start = k + 1
            if self.mode == DONE:
                self.trailing.extend(ids[start:].tolist())
                return

    # -- channels ------------------------------------------------------------

    cdef enter(self, int mode, int lead):
        """Switch channel; `lead`: how many leading newlines the template wrote."""
        self.mode = mode
        self.lead = lead
        self.held = False
        if mode == REASONING:
            if self.reasoning is None:
                self.reasoning = []
            self.parts, self.kind, self.index = self.reasoning, "reasoning", None
        elif mode == TOOL:
            self.body = []
            self.parts, self.kind, self.index = self.body, "tool_call", self.ncalls
        else:
            self.parts, self.kind, self.index = self.content, "content", None

    cdef text(self, bytes data, list out):
        cdef str text = self.utf8.take(data)
        if text:
            self.route(text, out)

    cdef route(self, str text, list out):
        """Append decoded text to the current channel, minus template newlines."""
        cdef Py_ssize_t k = 0, n
        if self.mode == START:  # text first: no reasoning block can open now
            self.mode = CONTENT
        if self.lead:
            n = len(text)
            while k < self.lead and k < n and text[k] == "\n":
                k += 1
            self.lead = 0 if k < n else self.lead - k
            if k:
                text = text[k:]
            if not text:
                return
        if self.held:
            text = "\n" + text
            self.held = False
        if text[len(text) - 1] == "\n":  # may be the newline the template writes before an atom
            self.held = True
            text = text[: len(text) - 1]
            if not text:
                return
        self.parts.append(text)
        out.append(new_delta(self.kind, text, self.index))

    cdef release(self, list out):
        """The held newline is text after all."""
        if self.held:
            self.held = False
            self.parts.append("\n")
            out.append(new_delta(self.kind, "\n", self.index))

    # -- atoms ---------------------------------------------------------------

    cdef atom(self, Py_ssize_t i, Py_ssize_t position, list out):
        cdef str tail = self.utf8.end()  # an unfinished character ends at any atom
        if tail:
            self.route(tail, out)
        cdef int role = self.roles[i]
        cdef int mode = self.mode
        if role == END:
            self.release(out)
            if mode == TOOL:
                self.close_call("unterminated tool call (no </tool_call> before the end)")
            elif mode == REASONING:
                self.error(position, "the message ended inside reasoning (no </think>)", "")
            self.mode = DONE
        elif role == OPEN_THINK and mode == START:
            self.enter(REASONING, 1)
        elif role == CLOSE_THINK and mode == REASONING:
            self.enter(CONTENT, 2)
        elif role == OPEN_CALL and (mode == START or mode == CONTENT):
            self.enter(TOOL, 1)
            self.ncalls += 1
        elif role == CLOSE_CALL and mode == TOOL:
            self.close_call(None)
            self.enter(CONTENT, 0)
        else:
            spelling = (<bytes> self.spelled[i]).decode("utf-8")
            hint = ""
            if role == CLOSE_THINK and self.reasoning is None:
                hint = " (if the prompt opened <think>, parse with in_reasoning=True)"
            self.error(position, f"unexpected {spelling} in {_MODE_NAMES[mode]}{hint}", spelling)

    cdef error(self, Py_ssize_t position, str message, str text):
        self.errors.append({"position": position, "error": message, "text": text})

    cdef close_call(self, object unterminated):
        body = "".join(self.body)
        if unterminated is None:
            call = self.tool_call(body)
            if isinstance(call, tuple):
                name, arguments = call
                self.calls.append({"type": "function", "function": {"name": name, "arguments": arguments}})
                return
            unterminated = call
        self.invalid.append({"index": self.ncalls - 1, "text": body, "error": unterminated})

    # -- the end -------------------------------------------------------------

    def finish(self):
        """The message: role, content, reasoning_content (None when no reasoning
        was opened), tool_calls, and invalid_tool_calls / errors when needed."""
        if self.result is not None:
            return self.result
        cdef list sink = []
        tail = self.utf8.end()
        if tail:
            self.route(tail, sink)
        if self.mode != DONE:
            self.release(sink)
            if self.mode == TOOL:
                self.close_call("unterminated tool call (the completion ends inside it)")
            self.error(self.count, "truncated: the completion ends without <|im_end|>", "")
        elif self.trailing:
            self.error(self.count - len(self.trailing), "ids after the end of the message",
                       self.decode_text(self.trailing))
        msg = {
            "role": "assistant",
            "content": "".join(self.content),
            "reasoning_content": None if self.reasoning is None else "".join(self.reasoning),
            "tool_calls": self.calls,
        }
        if self.invalid:
            msg["invalid_tool_calls"] = self.invalid
        if self.errors:
            msg["errors"] = self.errors
        self.result = msg
        return msg
