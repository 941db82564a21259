#!/usr/bin/env python3
"""atheris harness: encode (see fuzz/harness.py, run_encode, for the input decoding and the oracle).

    PYTHONPATH=src python fuzz/fuzz_encode.py [libFuzzer flags] [corpus dirs]
"""
from atheris_main import main

if __name__ == "__main__":
    main("encode")
