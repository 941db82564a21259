#!/usr/bin/env python3
"""atheris harness: segments (see fuzz/harness.py, run_segments, for the input decoding and the oracle).

    PYTHONPATH=src python fuzz/fuzz_segments.py [libFuzzer flags] [corpus dirs]
"""
from atheris_main import main

if __name__ == "__main__":
    main("segments")
