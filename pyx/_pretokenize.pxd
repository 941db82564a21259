# The Qwen pre-tokenizers as one hand-written scanner over valid UTF-8. Qwen3:
# (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
# Qwen3.5 puts \p{M} beside \p{L} in the letter run and outside the "other" run.
# `letters` is Q4_L (Qwen3) or Q4_L | Q4_M (Qwen3.5).
cdef Py_ssize_t piece_end(const unsigned char *s, Py_ssize_t n, Py_ssize_t i,
                          unsigned char letters) noexcept nogil
# The ends (exclusive byte offsets) of the next pre-tokens from s[i] into
# ends[0..k), k <= cap, fewer only at the end of the text; i < n, cap >= 1;
# returns k >= 1. The same pieces as piece_end for any cap; fast on ASCII with
# caps of a few dozen (each call starts a new 64-byte block).
cdef Py_ssize_t piece_ends(const unsigned char *s, Py_ssize_t n, Py_ssize_t i, unsigned char letters,
                           Py_ssize_t *ends, Py_ssize_t cap) noexcept nogil
