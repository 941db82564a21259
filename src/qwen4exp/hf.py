"""qwen4exp for transformers: `Qwen4ExpTokenizer` (qwen4exp.runtimes.hf;
docs/RUNTIMES.md, "transformers").

Needs transformers 4.57 or newer (the `hf` extra: `pip install '.[hf]'` in a
clone); `import qwen4exp` alone never imports it.
"""

from qwen4exp.runtimes.hf import ASSISTANT_MASK_STYLES, Qwen4ExpTokenizer

__all__ = ["Qwen4ExpTokenizer", "ASSISTANT_MASK_STYLES"]
