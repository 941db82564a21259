# NFC exactly as tokenizers 0.22.1's NFC normalizer (its older Unicode tables).

# True only if valid UTF-8 s is certainly NFC already (quick check: every code
# point QC=Yes and combining classes non-decreasing among non-starters).
cdef bint utf8_is_nfc(const unsigned char *s, Py_ssize_t n) noexcept nogil

# NFC of valid UTF-8 s: returns its length, with *out = NULL when s already is
# NFC (nothing copied), else *out = a q4_malloc'ed copy (the caller q4_frees
# it); -1 when an allocation failed (*out untouched, nothing leaked).
cdef Py_ssize_t utf8_nfc(const unsigned char *s, Py_ssize_t n, unsigned char **out) noexcept nogil

# Whether the character starting at s[p] (p < n, a character start) is a
# starter that is QC=Yes: NFC neither reorders it nor composes it with what
# comes before, so NFC(s) = NFC(s[:p]) + NFC(s[p:]).
cdef bint utf8_stable_at(const unsigned char *s, Py_ssize_t n, Py_ssize_t p) noexcept nogil
