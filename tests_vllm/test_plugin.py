"""The vLLM plugin in-process, through vLLM's own registries and classes
(docs/RUNTIMES.md): the entry point, the tokenizer against transformers'
PreTrainedTokenizerFast of the same folder, the renderer against qwen4exp and
against vLLM's `hf` renderer, the parser against `parse_completion`."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import entry_points

import pytest
from _cases import (CONVERSATIONS, HOSTILE, TOOLS, atom_ids, control_atom_count, reference_messages,
                    reference_prompt)
from conftest import VOCABULARIES

import qwen4exp
from qwen4exp.formats import chat_format
from qwen4exp.render.segments import SegmentBuilder

vllm = pytest.importorskip("vllm")  # the module is only collected in the vLLM venv

from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest  # noqa: E402
from vllm.exceptions import VLLMValidationError  # noqa: E402
from vllm.plugins import load_general_plugins  # noqa: E402
from vllm.renderers.params import ChatParams  # noqa: E402

load_general_plugins()

from vllm.parser import ParserManager  # noqa: E402
from vllm.reasoning import ReasoningParserManager  # noqa: E402
from vllm.renderers.registry import RENDERER_REGISTRY, renderer_from_config  # noqa: E402
from vllm.tokenizers.registry import TokenizerRegistry, get_tokenizer  # noqa: E402
from vllm.tool_parsers import ToolParserManager  # noqa: E402

from qwen4exp.runtimes import vllm as plugin  # noqa: E402
from qwen4exp.runtimes.vllm_parse import Qwen4ExpParser, Qwen4ExpReasoningParser, Qwen4ExpToolParser  # noqa: E402
from qwen4exp.runtimes.vllm_render import Qwen4ExpRenderer  # noqa: E402

TEXTS = ["Hello, world!", "héllo wörld  \n\n  tabs\tand  spaces", "中文和日本語のテキスト", "x = f(1, 2)\n",
         "emoji 👩‍💻 and 𝔘𝔫𝔦𝔠𝔬𝔡𝔢", ""]


# -- registration ---------------------------------------------------------------

def test_entry_point_registers_every_part():
    (ep,) = [e for e in entry_points(group="vllm.general_plugins") if e.name == "qwen4exp"]
    assert ep.value == "qwen4exp.runtimes.vllm:register"
    assert TokenizerRegistry.load_tokenizer_cls("qwen4exp") is plugin.Qwen4ExpTokenizer
    assert TokenizerRegistry.load_tokenizer_cls("qwen4exp-trusted-prompts") is plugin.Qwen4ExpTrustedPromptsTokenizer
    assert RENDERER_REGISTRY.load_renderer_cls("qwen4exp") is Qwen4ExpRenderer
    assert RENDERER_REGISTRY.load_renderer_cls("qwen4exp-trusted-prompts") is Qwen4ExpRenderer
    assert ToolParserManager.get_tool_parser("qwen4exp") is Qwen4ExpToolParser
    assert ReasoningParserManager.get_reasoning_parser("qwen4exp") is Qwen4ExpReasoningParser
    plugin.register()  # vLLM may call it again: nothing changes
    assert TokenizerRegistry.load_tokenizer_cls("qwen4exp") is plugin.Qwen4ExpTokenizer


def test_qwen4exp_import_does_not_import_vllm():
    code = "import sys, qwen4exp; qwen4exp.Tokenizer(); assert 'vllm' not in sys.modules, 'vllm imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_parser_composition(folders):
    tok = get_tokenizer(folders["qwen3"], tokenizer_mode="qwen4exp")
    cls = ParserManager.get_parser(tool_parser_name="qwen4exp", reasoning_parser_name="qwen4exp",
                                   enable_auto_tools=True, tokenizer=tok)
    assert issubclass(cls, Qwen4ExpParser) and cls.tool_parser_cls is Qwen4ExpToolParser
    # Without --enable-auto-tool-choice vLLM selects no tool parser: calls are not returned.
    cls = ParserManager.get_parser(tool_parser_name="qwen4exp", reasoning_parser_name="qwen4exp",
                                   enable_auto_tools=False, tokenizer=tok)
    assert issubclass(cls, Qwen4ExpParser) and cls.tool_parser_cls is None
    with pytest.raises(TypeError, match="--reasoning-parser qwen4exp"):
        ParserManager.get_parser(tool_parser_name="qwen4exp", enable_auto_tools=True, tokenizer=tok)
    with pytest.raises(TypeError, match="cannot be combined with hermes"):
        ParserManager.get_parser(tool_parser_name="hermes", reasoning_parser_name="qwen4exp",
                                 enable_auto_tools=True, tokenizer=tok)
    other = ParserManager.get_parser(tool_parser_name="hermes", enable_auto_tools=True)
    assert not issubclass(other, Qwen4ExpParser)  # every other combination is vLLM's own


@pytest.mark.parametrize("flags, says", [
    (["--tokenizer-mode", "qwen4exp", "--enable-auto-tool-choice", "--tool-call-parser", "qwen4exp"],
     "--tool-call-parser qwen4exp needs --reasoning-parser qwen4exp"),
    (["--tokenizer-mode", "qwen4exp", "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
      "--reasoning-parser", "qwen4exp"], "cannot be combined with hermes"),
])
def test_wrong_parser_flags_stop_the_server_before_the_model_loads(folders, flags, says):
    """The API server validates its arguments before it starts the engine:
    wrong parser flags end it there, with one line and no traceback."""
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", folders["qwen3"],
           "--load-format", "dummy", "--host", "127.0.0.1", "--port", "0", *flags]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert run.returncode != 0
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("qwen4exp: ") and says in last, run.stderr[-3000:]
    assert "Traceback" not in run.stderr and "EngineCore" not in run.stderr + run.stdout


# -- the tokenizer against transformers' -------------------------------------------

@pytest.fixture(scope="module", params=VOCABULARIES)
def pair(request, folders):
    """(the plugin's tokenizer as vLLM loads it, transformers' fast tokenizer) of one folder."""
    from transformers import AutoTokenizer

    folder = folders[request.param]
    return get_tokenizer(folder, tokenizer_mode="qwen4exp"), AutoTokenizer.from_pretrained(folder)


def test_tokenizer_matches_transformers(pair):
    ours, hf = pair
    assert ours.get_vocab() == hf.get_vocab()
    assert ours.get_added_vocab() == hf.get_added_vocab()
    assert len(ours) == len(hf)
    assert sorted(ours.all_special_ids) == sorted(hf.all_special_ids)
    assert sorted(ours.all_special_tokens) == sorted(hf.all_special_tokens)
    assert (ours.eos_token_id, ours.pad_token_id, ours.bos_token_id) == (hf.eos_token_id, hf.pad_token_id,
                                                                       hf.bos_token_id)
    assert ours.num_special_tokens_to_add() == 0 == len(hf.encode(""))
    for text in TEXTS:
        ids = ours.encode(text)
        assert ids == hf.encode(text, add_special_tokens=False), text
        assert ours(text)["input_ids"] == ids
        assert ours.convert_ids_to_tokens(ids) == hf.convert_ids_to_tokens(ids)
        assert ours.convert_tokens_to_ids(hf.convert_ids_to_tokens(ids)) == ids
        assert ours.convert_tokens_to_string(ours.convert_ids_to_tokens(ids)) == text
    batch = ours(TEXTS)["input_ids"]
    assert batch == [hf.encode(t, add_special_tokens=False) for t in TEXTS]
    assert ours.encode(TEXTS[1], truncation=True, max_length=3) == batch[1][-3:]  # vLLM truncates left


def test_tokenizer_decodes_like_transformers(pair):
    ours, hf = pair
    atoms = sorted(ours.get_added_vocab().values())
    ids = hf.encode("a <|im_end|> b </think> c", add_special_tokens=False) + atoms[:6] + [hf.encode("é")[0]]
    for skip in (False, True):
        assert ours.decode(ids, skip_special_tokens=skip) == hf.decode(ids, skip_special_tokens=skip)
    assert ours.convert_ids_to_tokens(ids) == hf.convert_ids_to_tokens(ids)
    # Skipping drops what decode drops (the atoms marked special), as vLLM's hf
    # detokenizer does; transformers' convert_ids_to_tokens drops only the named ones.
    flagged = {i for i, t in hf.added_tokens_decoder.items() if t.special}
    assert ours.convert_ids_to_tokens(ids, skip_special_tokens=True) == [
        t for i, t in zip(ids, hf.convert_ids_to_tokens(ids)) if i not in flagged]
    assert ours.decode(atoms[0]) == hf.decode(atoms[0])


def test_vllms_detokenizers_take_padded_rows_as_the_hf_mode_does(pair, folders):
    """vLLM hands its tokenizer every id the model's rows allow (the padded
    embedding: 151,936 rows for 151,669 ids) in logprobs, echo and output
    detokenizing; a raise there stops the server. Each of vLLM's own helpers
    gives what it gives with the hf mode's tokenizer of the same folder."""
    from vllm.tokenizers.detokenizer_utils import convert_ids_list_to_tokens, detokenize_incrementally

    ours, _ = pair
    vocab = next(v for v, f in folders.items() if f == ours.name_or_path)
    hf = get_tokenizer(folders[vocab], tokenizer_mode="hf")
    from _model_folders import MODEL_VOCAB_SIZE

    padded = list(range(len(ours), MODEL_VOCAB_SIZE[vocab]))
    atoms = sorted(ours.get_added_vocab().values())
    text = hf.encode("héllo 你好", add_special_tokens=False)
    ids = [padded[0], *text[:2], padded[1], *text[2:], atoms[0], padded[-1]]
    assert convert_ids_list_to_tokens(ours, padded + ids) == convert_ids_list_to_tokens(hf, padded + ids)
    for skip in (False, True):
        assert ours.decode(padded + ids, skip_special_tokens=skip) == hf.decode(padded + ids,
                                                                               skip_special_tokens=skip)
        states = {}
        for name, tok in (("ours", ours), ("hf", hf)):
            prev, prefix, read, out = None, 0, 0, []
            for k in range(1, len(ids) + 1):
                new, piece, prefix, read = detokenize_incrementally(tok, ids[:k], prev, prefix, read,
                                                                    skip_special_tokens=skip)
                prev = new if prev is None else prev + new
                out.append(piece)
            states[name] = "".join(out)
        assert states["ours"] == states["hf"]


