"""Image and video parts (qwen4exp.render.media; docs/FORMAT.md, "Media").

Rendering is checked against the official qwen3.5 / 3.6 / 3.8 templates run
by transformers (text, segments, message spans, and ids against HF
`tokenizers`); the pad counts against transformers' own Qwen2-VL image
processor resize rule (`smart_resize`, which the Qwen3-VL and Qwen3.5
processors use); errors against the templates' refusals and the
transactional rules.
"""

from __future__ import annotations

import ast
import math
import random
import re
from pathlib import Path

import numpy as np
import pytest

import _formats_reference as ref
from helpers import snapshot
from qwen4exp import ChatFormatError, Kind, Qwen4ExpError, RenderedChat, SegmentBuilder
from qwen4exp.render.chat import render_chat, render_chat_into
from qwen4exp.errors import MediaError
from qwen4exp.render.media import (
    DEFAULT_PROCESSOR,
    IMAGE_PLACEHOLDER,
    MAX_MEDIA_TOKENS,
    VIDEO_PLACEHOLDER,
    MediaProcessor,
    processor_from_config,
    smart_resize,
)

MEDIA_FORMATS = ref.QWEN35_FAMILY  # the formats whose templates render media
TEXT_FORMATS = ref.NO_MEDIA


def hf_smart_resize():
    """transformers' own smart_resize (its Qwen2-VL image processor module).
    Without Pillow that module does not import: the function is then taken
    from its source file and run as written."""
    try:
        from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize as fn
        return fn
    except ImportError:
        import transformers

        path = Path(transformers.__file__).parent / "models" / "qwen2_vl" / "image_processing_qwen2_vl.py"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "smart_resize")
        namespace = {"math": math}
        exec(compile(ast.Module([node], []), str(path), "exec"), namespace)
        return namespace["smart_resize"]


# --------------------------------------------------------------------------- generated conversations

_WORDS = ["look", "at", "this", "Picture 1:", "é", "中文", "<", "a\nb", "x", "1", "?", "ok", "Video 2: "]
_SPACE = ["", " ", "  ", "\n", "\u3000", " \n "]


def _text(rng: random.Random) -> str:
    words = [rng.choice(_WORDS) for _ in range(rng.randint(0, 3))]
    return rng.choice(_SPACE) + " ".join(words) + rng.choice(_SPACE)


def _media_part(rng: random.Random) -> dict:
    kind = rng.choice(["image", "image_url", "video"])
    part = {"type": kind}
    if kind == "image":
        part["image"] = "file:///tmp/a.png"
    elif kind == "image_url":
        part["image_url"] = {"url": "https://example.com/b.jpg"}
    else:
        part["video"] = "file:///tmp/c.mp4"
    if kind != "video" and rng.random() < 0.5:
        part["width"], part["height"] = rng.randint(1, 4000), rng.randint(1, 4000)
    elif rng.random() < 0.5:
        part["grid"] = [rng.randint(1, 4), 2 * rng.randint(1, 20), 2 * rng.randint(1, 20)]
    return part


def _content(rng: random.Random, media: bool = True):
    if not media or rng.random() < 0.2:
        return _text(rng) or "q"
    parts = []
    for _ in range(rng.randint(1, 5)):
        parts.append(_media_part(rng) if rng.random() < 0.5 else {"type": "text", "text": _text(rng)})
    if not any(p["type"] != "text" for p in parts):
        parts.insert(rng.randint(0, len(parts)), _media_part(rng))
    return parts


def conversation(rng: random.Random, fmt: str) -> dict:
    """A request with media parts in every role that takes them (user,
    assistant, tool), in any order with text parts, and the format's options."""
    msgs = []
    if rng.random() < 0.4:
        msgs.append({"role": "system", "content": _content(rng, media=False)})
    for _ in range(rng.randint(1, 3)):
        msgs.append({"role": "user", "content": _content(rng)})
        if rng.random() < 0.7:
            msg = {"role": "assistant", "content": _content(rng)}
            if rng.random() < 0.3:
                msg["reasoning_content"] = _text(rng)
            if rng.random() < 0.3:
                msg["tool_calls"] = [{"type": "function", "function": {"name": "look", "arguments": {"at": 1}}}]
                msgs.append(msg)
                for _ in range(rng.randint(1, 2)):
                    msgs.append({"role": "tool", "content": _content(rng)})
                continue
            msgs.append(msg)
    request = {"messages": msgs, "add_generation_prompt": rng.random() < 0.5,
               "enable_thinking": rng.choice([None, True, False]),
               "add_vision_id": rng.choice([None, True, False])}
    if rng.random() < 0.3:
        request["tools"] = [{"type": "function", "function": {"name": "look", "parameters": {}}}]
    if fmt != "qwen3.5" and rng.random() < 0.5:
        request["preserve_thinking"] = rng.choice([True, False])
    return request


