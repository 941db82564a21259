#!/usr/bin/env python3
"""Derive the gate's packaged oracle from the chat oracle of the tests.

    python tools/gen_gate_oracle.py     # rewrites src/qwen4exp/runtimes/gate_oracle.json

`qwen4exp gate` runs without the tests, so it ships its own copy of the cases
of tests/data/chat_oracle.json (checked there against the official templates
through transformers): each case's name, request, and per chat format either
the expected text and segments or the expected error class and message
fragment ("expect" for qwen3, "formats" for the others). tests/test_gate.py
checks that the packaged file is exactly this derivation.
"""

import json
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "..", "tests", "data", "chat_oracle.json")
OUT = os.path.join(HERE, "..", "src", "qwen4exp", "runtimes", "gate_oracle.json")


def _expectation(expect: dict) -> dict:
    if "error" in expect:
        return {"error": expect["error"], "match": expect["match"]}
    return {"text": expect["text"], "segments": expect["segments"]}


def derive(source: dict) -> dict:
    cases = []
    for case in source["cases"]:
        cases.append({"name": case["name"], "request": case["request"],
                      "expect": _expectation(case["expect"]),
                      "formats": {fmt: _expectation(e) for fmt, e in case["formats"].items()}})
    return {"source": "tests/data/chat_oracle.json (derived by tools/gen_gate_oracle.py)", "cases": cases}


def main():
    with open(SOURCE, encoding="utf-8") as f:
        oracle = derive(json.load(f))
    with open(OUT, "w", encoding="utf-8", newline="\n") as f:
        text = json.dumps(oracle, indent=1)  # ASCII: some requests hold lone surrogates
        # each segment list on one line ([[start, end, "KIND"], ...]), as in the tests' oracle
        text = re.sub(r'\[\s+(\d+),\s+(\d+),\s+"(DATA|TRUSTED_CONTROL)"\s+\]', r'[\1, \2, "\3"]', text)
        f.write(re.sub(r'"segments": \[((?:\s+\[\d+, \d+, "(?:DATA|TRUSTED_CONTROL)"\],?)+)\s+\]',
                       lambda m: '"segments": [' + " ".join(m.group(1).split()) + "]", text))
        f.write("\n")
    print(f"wrote {os.path.normpath(OUT)}: {len(oracle['cases'])} cases")


if __name__ == "__main__":
    main()
