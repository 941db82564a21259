"""Every file qwen4exp reads is opened through the one regular-file reader
(qwen4exp.vocab.files: open_regular_file / read_regular_file), which refuses a
FIFO, a device, a socket or a directory before opening it and again on the
descriptor, and bounds what it reads when asked to.

`Qwen4ExpTokenizer.from_pretrained` once read tokenizer_config.json with its
own `open()`, before any check of what the file is: a FIFO there blocked it
forever. This test finds every call in src/qwen4exp that opens or loads a
file (`open`, `os.open`, `os.fdopen`, `json.load`, `np.load`, `read_text`,
`gzip`, `pq.ParquetFile`, `shutil.copyfile`, ...) by parsing the source, and
each must be one of the justified ones below: package data, files qwen4exp
writes or wrote itself, and streams over the reader's own file.
"""

from __future__ import annotations

import ast
from pathlib import Path

import qwen4exp

SRC = Path(qwen4exp.__file__).resolve().parent

# Calls that open, load or copy a file: a bare name, or (module alias, attribute).
_NAMES = {"open"}
_MODULE_CALLS = {("os", "open"), ("os", "fdopen"), ("io", "open"), ("gzip", "open"), ("gzip", "GzipFile"),
                 ("bz2", "open"), ("lzma", "open"), ("json", "load"), ("pickle", "load"), ("np", "load"),
                 ("numpy", "load"), ("np", "fromfile"), ("np", "loadtxt"), ("pq", "ParquetFile"),
                 ("pq", "read_table"), ("pa", "memory_map"), ("pa", "OSFile"), ("zipfile", "ZipFile"),
                 ("tarfile", "open"), ("shutil", "copyfile"), ("shutil", "copyfileobj"), ("shutil", "copy")}
_ANY_RECEIVER = {"read_text", "read_bytes"}  # pathlib.Path and importlib.metadata.Distribution

# module file | enclosing function | call | why it need not go through the reader
_JUSTIFIED_TABLE = """
files.py | open_regular_file | os.open | the reader itself (non-blocking, kind checked twice)
files.py | open_regular_file | os.fdopen | the reader itself
pretrained.py | _bundled_fact | np.load | package data: a bundled compiled vocabulary
loading.py | bundled_arrays | np.load | package data: a bundled compiled vocabulary
loading.py | compiled_file | np.load | the cache entry qwen4exp wrote (isfile first, then checked array by array; a bad one is recompiled)
loading.py | compiled_file | open | writes the cache entry (a new temporary file)
vocabulary.py | _manifest | open | package data: vocabularies.json
vocabulary.py | _manifest | json.load | package data: vocabularies.json
gate.py | load_oracle | open | package data: runtimes/gate_oracle.json
gate.py | load_oracle | json.load | package data: runtimes/gate_oracle.json
_version.py | _installed | dist.read_text | the installed distribution's own metadata
_version.py | _source_tree | open | the source checkout's pyproject.toml
compile.py | compile_bundled | open | build step (setup.py): the source tree's vocab/
compile.py | write_arrays | open | writes a compiled vocabulary (build step)
hf.py | Qwen4ExpTokenizer.save_pretrained | open | writes the caller's save directory
hf.py | Qwen4ExpTokenizer.save_vocabulary | shutil.copyfile | copies the folder's tokenizer.json it loaded; shutil refuses a FIFO or device (SpecialFileError)
common.py | silence_stdout | os.open | os.devnull, for writing
_descriptor.py | ChatFormat.official_template | open | package data: formats/templates/
model_folder.py | write_model_folder | open | writes the new folder's tokenizer.json (staging)
model_folder.py | _write_files | open | writes the new folder's files (staging)
model_folder.py | _write_json | open | writes the new folder's files (staging)
sources.py | _open_jsonl | gzip.GzipFile | decompresses the file open_regular_file opened
sources.py | ParquetSource.__init__ | pq.ParquetFile | IN, checked by check_input_file first (pyarrow reads it by path, without Python in between)
ray_engine.py | _encode_work | pq.ParquetFile | IN, checked by the driver before any worker opens it
sinks.py | ParquetSink._close | os.open | the sink's own temporary file, to fsync it
sinks.py | JsonlSink._open | os.fdopen | writes the sink's own temporary file
sinks.py | JsonlSink._open | gzip.GzipFile | writes the sink's own temporary file
sinks.py | ErrorsFile.write | os.fdopen | writes the errors file's own temporary file
"""
JUSTIFIED = {tuple(row.split(" | ", 3)[:3]): row.split(" | ", 3)[3] for row in _JUSTIFIED_TABLE.strip().splitlines()}


def file_calls(path: Path):
    """(module file, enclosing function, call) for each call in `path` that opens a file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found, scope = [], []

    class Visitor(ast.NodeVisitor):
        def visit_FunctionDef(self, node):
            scope.append(node.name)
            self.generic_visit(node)
            scope.pop()

        visit_AsyncFunctionDef = visit_ClassDef = visit_FunctionDef

        def visit_Call(self, node):
            fn = node.func
            if (isinstance(fn, ast.Name) and fn.id in _NAMES) or (isinstance(fn, ast.Attribute) and (
                    fn.attr in _ANY_RECEIVER
                    or (isinstance(fn.value, ast.Name) and (fn.value.id, fn.attr) in _MODULE_CALLS))):
                found.append((path.name, ".".join(scope), ast.unparse(fn)))
            self.generic_visit(node)

    Visitor().visit(tree)
    return found


def test_every_file_is_read_through_the_regular_file_reader():
    calls = [c for path in sorted(SRC.rglob("*.py")) for c in file_calls(path)]
    assert len(calls) >= 10, "the scan found too little: is SRC the package?"
    unjustified = [c for c in calls if c not in JUSTIFIED]
    assert not unjustified, (
        "read these through qwen4exp.vocab.files (open_regular_file / read_regular_file), or add them to "
        f"JUSTIFIED with the reason they need not: {unjustified}")
    stale = sorted(set(JUSTIFIED) - set(calls))
    assert not stale, f"JUSTIFIED entries no call matches any more (remove them): {stale}"


def test_the_scan_finds_what_it_looks_for(tmp_path):
    """The scanner itself, on a file of the kinds of call it must find and
    the look-alikes it must not (a method called open, a docstring)."""
    sample = tmp_path / "sample.py"
    sample.write_text('"""open(path) in a docstring"""\n'
                      "import json, os\n"
                      "def f(p, obj):\n"
                      "    obj.reasoning_open(p)\n"
                      "    obj.open(p)\n"
                      "    with open(p) as g:\n"
                      "        json.load(g)\n"
                      "    os.open(p, 0)\n"
                      "    return p.read_text()\n", encoding="utf-8")
    assert file_calls(sample) == [("sample.py", "f", "open"), ("sample.py", "f", "json.load"),
                                  ("sample.py", "f", "os.open"), ("sample.py", "f", "p.read_text")]
