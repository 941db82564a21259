"""The native core: Cython extensions built from pyx/ (one stage per module:
normalize, pre-tokenize, BPE, atoms, the encoder and its threads, decode).

Nothing here is public API; the stubs (*.pyi) type what the Python layer calls.
"""
