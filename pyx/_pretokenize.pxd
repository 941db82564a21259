# The Qwen pre-tokenizer as a hand-written scanner over valid UTF-8:
# (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
cdef Py_ssize_t piece_end(const unsigned char *s, Py_ssize_t n, Py_ssize_t i) noexcept nogil
