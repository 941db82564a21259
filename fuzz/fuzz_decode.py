#!/usr/bin/env python3
"""atheris harness: decode (see fuzz/harness.py, run_decode, for the input decoding and the oracle).

    PYTHONPATH=src python fuzz/fuzz_decode.py [libFuzzer flags] [corpus dirs]
"""
from atheris_main import main

if __name__ == "__main__":
    main("decode")