def test_structured_output_backend_reads_the_tokenizer(pair):
    """xgrammar (vLLM's structured-output backend) builds the same tokenizer
    description from the plugin's tokenizer as from transformers'."""
    import xgrammar as xgr

    ours, hf = pair
    size = len(hf) + 64
    a, b = xgr.TokenizerInfo.from_huggingface(ours, vocab_size=size), xgr.TokenizerInfo.from_huggingface(
        hf, vocab_size=size)
    assert (a.vocab_type, a.add_prefix_space, a.stop_token_ids) == (b.vocab_type, b.add_prefix_space,
                                                                    b.stop_token_ids)
    assert a.decoded_vocab == b.decoded_vocab


def test_plain_text_is_data_unless_the_trusted_mode(pair, folders):
    """A raw prompt's atom spellings: ordinary BPE ids by default; atom ids (as
    transformers makes them) only in mode qwen4exp-trusted-prompts."""
    ours, hf = pair
    text = "<|im_start|>user\n" + HOSTILE + "<|im_end|>\n<|im_start|>assistant\n<think>\n"
    assert not set(ours.encode(text)) & set(ours.get_added_vocab().values())
    trusted = get_tokenizer(ours.name_or_path, tokenizer_mode="qwen4exp-trusted-prompts")
    assert trusted.encode(text) == hf.encode(text, add_special_tokens=False)
    assert trusted(text)["input_ids"] == hf(text)["input_ids"]


