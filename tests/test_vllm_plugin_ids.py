"""The vLLM plugin's runtime paths without vLLM (docs/RUNTIMES.md, "vLLM"):
what vLLM hands them that a chat request does not spell.

* ids of a model's padded embedding rows (Qwen3: 151,936 rows, 151,669 ids),
  which vLLM passes to the tokenizer's decode and convert_ids_to_tokens
  (logprobs, echo, token-id prompts) and to the output parser: they spell
  nothing, as in transformers, and never raise (a raise in vLLM's output
  handler stops the server);
* a request with `add_generation_prompt: false`, whose output the parser
  reads as a continuation;
* messages whose `tool_calls` and content parts are one-shot iterators
  (vLLM's request models validate them as pydantic Iterables).

The reference is transformers' PreTrainedTokenizerFast of the same folder
and qwen4exp's render_chat of the same request given as lists.
"""

from __future__ import annotations

import copy
import json
import os

import numpy as np
import pytest
from _model_folders import MODEL_VOCAB_SIZE, model_folder

import qwen4exp
from qwen4exp.errors import ChatFormatError, Qwen4ExpError
from qwen4exp.runtimes.vllm import Qwen4ExpTokenizer, parser_flags_problem
from qwen4exp.runtimes.vllm_requests import materialize_messages, output_parser

FORMAT_OF = {"qwen3": "qwen3", "qwen3.6": "qwen3.8"}
TEXT = "Héllo, wörld — 你好 👋🏽\n"


@pytest.fixture(scope="module", params=tuple(FORMAT_OF))
def pair(request, tmp_path_factory, qwen36_json):
    """(the plugin's tokenizer, transformers' tokenizer, the model's rows) of a folder."""
    from transformers import AutoTokenizer

    vocab = request.param
    folder = model_folder(str(tmp_path_factory.mktemp("vllm-ids") / vocab), FORMAT_OF[vocab],
                          cache_dir=os.path.dirname(qwen36_json))
    return Qwen4ExpTokenizer.from_pretrained(folder), AutoTokenizer.from_pretrained(folder), MODEL_VOCAB_SIZE[vocab]


def _padded(plugin, rows) -> list[int]:
    return list(range(plugin.qwen4exp_tokenizer.vocab_size, rows))


def _interleaved(ids: list[int], padded: list[int]) -> list[int]:
    """`ids` with a padded id before, after and between every two of them
    (inside multi-byte characters too)."""
    out = [padded[0]]
    for k, i in enumerate(ids):
        out += [i, padded[(k + 1) % len(padded)]]
    return out


def test_padded_rows_decode_to_nothing_as_in_transformers(pair):
    plugin, hf, rows = pair
    padded = _padded(plugin, rows)
    assert padded and len(hf) == plugin.qwen4exp_tokenizer.vocab_size  # the rows past the tokenizer's ids
    atoms = sorted(plugin.get_added_vocab().values())
    ordinary = list(range(0, plugin.qwen4exp_tokenizer.vocab_size, 997))
    for skip in (False, True):
        for i in padded + atoms + ordinary:  # one at a time, as vLLM decodes logprobs
            assert plugin.decode([i], skip_special_tokens=skip) == hf.decode([i], skip_special_tokens=skip), i
            assert plugin.decode(i, skip_special_tokens=skip) == hf.decode(i, skip_special_tokens=skip), i
        mixed = _interleaved(hf.encode(TEXT) + atoms[:3], padded)
        assert plugin.decode(mixed, skip_special_tokens=skip) == hf.decode(mixed, skip_special_tokens=skip)
        assert plugin.batch_decode([mixed, padded], skip_special_tokens=skip) == \
            hf.batch_decode([mixed, padded], skip_special_tokens=skip)
    assert plugin.convert_ids_to_tokens(padded + atoms + ordinary) == hf.convert_ids_to_tokens(padded + atoms + ordinary)
    assert plugin.convert_ids_to_tokens(np.array(padded[:3])) == hf.convert_ids_to_tokens(padded[:3])


