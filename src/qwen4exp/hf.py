"""qwen4exp for transformers: `Qwen4ExpTokenizer` (qwen4exp.runtimes.hf;
docs/RUNTIMES.md, "transformers").

Needs transformers (`pip install 'qwen4exp[hf]'`); `import qwen4exp` alone
never imports it.
"""

from .runtimes.hf import ASSISTANT_MASK_STYLES, Qwen4ExpTokenizer

__all__ = ["Qwen4ExpTokenizer", "ASSISTANT_MASK_STYLES"]