# -- the renderer ---------------------------------------------------------------------

def _engine_config(folder: str, mode: str):
    from vllm.engine.arg_utils import EngineArgs

    return EngineArgs(model=folder, tokenizer_mode=mode, load_format="dummy", max_model_len=4096,
                      dtype="bfloat16", enforce_eager=True).create_engine_config()


@pytest.fixture(scope="module", params=VOCABULARIES)
def renderers(request, folders, qwen_tokenizers):
    """(vocabulary, qwen4exp tokenizer, our renderer, vLLM's hf renderer), built by vLLM's registry."""
    folder = folders[request.param]
    ours = renderer_from_config(_engine_config(folder, "qwen4exp"))
    hf = renderer_from_config(_engine_config(folder, "hf"))
    assert isinstance(ours, Qwen4ExpRenderer) and not isinstance(hf, Qwen4ExpRenderer)
    return request.param, qwen_tokenizers[request.param], ours, hf


def _vllm_messages(messages: list[dict], tools=None) -> tuple[list, list | None]:
    """The messages and tool dicts as vLLM's server hands them to a renderer."""
    req = ChatCompletionRequest(model="m", messages=messages, tools=tools)
    return req.messages, None if req.tools is None else [t.model_dump() for t in req.tools]


def _render(renderer, messages, tools=None, **kwargs) -> list[int]:
    messages, tool_dicts = _vllm_messages(messages, tools)
    params = ChatParams(chat_template_kwargs={"add_generation_prompt": True, "tools": tool_dicts, **kwargs})
    _, (engine_input,) = renderer.render_chat([messages], params)
    return list(engine_input["prompt_token_ids"])


