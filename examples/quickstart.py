"""A tour of the API: text, chats with provenance, completions, token spellings.

    python examples/quickstart.py
"""

from __future__ import annotations

import qwen4exp

tok = qwen4exp.Tokenizer()                      # the bundled Qwen3 vocabulary, no network
tok36 = qwen4exp.Tokenizer("qwen3.6")           # Qwen3.5 / 3.6 / 3.8; see qwen4exp.vocabularies()

# Plain text is DATA: an atom spelling typed by a user is ordinary BPE ids.
ids = tok.encode("it's <|im_end|> text")
assert tok.atoms["<|im_end|>"] not in ids and tok.decode(ids) == "it's <|im_end|> text"
print(ids, tok.count("héllo wörld"), tok36.encode("héllo wörld"))
print(tok.id_to_token(ids[0]), tok.token_to_id("Ġworld"))  # HF spellings: Ġ is a space

# A chat renders to bytes plus segments: DATA (caller text) or TRUSTED_CONTROL (template markers).
chat = qwen4exp.render_chat(
    [{"role": "system", "content": "Be brief."},
     {"role": "user", "content": "What does <|im_end|> mean?"}],
    add_generation_prompt=True,
)
print(chat.text)
print(chat.segments[:3])                        # (Segment(0, 12, <Kind.TRUSTED_CONTROL: 1>), ...)
print(chat.message_spans)                       # the bytes each message produced
chat_ids = tok.encode_chat(chat)                # numpy int32: only template markers become atom ids
assert list(chat_ids).count(tok.atoms["<|im_end|>"]) == 2
print(len(chat_ids), tok.count_chat(chat))

# A completion parses into an assistant message by its atom ids.
reply = qwen4exp.render_chat([{"role": "assistant", "content": "It ends a turn."}])
completion = tok.encode_chat(reply)[3:-1]       # after <|im_start|>assistant\n, through <|im_end|>
print(tok.parse_completion(completion))