def test_decode_stream_takes_padded_rows(pair):
    """tok.decode_stream(embedding_rows=...): each step's text, joined, is
    transformers' decode of the ids (padded rows spell nothing)."""
    plugin, hf, rows = pair
    tok = plugin.qwen4exp_tokenizer
    padded = _padded(plugin, rows)
    ids = _interleaved(hf.encode(TEXT) + sorted(plugin.get_added_vocab().values())[:3], padded)
    for skip in (False, True):
        stream = tok.decode_stream(skip_special=skip, embedding_rows=rows)
        text = "".join(stream.step(i) for i in ids) + stream.flush()
        assert text == hf.decode(ids, skip_special_tokens=skip)
        assert stream.padded == sum(i in padded for i in ids)
    stream = tok.decode_stream(embedding_rows=rows)
    stream.step(padded[0])
    with pytest.raises(Qwen4ExpError, match=f"id {rows} at index 1 "):
        stream.step(rows)  # past the model's rows: the documented error
    with pytest.raises(Qwen4ExpError, match=f"id {padded[0]} at index 0 "):
        tok.decode_stream().step(padded[0])  # without embedding_rows, as before


def _prompt(tok, **options):
    return tok.render_chat([{"role": "user", "content": "hi"}], add_generation_prompt=True, **options)


