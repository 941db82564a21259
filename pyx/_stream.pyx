# cython: language_level=3, boundscheck=True, wraparound=True
"""The output side's per-id work, native because a profile of the Python
version showed interpreter overhead as the whole cost of one-id feeds.

* `held_from` / `Utf8Stream`: incremental UTF-8 that holds only a proper
  prefix of a well-formed sequence (Unicode table 3-7), so U+FFFD comes as
  soon as bytes can no longer complete (CPython's incremental decoder holds
  b"\\xed\\xa0" until the end);
* `DecodeStreamCore.step`;
* `ParserCore`: the completion parser's state machine: atoms -> channels
  (reasoning, content, tool calls). Grammar, whitespace rules and the error
  model are documented in src/qwen4exp/parse/completion.py; each call's text goes,
  as it arrives, to a reader from src/qwen4exp/parse/tool_calls.py (Python: a
  call's body is a small part of the ids).

Indexing is bounds-checked here (the header's directives override the build's):
the per-id cost is a Python call or two, and an index past a str's end must be
an IndexError, never a read of other memory.

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

# what each atom id does to the parser, by name (completion.py maps atom ids to these)
ATOM_ACTIONS = {"open_think": OPEN_THINK, "close_think": CLOSE_THINK, "open_call": OPEN_CALL,
         "close_call": CLOSE_CALL, "end": END, "other": OTHER}
_MODE_NAMES = {START: "content", REASONING: "reasoning", CONTENT: "content", TOOL: "a tool call"}
_ARRAY_PATH_MIN = 64  # from this many ids, feed() finds atoms and decodes runs with numpy
_FUNCTION = "<function="  # how an XML call body starts (text, not an atom)


@cython.freelist(64)
cdef class Delta:
    """New output of one channel: `kind` is "reasoning", "content" or "tool_call";
    `index` is the tool call's place (0, 1, ...) for "tool_call", else None.

    A tool call streams as a first delta that carries its `name` and
    `call_id` (text ""), then deltas whose `text` are fragments of its
    `arguments` JSON. `openai()` gives the `choices[0].delta` an OpenAI-style
    server sends for it. Compares and hashes by all five fields; unpacks like
    the tuple (kind, text, index)."""

    def __init__(self, str kind not None, str text not None, index=None, *, name=None, call_id=None):
        self.kind = kind
        self.text = text
        self.index = index
        self.name = name
        self.call_id = call_id

    def __repr__(self):
        if self.call_id is not None:
            return (f"Delta(kind={self.kind!r}, text={self.text!r}, index={self.index!r}, "
                    f"name={self.name!r}, call_id={self.call_id!r})")
        return f"Delta(kind={self.kind!r}, text={self.text!r}, index={self.index!r})"

    def __eq__(self, other):
        if not isinstance(other, Delta):
            return NotImplemented
        cdef Delta o = <Delta> other
        return (self.kind == o.kind and self.text == o.text and self.index == o.index
                and self.name == o.name and self.call_id == o.call_id)

    def __hash__(self):
        return hash((self.kind, self.text, self.index, self.name, self.call_id))

    def __iter__(self):
        return iter((self.kind, self.text, self.index))

    def __reduce__(self):
        if self.call_id is None:
            return (Delta, (self.kind, self.text, self.index))
        return (_delta, (self.kind, self.text, self.index, self.name, self.call_id))

    def openai(self):
        """The `choices[0].delta` dict of an OpenAI-compatible chat stream:
        {"reasoning_content": text}, {"content": text}, a call's first delta
        {"tool_calls": [{"index", "id", "type": "function", "function":
        {"name", "arguments": ""}}]}, then {"tool_calls": [{"index",
        "function": {"arguments": fragment}}]}."""
        if self.kind == "content":
            return {"content": self.text}
        if self.kind == "reasoning":
            return {"reasoning_content": self.text}
        if self.call_id is not None:
            return {"tool_calls": [{"index": self.index, "id": self.call_id, "type": "function",
                                    "function": {"name": self.name, "arguments": ""}}]}
        return {"tool_calls": [{"index": self.index, "function": {"arguments": self.text}}]}


def _delta(kind, text, index, name, call_id):
    """Unpickles a call's first delta (keywords cannot go through __reduce__)."""
    return Delta(kind, text, index, name=name, call_id=call_id)


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

    def __init__(self, tables, dict actions not None, decode_run, decode_text, open_call,
                 bint in_reasoning, int lead, int first_call_newlines, bint reasoning_calls):
        self.utf8 = Utf8Stream()
        self.parse = tables.parse
        self.spelled = tables.text
        self.is_atom = tables.is_atom
        self.has_gaps = tables.has_gaps
        self.actions = actions
        self.decode_run = decode_run
        self.decode_text = decode_text
        self.open_call = open_call
        self.reader = None
        self.first_call_newlines = first_call_newlines
        self.reasoning_calls = reasoning_calls
        self.reasoning_call_open = False
        self.pending_call = False
        self.call_text = []
        self.tail = ""
        self.after_call = CONTENT
        self.reasoning = None
        self.content = []
        self.calls = []
        self.invalid = []
        self.errors = []
        self.trailing = []
        self.ncalls = 0
        self.count = 0
        self.result = None
        self._where = "feed()"
        self.held = 0
        self.chars_scanned = 0
        self.written = []
        self.enter(REASONING if in_reasoning else START, lead)

    # -- feeding -------------------------------------------------------------

    def feed(self, ids):
        """Parse the next ids (an int, a sequence of ints or a 1-D int array);
        return the new deltas. Raises Qwen4ExpError, changing nothing, for an id
        that is not in the vocabulary."""
        cdef list out = []
        cdef Py_ssize_t i
        cdef object data
        if type(ids) is int and self.result is None and 0 <= ids < len(self.parse):
            i = ids  # one id: the generate loop's case
            data = self.parse[i]
            if data is not None:  # None: a gap in the ids, reported below
                if self.mode == DONE:
                    self.trailing.append(ids)
                elif type(data) is bytes:
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
            if ids.dtype.kind == "u" and len(ids):  # range-check before int64 could wrap it
                bad = ids >= n
                if bad.any():
                    k = int(np.flatnonzero(bad)[0])
                    raise self._bad_id(int(ids[k]), self.count + k)
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
        self.held = 0
        self.line_start = True
        if mode == REASONING:
            if self.reasoning is None:
                self.reasoning = []
            self.parts, self.kind, self.index = self.reasoning, "reasoning", None
        elif mode == TOOL:
            self.parts, self.kind, self.index = None, "tool_call", self.ncalls - 1
        else:
            self.parts, self.kind, self.index = self.content, "content", None

    cdef text(self, bytes data, list out):
        self.written.append(data)
        cdef str text = self.utf8.take(data)
        if text:
            self.route(text, out)

    cdef route(self, str text, list out):
        """Append decoded text to the current channel, minus template newlines;
        a tool call's text goes to its reader as it is."""
        cdef Py_ssize_t k = 0, n
        if self.mode == TOOL:
            deltas = self.reader.feed(text)
            if deltas:
                out.extend(deltas)
            return
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
        if self.mode == CONTENT and (self.pending_call or self.tail or "<" in text):
            self.scan_content(text, out)
        else:
            self.plain(text, out)

    cdef plain(self, str text, list out):
        """Emit text, holding back its final newlines (the template may have written them).
        Held newlines are a count: a run of them costs O(1) an id, however long."""
        cdef Py_ssize_t n = len(text)
        cdef Py_ssize_t k = n
        self.chars_scanned += n
        while k > 0 and text[k - 1] == "\n":
            k -= 1
        if k == 0:  # only newlines (or nothing): still undecided
            self.held += n
            return
        if self.held:  # text follows the held newlines: they are text
            text = "\n" * self.held + text
            k += self.held
            n += self.held
        self.held = n - k
        if k < n:
            text = text[:k]
        self.emit(text, out)

    cdef scan_content(self, str text, list out):
        """Content that may hold a call written without its <tool_call> atom: from a
        `<function=` at the start of a line, text is held until the next atom shows
        what it is (a </tool_call>: a call; any other: content)."""
        cdef Py_ssize_t k, nl
        if self.pending_call:
            self.call_text.append(text)
            return
        if self.tail:
            text = self.tail + text
            self.tail = ""
        cdef bint line_start = self.held > 0 or self.line_start
        k = text.find(_FUNCTION)
        while k > 0 and text[k - 1] != "\n":
            k = text.find(_FUNCTION, k + 1)
        if k == 0 and not line_start:
            k = text.find("\n" + _FUNCTION)
            k = k + 1 if k >= 0 else -1
        if k >= 0:
            self.plain(text[:k], out)
            self.pending_call = True
            self.call_text = [text[k:]]
            return
        nl = text.rfind("\n")
        if (nl >= 0 or line_start) and nl + 1 < len(text) and _FUNCTION.startswith(text[nl + 1 :]):
            self.tail = text[nl + 1 :]  # may become `<function=`
            text = text[: nl + 1]
        self.plain(text, out)

    cdef flush_pending(self, list out):
        """Text held as a possible call is content after all."""
        cdef str text = self.tail
        if self.pending_call:
            text = "".join(self.call_text)
            self.pending_call = False
            self.call_text = []
        self.tail = ""
        if text:
            self.plain(text, out)

    cdef emit(self, str text, list out):
        if not text:  # no delta without text
            return
        self.parts.append(text)
        self.line_start = text.endswith("\n")
        out.append(new_delta(self.kind, text, self.index))

    cdef release(self, list out):
        """The held newlines are text after all."""
        if self.held:
            text = "\n" * self.held
            self.held = 0
            self.emit(text, out)

    # -- atoms ---------------------------------------------------------------

    cdef atom(self, Py_ssize_t i, Py_ssize_t position, list out):
        self.written.append(self.spelled[i])
        cdef str tail = self.utf8.end()  # an unfinished character ends at any atom
        if tail:
            self.route(tail, out)
        cdef int action = self.actions[i]
        cdef int mode = self.mode
        if self.pending_call and action == CLOSE_CALL:
            self.recover_call(i, position, out)
            return
        if self.pending_call or self.tail:
            self.flush_pending(out)
        if action == END:
            if mode == TOOL:
                self.close_call("ended", out)
                mode = self.after_call
            else:
                self.release(out)
            if mode == REASONING:
                self.error(position, "the message ended inside reasoning (no </think>)", "")
            self.mode = DONE
        elif action == OPEN_THINK and mode == START:
            self.enter(REASONING, 1)
        elif action == CLOSE_THINK and mode == REASONING:
            if self.held > 1:  # the template writes one newline before </think>
                self.held -= 1
                self.release(out)
            self.reasoning_call_open = False
            self.enter(CONTENT, 2)
        elif action == OPEN_CALL and (mode == START or mode == CONTENT):
            self.open_tool(position, False, out)
        elif action == OPEN_CALL and mode == REASONING:
            if self.reasoning_calls:
                self.error(position, "a tool call inside reasoning (before </think>), parsed as a call "
                           "as calls_in_reasoning='call' asks", self.spelled_atom(i))
                self.open_tool(position, True, out)
            else:
                self.release(out)
                self.lead = 0
                self.emit(self.spelled_atom(i), out)
                self.reasoning_call_open = True
                self.error(position, "a tool call inside reasoning (before </think>) is not executed: "
                           "it stays reasoning text (calls_in_reasoning='call' parses it)",
                           self.spelled_atom(i))
        elif action == OPEN_CALL and mode == TOOL:  # the previous call was never closed
            self.close_call("reopened", out)
            self.enter(self.after_call, 0)
            self.open_tool(position, self.after_call == REASONING, out)
        elif action == CLOSE_CALL and mode == TOOL:
            self.close_call("closed", out)
            self.enter(self.after_call, 0)
        elif action == CLOSE_CALL and mode == REASONING and self.reasoning_call_open:
            self.release(out)
            self.lead = 0
            self.emit(self.spelled_atom(i), out)
            self.reasoning_call_open = False
        else:
            spelling = self.spelled_atom(i)
            hint = ""
            if action == CLOSE_THINK and self.reasoning is None:
                hint = " (if the prompt opened <think>, pass the prompt or in_reasoning=True)"
            self.error(position, f"unexpected {spelling} in {_MODE_NAMES[mode]}{hint}", spelling)

    cdef str spelled_atom(self, Py_ssize_t i):
        return (<bytes> self.spelled[i]).decode("utf-8")

    cdef open_tool(self, Py_ssize_t position, bint in_reasoning, list out):
        """A <tool_call> opens a call: drop the newlines the template writes before it."""
        cdef Py_ssize_t expected
        if self.held:
            if self.ncalls:
                expected = 1
            elif in_reasoning or self.content:
                expected = self.first_call_newlines
            elif self.first_call_newlines == 1:
                # Qwen3 writes its "\n" after any content that is not "", also one of
                # newlines only, which it may strip to "" (after reasoning): so the
                # last newline is the template's unless it is the only one
                expected = 1 if self.held > 1 else 0
            else:  # 3.5+ writes "\n\n" only after content that is not blank
                self.error(position, "newlines before the first tool call, with no content before "
                           "them (the template writes them only after content): dropped",
                           "\n" * self.held)
                expected = self.held
            if self.held > expected:
                self.held -= expected
                self.release(out)
            self.held = 0
        self.ncalls += 1
        self.after_call = REASONING if in_reasoning else CONTENT
        self.reader = self.open_call(self.ncalls - 1, position)
        self.enter(TOOL, 0)

    cdef recover_call(self, Py_ssize_t i, Py_ssize_t position, list out):
        """A </tool_call> after a held `<function=` line: a call whose <tool_call>
        the model left out (repaired, and reported at the </tool_call>)."""
        body = "".join(self.call_text)
        self.pending_call = False
        self.call_text = []
        self.error(position, "a tool call without <tool_call> (read from its <function= line)",
                   self.spelled_atom(i))
        self.open_tool(position, False, out)
        deltas = self.reader.feed(body)
        if deltas:
            out.extend(deltas)
        self.close_call("closed", out)
        self.enter(self.after_call, 0)

    cdef error(self, Py_ssize_t position, str message, str text):
        self.errors.append({"position": position, "error": message, "text": text})

    cdef close_call(self, str how, list out):
        """End the open call (`how`: "closed", "ended", "reopened" or "truncated")."""
        call, invalid, errors = self.reader.close(how, out)
        self.chars_scanned += self.reader.scanned
        self.reader = None
        if call is not None:
            self.calls.append(call)
        if invalid is not None:
            self.invalid.append(invalid)
        if errors:
            self.errors.extend(errors)

    # -- copies --------------------------------------------------------------

    def __copy__(self):
        """An independent parser in the same state: feeding one does not change
        the other (a generate loop that branches, as beam search does)."""
        import copy

        cdef ParserCore c = type(self).__new__(type(self))
        c.utf8 = Utf8Stream()
        c.utf8.pending = self.utf8.pending
        c.parse, c.spelled, c.is_atom, c.has_gaps = self.parse, self.spelled, self.is_atom, self.has_gaps
        c.actions, c.decode_run, c.decode_text, c.open_call = self.actions, self.decode_run, self.decode_text, self.open_call
        c.reader = None if self.reader is None else self.reader.copy()
        c.mode, c.after_call, c.lead, c.held = self.mode, self.after_call, self.lead, self.held
        c.first_call_newlines, c.reasoning_calls = self.first_call_newlines, self.reasoning_calls
        c.reasoning_call_open = self.reasoning_call_open
        c.pending_call, c.call_text, c.tail = self.pending_call, list(self.call_text), self.tail
        c.line_start = self.line_start
        c.kind, c.index = self.kind, self.index
        c.reasoning = None if self.reasoning is None else list(self.reasoning)
        c.content = list(self.content)
        c.parts = c.reasoning if self.parts is self.reasoning else (c.content if self.parts is self.content else None)
        c.calls = copy.deepcopy(self.calls)
        c.invalid = copy.deepcopy(self.invalid)
        c.errors = copy.deepcopy(self.errors)
        c.trailing = list(self.trailing)
        c.written = list(self.written)
        c.ncalls, c.count, c.chars_scanned = self.ncalls, self.count, self.chars_scanned
        c.result = copy.deepcopy(self.result)
        c._where = self._where
        return c

    @property
    def scanned(self):
        """Characters of text the parser has examined, held text counted each
        time it is looked at again: linear in the text for every input (the
        tests bound it; no clock involved)."""
        return self.scanned_total()

    cdef Py_ssize_t scanned_total(self):
        if self.reader is None:
            return self.chars_scanned
        return self.chars_scanned + self.reader.scanned

    def __deepcopy__(self, memo):
        return self.__copy__()

    def __reduce__(self):
        raise TypeError(f"a {type(self).__name__} cannot be pickled (it holds the vocabulary's "
                        "tables); pickle the ids and feed them to a new parser")

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
        if self.pending_call or self.tail:
            self.flush_pending(sink)
        if self.mode != DONE:
            if self.mode == TOOL:
                self.close_call("truncated", sink)
            else:
                self.release(sink)
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
        if not self.errors and not self.invalid:  # else the reports already say what went wrong
            self._finish_message(msg, self.count - len(self.trailing) - 1 if self.mode == DONE else self.count)
        if self.errors:
            self.errors.sort(key=_position)  # a call's repairs are reported when it closes
            msg["errors"] = self.errors
        self.result = msg
        return msg

    def _finish_message(self, msg, position):
        """Called once with a message that has nothing to report yet, before it
        is returned (`position`: the index of its end atom, or the number of
        ids when it has none); a subclass may report with `_report`."""

    def _report(self, position, message, text):
        self.error(position, message, text)

    def written_bytes(self):
        """The bytes of the ids fed up to the message's end, atoms spelled."""
        return b"".join(self.written)


def _position(error):
    return error["position"]
