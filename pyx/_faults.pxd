# The native core's result codes, declared once: every nogil routine that can
# fail returns one of these. The binding (_encoder) raises MemoryError for
# RC_NO_MEMORY itself and hands the others to Python as fault tuples
# (code, geometry code, segment, offset), which qwen4exp.tokenizer.fault_error
# turns into exceptions (docs/RELIABILITY.md, "Error model").
cpdef enum Fault:
    RC_OK = 0
    RC_NO_MEMORY = -1           # MemoryError
    RC_GEOMETRY = -2            # SegmentError; the GeoCode (_geometry.pxd) says which
    RC_UNKNOWN_CONTROL = -3     # UnknownControlError: a control segment that is not atoms
