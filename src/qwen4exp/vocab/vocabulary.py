"""The bundled vocabularies, one descriptor each (their data: vocab/vocabularies.json).

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

import json
import os
from dataclasses import dataclass

__all__ = ["Vocabulary", "VOCABULARIES", "ALIASES", "DEFAULT_VOCABULARY", "QWEN_PATTERN",
           "QWEN35_PATTERN", "PATTERNS", "MANIFEST", "bundled_vocabulary"]

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
    #: The embedding rows of the family's models: padded past the last id, as
    #: Qwen's are (a model folder's config.json vocab_size).
    embedding_rows: int

    @property
    def marks(self) -> bool:
        """Whether combining marks join letter runs (the Qwen3.5 pattern)."""
        return self.pattern == QWEN35_PATTERN


#: The split patterns by the name the manifest gives them.
PATTERNS = {"letters": QWEN_PATTERN, "letters_and_marks": QWEN35_PATTERN}


def _manifest() -> list[dict]:
    """The entries of vocabularies.json: in a source tree its vocab/ folder's
    (setup.py reads this module before the package data exists, and rebuilds
    that data from it), else the installed package's copy."""
    here = os.path.dirname(os.path.abspath(__file__))
    for path in (os.path.join(here, os.pardir, os.pardir, os.pardir, "vocab", MANIFEST),
                 os.path.join(here, "_data", MANIFEST)):
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                return json.load(f)["vocabularies"]
    raise FileNotFoundError(f"{MANIFEST} is missing: reinstall qwen4exp (pip install .)")


#: The manifest of the bundled vocabularies, beside their files in vocab/.
MANIFEST = "vocabularies.json"
VOCABULARIES: dict[str, Vocabulary] = {
    e["name"]: Vocabulary(e["name"], tuple(e["aliases"]), e["source"], e["kind"], e["compiled"],
                          PATTERNS[e["pattern"]], tuple(e["specials"]), e["license"],
                          e["embedding_rows"])
    for e in _manifest()
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
