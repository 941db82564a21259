"""An SFT dataset job: JSONL chats -> Parquet with token ids and training labels.

Each input line is a chat request, {"messages": [...], "tools": [...]}. Each
output row holds `ids` (list<int32>), `assistant_mask` (list<bool>: the
tokens each assistant turn wrote, its `<|im_end|>` included), `labels`
(the ids where the mask is set, -100 elsewhere, as trainers take them) and
`length`. The masks come from what the renderer recorded, never from the
text, so they are right for the Qwen3 template too, which has no
`{% generation %}` blocks for transformers' own masks.

Needs pyarrow (pip install ".[cli]" from a clone of the repository).

    python examples/sft_dataset.py                   # a small sample, written to a temporary folder
    python examples/sft_dataset.py IN.jsonl OUT.parquet

The command line does the same at corpus scale (threads, errors per line,
Ray): qwen4exp batch IN.jsonl OUT.parquet --masks --keep-columns --chat-format qwen3
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import qwen4exp

# The chat format and vocabulary of the model being trained: ("qwen3.6", "qwen3.6")
# for Qwen3.6, ("qwen3-2507", "qwen3") for Qwen3-Instruct-2507, ... (README, "Formats
# and vocabularies").
CHAT_FORMAT, VOCABULARY = "qwen3", "qwen3"

SAMPLE = [
    {"messages": [{"role": "user", "content": "Name a prime number."},
                  {"role": "assistant", "content": "7", "reasoning_content": "Any prime will do."}]},
    {"messages": [{"role": "system", "content": "You can look things up."},
                  {"role": "user", "content": "How tall is the Eiffel Tower?"},
                  {"role": "assistant", "content": "",
                   "tool_calls": [{"type": "function", "function": {"name": "search", "arguments": {"q": "Eiffel Tower height"}}}]},
                  {"role": "tool", "content": "330 m"},
                  {"role": "assistant", "content": "About 330 metres."}],
     "tools": [{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}]},
]


def convert(src: str, dst: str, tok: qwen4exp.Tokenizer) -> pa.Table:
    with open(src, encoding="utf-8") as f:
        requests = [json.loads(line) for line in f if line.strip()]
    chats = [qwen4exp.render_chat(r["messages"], tools=r.get("tools"), chat_format=CHAT_FORMAT) for r in requests]
    encoded = tok.encode_chats(chats, return_masks=True)  # native threads, results in order
    table = pa.table({
        "ids": pa.array([e.ids for e in encoded], type=pa.list_(pa.int32())),
        "assistant_mask": pa.array([e.assistant_mask for e in encoded], type=pa.list_(pa.bool_())),
        "labels": pa.array([np.where(e.assistant_mask, e.ids, -100) for e in encoded], type=pa.list_(pa.int32())),
        "length": pa.array([len(e.ids) for e in encoded], type=pa.int32()),
    })
    pq.write_table(table, dst)
    return table


def main(argv: list[str]) -> None:
    tok = qwen4exp.Tokenizer(VOCABULARY)
    with tempfile.TemporaryDirectory() as tmp:
        if argv:
            src, dst = argv
        else:
            src, dst = os.path.join(tmp, "chats.jsonl"), os.path.join(tmp, "sft.parquet")
            with open(src, "w", encoding="utf-8") as f:
                f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in SAMPLE)
        convert(src, dst, tok)
        table = pq.read_table(dst)
        print(f"{table.num_rows} chats -> {dst}: {table.schema.names}")
        for row in table.to_pylist():
            trained = [i for i, m in zip(row["ids"], row["assistant_mask"]) if m]
            print(f"{row['length']:4d} tokens, {len(trained):3d} trained on: {tok.decode(trained)!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
