"""Fit a long conversation into a context window.

`fit_chat` drops the oldest whole turns (a user message and everything up to
the next one, so a tool call keeps its results) until the ids fit, always
keeping the system message and the last user turn. Each segment is tokenized
on its own, so one encoding gives every message's count and the fitting
needs no re-tokenizing; the result is exact: the longest suffix that fits.

    python examples/context_budget.py
"""

from __future__ import annotations

import qwen4exp

tok = qwen4exp.Tokenizer()

messages: list[qwen4exp.ChatMessage] = [{"role": "system", "content": "You are a coding agent."}]
for i in range(40):
    messages += [
        {"role": "user", "content": f"Step {i}: read src/module_{i}.py and fix the failing test."},
        {"role": "assistant", "content": "", "reasoning_content": "Read the file first.",
         "tool_calls": [{"type": "function", "function": {"name": "read", "arguments": {"path": f"src/module_{i}.py"}}}]},
        {"role": "tool", "content": f"def f(x):\n    return x + {i}\n" * 20},
        {"role": "assistant", "content": f"Fixed module {i}: f now handles negative x."},
    ]

whole = qwen4exp.render_chat(messages, add_generation_prompt=True)
print(f"the whole conversation: {len(messages)} messages, {tok.count_chat(whole)} tokens")

for budget in (32768, 8192, 2048, 400):
    fit = tok.fit_chat(messages, budget)
    assert len(fit.ids) <= budget and fit.ids.tolist() == tok.encode_chat(fit.chat).tolist()
    print(f"budget {budget:6d}: kept {len(fit.messages):3d} messages ({len(fit.ids)} tokens), dropped {fit.dropped}")

try:
    tok.fit_chat(messages, 100)
except qwen4exp.BudgetError as exc:  # the system message and the last turn alone do not fit
    print(f"budget    100: {exc}")
