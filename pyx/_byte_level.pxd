# ByteLevel's own split (GPT-2's pattern, tokenizers' use_regex): the end of the
# piece that starts at s[i], i < n, over valid UTF-8 (pyx/_byte_level.pyx).
cdef Py_ssize_t piece_end(const unsigned char *s, Py_ssize_t n, Py_ssize_t i) noexcept nogil
