"""qwen4exp for transformers: `Qwen4ExpTokenizer`, implemented in
qwen4exp.runtimes.hf (docs/RUNTIMES.md, "transformers"). This name is that
module itself.

Needs transformers 4.57 or newer (the `hf` extra: `pip install '.[hf]'` in a
clone); `import qwen4exp` alone never imports it.
"""

import sys

from qwen4exp.runtimes import hf as _impl

sys.modules[__name__] = _impl