@pytest.mark.parametrize("name", sorted(CONVERSATIONS))
def test_renderer_feeds_qwen4exp_ids(renderers, name):
    """The ids vLLM gets are qwen4exp's; the only atoms are the renderer's markers,
    where vLLM's hf renderer turns the caller's spellings into atoms too."""
    _, tok, ours, hf = renderers
    messages = CONVERSATIONS[name]
    chat, expected = reference_prompt(tok, messages, tools=TOOLS)
    ids = _render(ours, messages, TOOLS)
    assert ids == expected
    atoms = atom_ids(tok)
    assert sum(i in atoms for i in ids) == control_atom_count(tok, chat)
    hf_ids = _render(hf, reference_messages(messages), TOOLS)
    assert sum(i in atoms for i in hf_ids) > sum(i in atoms for i in ids)


def test_renderer_options_reach_the_format(renderers):
    """Each option the folder's format has, set to a value other than its
    default, changes the prompt, exactly as qwen4exp renders it."""
    vocab, tok, ours, _ = renderers
    rules = chat_format(tok.chat_format).rules
    messages = CONVERSATIONS["history with reasoning_content"]
    grid = [{"enable_thinking": not rules.thinking}]
    if rules.preserve is not None:
        grid.append({"preserve_thinking": not rules.preserve})
    if rules.effort is not None:
        grid += [{"reasoning_effort": e} for e in ("xhigh", "medium", "low") if e != rules.effort]
    # add_vision_id numbers images, which the renderer refuses (vLLM would get none)
    text_options = [o for o in chat_format(tok.chat_format).options if o != "add_vision_id"]
    assert len(grid) == len(text_options) + (1 if rules.effort else 0)
    default = _render(ours, messages)
    assert default == reference_prompt(tok, messages)[1]
    for options in grid:
        ids = _render(ours, messages, **options)
        assert ids == reference_prompt(tok, messages, **options)[1], options
        assert ids != default, options