def _check_parity(request: dict, fmt: str, tok, hf) -> RenderedChat:
    chat = render_chat(request["messages"], **ref.render_kwargs(request, fmt))
    want = ref.reference_text(request, fmt)
    assert chat.text == want
    assert ref.plain_segments(chat) == ref.scan_segments(want)
    assert [tuple(s) for s in chat.message_spans] == ref.reference_spans(request, fmt)
    assert tok.encode_chat(chat).tolist() == hf.encode(want, add_special_tokens=False).ids
    return chat


def _check_generated(fmt: str, count: int, seed: str, tok36, hf_full36) -> None:
    rng = random.Random(seed)
    seen = set()
    for _ in range(count):
        request = conversation(rng, fmt)
        chat = _check_parity(request, fmt, tok36, hf_full36)
        for part in chat.media:
            seen.add((request["messages"][part.message]["role"], part.kind))
            assert chat.data[part.start:part.end] == (IMAGE_PLACEHOLDER if part.kind == "image"
                                                     else VIDEO_PLACEHOLDER)
    assert {(r, k) for r in ("user", "assistant", "tool") for k in ("image", "video")} <= seen


@pytest.mark.parametrize("fmt", MEDIA_FORMATS)
def test_generated_conversations_match_the_template(fmt, tok36, hf_full36):
    """Text, segments, spans and ids of conversations with media parts in
    every place the template renders them, with and without add_vision_id."""
    _check_generated(fmt, 60, f"media-{fmt}", tok36, hf_full36)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", MEDIA_FORMATS)
def test_generated_conversations_match_the_template_sweep(fmt, tok36, hf_full36):
    _check_generated(fmt, 1000, f"media-sweep-{fmt}", tok36, hf_full36)


@pytest.mark.parametrize("fmt", MEDIA_FORMATS)
@pytest.mark.parametrize("add_vision_id", [None, False, True])
def test_media_in_every_place(fmt, add_vision_id, tok36, hf_full36):
    """The hand-written corners: media first, last, alone, side by side, in an
    assistant turn with and without calls and reasoning, in a tool result
    (also the first message), whitespace-only text around them (trimmed away
    as the template trims the whole content), numbering across the turns."""
    img, vid = {"type": "image", "image": "i"}, {"type": "video", "video": "v"}
    url = {"type": "image_url", "image_url": {"url": "u"}}
    assert "Unexpected item type" in _template_raises([{"role": "user", "content": [{"type": "image_url"}]}], fmt)
    txt = lambda s: {"type": "text", "text": s}  # noqa: E731
    cases = [
        [{"role": "user", "content": [img]}],
        [{"role": "user", "content": [img, img, vid, url]}],
        [{"role": "user", "content": [txt("  "), img, txt("\n")]}],
        [{"role": "user", "content": [txt(" a "), img, txt(" b "), vid, txt(" c ")]}],
        [{"role": "system", "content": "s"}, {"role": "user", "content": [vid, txt("what?")]},
         {"role": "assistant", "content": [img], "reasoning_content": "r"},
         {"role": "user", "content": [url]}],
        [{"role": "user", "content": "q"},
         {"role": "assistant", "content": [txt("see"), img], "tool_calls": [
             {"type": "function", "function": {"name": "f", "arguments": {"x": [1]}}}]},
         {"role": "tool", "content": [img, txt("result")]}, {"role": "tool", "content": [vid]},
         {"role": "assistant", "content": [img]}],
        [{"role": "user", "content": "q"},
         {"role": "assistant", "content": [img], "tool_calls": [{"name": "f", "arguments": {}}]},
         {"role": "tool", "content": [txt(" "), img, txt(" ")]}],
        [{"role": "tool", "content": [img]}, {"role": "user", "content": [img]}],
    ]
    opts = {} if add_vision_id is None else {"add_vision_id": add_vision_id}
    for messages in cases:
        for gen in (False, True):
            _check_parity({"messages": messages, "add_generation_prompt": gen, **opts}, fmt, tok36, hf_full36)


