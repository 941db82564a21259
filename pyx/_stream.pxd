# The output side's per-id work (src/qwen4exp/parse/decode_stream.py and
# completion.py hold the documented classes built on these).

cdef Py_ssize_t held_from(const unsigned char *p, Py_ssize_t n) noexcept nogil


cdef class Delta:
    cdef readonly str kind      # "reasoning", "content" or "tool_call"
    cdef readonly str text
    cdef readonly object index  # the tool call's place for "tool_call", else None
    cdef readonly object name   # a call's first delta: the function name, else None
    cdef readonly object call_id  # a call's first delta: its id, else None


cdef class Utf8Stream:
    cdef bytes pending          # a proper prefix of a well-formed sequence, or b""
    cdef str take(self, bytes data)
    cdef str end(self)


cdef class DecodeStreamCore(Utf8Stream):
    cdef list table             # id -> bytes (None: no such id)
    cdef Py_ssize_t count       # ids stepped so far (for error messages)


cdef class ParserCore:
    cdef Utf8Stream utf8
    cdef list parse             # id -> bytes for BPE ids, the id (int) for atoms
    cdef list spelled           # id -> bytes, atoms included
    cdef object is_atom         # numpy bool per id
    cdef bint has_gaps
    cdef dict actions           # atom id -> what it does (ATOM_ACTIONS)
    cdef object decode_run      # native decode_bytes(int32 array) -> (bytes, bad)
    cdef object decode_text     # Tokenizer.decode
    cdef object open_call       # (index, position) -> a tool_calls reader for one call body
    cdef object reader          # the open call's reader (TOOL mode), else None
    cdef int mode
    cdef int after_call         # the mode a closed call returns to (CONTENT, or REASONING)
    cdef int lead               # template newlines still to drop at the channel's start
    cdef Py_ssize_t held        # final newlines held back (the template may have written them)
    cdef Py_ssize_t chars_scanned  # characters examined (closed calls' readers included)
    cdef int first_call_newlines  # newlines the template writes between content and the first call
    cdef bint reasoning_calls   # a <tool_call> inside reasoning opens a call (else it is text)
    cdef bint reasoning_call_open  # inside reasoning: a <tool_call> kept as text, not yet closed
    cdef bint line_start        # the channel's text so far ends a line (or is empty)
    cdef bint pending_call      # content from a `<function=` line held: a call missing <tool_call>?
    cdef list call_text         # that held text
    cdef str tail               # a line's start that may become `<function=`, held
    cdef list parts             # the current channel's text
    cdef str kind
    cdef object index
    cdef object reasoning       # list, or None while no reasoning was opened
    cdef list content, calls, invalid, errors, trailing
    cdef list written           # the bytes of every id up to the end (atoms spelled)
    cdef Py_ssize_t ncalls, count
    cdef object result
    cdef public str _where   # names the caller in errors

    cdef Py_ssize_t scanned_total(self)
    cdef route(self, str text, list out)
    cdef text(self, bytes data, list out)
    cdef enter(self, int mode, int lead)
    cdef release(self, list out)
    cdef emit(self, str text, list out)
    cdef plain(self, str text, list out)
    cdef scan_content(self, str text, list out)
    cdef flush_pending(self, list out)
    cdef recover_call(self, Py_ssize_t i, Py_ssize_t position, list out)
    cdef atom(self, Py_ssize_t i, Py_ssize_t position, list out)
    cdef str spelled_atom(self, Py_ssize_t i)
    cdef open_tool(self, Py_ssize_t position, bint in_reasoning, list out)
    cdef error(self, Py_ssize_t position, str message, str text)
    cdef close_call(self, str how, list out)
    cdef checked(self, ids)
    cdef feed_list(self, list ids, list out)
    cdef feed_array(self, ids, list out)
