#!/usr/bin/env bash
# Build a wheel of this tree and use it from outside the source tree, in a
# fresh virtual environment: both vocabularies load from their compiled
# arrays, a chat renders and encodes, the command line runs. The venv sees
# the system's packages (numpy, pyarrow) but imports qwen4exp from the wheel
# alone, which the check asserts.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

python3 -m pip wheel --no-deps -q -w "$tmp/dist" .
python3 -m venv --system-site-packages "$tmp/venv"
# --ignore-installed: CI has just installed the same version into the system
# Python, which this venv sees; pip would call the wheel satisfied and skip it.
"$tmp/venv/bin/python" -m pip install --no-deps --no-index --ignore-installed -q "$tmp"/dist/qwen4exp-*.whl

typed="$(cd src/qwen4exp && echo py.typed _native/*.pyi)"  # PEP 561: the marker and the compiled modules' stubs
cd "$tmp"  # nothing of the source tree on the path
QWEN4EXP_TYPED="$typed" "$tmp/venv/bin/python" - "$tmp/venv" "$tmp"/dist/qwen4exp-*.whl <<'EOF'
import os
import sys
import zipfile

venv, wheel = sys.argv[1], sys.argv[2]
names = set(zipfile.ZipFile(wheel).namelist())
for need in ("qwen4exp/__init__.py", "qwen4exp/cli/__init__.py", "qwen4exp/formats/__init__.py",
             "qwen4exp/vocab/_data/tokenizer.json", "qwen4exp/vocab/_data/NOTICE", "qwen4exp/vocab/_data/qwen3.6/NOTICE",
             "qwen4exp/cli/example_chat.json", "qwen4exp/runtimes/gate_oracle.json",
             "qwen4exp/formats/templates/qwen3.jinja", "qwen4exp/formats/templates/qwen3_8.jinja"):
    assert need in names, f"the wheel lacks {need}"
assert any(n.startswith("qwen4exp/vocab/_data/") and n.endswith(".npz") for n in names), "no compiled vocabulary"
assert any(n.endswith("/LICENSE") for n in names), "no LICENSE in the wheel"
for name in os.environ["QWEN4EXP_TYPED"].split():
    assert f"qwen4exp/{name}" in names, f"the wheel lacks qwen4exp/{name}"

import qwen4exp

where = os.path.realpath(qwen4exp.__file__)
assert where.startswith(os.path.realpath(venv)), f"qwen4exp imported from {where}, not from the wheel"
for name in qwen4exp.vocabularies():
    tok = qwen4exp.Tokenizer(name)
    chat = tok.render_chat([{"role": "user", "content": "hi <|im_end|>"}], add_generation_prompt=True)
    ids = tok.encode_chat(chat)
    assert tok.decode(ids) == chat.text and list(ids).count(tok.atoms["<|im_end|>"]) == 1
    print(f"{name}: {tok!r}, {len(ids)} ids for {len(chat.data)} bytes")
print(f"qwen4exp {qwen4exp.__version__} from {os.path.dirname(where)}")
EOF
"$tmp/venv/bin/qwen4exp" demo > "$tmp/demo.txt"
"$tmp/venv/bin/python" -m qwen4exp demo | cmp - "$tmp/demo.txt"
head -n 2 "$tmp/demo.txt"
# the model folder of the README's vLLM section, from the wheel's template and tokenizer.json
"$tmp/venv/bin/qwen4exp" folder "$tmp/tiny" --chat-format qwen3-2507
"$tmp/venv/bin/python" -c "import qwen4exp, sys; assert qwen4exp.Tokenizer.from_pretrained(sys.argv[1]).chat_format == 'qwen3-2507'" "$tmp/tiny"
# A user's type checker reads the installed wheel's types (py.typed, the stubs, the TypedDicts).
if python3 -m mypy --version > /dev/null 2>&1; then
    cat > "$tmp/typed_use.py" <<'EOF'
import qwen4exp

tok = qwen4exp.Tokenizer()
chat = tok.render_chat([{"role": "user", "content": "hi"}], add_generation_prompt=True)
ids: list[int] = tok.encode_chat(chat).tolist()
message: qwen4exp.ParsedCompletion = tok.parse_completion(ids, chat)
delta: qwen4exp.OpenAIDelta = tok.completion_parser(chat).feed(ids)[0].openai()
EOF
    python3 -m mypy --python-executable "$tmp/venv/bin/python" --no-incremental --strict "$tmp/typed_use.py"
fi
echo "wheel check: ok ($(basename "$tmp"/dist/qwen4exp-*.whl))"
