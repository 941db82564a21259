# The native core's result codes, declared once: every nogil routine that can
# fail returns one of these. The binding (_encoder) raises MemoryError for
# RC_NO_MEMORY itself and hands the others to Python: encoding as fault tuples
# (code, geometry code, segment, offset), building a tokenizer as
# InitFault(code, detail) (_faults.pyx). qwen4exp.errors turns both into
# exceptions (fault_error, init_error; docs/RELIABILITY.md, "Error model").
cpdef enum Fault:
    RC_OK = 0
    RC_NO_MEMORY = -1           # MemoryError
    RC_GEOMETRY = -2            # SegmentError; the GeoCode (_geometry.pxd) says which
    RC_UNKNOWN_CONTROL = -3     # UnknownControlError: a control segment that is not atoms
    RC_TOO_LARGE = -4           # VocabularyError: an id or the merge count past the native tables (ID_BITS)
    RC_NO_BYTE_TOKEN = -5       # VocabularyError: a byte with no token of its own (detail: the byte)
