#!/usr/bin/env bash
# Type-check the package and the examples with mypy (the `test` extra pins
# it; the settings are pyproject.toml's [tool.mypy]): py.typed, the stubs of
# the compiled modules (src/qwen4exp/_native/*.pyi) and the TypedDicts of
# qwen4exp.shapes are what users' type checkers read, so they must agree
# with the code; the examples, being what users copy, are checked --strict
# too. Extra arguments go to mypy (e.g. --no-incremental). PYTHON picks the
# interpreter (default python3): one with only mypy and numpy installed is
# enough, the optional dependencies being checked as Any, e.g.
#   python3 -m venv /tmp/tc && /tmp/tc/bin/pip install mypy==2.4.1 numpy
#   PYTHON=/tmp/tc/bin/python tools/typecheck.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
"$PYTHON" -m mypy --version
"$PYTHON" -m mypy "$@"
"$PYTHON" -m mypy --strict --follow-imports=silent "$@" examples  # strict for the examples only: the package is checked above
