"""Images and videos in a chat: content parts, their placeholders, and exact counts.

The qwen3.5 / 3.6 / 3.8 templates write one placeholder per media part: the
VISION_START, IMAGE_PAD (or VIDEO_PAD) and VISION_END markers (`markers.
MediaMarker`), TRUSTED_CONTROL like every marker the renderer writes; with
`add_vision_id=True` a "Picture N: " / "Video N: " label (DATA) before it,
numbered across the conversation. Only a structured part makes one: a
placeholder spelled in text is DATA (docs/FORMAT.md, "Media").

A model sees not one pad per part but one per merged patch, so
`encode_chat(chat, expand_media=...)` replaces each part's pad id by as many
as Qwen's image processor produces: the image resized to multiples of
patch_size * merge_size within min_pixels..max_pixels (`smart_resize`, the
rule of transformers' Qwen2-VL image processor, which Qwen2.5-VL, Qwen3-VL
and Qwen3.5 use), then grid_t * grid_h * grid_w / merge_size**2. The sizes
come from the part ("width" and "height", or an explicit "grid": [t, h, w] of
patches); a video needs the grid. The expansion works on the ids, from what
the renderer recorded (`RenderedChat.media`), never by rendering again.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from qwen4exp.errors import ChatFormatError, MediaError
from qwen4exp.markers import MediaMarker

__all__ = [
    "MediaPart",
    "MediaProcessor",
    "DEFAULT_PROCESSOR",
    "IMAGE_PLACEHOLDER",
    "VIDEO_PLACEHOLDER",
    "smart_resize",
    "processor_from_config",
    "MAX_SIDE",
    "MAX_MEDIA_TOKENS",
]

IMAGE, VIDEO = "image", "video"
#: What the templates write for one part (all TRUSTED_CONTROL).
IMAGE_PLACEHOLDER = (MediaMarker.VISION_START + MediaMarker.IMAGE_PAD + MediaMarker.VISION_END).encode()
VIDEO_PLACEHOLDER = (MediaMarker.VISION_START + MediaMarker.VIDEO_PAD + MediaMarker.VISION_END).encode()
_PLACEHOLDER = {IMAGE: IMAGE_PLACEHOLDER, VIDEO: VIDEO_PLACEHOLDER}
_PAD = {IMAGE: MediaMarker.IMAGE_PAD.value, VIDEO: MediaMarker.VIDEO_PAD.value}
_LABEL = {IMAGE: "Picture", VIDEO: "Video"}

#: The part types that are media, and what each is.
MEDIA_TYPES = {"image": IMAGE, "image_url": IMAGE, "video": VIDEO}
# The keys by which the templates recognise an image (`'image' in item`),
# whatever the part's type: a video or text part with one is refused.
_IMAGE_KEYS = ("image", "image_url")

#: Largest width or height accepted (2**24 pixels a side, past the largest
#: stitched panoramas): a size beyond it is a mistake, not an image.
MAX_SIDE = 1 << 24
#: Largest grid side (t, h or w) accepted, in patches.
MAX_GRID_SIDE = 1 << 16
#: Most pad ids one part may expand to: 64 times what the default processor
#: gives its largest image (16,384), so no request allocates without bound.
MAX_MEDIA_TOKENS = 1 << 20


class MediaPart(NamedTuple):
    """One image or video of a rendered chat (`RenderedChat.media`, in order).

    `chat.data[start:end]` is its placeholder (VISION_START, the pad marker,
    VISION_END); `message` and `part` index the request's `messages` and that
    message's content list; `width`, `height` and `grid` are what the part
    gave (None when absent), which `expand_media` counts from.
    """

    message: int
    part: int
    kind: str  # "image" or "video"
    start: int
    end: int
    width: int | None
    height: int | None
    grid: tuple[int, int, int] | None


class MediaItem(NamedTuple):
    """A validated media part of a request (render/validate.py): what the renderer
    writes for it and what RenderedChat.media records."""

    message: int
    part: int
    kind: str
    width: int | None
    height: int | None
    grid: tuple[int, int, int] | None
    label: bytes  # "Picture N: " with add_vision_id, else b""

    @property
    def placeholder(self) -> bytes:
        return _PLACEHOLDER[self.kind]


# --------------------------------------------------------------------------- parts


def _where(i: int, j: int) -> str:
    return f"messages[{i}].content[{j}]"


def _positive(value: Any, where: str, limit: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise MediaError(f"{where}: must be a positive int, not {type(value).__name__} {value!r}")
    value = operator.index(value)
    if not 1 <= value <= limit:
        raise MediaError(f"{where}: {value} is out of range (1 to {limit})")
    return value


class Numbering:
    """The media parts of one request as validation meets them: checks each,
    numbers images and videos across the conversation (the templates' counters),
    and collects them in order."""

    __slots__ = ("fmt", "allowed", "add_vision_id", "items", "images", "videos")

    def __init__(self, fmt: str, allowed: bool, add_vision_id: bool) -> None:
        self.fmt, self.allowed, self.add_vision_id = fmt, allowed, add_vision_id
        self.items: list[MediaItem] = []
        self.images = self.videos = 0

    def check_text_part(self, part: Mapping, i: int, j: int) -> None:
        """A text part carrying a media key is an image or video to the template
        (it reads keys first): ambiguous, refused where media render."""
        if self.allowed:
            for key in (*_IMAGE_KEYS, "video"):
                if key in part:
                    raise ChatFormatError(
                        f"{_where(i, j)}: a 'text' part with the key {key!r} is ambiguous "
                        f"(the {self.fmt} template would render it as media): give it one type")

    def part(self, part: Mapping, kind_name: str, i: int, j: int, system: bool) -> MediaItem:
        """The validated item of a media part (type `kind_name`), numbered."""
        where = _where(i, j)
        if not self.allowed:
            raise ChatFormatError(
                f"{where}: {kind_name!r} parts are not supported in the {self.fmt} format "
                "(its models read no images or videos; the vision formats render them)")
        kind = MEDIA_TYPES.get(kind_name)
        if kind is None:
            raise ChatFormatError(
                f"{where}: {kind_name!r} parts are not supported (the {self.fmt} template renders "
                "'image', 'image_url' and 'video' parts)")
        if kind_name == "image_url" and "image_url" not in part:  # the template reads the key
            raise ChatFormatError(
                f"{where}: an 'image_url' part needs its 'image_url' field (the {self.fmt} template "
                "renders no other)")
        if system:
            raise ChatFormatError(
                f"{where}: a system message cannot contain {kind}s (the {self.fmt} template refuses it)")
        if kind == VIDEO and any(key in part for key in _IMAGE_KEYS):
            raise ChatFormatError(
                f"{where}: a 'video' part with the key 'image' or 'image_url' is ambiguous "
                f"(the {self.fmt} template would render it as an image)")
        width, height, grid = _sizes(part, where)
        if kind == IMAGE:
            self.images += 1
            number = self.images
        else:
            self.videos += 1
            number = self.videos
        label = f"{_LABEL[kind]} {number}: ".encode() if self.add_vision_id else b""
        item = MediaItem(i, j, kind, width, height, grid, label)
        self.items.append(item)
        return item


def _sizes(part: Mapping, where: str) -> tuple[int | None, int | None, tuple | None]:
    """A part's optional "width"/"height" (both or neither) and "grid"."""
    width, height, grid = part.get("width"), part.get("height"), part.get("grid")
    if (width is None) != (height is None):
        missing = "height" if height is None else "width"
        raise MediaError(f"{where}: 'width' and 'height' go together ({missing!r} is missing)")
    if width is not None:
        width = _positive(width, f"{where}.width", MAX_SIDE)
        height = _positive(height, f"{where}.height", MAX_SIDE)
    if grid is not None:
        if not isinstance(grid, (list, tuple)) or len(grid) != 3:
            raise MediaError(f"{where}.grid: must be [t, h, w] (three positive ints, in patches), "
                             f"not {grid!r}")
        grid = tuple(_positive(g, f"{where}.grid[{k}]", MAX_GRID_SIDE) for k, g in enumerate(grid))
    return width, height, grid


def locate(parts: list[bytes], first_control: bool, items: Sequence[MediaItem]) -> tuple[MediaPart, ...]:
    """The byte range of each item's placeholder in the rendered stream. The
    placeholders lie in CONTROL parts, which only the renderer writes (its
    constants), in the order of the items."""
    out = []
    offset = 0
    k = 0
    start_marker = MediaMarker.VISION_START.value.encode()
    control = 0 if first_control else 1
    for index, part in enumerate(parts):
        if index % 2 == control:
            at = part.find(start_marker)
            while at >= 0:
                item = items[k]
                ph = item.placeholder
                if not part.startswith(ph, at):  # the renderer's own invariant
                    raise AssertionError(f"media placeholder {k} not where it was written")
                out.append(MediaPart(item.message, item.part, item.kind, offset + at, offset + at + len(ph),
                                     item.width, item.height, item.grid))
                k += 1
                at = part.find(start_marker, at + len(ph))
        offset += len(part)
    if k != len(items):
        raise AssertionError(f"{len(items)} media parts, {k} placeholders written")
    return tuple(out)


# --------------------------------------------------------------------------- counting


class MediaProcessor(NamedTuple):
    """The image processor parameters the pad count depends on.

    The defaults are those of the Qwen3-VL image processor's configuration,
    which Qwen3.5 model folders ship (preprocessor_config.json: patch_size 16,
    merge_size 2, size {"shortest_edge": 65536, "longest_edge": 16777216}):
    an image is resized to between 64 and 16,384 merged patches.
    """

    patch_size: int = 16
    merge_size: int = 2
    min_pixels: int = 65536
    max_pixels: int = 16777216

    def image_grid(self, width: int, height: int) -> tuple[int, int, int]:
        """[t, h, w] in patches of a width x height image (t is 1 for an image)."""
        h, w = smart_resize(height, width, self.patch_size * self.merge_size, self.min_pixels,
                            self.max_pixels)
        return 1, h // self.patch_size, w // self.patch_size

    def tokens(self, part: MediaPart) -> int:
        """The pad ids the part expands to; MediaError when its sizes cannot say."""
        where = f"messages[{part.message}].content[{part.part}]"
        if part.grid is not None:
            t, h, w = part.grid
            merge = self.merge_size
            if h % merge or w % merge:
                raise MediaError(f"{where}.grid: {list(part.grid)} is not a grid of merged patches "
                                 f"(h and w must be multiples of merge_size {merge})")
        elif part.kind == IMAGE and part.width is not None and part.height is not None:  # set together
            try:
                t, h, w = self.image_grid(part.width, part.height)
            except ValueError as exc:
                raise MediaError(f"{where}: cannot count this image ({exc})") from None
        else:
            need = "'width' and 'height' or a 'grid'" if part.kind == IMAGE else "a 'grid': [t, h, w]"
            raise MediaError(f"{where}: cannot count this {part.kind}'s tokens: it has no size "
                             f"(give {need}, or encode without expand_media)")
        count = t * h * w // self.merge_size ** 2
        if count > MAX_MEDIA_TOKENS:
            raise MediaError(f"{where}: {count} tokens for one {part.kind} is absurd "
                             f"(at most {MAX_MEDIA_TOKENS})")
        return count


DEFAULT_PROCESSOR = MediaProcessor()


def smart_resize(height: int, width: int, factor: int = 32, min_pixels: int = 65536,
                 max_pixels: int = 16777216) -> tuple[int, int]:
    """(height, width) an image is resized to: multiples of `factor` closest to
    the image's, scaled into min_pixels..max_pixels keeping the aspect ratio.
    The same arithmetic and arguments as transformers' Qwen2-VL image
    processor's `smart_resize` (Python's round, half to even; floats where it
    uses floats), so the same result; ValueError for an aspect ratio over
    200, as there. The defaults are DEFAULT_PROCESSOR's (factor 16 * 2)."""
    if max(height, width) / min(height, width) > 200:
        raise ValueError(
            f"absolute aspect ratio must be smaller than 200, got {max(height, width) / min(height, width)}")
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


_LIMITS = {"patch_size": 1 << 12, "merge_size": 1 << 6, "min_pixels": 1 << 40, "max_pixels": 1 << 40}


def _processor(values: Mapping, base: MediaProcessor, where: str) -> MediaProcessor:
    checked = {key: _positive(value, f"{where}[{key!r}]", _LIMITS[key]) for key, value in values.items()}
    proc = base._replace(**checked)
    if proc.min_pixels > proc.max_pixels:
        raise MediaError(f"{where}: min_pixels {proc.min_pixels} is over max_pixels {proc.max_pixels}")
    return proc


def processor_from_config(config: Mapping) -> MediaProcessor:
    """The MediaProcessor of a model folder's preprocessor_config.json (parsed):
    patch_size, merge_size, and the pixel bounds from "min_pixels" /
    "max_pixels" or else "size": {"shortest_edge", "longest_edge"} (as
    transformers reads them); DEFAULT_PROCESSOR's values for what it lacks."""
    if not isinstance(config, Mapping):
        raise MediaError(f"preprocessor_config.json: must be a JSON object, not {type(config).__name__}")
    values = {key: config[key] for key in ("patch_size", "merge_size") if config.get(key) is not None}
    size = config.get("size")
    size = size if isinstance(size, Mapping) else {}
    for key, edge in (("min_pixels", "shortest_edge"), ("max_pixels", "longest_edge")):
        value = config.get(key)
        if value is None:
            value = size.get(edge)
        if value is not None:
            values[key] = value
    return _processor(values, DEFAULT_PROCESSOR, "preprocessor_config.json")


def processor_of(tok, expand_media: Any, where: str) -> MediaProcessor | None:
    """What `expand_media=` asks for: None (False/None: placeholders stay), the
    tokenizer's processor (True), or one from a dict of its four parameters
    (the rest from the tokenizer's)."""
    if expand_media is None or expand_media is False:
        return None
    base = getattr(tok, "_media_defaults", None)
    if base is None:
        config = tok.core.model_config.get("preprocessor_config.json")
        base = processor_from_config(config) if config is not None else DEFAULT_PROCESSOR
    if expand_media is True:
        return base
    if isinstance(expand_media, MediaProcessor):
        return _processor(expand_media._asdict(), DEFAULT_PROCESSOR, f"{where}: expand_media")
    if isinstance(expand_media, Mapping):
        unknown = [key for key in expand_media if key not in _LIMITS]
        if unknown:
            raise MediaError(f"{where}: expand_media: unknown key {unknown[0]!r} "
                             f"(expected {', '.join(_LIMITS)})")
        return _processor(expand_media, base, f"{where}: expand_media")
    raise TypeError(f"{where}: expand_media must be a bool, a dict of processor parameters or a "
                    f"MediaProcessor, not {type(expand_media).__name__}")


def repeats(tok, chat, ids: np.ndarray, proc: MediaProcessor, where: str) -> np.ndarray | None:
    """How many times each id is written once the chat's media parts are
    expanded (1, and each part's pad count at its pad id); None when the chat
    has no media. DATA never yields an atom id, so the pad ids in `ids` are
    exactly the recorded placeholders' pads, in order; a stream whose pads no
    part records (one built with SegmentBuilder) cannot be counted."""
    media = chat.media
    atoms = tok.atoms
    pad_ids = [atoms[_PAD[kind]] for kind in (IMAGE, VIDEO) if _PAD[kind] in atoms]
    pads = np.flatnonzero(np.isin(ids, pad_ids)) if pad_ids else np.empty(0, dtype=np.intp)
    if len(pads) != len(media):
        raise MediaError(f"{where}: the stream holds {len(pads)} media placeholders and records "
                         f"{len(media)} media parts: cannot count them (the pads of a caller-built "
                         "stream have no sizes)")
    if not len(media):
        return None
    try:
        counts = [proc.tokens(part) for part in media]
    except MediaError as exc:
        raise MediaError(f"{where}: {exc}") from None
    for at, part in zip(pads, media):
        if ids[at] != atoms[_PAD[part.kind]]:  # the renderer's own invariant
            raise AssertionError(f"media part {part} is not at its pad id")
    reps = np.ones(len(ids), dtype=np.int64)
    reps[pads] = counts
    return reps


def apply(result, reps: np.ndarray | None):
    """`result` (the ids, or an EncodedChat of arrays one per id) with each id
    written reps[k] times: a pad's copies keep its masks (TRUSTED_CONTROL, its
    message, its turn)."""
    if reps is None:
        return result
    if isinstance(result, np.ndarray):
        return np.repeat(result, reps)
    return type(result)(*(np.repeat(a, reps) for a in result))


def expand(tok, chat, result, proc: MediaProcessor | None, where: str):
    """`result` of encode_chat (ids or EncodedChat) with the media expanded by `proc`."""
    if proc is None:
        return result
    ids = result if isinstance(result, np.ndarray) else result.ids
    return apply(result, repeats(tok, chat, ids, proc, where))


def expanded_count(tok, chat, ids: np.ndarray, proc: MediaProcessor | None, where: str) -> int:
    """len(expand(...)) without building the array."""
    reps = None if proc is None else repeats(tok, chat, ids, proc, where)
    return len(ids) if reps is None else int(reps.sum())
