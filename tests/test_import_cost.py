"""`import qwen4exp; Tokenizer().encode(text)` loads what encoding needs and no
more (docs/PERFORMANCE.md, "Load"): rendering, parsing, masks, media, the
template renderer (jinja2), other vocabularies' pipelines (regex), the
runtimes and the command line load on first use. Checked by the set of
modules a fresh interpreter holds, not by timing."""

from __future__ import annotations

import json
import subprocess
import sys

import qwen4exp

# What encoding plain text with the bundled vocabulary needs.
ENCODE_PATH = {
    "qwen4exp", "qwen4exp.errors", "qwen4exp._native", "qwen4exp.encode", "qwen4exp.encode.core",
    "qwen4exp.encode.tokenizer", "qwen4exp.encode.token_buffer", "qwen4exp.render", "qwen4exp.render.segments",
    "qwen4exp.vocab", "qwen4exp.vocab.compile", "qwen4exp.vocab.files", "qwen4exp.vocab.loading",
    "qwen4exp.vocab.vocabulary",
}
# Third-party or heavy modules none of that may pull in.
NEVER = ("jinja2", "regex", "pyarrow", "transformers", "tokenizers", "ray", "vllm", "importlib.metadata")


def _loaded(code: str) -> list[str]:
    script = f"import sys, json\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.splitlines()[-1])


def test_encoding_loads_only_the_encode_path():
    loaded = _loaded("import qwen4exp\nqwen4exp.Tokenizer().encode('hi')")
    ours = {m for m in loaded if m == "qwen4exp" or m.startswith("qwen4exp.")}
    python_layer = {m for m in ours if not m.startswith("qwen4exp._native.")}
    assert python_layer == ENCODE_PATH, sorted(python_layer ^ ENCODE_PATH)
    heavy = [m for m in loaded if m.split(".")[0] in NEVER or m in NEVER]
    assert not heavy, heavy


def test_public_names_load_on_first_use():
    loaded = _loaded("from qwen4exp import render_chat, render_template, CompletionParser, ChatEncoder\n"
                     "render_chat([{'role': 'user', 'content': 'hi'}])")
    assert "qwen4exp.render.chat" in loaded and "jinja2" not in loaded  # jinja2: on the first template render
    for name in qwen4exp.__all__:
        assert getattr(qwen4exp, name) is not None, name
    assert sorted(dir(qwen4exp)) == sorted([*qwen4exp.__all__, "__version__"])
