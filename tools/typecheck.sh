#!/usr/bin/env bash
# Type-check the package and the examples with mypy (the `test` extra pins
# it; the settings are pyproject.toml's [tool.mypy]): py.typed, the stubs of
# the compiled modules (src/qwen4exp/_native/*.pyi) and the TypedDicts of
# qwen4exp.shapes are what users' type checkers read, so they must agree
# with the code; the examples, being what users copy, are checked --strict
# too. Extra arguments go to mypy (e.g. --no-incremental).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m mypy --version
python3 -m mypy "$@"
python3 -m mypy --strict --follow-imports=silent "$@" examples  # strict for the examples only: the package is checked above