def test_renderer_refusals(renderers):
    vocab, _, ours, _ = renderers
    messages = CONVERSATIONS["hostile user"]
    with pytest.raises(VLLMValidationError, match="chat template cannot be used"):
        ours.render_chat([messages], ChatParams(chat_template="{{ messages }}"))
    with pytest.raises(VLLMValidationError, match="continue_final_message"):
        _render(ours, messages, continue_final_message=True)
    if vocab == "qwen3":
        with pytest.raises(VLLMValidationError, match="reasoning_effort"):
            _render(ours, messages, reasoning_effort="low")
    with pytest.raises(VLLMValidationError, match=r"messages\[0\]"):
        _render(ours, [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}])


def _png_data_url(width: int, height: int, rgb: tuple[int, int, int]) -> str:
    """A data: URL of a width x height PNG of one colour (zlib + struct: no download, no PIL)."""
    import base64
    import struct
    import zlib

    def chunk(tag: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + tag + body + struct.pack(">I", zlib.crc32(tag + body))

    rows = b"".join(b"\0" + bytes(rgb) * width for _ in range(height))
    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
    return "data:image/png;base64," + base64.b64encode(png).decode()


def test_media_on_a_text_only_model_is_refused_as_vllm_does(renderers):
    """An image on a text-only architecture: vLLM's hf renderer fails with its
    multimodal registry's reason (a ValueError, HTTP 400); the qwen4exp
    renderer gives the same reason as a 400 naming the part, before fetching
    anything (a broken data: URL gets the same answer), for every media shape
    vLLM's request model reads."""
    _, _, ours, hf = renderers
    image = {"type": "image_url", "image_url": {"url": _png_data_url(5, 3, (200, 10, 10))}}
    messages = [{"role": "user", "content": "first"},
                {"role": "user", "content": [{"type": "text", "text": "look"}, image]}]
    with pytest.raises(ValueError) as hf_error:
        _render(hf, messages)
    reason = str(hf_error.value)
    assert reason.endswith("is not a multimodal model")
    broken = {"type": "image_url", "image_url": {"url": "data:image/png;base64,!!"}}
    shapes = [image, broken, {"image_url": image["image_url"]["url"]},
              {"type": "video_url", "video_url": {"url": "data:video/mp4;base64,AAAA"}},
              {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}]
    for part in shapes:
        content = [{"type": "text", "text": "look"}, part]
        with pytest.raises(VLLMValidationError, match=r"messages\[1\]\.content\[1\]") as ours_error:
            _render(ours, [messages[0], {"role": "user", "content": content}])
        assert reason in str(ours_error.value), part
        assert ours_error.value.parameter == "messages"


def test_media_on_a_vision_model_is_refused(renderers, monkeypatch):
    """On a vision architecture (a multimodal config: vLLM 0.32's CPU build
    cannot load a Qwen vision one, docs/RUNTIMES.md "Media") the 400 says the
    renderer does not pass media, rather than prompting without the image."""
    from vllm.config import MultiModalConfig

    _, _, ours, _ = renderers
    monkeypatch.setattr(ours.model_config, "multimodal_config", MultiModalConfig())
    assert ours.model_config.is_multimodal_model
    content = [{"type": "video_url", "video_url": {"url": "data:video/mp4;base64,AAAA"}}]
    with pytest.raises(VLLMValidationError, match=r"messages\[0\]\.content\[0\]: 'video_url' parts are not "
                       r"supported \(the qwen4exp renderer does not pass images or videos"):
        _render(ours, [{"role": "user", "content": content}])


def test_renderer_accepts_openai_shapes(renderers):
    """Content as text parts, `reasoning` or `reasoning_content`, arguments as
    a JSON string (vLLM's request model takes no other), tool_call_id: the same
    prompt."""
    _, tok, ours, _ = renderers
    base = CONVERSATIONS["tool round trip"]
    variant = json.loads(json.dumps(base))
    variant[2]["reasoning_content"] = variant[2].pop("reasoning")
    variant[1]["content"] = [{"type": "text", "text": "Weather "}, {"type": "text", "text": "in Paris?"}]
    assert _render(ours, variant, TOOLS) == _render(ours, base, TOOLS) == reference_prompt(tok, base, TOOLS)[1]


# -- the parser --------------------------------------------------------------------------

def _completion(tok, prompt_ids: list[int], turn: dict, messages, options) -> list[int] | None:
    """The ids of an assistant turn as the renderer writes it after the
    prompt's generation prompt (what a model that follows its format
    generates), <|im_end|> included; None when the turn cannot follow that
    generation prompt (reasoning after a closed empty <think> block)."""
    full = tok.encode_chat(tok.render_chat(reference_messages(messages) + [turn], tools=TOOLS,
                                           **options)).tolist()
    start = tok.atoms["<|im_start|>"]
    header = len(prompt_ids) - prompt_ids[::-1].index(start) + 2  # ids through "assistant\n"
    turn_at = len(full) - full[::-1].index(start) + 2
    generation, body = prompt_ids[header:], full[turn_at:]
    if body[:len(generation)] != generation:
        return None
    end = body.index(tok.atoms["<|im_end|>"])
    return body[len(generation):end + 1]


def _outputs(tok, prompt_ids, prompt_chat, messages, options):
    """Completions to parse: content, reasoning, typed tool calls, a call spelled
    in plain text, a call inside reasoning, a truncated reply."""
    a = tok.atoms
    text = tok.encode
    turns = [
        {"role": "assistant", "content": "Plain answer with <tool_call> spelled in text."},
        {"role": "assistant", "content": "Sure.", "reasoning_content": "Think <|im_end|> first."},
        {"role": "assistant", "content": "", "reasoning_content": "Need weather.", "tool_calls": [
            {"type": "function", "function": {"name": "get_weather",
                                              "arguments": {"city": "Paris", "days": 3, "metric": True}}},
            {"type": "function", "function": {"name": "lookup", "arguments": {"q": "a \"quoted\" </q>"}}}]},
        {"role": "assistant", "content": "Calling.", "tool_calls": [
            {"type": "function", "function": {"name": "get_weather",
                                              "arguments": {"city": "Paris", "days": 3, "metric": True}}},
            {"type": "function", "function": {"name": "lookup", "arguments": {"q": "z"}}}]},
    ]
    outs = [ids for t in turns if (ids := _completion(tok, prompt_ids, t, messages, options)) is not None]
    assert len(outs) >= 2
    outs.append(outs[-1][:-6])  # cut off inside a call
    opened = [] if prompt_chat.opens_reasoning else [a["<think>"]]
    outs.append(opened + text("\nplan ") + [a["<tool_call>"]] + text('\n{"name": "lookup", "arguments": {}}\n')
                + [a["</tool_call>"]] + text("\n") + [a["</think>"]] + text("\n\nok") + [a["<|im_end|>"]])
    outs.append(text('<tool_call>\n{"name": "lookup", "arguments": {}}\n</tool_call>') + [a["<|im_end|>"]])
    return outs


def _parser(tok_vllm, request, enable_auto_tools=True):
    cls = ParserManager.get_parser(tool_parser_name="qwen4exp", reasoning_parser_name="qwen4exp",
                                   enable_auto_tools=enable_auto_tools, tokenizer=tok_vllm)
    kwargs = request.build_chat_params(None, "auto").chat_template_kwargs
    return cls(tok_vllm, request.tools, chat_template_kwargs=kwargs)


def _streamed(parser, request, prompt_ids, ids, step):
    reasoning, content, calls = "", "", {}
    for k in range(0, max(len(ids), 1), step):
        delta = parser.parse_delta("", ids[k:k + step], request, prompt_ids, finished=k + step >= len(ids))
        if delta is None:
            continue
        reasoning += delta.reasoning or ""
        content += delta.content or ""
        for tc in delta.tool_calls:
            entry = calls.setdefault(tc.index, {"id": None, "name": None, "arguments": ""})
            if tc.id is not None:
                entry["id"], entry["name"] = tc.id, tc.function.name
            entry["arguments"] += tc.function.arguments or ""
    return reasoning or None, content or None, [calls[i] for i in sorted(calls)]


@pytest.mark.parametrize("thinking", [False, True])
def test_parser_reads_ids_like_parse_completion(renderers, thinking):
    """One-shot and streamed in chunks of every size tried, the parser vLLM
    builds gives parse_completion's message: typed calls with the same ids,
    a call inside reasoning or spelled in text not executed."""
    vocab, tok, ours, _ = renderers
    tok_vllm = ours.get_tokenizer()
    messages = CONVERSATIONS["tool round trip"]
    options = {"enable_thinking": thinking}
    request = ChatCompletionRequest(model="m", messages=messages, tools=TOOLS, chat_template_kwargs=options)
    prompt_chat, prompt_ids = reference_prompt(tok, messages, TOOLS, **options)
    assert _render(ours, messages, TOOLS, **options) == prompt_ids
    outputs = _outputs(tok, prompt_ids, prompt_chat, messages, options)
    for ids in outputs:
        expected = tok.parse_completion(ids, prompt_chat)
        parser = _parser(tok_vllm, request)
        parser.set_prompt_token_ids(prompt_ids)
        reasoning, content, calls = parser.parse("", request, enable_auto_tools=True, model_output_token_ids=ids)
        assert reasoning == (expected["reasoning_content"] or None)
        want_calls = [{"id": c["id"], "name": c["function"]["name"], "arguments": c["function"]["arguments"]}
                      for c in expected["tool_calls"]]
        got_calls = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls or []]
        assert got_calls == want_calls
        assert content == (None if want_calls and not expected["content"] else expected["content"])
        assert parser.count_reasoning_tokens(ids) == _reasoning_ids(tok, ids, prompt_chat.opens_reasoning,
                                                                    expected["reasoning_content"])
        for step in (1, 2, 5, len(ids)):
            streamed = _streamed(_parser(tok_vllm, request), request, prompt_ids, ids, step)
            assert streamed == (reasoning, content or None, got_calls), (step, tok.decode(ids))
    calls = [c for ids in outputs for c in tok.parse_completion(ids, prompt_chat)["tool_calls"]]
    assert {c["function"]["name"] for c in calls} == {"get_weather", "lookup"}  # the cases hold calls
    typed = next(c for c in calls if c["function"]["name"] == "get_weather")
    assert json.loads(typed["function"]["arguments"]) == {"city": "Paris", "days": 3, "metric": True}


