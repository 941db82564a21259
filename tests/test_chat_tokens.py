"""Render + encode end to end: parity with transformers' ids and provenance.

The reference ids are transformers' `apply_chat_template(..., tokenize=True)`
with the Qwen3 template of the bundled vocabulary: on atom-free conversations
the flattened text contains only template-emitted markers, so the reference's
special-token extraction is exactly right there.
"""

import numpy as np
import pytest

from qwen4exp import Kind

import _chat_reference as ref
from helpers import ATOM_FREE, ORACLE_ACCEPTED, ORACLE_CASES, WITH_ATOMS, reference_ids, render_oracle


def test_oracle_has_both_kinds():
    assert len(ATOM_FREE) >= 25 and len(WITH_ATOMS) >= 10


@pytest.mark.parametrize("name", ATOM_FREE)
def test_ids_equal_transformers(tok, name):
    request = ORACLE_CASES[name]["request"]
    ids = tok.encode_chat(render_oracle(request))
    assert ids.dtype == np.int32
    assert ids.tolist() == reference_ids(request)


@pytest.mark.parametrize("name", WITH_ATOMS)
def test_literal_controls_stay_data(tok, name):
    request = ORACLE_CASES[name]["request"]
    twin = ref.harmless_twin(request)
    ids = tok.encode_chat(render_oracle(request)).tolist()
    twin_ids = tok.encode_chat(render_oracle(twin)).tolist()
    atom_ids = set(tok.atoms.values())
    # The added-token ids are exactly those of the harmless twin: same ids, same order.
    assert [i for i in ids if i in atom_ids] == [i for i in twin_ids if i in atom_ids]
    # ... one per template-emitted marker, and the twin's atom ids equal the reference's.
    chat = render_oracle(request)
    controls = sum(
        len(ref._MARKER_RE.findall(chat.data[s:e].decode())) for s, e, k in chat.segments
        if k is Kind.TRUSTED_CONTROL
    )
    assert sum(1 for i in ids if i in atom_ids) == controls
    assert [i for i in twin_ids if i in atom_ids] == [i for i in reference_ids(twin) if i in atom_ids]


@pytest.mark.parametrize("name", WITH_ATOMS)
def test_flattening_would_have_promoted(tok, hf_full, name):
    """The bug provenance prevents: a flat trusted pass over the same bytes finds more atoms."""
    chat = render_oracle(ORACLE_CASES[name]["request"])
    ours = tok.encode_chat(chat).tolist()
    flat = hf_full.encode(chat.text, add_special_tokens=False).ids
    atom_ids = set(tok.atoms.values())
    assert sum(i in atom_ids for i in flat) > sum(i in atom_ids for i in ours)


def test_encode_chats_batch_equals_single(tok):
    chats = [render_oracle(ORACLE_CASES[n]["request"]) for n in ORACLE_ACCEPTED] * 3
    batch = tok.encode_chats(chats, num_threads=2)
    assert [b.tolist() for b in batch] == [tok.encode_chat(c).tolist() for c in chats]


@pytest.fixture(scope="module", params=["qwen3", "qwen3.6"])
def tok_and_hf(request):
    """Each bundled vocabulary with its HF reference (added tokens included)."""
    if request.param == "qwen3.6":
        return request.getfixturevalue("tok36"), request.getfixturevalue("hf_full36")
    return request.getfixturevalue("tok"), request.getfixturevalue("hf_full")


@pytest.mark.parametrize("name", ORACLE_ACCEPTED)
def test_both_vocabularies(tok_and_hf, name):
    """render_chat + encode_chat over either vocabulary: the harmless twin's ids are
    HF's ids of the reference text (its markers resolve to this vocabulary's atom
    ids), and the case itself has the same atom ids, one per template marker."""
    tok, hf = tok_and_hf
    request = ORACLE_CASES[name]["request"]
    twin = ref.harmless_twin(request)
    twin_ids = tok.encode_chat(render_oracle(twin)).tolist()
    assert twin_ids == hf.encode(ref.reference_text(twin), add_special_tokens=False).ids
    chat = render_oracle(request)
    ids = tok.encode_chat(chat).tolist()
    atom_ids = set(tok.atoms.values())
    markers = [m for s, e, k in chat.segments if k is Kind.TRUSTED_CONTROL
               for m in ref._MARKER_RE.findall(chat.data[s:e].decode())]
    assert [i for i in ids if i in atom_ids] == [tok.atoms[m] for m in markers]
    assert [i for i in ids if i in atom_ids] == [i for i in twin_ids if i in atom_ids]
