#!/usr/bin/env python3
"""atheris harness: chat (see fuzz/harness.py, run_chat, for the input decoding and the oracle).

    PYTHONPATH=src python fuzz/fuzz_chat.py [libFuzzer flags] [corpus dirs]
"""
from atheris_main import main

if __name__ == "__main__":
    main("chat")
