"""qwen4exp inside serving runtimes (docs/RUNTIMES.md).

Nothing here is imported by `import qwen4exp`, and no runtime is a dependency
of qwen4exp: each module imports its runtime only when the runtime loads it.

* `qwen4exp.runtimes.vllm` — the vLLM plugin, registered through the
  `vllm.general_plugins` entry point: tokenizer and renderer mode `qwen4exp`
  (`vllm_render`) and the `qwen4exp` tool-call and reasoning parser
  (`vllm_parse`); `vllm_requests` holds their vLLM-free parts.
* `qwen4exp.runtimes.hf` — a transformers tokenizer class.
"""
