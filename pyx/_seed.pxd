# The tokenizer's seed (see _piece_cache.pxd): every token spelling that is
# one whole piece, valued with what merging it gives, built once per
# tokenizer and shared by its workers (docs/ARCHITECTURE.md, "Step by step"
# and "Sharing merges through the seed").
from libc.stdint cimport int64_t, uint8_t

from qwen4exp._native._bpe cimport BpeModel
from qwen4exp._native._piece_cache cimport PieceCache

cdef enum:
    SEED_AHEAD = 16         # a token's slot is requested this many stores before it


cdef int build_seed(PieceCache *seed, const BpeModel *m, const uint8_t *token_bytes,
                    const int64_t *token_offsets, Py_ssize_t n_vocab, unsigned char letters,
                    const uint8_t *flags) noexcept nogil