def _reasoning_ids(tok, ids, opened: bool, reasoning: str | None) -> int:
    """The ids between the reasoning block's opening (the prompt's, or a
    leading <think>) and its </think>, checked to spell the parsed reasoning."""
    a = tok.atoms
    if not opened:
        if not ids or ids[0] != a["<think>"]:
            return 0
        ids = ids[1:]
    ends = [k for k, i in enumerate(ids) if i in (a["</think>"], a["<|im_end|>"], a["<|endoftext|>"])]
    end = ends[0] if ends else len(ids)
    inner = tok.decode(ids[:end])
    assert inner.strip("\n") == (reasoning or "").strip("\n") or a["<tool_call>"] in ids[:end]
    return end


def test_parser_without_auto_tools_returns_no_calls(renderers):
    _, tok, ours, _ = renderers
    messages = CONVERSATIONS["hostile user"]
    options = {"enable_thinking": False}
    request = ChatCompletionRequest(model="m", messages=messages, tools=TOOLS, chat_template_kwargs=options)
    prompt_chat, prompt_ids = reference_prompt(tok, messages, TOOLS, **options)
    ids = _completion(tok, prompt_ids, {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "lookup", "arguments": {"q": "z"}}}]}, messages, options)
    assert tok.parse_completion(ids, prompt_chat)["tool_calls"]
    parser = _parser(ours.get_tokenizer(), request, enable_auto_tools=False)
    parser.set_prompt_token_ids(prompt_ids)
    assert parser.parse("", request, model_output_token_ids=ids)[2] is None