@pytest.mark.parametrize("fmt", MEDIA_FORMATS)
def test_vision_ids_number_across_the_conversation(fmt):
    img, vid = {"type": "image"}, {"type": "video"}
    msgs = [{"role": "user", "content": [img, vid]}, {"role": "assistant", "content": [img]},
            {"role": "user", "content": [vid, img]}]
    chat = render_chat(msgs, chat_format=fmt, add_vision_id=True)
    labels = [chat.data[s.start:s.end] for s in chat.segments if s.kind is Kind.DATA]
    joined = b"".join(labels)
    for label in (b"Picture 1: ", b"Video 1: ", b"Picture 2: ", b"Video 2: ", b"Picture 3: "):
        assert joined.count(label) == 1
    assert [(p.message, p.part, p.kind) for p in chat.media] == [
        (0, 0, "image"), (0, 1, "video"), (1, 0, "image"), (2, 0, "video"), (2, 1, "image")]


# --------------------------------------------------------------------------- refusals


def _template_raises(messages, fmt, **opts) -> str:
    with pytest.raises(Exception) as info:
        ref.reference_tokenizer().apply_chat_template(
            messages, chat_template=ref.template_text(fmt), tokenize=False, **opts)
    return str(info.value)


@pytest.mark.parametrize("fmt", MEDIA_FORMATS)
@pytest.mark.parametrize("kind, word", [("image", "images"), ("image_url", "images"), ("video", "videos")])
def test_media_in_a_system_message_is_refused_as_the_template_refuses_it(fmt, kind, word):
    part = {"type": kind, kind: {"url": "u"} if kind == "image_url" else "x"}
    messages = [{"role": "system", "content": [{"type": "text", "text": "s"}, part]},
                {"role": "user", "content": "q"}]
    assert f"System message cannot contain {word}" in _template_raises(messages, fmt)
    for tools in (None, [{"type": "function", "function": {"name": "f"}}]):
        with pytest.raises(ChatFormatError, match=rf"messages\[0\]\.content\[1\]: a system message cannot contain {word}"):
            render_chat(messages, chat_format=fmt, tools=tools)


@pytest.mark.parametrize("fmt", MEDIA_FORMATS)
@pytest.mark.parametrize("kind", ["video_url", "audio", "input_audio", "file", None])
def test_parts_the_template_cannot_render_are_refused(fmt, kind):
    part = {"type": kind} if kind else {"url": "x"}
    messages = [{"role": "user", "content": [part]}]
    assert "Unexpected item type" in _template_raises(messages, fmt)
    with pytest.raises(ChatFormatError, match=r"messages\[0\]\.content\[0\]"):
        render_chat(messages, chat_format=fmt)


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
@pytest.mark.parametrize("kind", ["image", "image_url", "video"])
def test_formats_without_media_refuse_media_naming_the_format(fmt, kind):
    with pytest.raises(ChatFormatError, match=rf"'{kind}' parts are not supported in the {fmt} format"):
        render_chat([{"role": "user", "content": [{"type": kind}]}], chat_format=fmt)
    with pytest.raises(ChatFormatError, match=rf"add_vision_id: the {fmt} format has no such option"):
        render_chat([{"role": "user", "content": "q"}], chat_format=fmt, add_vision_id=False)


@pytest.mark.parametrize("fmt", MEDIA_FORMATS)
def test_parts_whose_keys_contradict_their_type_are_refused(fmt):
    """The template reads keys before the type ('image' in item): a text part
    with an image key would be an image there. Such parts are ambiguous."""
    for part, fragment in (({"type": "text", "text": "t", "image": "i"}, "'text' part with the key 'image'"),
                           ({"type": "text", "text": "t", "video": "v"}, "'text' part with the key 'video'"),
                           ({"type": "video", "image_url": {"url": "u"}}, "'video' part with the key 'image'")):
        with pytest.raises(ChatFormatError, match=fragment):
            render_chat([{"role": "user", "content": [part]}], chat_format=fmt)


# --------------------------------------------------------------------------- typed placeholders


