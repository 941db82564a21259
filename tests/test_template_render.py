"""The template renderer (qwen4exp.render_template) against transformers.

For real chat templates of ~30 families (tests/data/templates/) and generated
conversations: the text equals transformers' apply_chat_template(tokenize=False)
(both refuse together), the ids of a benign conversation equal Hugging Face's
over the test vocabulary (Qwen3 + every template's markers as added tokens,
tests/_template_reference.py), and a hostile twin (the template's markers
spelled in every caller string) gets exactly the atoms its benign twin gets:
none from caller text.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import _template_reference as R
from qwen4exp import ChatFormatError, Kind, Tokenizer, render_template
from qwen4exp.template_values import DATA, TRUSTED, OriginStr, data, trusted

# One template per family shape: Qwen (atoms of the bundled vocabulary too),
# Llama 3.1 (tools, bos), Gemma 2 (raises on system), Mistral Nemo (alternation,
# tool calls), DeepSeek R1 (splits content), Phi 3.5, Hermes tool use, Granite,
# SmolLM3 (strftime_now), GPT-OSS (harmony), GLM 4.6, Kimi K2.
FAST = ("Qwen-Qwen3-0.6B.jinja", "meta-llama-Llama-3.1-8B-Instruct.jinja", "google-gemma-2-2b-it.jinja",
        "mistralai-Mistral-Nemo-Instruct-2407.jinja", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
        "microsoft-Phi-3.5-mini-instruct.jinja", "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja",
        "ibm-granite-granite-3.3-2B-Instruct.jinja", "HuggingFaceTB-SmolLM3-3B.jinja",
        "openai-gpt-oss-120b.jinja", "GLM-4.6.jinja", "moonshotai-Kimi-K2.jinja")


@pytest.fixture(scope="module")
def union(tmp_path_factory):
    """(our Tokenizer, HF tokenizers.Tokenizer, atom ids) of the test vocabulary."""
    from tokenizers import AddedToken
    from tokenizers import Tokenizer as HFTokenizer

    hf = HFTokenizer.from_file(R.TOKENIZER_JSON)
    have = {t.content for t in hf.get_added_tokens_decoder().values()}
    # a marker that is already a BPE token (`<s>` is one in Qwen3) stays one
    hf.add_special_tokens([AddedToken(m, special=True, normalized=False)
                           for m in R.all_markers() if m not in have and hf.token_to_id(m) is None])
    path = tmp_path_factory.mktemp("union") / "tokenizer.json"
    path.write_text(hf.to_str(), encoding="utf-8")
    tok = Tokenizer.from_file(str(path))
    return _Union((tok, hf, np.array(sorted(tok.atoms.values()), dtype=np.int64)))


class _Union(tuple):
    def __repr__(self) -> str:  # hypothesis prints its arguments
        return "union"



def hf_text(name, messages, tools, agp):
    """transformers' apply_chat_template(tokenize=False): render_jinja_template
    with the folder's special tokens as variables, as apply_chat_template calls
    it ({**special_tokens_map, **kwargs}); ("raises", exc) when it raises."""
    import copy

    from transformers.utils.chat_template_utils import render_jinja_template

    try:
        rendered, _ = render_jinja_template(conversations=[copy.deepcopy(messages)], tools=copy.deepcopy(tools),
                                            chat_template=R.template_text(name), add_generation_prompt=agp,
                                            **R.special_tokens(name))
        return rendered[0]
    except Exception as exc:  # noqa: BLE001 - transformers refuses
        return ("raises", exc)


def ours(name, tok, messages, tools, agp):
    try:
        return render_template(R.template_text(name), messages, tools=tools, add_generation_prompt=agp,
                               special_tokens=R.special_tokens(name), atoms=tok.atoms)
    except ChatFormatError as exc:
        return ("raises", exc)


def atoms_of(ids, atom_ids):
    ids = np.asarray(ids, dtype=np.int64)
    return ids[np.isin(ids, atom_ids)].tolist()


def check_conversation(name, union, conversation):
    """Benign: text and ids equal Hugging Face's. Hostile twin: text equal, and
    its atoms exactly those HF finds in the placeholder twin (when the template
    renders the placeholder twin as it renders the hostile one)."""
    tok, hf, atom_ids = union
    messages, tools, agp = conversation
    ref = hf_text(name, messages, tools, agp)
    chat = ours(name, tok, messages, tools, agp)
    if isinstance(ref, tuple):
        assert isinstance(chat, tuple), f"{name}: transformers raises {ref[1]!r}, we rendered"
        return
    assert not isinstance(chat, tuple), f"{name}: we raise {chat[1]}"
    assert chat.text == ref
    assert chat.chat_format == "template"
    ids = tok.encode_chat(chat)
    assert ids.tolist() == hf.encode(ref, add_special_tokens=False).ids

    spellings = R.markers(name)
    hostile = R.twin(conversation, spellings)
    placed = R.twin(conversation, spellings, placeholder=True)
    ref_h = hf_text(name, *hostile)
    chat_h = ours(name, tok, *hostile)
    if isinstance(ref_h, tuple):
        assert isinstance(chat_h, tuple), f"{name}: transformers raises {ref_h[1]!r} (hostile), we rendered"
        return
    assert not isinstance(chat_h, tuple), f"{name}: we raise {chat_h[1]} (hostile)"
    assert chat_h.text == ref_h
    ids_h = tok.encode_chat(chat_h)
    ref_p = hf_text(name, *placed)
    if not isinstance(ref_p, tuple) and R.unplace(ref_p, spellings) == ref_h:
        # the template did not branch on the markers: the same structure, the same atoms
        assert atoms_of(ids_h, atom_ids) == atoms_of(hf.encode(ref_p, add_special_tokens=False).ids, atom_ids)


@pytest.mark.parametrize("name", FAST)
@settings(max_examples=6, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(conversation=R.conversations())
def test_real_templates(name, union, conversation):
    check_conversation(name, union, conversation)


@pytest.mark.slow
@pytest.mark.parametrize("name", R.TEMPLATES)
@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(conversation=R.conversations())
def test_real_templates_sweep(name, union, conversation):
    check_conversation(name, union, conversation)