def test_reasoning_parser_is_reasoning_end(renderers):
    vocab, tok, ours, _ = renderers
    tok_vllm = ours.get_tokenizer()
    messages = CONVERSATIONS["hostile user"]
    for thinking in (False, True):
        chat, ids = reference_prompt(tok, messages, enable_thinking=thinking)
        reasoning = Qwen4ExpReasoningParser(tok_vllm, chat_template_kwargs={"enable_thinking": thinking})
        # Reasoning has ended at the prompt's end only when thinking is off.
        assert reasoning.is_reasoning_end(ids) is (not thinking)
        a = tok.atoms
        opened = ids + ([] if chat.opens_reasoning else [a["<think>"]]) + tok.encode("\nhm")
        assert not reasoning.is_reasoning_end(opened)
        closed = opened + [a["</think>"]] + tok.encode("\n\nx")
        assert reasoning.is_reasoning_end(closed)
        assert reasoning.extract_content_ids(closed) == tok.encode("\n\nx")


def test_built_stream_is_what_the_parser_reads():
    """SegmentBuilder streams are how the completions above place atoms by hand:
    check that the builder resolves them to the atom ids the parser reads."""
    tok = qwen4exp.Tokenizer()
    chat = SegmentBuilder().control("<think>").text("x").control("</think>").build()
    assert tok.encode_chat(chat).tolist() == [tok.atoms["<think>"], *tok.encode("x"), tok.atoms["</think>"]]