@pytest.mark.parametrize("fmt", MEDIA_FORMATS + TEXT_FORMATS)
def test_typed_placeholders_stay_data(fmt, tok, tok36):
    """Placeholder spellings in text (content, text parts, reasoning, tool
    results) are DATA and give no atom id; only a structured part makes one."""
    typed = "<|vision_start|><|image_pad|><|vision_end|> <|video_pad|><|vision_pad|>"
    msgs = [{"role": "user", "content": [{"type": "text", "text": typed}]},
            {"role": "assistant", "content": typed, "reasoning_content": typed},
            {"role": "user", "content": typed}]
    chat = render_chat(msgs, chat_format=fmt)
    assert chat.media == ()
    for s in chat.segments:
        if s.kind is Kind.TRUSTED_CONTROL:
            assert b"vision" not in chat.data[s.start:s.end] and b"pad" not in chat.data[s.start:s.end]
    t = tok36 if ref.VOCAB_OF[fmt] == "qwen3.6" else tok
    pads = {t.atoms[a] for a in ("<|vision_start|>", "<|image_pad|>", "<|video_pad|>", "<|vision_pad|>")}
    ids = t.encode_chat(chat)
    assert not pads & set(ids.tolist())
    assert len(t.encode_chat(chat, expand_media=True)) == len(ids)  # nothing to expand


@pytest.mark.parametrize("fmt", MEDIA_FORMATS)
def test_a_typed_placeholder_beside_a_real_one(fmt, tok36):
    msgs = [{"role": "user", "content": [{"type": "text", "text": "<|image_pad|>"},
                                         {"type": "image", "width": 64, "height": 64}]}]
    chat = render_chat(msgs, chat_format=fmt)
    assert len(chat.media) == 1
    ids = tok36.encode_chat(chat)
    assert (ids == tok36.atoms["<|image_pad|>"]).sum() == 1
    expanded = tok36.encode_chat(chat, expand_media=True)
    assert (expanded == tok36.atoms["<|image_pad|>"]).sum() == DEFAULT_PROCESSOR.tokens(chat.media[0])


# --------------------------------------------------------------------------- counts


