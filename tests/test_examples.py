"""Every script in examples/ runs, as a user would run it, in its own process."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import qwen4exp

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
SCRIPTS = sorted(f for f in os.listdir(EXAMPLES) if f.endswith(".py"))


def run_example(name: str, *args: str) -> str:
    where = os.path.dirname(os.path.dirname(os.path.abspath(qwen4exp.__file__)))
    env = dict(os.environ, PYTHONPATH=where + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("QWEN4EXP_FAULT_INJECTION", None)
    done = subprocess.run([sys.executable, os.path.join(EXAMPLES, name), *args], capture_output=True,
                          text=True, timeout=120, env=env, cwd=EXAMPLES)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()
    return done.stdout


def test_there_are_examples():
    assert {"serving.py", "sft_dataset.py", "context_budget.py", "quickstart.py"} <= set(SCRIPTS)


# serving.py and sft_dataset.py also run below, their output checked: a bare run again is `slow`
CHECKED_BELOW = ("serving.py", "sft_dataset.py")


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in CHECKED_BELOW else n
                                  for n in SCRIPTS])
def test_example_runs(name):
    run_example(name)


def test_serving_streams_openai_chunks():
    events = [line[len("data: "):] for line in run_example("serving.py").splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    deltas = [json.loads(e)["choices"][0] for e in events[:-1]]
    assert [d["finish_reason"] for d in deltas if d["finish_reason"]] == ["tool_calls", "stop"]
    # A tool call streams as OpenAI's do: its id and name first, then its arguments in pieces.
    calls = [c for d in deltas for c in d["delta"].get("tool_calls", [])]
    assert calls[0]["function"]["name"] == "get_weather" and calls[0]["id"].startswith("call_")
    assert all("name" not in c["function"] for c in calls[1:]) and {c["index"] for c in calls} == {0}
    assert json.loads("".join(c["function"]["arguments"] for c in calls)) == {"city": "Paris"}
    second = deltas[[d["finish_reason"] for d in deltas].index("tool_calls") + 1:]
    content = "".join(d["delta"].get("content", "") for d in second)
    reasoning = "".join(d["delta"].get("reasoning_content", "") for d in second)
    assert content == "It is 18 °C in Paris, with light rain. (A literal <tool_call> in text stays text.)"
    assert reasoning == "The tool answered; summarise."


def test_sft_dataset_writes_ids_and_labels(tmp_path, tok):
    pq = pytest.importorskip("pyarrow.parquet")
    requests = [
        {"messages": [{"role": "user", "content": "hi <|im_end|>"}, {"role": "assistant", "content": "hello"}]},
        {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "2+2?"},
                      {"role": "assistant", "content": "4", "reasoning_content": "easy"}]},
    ]
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.parquet"
    src.write_text("".join(json.dumps(r) + "\n" for r in requests), encoding="utf-8")
    run_example("sft_dataset.py", str(src), str(dst))
    rows = pq.read_table(dst).to_pylist()
    assert len(rows) == len(requests)
    for row, request in zip(rows, requests):
        encoded = tok.encode_chat(qwen4exp.render_chat(request["messages"]), return_masks=True)
        assert row["ids"] == encoded.ids.tolist() and row["length"] == len(encoded.ids)
        assert row["assistant_mask"] == encoded.assistant_mask.tolist()
        assert row["labels"] == np.where(encoded.assistant_mask, encoded.ids, -100).tolist()