# -- every format ------------------------------------------------------------------------

OTHER_FORMATS = ("qwen3-2507", "qwen3.5", "qwen3.6")  # the servers' folders are qwen3 and qwen3.8


@pytest.fixture(scope="module")
def other_folders(tmp_path_factory) -> dict:
    from conftest import write_model_folders

    return write_model_folders(tmp_path_factory.mktemp("formats"), {f: f for f in OTHER_FORMATS})


@pytest.mark.parametrize("fmt", OTHER_FORMATS)
def test_every_format_renders_and_parses(other_folders, fmt):
    """A folder of each other format: vLLM's tokenizer mode picks the format
    from the template, the renderer feeds qwen4exp's ids, the parser reads a
    reply as parse_completion does."""
    folder = other_folders[fmt]
    tok = qwen4exp.Tokenizer.from_pretrained(folder)
    assert tok.chat_format == fmt
    renderer = renderer_from_config(_engine_config(folder, "qwen4exp"))
    messages = CONVERSATIONS["tool round trip"]
    assert _render(renderer, messages, TOOLS) == reference_prompt(tok, messages, TOOLS)[1]
    # A reply without reasoning follows the prompt of thinking turned off.
    options = {} if chat_format(fmt).rules.thinking is None else {"enable_thinking": False}
    prompt_chat, prompt_ids = reference_prompt(tok, messages, TOOLS, **options)
    assert _render(renderer, messages, TOOLS, **options) == prompt_ids
    request = ChatCompletionRequest(model="m", messages=messages, tools=TOOLS, chat_template_kwargs=options)
    turn = {"role": "assistant", "content": "On it.", "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo", "days": 1}}}]}
    ids = _completion(tok, prompt_ids, turn, messages, options)
    expected = tok.parse_completion(ids, prompt_chat)
    assert [c["function"]["name"] for c in expected["tool_calls"]] == ["get_weather"]
    parser = _parser(renderer.get_tokenizer(), request)
    parser.set_prompt_token_ids(prompt_ids)
    reasoning, content, calls = parser.parse("", request, enable_auto_tools=True, model_output_token_ids=ids)
    assert (reasoning, content) == (expected["reasoning_content"] or None, expected["content"])
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        (c["id"], c["function"]["name"], c["function"]["arguments"]) for c in expected["tool_calls"]]
    assert _streamed(_parser(renderer.get_tokenizer(), request), request, prompt_ids, ids, 3) == (
        reasoning, content, [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls])
