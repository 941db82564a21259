"""`import qwen4exp.runtimes.ray`: Ray Data tokenization, implemented in
qwen4exp.runtimes.ray (docs/RUNTIMES.md). This name is that module itself, so
whatever one sets on either is seen through both."""

import sys

from qwen4exp.runtimes import ray as _impl

sys.modules[__name__] = _impl