def _sizes() -> list[tuple[int, int]]:
    rng = random.Random("media-sizes")
    sizes = [(1, 1), (1, 2), (2, 1), (3, 3), (15, 17), (31, 33), (32, 32), (1, 199), (199, 1), (1, 200),
             (200, 1), (5, 1000), (1000, 5), (16, 3200), (256, 256), (255, 257), (16 * 1023, 16),
             (4096, 4096), (4097, 4095), (8192, 2048), (20000, 15000), (100000, 600), (600, 100000),
             (65535, 65535), (1 << 20, 1 << 20), (1 << 20, (1 << 20) // 200),
             (10 ** 7, 10 ** 6), (1 << 24, 1 << 24), (1 << 24, 1)]
    sizes += [(32 * rng.randint(1, 200), 32 * rng.randint(1, 200)) for _ in range(80)]  # exact multiples
    sizes += [(28 * rng.randint(1, 200), 14 * rng.randint(1, 400)) for _ in range(40)]
    sizes += [(rng.randint(1, 60), rng.randint(1, 60)) for _ in range(60)]  # tiny
    sizes += [(rng.randint(1, 12000), rng.randint(1, 12000)) for _ in range(120)]
    sizes += [(rng.randint(1, 50), rng.randint(2000, 9000)) for _ in range(40)]  # extreme aspect ratios
    return sizes


PROCESSORS = [DEFAULT_PROCESSOR, MediaProcessor(14, 2, 56 * 56, 28 * 28 * 1280),
              MediaProcessor(16, 2, 4095, 1310720), MediaProcessor(14, 1, 3136, 12845056)]


@pytest.mark.parametrize("proc", PROCESSORS, ids=lambda p: f"{p.patch_size}-{p.merge_size}-{p.max_pixels}")
def test_resize_rule_equals_transformers(proc):
    """smart_resize, and the pad count from it, equal transformers' rule on a
    few hundred sizes: tiny, huge, extreme aspect ratios (over 200: refused by
    both), exact multiples."""
    theirs = hf_smart_resize()
    factor = proc.patch_size * proc.merge_size
    sizes = _sizes()
    refused = 0
    assert len(sizes) >= 300
    for width, height in sizes:
        try:
            want = theirs(height, width, factor=factor, min_pixels=proc.min_pixels, max_pixels=proc.max_pixels)
        except ValueError as exc:
            refused += 1
            with pytest.raises(ValueError, match="aspect ratio"):
                smart_resize(height, width, factor, proc.min_pixels, proc.max_pixels)
            assert "aspect ratio" in str(exc)
            continue
        assert smart_resize(height, width, factor, proc.min_pixels, proc.max_pixels) == want, (width, height)
        t, gh, gw = proc.image_grid(width, height)
        assert (t, gh * proc.patch_size, gw * proc.patch_size) == (1, *want)
    assert refused >= 20


def test_expanded_ids_equal_the_processor_count(tok36):
    """encode_chat(expand_media=...) writes each pad once per merged patch:
    grid_h * grid_w / merge**2 from transformers' rule for an image with a
    size, t * h * w / merge**2 for an explicit grid; everything else as before."""
    theirs = hf_smart_resize()
    rng = random.Random("media-expand")
    pad_img, pad_vid = tok36.atoms["<|image_pad|>"], tok36.atoms["<|video_pad|>"]
    for proc in PROCESSORS:
        parts, want = [], []
        for _ in range(12):
            w, h = rng.randint(1, 5000), rng.randint(1, 5000)
            if max(w, h) / min(w, h) > 200:
                continue
            parts.append({"type": "image_url", "image_url": {"url": "u"}, "width": w, "height": h})
            rh, rw = theirs(h, w, factor=proc.patch_size * proc.merge_size, min_pixels=proc.min_pixels,
                            max_pixels=proc.max_pixels)
            want.append((pad_img, (rh // proc.patch_size) * (rw // proc.patch_size) // proc.merge_size ** 2))
        grid = [3, 4 * proc.merge_size, 6 * proc.merge_size]
        parts.append({"type": "video", "grid": grid})
        want.append((pad_vid, 3 * 4 * 6))
        parts.append({"type": "image", "grid": [1, 2 * proc.merge_size, 2 * proc.merge_size]})
        want.append((pad_img, 4))
        chat = render_chat([{"role": "user", "content": parts}], chat_format="qwen3.6",
                           add_generation_prompt=True)
        plain = tok36.encode_chat(chat)
        keys = dict(proc._asdict())
        expanded = tok36.encode_chat(chat, expand_media=keys)
        # the same ids with each pad run in place of the one pad
        runs = []
        k = 0
        for i in plain.tolist():
            if i in (pad_img, pad_vid):
                runs += [i] * want[k][1]
                assert i == want[k][0]
                k += 1
            else:
                runs.append(i)
        assert expanded.tolist() == runs and k == len(want)
        assert tok36.count_chat(chat, expand_media=keys) == len(runs)
        assert [proc.tokens(p) for p in chat.media] == [n for _, n in want]


def _image_chat(fmt: str = "qwen3.6", **part) -> RenderedChat:
    return render_chat([{"role": "user", "content": [{"type": "text", "text": "see"},
                                                     {"type": "image", **part}]}], chat_format=fmt)


def test_processor_defaults_and_config(tok36):
    assert DEFAULT_PROCESSOR == MediaProcessor(16, 2, 65536, 16777216)
    # a Qwen3-VL / Qwen3.5 preprocessor_config.json: bounds from "size"
    cfg = {"size": {"longest_edge": 16777216, "shortest_edge": 65536}, "patch_size": 16,
           "temporal_patch_size": 2, "merge_size": 2, "image_processor_type": "Qwen2VLImageProcessorFast"}
    assert processor_from_config(cfg) == DEFAULT_PROCESSOR
    # min_pixels / max_pixels keys win over "size", as transformers reads them; Qwen2-VL's
    qwen2 = {"min_pixels": 3136, "max_pixels": 12845056, "patch_size": 14, "merge_size": 2,
             "size": {"shortest_edge": 1, "longest_edge": 2}}
    assert processor_from_config(qwen2) == MediaProcessor(14, 2, 3136, 12845056)
    assert processor_from_config({}) == DEFAULT_PROCESSOR
    chat = _image_chat(width=1000, height=700)
    n_default = tok36.count_chat(chat, expand_media=True)
    assert n_default == tok36.count_chat(chat, expand_media=dict(DEFAULT_PROCESSOR._asdict()))
    assert n_default == len(tok36.encode_chat(chat)) - 1 + DEFAULT_PROCESSOR.tokens(chat.media[0])
    # a partial dict: the rest from the tokenizer's processor
    assert tok36.count_chat(chat, expand_media={"max_pixels": 65536}) < n_default
    # the tokenizer's processor: the hook a model folder's preprocessor_config.json sets
    import qwen4exp

    t = qwen4exp.Tokenizer("qwen3.6")
    t.core.model_config = {"preprocessor_config.json": qwen2}
    assert t.count_chat(chat, expand_media=True) == tok36.count_chat(
        chat, expand_media=dict(processor_from_config(qwen2)._asdict()))
    t._media_defaults = MediaProcessor(16, 2, 65536, 65536 * 4)
    assert t.count_chat(chat, expand_media=True) == tok36.count_chat(chat, expand_media={"max_pixels": 65536 * 4})


def test_masks_chat_encoder_and_batches_expand_alike(tok36):
    msgs = [{"role": "system", "content": "s"},
            {"role": "user", "content": [{"type": "image", "width": 300, "height": 200}, {"type": "text", "text": "q"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "image", "grid": [1, 4, 4]}]},
            {"role": "user", "content": [{"type": "video", "grid": [2, 2, 4]}]}]
    chat = render_chat(msgs, chat_format="qwen3.8", add_generation_prompt=True, add_vision_id=True)
    plain = tok36.encode_chat(chat, return_masks=True)
    ex = tok36.encode_chat(chat, return_masks=True, expand_media=True)
    assert len({len(a) for a in ex}) == 1 and len(ex.ids) == tok36.count_chat(chat, expand_media=True)
    # every pad keeps its masks: control, its message, its turn
    for part, pad in zip(chat.media, np.flatnonzero(np.isin(plain.ids, [tok36.atoms["<|image_pad|>"],
                                                                         tok36.atoms["<|video_pad|>"]]))):
        assert plain.message_index[pad] == part.message and plain.control_mask[pad]
    for kind_pad, msg in ((tok36.atoms["<|image_pad|>"], 1), (tok36.atoms["<|video_pad|>"], 3)):
        at = np.flatnonzero(ex.ids == kind_pad)
        assert (ex.message_index[at] >= 1).all() and ex.control_mask[at].all()
    at = np.flatnonzero(ex.ids == tok36.atoms["<|image_pad|>"])
    assert sorted(set(ex.message_index[at].tolist())) == [1, 2]
    assert ex.assistant_mask[at].sum() == 4  # the assistant's own image: 16 patches / 4
    assert ex.assistant_mask.sum() == plain.assistant_mask.sum() - 1 + 4
    enc = tok36.chat_encoder()
    assert np.array_equal(enc.encode(chat, expand_media=True), ex.ids)
    assert all(np.array_equal(a, b) for a, b in zip(enc.encode(chat, return_masks=True, expand_media=True), ex))
    assert np.array_equal(enc.encode(chat), plain.ids)  # the kept state is the unexpanded ids
    both = tok36.encode_chats([chat, _image_chat(width=50, height=50)], return_masks=True, expand_media=True)
    assert all(np.array_equal(a, b) for a, b in zip(both[0], ex))


def test_fit_chat_drops_media_with_its_turn(tok36):
    big = {"type": "image", "width": 2048, "height": 2048}  # 4096 pads by default
    msgs = [{"role": "system", "content": "s"},
            {"role": "user", "content": [big, {"type": "text", "text": "what is it?"}]},
            {"role": "assistant", "content": "a cat"},
            {"role": "user", "content": [{"type": "image", "width": 64, "height": 64}, {"type": "text", "text": "and?"}]}]
    kw = {"chat_format": "qwen3.6"}
    full = tok36.count_chat(render_chat(msgs, add_generation_prompt=True, **kw), expand_media=True)
    assert full > 4096
    fitted = tok36.fit_chat(msgs, 1000, expand_media=True, **kw)
    assert fitted.dropped == 2 and len(fitted.ids) <= 1000
    assert [p.message for p in fitted.chat.media] == [1]
    assert np.array_equal(fitted.ids, tok36.encode_chat(fitted.chat, expand_media=True))
    # without expansion the placeholders are one id each: nothing needs dropping
    assert tok36.fit_chat(msgs, 1000, **kw).dropped == 0
    assert tok36.fit_chat(msgs, full, expand_media=True, **kw).dropped == 0
    assert tok36.fit_chat(msgs, full - 1, expand_media=True, **kw).dropped == 2


# --------------------------------------------------------------------------- bad parts


BAD_PARTS = [
    ({"type": "image", "width": -1, "height": 10}, "width: -1 is out of range"),
    ({"type": "image", "width": 0, "height": 10}, "width: 0 is out of range"),
    ({"type": "image", "width": 10, "height": 10 ** 12}, "height: 1000000000000 is out of range"),
    ({"type": "image", "width": 10.5, "height": 10}, "width: must be a positive int, not float"),
    ({"type": "image", "width": True, "height": 10}, "width: must be a positive int, not bool"),
    ({"type": "image", "width": "10", "height": 10}, "must be a positive int, not str"),
    ({"type": "image", "width": 10}, "'height' is missing"),
    ({"type": "image_url", "image_url": {"url": "u"}, "height": 10}, "'width' is missing"),
    ({"type": "video", "grid": [1, 2]}, r"grid: must be \[t, h, w\]"),
    ({"type": "video", "grid": "1,2,2"}, r"grid: must be \[t, h, w\]"),
    ({"type": "video", "grid": [1, 2, 0]}, r"grid\[2\]: 0 is out of range"),
    ({"type": "video", "grid": [1, -2, 2]}, r"grid\[1\]: -2 is out of range"),
    ({"type": "image", "grid": [1, 2 ** 40, 2]}, r"grid\[1\]: 1099511627776 is out of range"),
    ({"type": "video_url", "video_url": {"url": "v"}}, "'video_url' parts are not supported"),
    ({"type": "picture"}, "unknown content part type 'picture'"),
    ({"type": "image_url", "url": "u"}, "an 'image_url' part needs its 'image_url' field"),
]


@pytest.mark.parametrize("part, fragment", BAD_PARTS, ids=[f for _, f in BAD_PARTS])
@pytest.mark.parametrize("fmt", MEDIA_FORMATS)
def test_bad_parts_are_refused_and_leave_the_transcript(fmt, part, fragment):
    out = render_chat([{"role": "user", "content": [{"type": "image"}]}], chat_format=fmt)
    before = snapshot(out) + (out.media,)
    messages = [{"role": "user", "content": "q"},
                {"role": "assistant", "content": [{"type": "text", "text": "t"}, part]}]
    with pytest.raises(Qwen4ExpError, match=r"messages\[1\]\.content\[1\]") as info:
        render_chat_into(messages, out, chat_format=fmt)
    assert isinstance(info.value, ChatFormatError)
    assert re.search(fragment, str(info.value)), str(info.value)
    assert snapshot(out) + (out.media,) == before


UNCOUNTABLE = [
    ({"type": "image"}, "cannot count this image's tokens: it has no size"),
    ({"type": "video", "video": "v"}, r"cannot count this video's tokens: it has no size \(give a 'grid'"),
    ({"type": "video", "width": 64, "height": 64}, "cannot count this video's tokens"),
    ({"type": "image", "width": 1, "height": 300}, "aspect ratio must be smaller than 200"),
    ({"type": "video", "grid": [1, 3, 4]}, "h and w must be multiples of merge_size 2"),
    ({"type": "video", "grid": [65536, 2048, 2048]}, "is absurd"),
]


@pytest.mark.parametrize("part, fragment", UNCOUNTABLE, ids=[f[:30] for _, f in UNCOUNTABLE])
def test_uncountable_parts_raise_and_change_nothing(tok36, part, fragment):
    """expand_media on a part it cannot count names the part and returns
    nothing; the ChatEncoder keeps its previous state; without expand_media
    the placeholder form stays."""
    good = render_chat([{"role": "user", "content": "hello"}], chat_format="qwen3.6")
    chat = render_chat([{"role": "user", "content": "hello"},
                        {"role": "assistant", "content": [{"type": "text", "text": "x"}, part]}],
                       chat_format="qwen3.6")
    assert len(tok36.encode_chat(chat)) == tok36.count_chat(chat)
    enc = tok36.chat_encoder()
    enc.encode(good)
    state = (enc._prev, enc.reused_bytes)
    calls = [lambda: tok36.encode_chat(chat, expand_media=True),
             lambda: tok36.encode_chat(chat, return_masks=True, expand_media=True),
             lambda: tok36.count_chat(chat, expand_media=True),
             lambda: tok36.encode_chats([good, chat], expand_media=True),
             lambda: enc.encode(chat, expand_media=True)]
    for call in calls:
        with pytest.raises(MediaError, match=r"messages\[1\]\.content\[1\]") as info:
            call()
        assert re.search(fragment, str(info.value)), str(info.value)
    assert (enc._prev, enc.reused_bytes) == state
    with pytest.raises(MediaError, match=r"fit_chat\(\): messages\[1\]\.content\[1\]"):
        tok36.fit_chat([{"role": "user", "content": "hello"},
                        {"role": "assistant", "content": [{"type": "text", "text": "x"}, part]},
                        {"role": "user", "content": "more"}], 5, chat_format="qwen3.6", expand_media=True)


@pytest.mark.parametrize("bad, fragment", [
    ({"patch_size": 0}, r"'patch_size'\]: 0 is out of range"),
    ({"merge_size": 2.0}, "must be a positive int, not float"),
    ({"min_pixels": 10, "max_pixels": 5}, "min_pixels 10 is over max_pixels 5"),
    ({"temporal_patch_size": 2}, "unknown key 'temporal_patch_size'"),
    ({"max_pixels": 2 ** 50}, "out of range"),
])
def test_bad_processor_parameters(tok36, bad, fragment):
    chat = _image_chat(width=64, height=64)
    with pytest.raises(MediaError, match=fragment):
        tok36.encode_chat(chat, expand_media=bad)
    with pytest.raises(TypeError, match="expand_media must be"):
        tok36.count_chat(chat, expand_media="yes")
    with pytest.raises(MediaError, match="preprocessor_config.json"):
        processor_from_config({"patch_size": -16})


def test_a_huge_processor_is_bounded(tok36):
    """Pads per part are bounded whatever the processor allows."""
    chat = _image_chat(width=1 << 20, height=1 << 20)
    with pytest.raises(MediaError, match="absurd"):
        tok36.encode_chat(chat, expand_media={"patch_size": 1, "merge_size": 1, "min_pixels": 1,
                                              "max_pixels": 1 << 40})
    assert MAX_MEDIA_TOKENS >= 64 * DEFAULT_PROCESSOR.max_pixels // (32 * 32)


def test_caller_built_pads_cannot_be_counted(tok36):
    stream = SegmentBuilder().control("<|im_start|>").text("user\n").control(
        "<|vision_start|><|image_pad|><|vision_end|><|im_end|>").build()
    assert len(tok36.encode_chat(stream)) == 7  # im_start, "user", "\n", three vision atoms, im_end
    with pytest.raises(MediaError, match="holds 1 media placeholders and records 0 media parts"):
        tok36.encode_chat(stream, expand_media=True)
    plain = SegmentBuilder().control("<|im_start|>").text("user\nhi").build()
    assert len(tok36.encode_chat(plain, expand_media=True)) == len(tok36.encode_chat(plain))


def test_a_model_folder_gives_its_processor(tmp_path, tok36):
    """from_pretrained keeps the folder's preprocessor_config.json: expand_media=True
    counts with its parameters (a dict still overrides them)."""
    import json

    import _model_folders
    import qwen4exp

    folder = _model_folders.model_folder(str(tmp_path / "m"), "qwen3.6")
    chat = _image_chat(width=1000, height=700)
    assert qwen4exp.Tokenizer.from_pretrained(folder).count_chat(chat, expand_media=True) == \
        tok36.count_chat(chat, expand_media=True)  # no preprocessor_config.json: the defaults
    config = {"min_pixels": 3136, "max_pixels": 12845056, "patch_size": 14, "merge_size": 2}
    (tmp_path / "m" / "preprocessor_config.json").write_text(json.dumps(config), encoding="utf-8")
    tok = qwen4exp.Tokenizer.from_pretrained(folder)
    want = tok36.count_chat(chat, expand_media=config)
    assert want != tok36.count_chat(chat, expand_media=True)
    assert tok.count_chat(chat, expand_media=True) == want
    assert tok.count_chat(chat, expand_media={"patch_size": 16}) == tok36.count_chat(
        chat, expand_media={**config, "patch_size": 16})
