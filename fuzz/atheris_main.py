"""The atheris driver shared by fuzz/fuzz_<name>.py.

Python code of qwen4exp (renderer, validation, tokenizer wrapper) is
instrumented by atheris for coverage. The Cython extensions are instrumented
too when they were built with clang and -fsanitize=fuzzer-no-link (see
fuzz/README.md and `run_all.py --native`); otherwise libFuzzer only sees the
Python side and still mutates the inputs.
"""

import os
import sys


def main(name: str) -> None:
    import atheris

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    with atheris.instrument_imports(include=["qwen4exp", "harness", "harness_input"]):
        import qwen4exp  # noqa: F401
        import qwen4exp.render.chat  # noqa: F401
        import qwen4exp.render.validate  # noqa: F401
        import qwen4exp.render.segments  # noqa: F401
        import qwen4exp.encode.tokenizer  # noqa: F401
        import harness

    run = harness.RUNNERS[name]
    # Load both tokenizers and the reference tables before fuzzing starts.
    harness.tokenizer()
    harness.hf_plain()
    harness.reference_tables()
    run(b"")

    def test_one_input(data: bytes) -> None:
        run(data)

    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
