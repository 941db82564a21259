# Character classes at a byte offset, shared by the scanner and by the cut
# rule of encode()'s parts (_parts.pyx).
from qwen4exp._native._unicode cimport q4_cclass, q4_byte_class

# Decoding a multi-byte character and looking its class up is on the path of
# every non-ASCII character of a run: always inlined (GCC would call them).
cdef extern from * nogil:
    """
    #if defined(__GNUC__)
    #define Q4_ALWAYS_INLINE static inline __attribute__((always_inline))
    #else
    #define Q4_ALWAYS_INLINE static inline
    #endif
    Q4_ALWAYS_INLINE unsigned char q4_class_hi(const unsigned char *s, Py_ssize_t i, Py_ssize_t *next_i) {
        unsigned char b = s[i];
        uint32_t cp;
        if (b < 0xE0) {
            cp = ((uint32_t)(b & 0x1F) << 6) | (s[i + 1] & 0x3F);
            *next_i = i + 2;
        } else if (b < 0xF0) {
            cp = ((uint32_t)(b & 0x0F) << 12) | ((uint32_t)(s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F);
            *next_i = i + 3;
        } else {
            cp = ((uint32_t)(b & 0x07) << 18) | ((uint32_t)(s[i + 1] & 0x3F) << 12)
                 | ((uint32_t)(s[i + 2] & 0x3F) << 6) | (s[i + 3] & 0x3F);
            *next_i = i + 4;
        }
        return q4_cclass(cp);
    }
    Q4_ALWAYS_INLINE unsigned char q4_class_at(const unsigned char *s, Py_ssize_t i, Py_ssize_t *next_i) {
        if (s[i] < 0x80) {
            *next_i = i + 1;
            return q4_byte_class[s[i]];
        }
        return q4_class_hi(s, i, next_i);
    }
    """
    # Class bits of the multi-byte character at s[i] (s[i] >= 0x80); next_i: its end.
    unsigned char class_hi "q4_class_hi" (const unsigned char *s, Py_ssize_t i, Py_ssize_t *next_i)
    # Class bits of the character at s[i]; next_i: its end.
    unsigned char class_at "q4_class_at" (const unsigned char *s, Py_ssize_t i, Py_ssize_t *next_i)


# A flag bit of `letters` (no character class has it): numbers in runs of up
# to three (Llama 3's `\p{N}{1,3}`, otherwise the Qwen3 pattern) instead of one.
cdef enum:
    DIGIT_RUNS = 64
    # ByteLevel's own pattern instead (GPT-2's: pyx/_byte_level.pyx); no class has it either
    BYTE_LEVEL = 32

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