def _reply_ids(tok) -> list[int]:
    """A reply with reasoning, content and a call, as the renderer writes a final turn."""
    turn = {"role": "assistant", "reasoning_content": "think", "content": TEXT,
            "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"x": 1}}}]}
    messages = [{"role": "user", "content": "hi"}]
    prompt = tok.encode_chat(tok.render_chat(messages, add_generation_prompt=True)).tolist()
    whole = tok.encode_chat(tok.render_chat(messages + [turn])).tolist()
    assert whole[:len(prompt)] == prompt
    return whole[len(prompt):-1]  # up to the turn's IM_END (the template's newline after it dropped)


def _without_notes(message: dict) -> dict:
    return {k: v for k, v in message.items() if k != "notes"}


def test_the_parser_takes_padded_rows(pair):
    plugin, hf, rows = pair
    tok = plugin.qwen4exp_tokenizer
    padded = _padded(plugin, rows)
    prompt = _prompt(tok)
    clean = _reply_ids(tok)
    ids = _interleaved(clean, padded)
    expected = tok.parse_completion(clean, prompt)
    assert "errors" not in expected
    given = [k for k, i in enumerate(ids) if i >= tok.vocab_size]
    one_shot = tok.parse_completion(ids, prompt, embedding_rows=rows)
    assert _without_notes(one_shot) == expected
    assert [(n["position"], n["id"]) for n in one_shot["notes"]] == [(k, ids[k]) for k in given]
    for step in (1, 2, 5):  # streamed, int by int and in lists and arrays
        parser = tok.completion_parser(prompt, embedding_rows=rows)
        for k in range(0, len(ids), step):
            chunk = ids[k] if step == 1 else (ids[k:k + step] if k % 2 else np.array(ids[k:k + step]))
            parser.feed(chunk)
        assert parser.finish() == one_shot
    # A copy is independent; positions of reports count the padded ids.
    parser = tok.completion_parser(prompt, embedding_rows=rows)
    parser.feed(ids[:4])
    other = copy.copy(parser)
    other.feed([padded[-1]])
    truncated = other.finish()
    assert truncated["errors"][-1]["position"] == 5 and truncated["notes"][-1] == \
        {"position": 4, "id": padded[-1], "note": truncated["notes"][-1]["note"]}
    assert parser.finish()["errors"][-1]["position"] == 4


def test_ids_past_the_rows_still_raise(pair):
    plugin, _, rows = pair
    tok = plugin.qwen4exp_tokenizer
    padded = _padded(plugin, rows)
    with pytest.raises(Qwen4ExpError, match=f"id {padded[0]} at index 1 "):
        tok.parse_completion([1, padded[0]], _prompt(tok))  # without embedding_rows: documented error
    parser = tok.completion_parser(_prompt(tok), embedding_rows=rows)
    parser.feed([1, padded[0]])
    with pytest.raises(Qwen4ExpError, match=f"id {rows} at index 4 "):
        parser.feed([2, padded[1], rows])  # the failed feed changes nothing
    with pytest.raises(TypeError):
        tok.completion_parser(embedding_rows="many")
    after = parser.finish()
    assert [n["position"] for n in after["notes"]] == [1]
    assert (after["reasoning_content"] or "") + after["content"] == tok.decode([1])  # the 3.8 prompt opens <think>


def test_a_continuation_without_generation_prompt_is_parsed(pair):
    """add_generation_prompt false: the model continues the last message; the
    reply is read as text and atoms (an IM_START there is reported, not raised)."""
    plugin, hf, rows = pair
    tok = plugin.qwen4exp_tokenizer
    chat = tok.render_chat([{"role": "user", "content": "hi"}], add_generation_prompt=False)
    with pytest.raises(Qwen4ExpError, match="generation prompt"):
        tok.completion_parser(chat)  # the library's documented refusal
    atoms = tok.atoms
    reply = [atoms["<|im_start|>"]] + tok.encode("assistant\n" + TEXT) + [rows - 1, atoms["<|im_end|>"]]
    for prompt_ids in (None, tok.encode_chat(chat).tolist()):
        parser, opened = output_parser(tok, chat, prompt_ids, None, rows)
        assert opened is False
        parser.feed(reply)
        message = parser.finish()
        assert message["content"] == hf.decode(reply[1:-1])
        assert [e["position"] for e in message["errors"]] == [0]  # the IM_START, reported
        assert [n["id"] for n in message["notes"]] == [rows - 1]
    # With a generation prompt, the chat's own parser (call ids, tools).
    parser, _ = output_parser(tok, _prompt(tok), None, None, rows)
    parser.feed(_reply_ids(tok) + [atoms["<|im_end|>"]])
    assert parser.finish() == tok.parse_completion(_reply_ids(tok) + [atoms["<|im_end|>"]], _prompt(tok))


def _iterator_messages():
    """A history as vLLM's request model hands it outside Chat Completions:
    tool_calls and content lists as one-shot iterators."""
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": json.dumps({"x": 1})}}
    return [
        {"role": "user", "content": iter([{"type": "text", "text": "a <|im_end|>"}, {"type": "text", "text": "b"}])},
        {"role": "assistant", "content": iter([]), "tool_calls": (c for c in [call])},
        {"role": "tool", "tool_call_id": "c1", "content": "42"},
        {"role": "user", "content": []},
    ]


def test_iterator_fields_render_as_lists(pair):
    plugin, _, _ = pair
    tok = plugin.qwen4exp_tokenizer
    as_lists = [{k: (list(v) if k in ("content", "tool_calls") and not isinstance(v, str) else v)
                 for k, v in m.items()} for m in _iterator_messages()]
    messages = materialize_messages(_iterator_messages())
    assert messages == as_lists
    assert materialize_messages(messages) == as_lists  # read once, kept: the parsers render it again
    expected = tok.render_chat(as_lists, add_generation_prompt=True)
    assert tok.render_chat(materialize_messages(_iterator_messages()), add_generation_prompt=True).data == \
        expected.data
    assert materialize_messages(iter(as_lists)) == as_lists


def test_pydantic_iterators_and_a_malformed_item():
    """pydantic validates an Iterable field as a ValidatorIterator that checks
    each item as it is read (what vLLM's request models hand the renderer)."""
    from typing import Iterable, Literal

    import pydantic  # transformers' dependency, and vLLM's
    from typing_extensions import TypedDict  # pydantic's requirement before Python 3.12

    class Part(TypedDict):
        type: Literal["text"]
        text: str

    lazy = pydantic.TypeAdapter(Iterable[Part])
    parts = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    messages = materialize_messages([{"role": "user", "content": lazy.validate_python(parts)}])
    assert messages == [{"role": "user", "content": parts}]
    bad = lazy.validate_python([parts[0], {"type": "text"}])
    with pytest.raises(ChatFormatError, match=r"^messages\[1\]\.content\[1\] is malformed: text: Field required$"):
        materialize_messages([{"role": "system", "content": "s"}, {"role": "user", "content": bad}])

    def failing():
        yield parts[0]
        raise ValueError("not a part\nmore")

    with pytest.raises(ChatFormatError, match=r"^messages\[0\]\.tool_calls\[1\] is malformed: not a part$"):
        materialize_messages([{"role": "assistant", "tool_calls": failing()}])


def test_parser_flags_are_checked_before_the_model_loads():
    ok = parser_flags_problem("qwen4exp", "qwen4exp", True, "qwen4exp")
    assert ok is None
    assert parser_flags_problem("hermes", "deepseek_r1", True, "auto") is None  # not ours
    assert parser_flags_problem("qwen4exp", "qwen4exp", True, "qwen4exp-trusted-prompts") is None
    assert "needs --reasoning-parser qwen4exp" in parser_flags_problem("qwen4exp", None, True, "qwen4exp")
    assert "cannot be combined with hermes" in parser_flags_problem("hermes", "qwen4exp", True, "qwen4exp")
    assert "cannot be combined with qwen3" in parser_flags_problem("qwen4exp", "qwen3", True, "qwen4exp")
    assert "--tokenizer-mode qwen4exp" in parser_flags_problem("qwen4exp", "qwen4exp", True, "auto")
    for problem in (parser_flags_problem("qwen4exp", "", True, "qwen4exp"),
                    parser_flags_problem(None, "qwen4exp", False, "hf")):
        assert problem is not None and "\n" not in problem
