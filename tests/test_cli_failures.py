"""How the command line fails (docs/RELIABILITY.md, "Failure classes of the
command line").

* Output that cannot be written: stdout on a full disk (/dev/full), a closed
  pipe or a terminal gone (EIO), for every command; batch's OUT and errors
  file past a file-size limit or on a full disk.
* Written paths that are not regular files: OUT and the errors file as a FIFO,
  a character device, a socket, a directory or a symbolic link to one.
* Hostile files in every file argument: JSON nested 100,000 deep, NaN-like and
  out-of-range numbers, lone surrogates, wrong types, FIFOs, directories,
  devices, sockets, unreadable files; ids that are not ASCII digits.

Each one is one line on stderr and the exit code documented in
qwen4exp/cli/common.py (2 usage, 3 input, 4 output), never a traceback; no
file is left behind and no node is replaced.
"""

from __future__ import annotations

import io
import json
import os
import resource
import signal
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from qwen4exp.cli.common import EXIT_INPUT, EXIT_OUTPUT, EXIT_USAGE
from qwen4exp.cli.main import main

from _small_vocab import small_tokenizer_json
from helpers import EXAMPLE, cli_env

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="FIFOs, /dev/full, ptys and /proc as on Linux")


def _one_line(err: str, command: str) -> str:
    """The single stderr line of a failed command (asserts there is exactly one)."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert len(lines) == 1, err
    assert lines[0].startswith(f"qwen4exp {command}: "), lines[0]
    return lines[0]


def _left_behind(directory: Path, before: set) -> list[str]:
    return sorted(set(os.listdir(directory)) - before)


def _run(args, **kw):
    return subprocess.run([sys.executable, "-m", "qwen4exp", *map(str, args)], env=cli_env(), timeout=300, **kw)


# ---------------------------------------------------------------- stdout that cannot be written

STDOUT_COMMANDS = {
    "encode": ["encode", "--text", "hello world"],
    "encode --chat": ["encode", "--chat", str(EXAMPLE)],
    "decode": ["decode", "14990", "1879"],
    "decode --bytes": ["decode", "--bytes", "14990"],
    "parse": ["parse", "14990", "1879"],
    "count": ["count", "--text", "hello"],
    "render": ["render", str(EXAMPLE)],
    "demo": ["demo"],
    "gate": ["gate"],
}


def _full_disk():
    return os.open("/dev/full", os.O_WRONLY)


def _closed_pipe():
    r, w = os.pipe()
    os.close(r)
    return w


def _dead_terminal():
    master, slave = os.openpty()
    os.close(master)  # writes to the terminal now fail with EIO
    return slave


SINKS = {"full disk": (_full_disk, "No space left on device"), "closed pipe": (_closed_pipe, "Broken pipe"),
         "terminal gone": (_dead_terminal, "Input/output error")}


@pytest.mark.parametrize("sink", SINKS)
@pytest.mark.parametrize("command", STDOUT_COMMANDS)
def test_unwritable_stdout(command, sink, monkeypatch, capsys):
    """Every command whose stdout fails: one line, exit 4 (in this process, on a
    real failing descriptor)."""
    make, reason = SINKS[sink]
    fd = make()
    out = io.TextIOWrapper(io.FileIO(fd, "w"), encoding="utf-8", write_through=False)
    monkeypatch.setattr(sys, "stdout", out)
    try:
        code = main(STDOUT_COMMANDS[command])
    finally:
        monkeypatch.undo()
        try:
            out.close()
        except OSError:
            pass
    assert code == EXIT_OUTPUT
    line = _one_line(capsys.readouterr().err, command.split()[0])
    assert f"cannot write the output: {reason}" in line


@pytest.mark.parametrize("sink", SINKS)
def test_unwritable_stdout_whole_process(sink):
    """The same through a real process, down to the interpreter's exit: no
    'Exception ignored' from the final flush, exit 4."""
    make, reason = SINKS[sink]
    fd = make()
    try:
        r = _run(["decode", "14990", "1879"], stdout=fd, stderr=subprocess.PIPE, text=True)
    finally:
        os.close(fd)
    assert r.returncode == EXIT_OUTPUT
    assert f"cannot write the output: {reason}" in _one_line(r.stderr, "decode")


# ---------------------------------------------------------------- batch's OUT and errors file

def _bad_records(tmp_path, good=3, bad=3000) -> Path:
    src = tmp_path / "in.jsonl"
    src.write_bytes(b'{"text": "hello"}\n' * good + b'{"text": 5}\n' * bad)
    return src


def _limited(limit):
    def preexec():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a killed process
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return preexec


@pytest.mark.parametrize("out_name", ["out.jsonl", "out.parquet"])
def test_errors_file_past_its_size_limit(tmp_path, out_name):
    """--on-error skip with an errors file that outgrows RLIMIT_FSIZE (OUT stays
    small): one line, exit 4, neither OUT nor the errors file nor a temporary file."""
    _bad_records(tmp_path)
    r = _run(["batch", "in.jsonl", out_name, "--on-error", "skip", "-q"], cwd=tmp_path,
             capture_output=True, text=True, preexec_fn=_limited(32 * 1024))
    assert r.returncode == EXIT_OUTPUT, r.stderr
    assert "cannot write the errors file" in _one_line(r.stderr, "batch")
    assert os.listdir(tmp_path) == ["in.jsonl"]


def test_existing_out_and_errors_file_are_kept_when_writing_fails(tmp_path):
    _bad_records(tmp_path)
    (tmp_path / "out.jsonl").write_text("previous OUT")
    (tmp_path / "errs.jsonl").write_text("previous errors")
    r = _run(["batch", "in.jsonl", "out.jsonl", "--on-error", "skip", "--errors", "errs.jsonl", "-q"],
             cwd=tmp_path, capture_output=True, text=True, preexec_fn=_limited(32 * 1024))
    assert r.returncode == EXIT_OUTPUT, r.stderr
    _one_line(r.stderr, "batch")
    assert sorted(os.listdir(tmp_path)) == ["errs.jsonl", "in.jsonl", "out.jsonl"]
    assert (tmp_path / "out.jsonl").read_text() == "previous OUT"
    assert (tmp_path / "errs.jsonl").read_text() == "previous errors"


@pytest.fixture()
def small_disk(tmp_path):
    """A 64 KiB tmpfs (needs the right to mount; skipped otherwise)."""
    where = tmp_path / "disk"
    where.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(where)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({r.stderr.strip()[:80]}): RLIMIT_FSIZE covers the class")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


@pytest.mark.parametrize("which", ["OUT", "errors file"])
def test_full_disk_under_batch(tmp_path, small_disk, which):
    src = _bad_records(tmp_path, good=3000, bad=3) if which == "OUT" else _bad_records(tmp_path, good=3, bad=3000)
    r = _run(["batch", src, small_disk / "out.jsonl", "--on-error", "skip", "-q"], capture_output=True, text=True)
    assert r.returncode == EXIT_OUTPUT, r.stderr
    line = _one_line(r.stderr, "batch")
    assert "No space left on device" in line and ("errors file" in line) == (which == "errors file")
    assert os.listdir(small_disk) == []


# ---------------------------------------------------------------- written paths that are not regular files

def _make_fifo(path):
    os.mkfifo(path)


def _make_char_device(path):
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # a /dev/null of our own
    except PermissionError:
        pytest.skip("mknod needs privileges here; the FIFO and socket cases cover non-regular nodes")


def _make_socket(path):
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    s.close()  # the node stays


def _make_dir(path):
    path.mkdir()


NODES = {"FIFO": _make_fifo, "character device": _make_char_device, "socket": _make_socket,
         "directory": _make_dir}


def _node(path):
    st = os.lstat(path)
    return st.st_ino, st.st_mode, st.st_rdev, (os.readlink(path) if stat.S_ISLNK(st.st_mode) else None)


@pytest.mark.parametrize("link", [False, True], ids=["node", "link to it"])
@pytest.mark.parametrize("kind", NODES)
@pytest.mark.parametrize("which", ["OUT", "errors file"])
def test_batch_refuses_non_regular_outputs(tmp_path, monkeypatch, capsys, which, kind, link):
    """Refused before any work (exit 2, one line naming the kind); the node (and
    the link) stay as they were and nothing is written."""
    src = tmp_path / "in.jsonl"
    src.write_text('{"text": "a"}\n{"text": 5}\n')
    NODES[kind](tmp_path / "node")
    if link:
        os.symlink("node", tmp_path / "link")
    name = "link" if link else "node"
    before = {p: _node(tmp_path / p) for p in os.listdir(tmp_path)}
    monkeypatch.chdir(tmp_path)
    args = [name, "--format", "jsonl"] if which == "OUT" else ["out.jsonl", "--errors", name, "--on-error", "skip"]
    assert main(["batch", "in.jsonl", *args]) == EXIT_USAGE
    line = _one_line(capsys.readouterr().err, "batch")
    assert f"is {'a symbolic link to ' if link else ''}a {kind}" in line
    assert {p: _node(tmp_path / p) for p in os.listdir(tmp_path)} == before


def test_batch_refuses_a_link_to_its_own_stdout(tmp_path):
    """OUT a symbolic link to /dev/stdout (here a pipe): refused, the link kept."""
    src = tmp_path / "in.jsonl"
    src.write_text('{"text": "a"}\n')
    os.symlink("/dev/stdout", tmp_path / "out.jsonl")
    r = _run(["batch", "in.jsonl", "out.jsonl"], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == EXIT_USAGE and r.stdout == ""
    assert "is a symbolic link to a FIFO" in _one_line(r.stderr, "batch")
    assert os.readlink(tmp_path / "out.jsonl") == "/dev/stdout"
    assert sorted(os.listdir(tmp_path)) == ["in.jsonl", "out.jsonl"]


@pytest.mark.parametrize("target_exists", [True, False], ids=["to a file", "dangling"])
def test_batch_follows_a_link_to_a_regular_file(tmp_path, monkeypatch, target_exists):
    """A link to a regular file (or to none yet): the file it points to is
    written and the link stays a link."""
    (tmp_path / "in.jsonl").write_text('{"text": "hello world"}\n')
    (tmp_path / "sub").mkdir()
    if target_exists:
        (tmp_path / "sub" / "real.jsonl").write_text("old")
    os.symlink("sub/real.jsonl", tmp_path / "out.jsonl")
    monkeypatch.chdir(tmp_path)
    assert main(["batch", "in.jsonl", "out.jsonl", "-q"]) == 0
    assert os.readlink("out.jsonl") == "sub/real.jsonl"
    assert json.loads(Path("sub/real.jsonl").read_text())["length"] == 2
    assert sorted(os.listdir("sub")) == ["real.jsonl"]


# ---------------------------------------------------------------- hostile files in every file argument

def _deep_list(path):
    path.write_text("[" * 100_000 + "]" * 100_000)


def _deep_object(path):
    path.write_text('{"a": ' * 50_000 + "1" + "}" * 50_000)


def _json_constant(value):
    def make(path):
        path.write_text('{"messages": [{"role": "user", "content": "hi", "n": %s}]}' % value)
    return make


def _lone_surrogate(path):
    path.write_text('{"messages": [{"role": "user", "content": "a\\ud800b"}]}')


def _wrong_type(path):
    path.write_text('{"messages": "hello"}')


def _not_utf8(path):
    path.write_bytes(b'{"messages": [{"role": "user", "content": "\xff\xfe"}]}')


JSON_CONTENT = {"nested 100,000 deep": _deep_list, "object nested 50,000 deep": _deep_object,
                "NaN": _json_constant("NaN"), "Infinity": _json_constant("Infinity"),
                "1e999": _json_constant("1e999"), "a 5,000-digit number": _json_constant("9" * 5000),
                "lone surrogate": _lone_surrogate, "wrong type": _wrong_type, "not UTF-8": _not_utf8}


FILE_KINDS = {"FIFO": _make_fifo, "directory": _make_dir, "socket": _make_socket,
              "device": "/dev/zero",  # read forever, were it read: never opened for writing
              "read fails (EIO)": "/proc/self/mem",  # a regular file whose read fails, even for root
              "missing": None}

# (label, argv with "{}" for the file, whether the file is read as JSON)
INPUT_SLOTS = {
    "render FILE": (["render", "{}"], True),
    "encode FILE": (["encode", "{}"], False),
    "encode --chat FILE": (["encode", "--chat", "{}"], True),
    "count FILE": (["count", "{}"], False),
    "count --chat FILE": (["count", "--chat", "{}"], True),
    "decode --file FILE": (["decode", "--file", "{}"], True),
    "parse --file FILE": (["parse", "--file", "{}"], True),
    "batch IN": (["batch", "{}", "out.jsonl"], True),
}
TOKENIZER_SLOTS = {
    "encode --tokenizer": ["encode", "--text", "hi", "--tokenizer", "{}"],
    "count --tokenizer": ["count", "--text", "hi", "--tokenizer", "{}"],
    "decode --tokenizer": ["decode", "1", "--tokenizer", "{}"],
    "parse --tokenizer": ["parse", "1", "--tokenizer", "{}"],
    "batch --tokenizer": ["batch", "in.jsonl", "out.jsonl", "--tokenizer", "{}"],
    "gate --tokenizer": ["gate", "--tokenizer", "{}"],
}


def _tokenizer_with_added_id(value):
    def make(path):
        raw = json.dumps(small_tokenizer_json())
        path.write_text(raw.replace('"id": 1000,', f'"id": {value},', 1))
    return make


def _tokenizer_with_content(escaped):
    def make(path):
        raw = json.dumps(small_tokenizer_json())
        path.write_text(raw.replace('"content": "<|endoftext|>"', f'"content": "{escaped}"', 1))
    return make


TOKENIZER_CONTENT = {
    "nested 100,000 deep": _deep_list,
    "added id Infinity": _tokenizer_with_added_id("Infinity"),
    "added id 1e999": _tokenizer_with_added_id("1e999"),
    "added id -1": _tokenizer_with_added_id("-1"),
    "added id 2**70": _tokenizer_with_added_id(str(2**70)),
    "added id \"12\"": _tokenizer_with_added_id('"12"'),
    "added id 1.5": _tokenizer_with_added_id("1.5"),
    "added content a lone surrogate": _tokenizer_with_content("\\ud800"),
    "a JSON list": lambda path: path.write_text("[1, 2]"),
    "not UTF-8": lambda path: path.write_bytes(b"\xff\xfe{}"),
}
# Well-formed files whose values the gate judges: its report fails the checks (exit 1).
GATE_FAILS_CHECKS = {"added id -1", "added id 2**70"}


def _hostile_path(tmp_path, make):
    if isinstance(make, str) or make is None:
        return make or str(tmp_path / "missing.json")
    path = tmp_path / "hostile.json"
    make(path)
    return str(path)


def _call(argv, tmp_path, monkeypatch, capsys):
    """main(argv) in tmp_path, with a guard: if the call blocks on a FIFO, a
    writer opened after 60 s lets it go, and the test fails instead of hanging."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("QWEN4EXP_CACHE", str(tmp_path / ".cache"))
    (tmp_path / "in.jsonl").write_text('{"text": "a"}\n')
    before = set(os.listdir(tmp_path))
    done, blocked = threading.Event(), []

    def unblock():
        if not done.wait(60):
            blocked.append(True)
            for p in tmp_path.iterdir():
                if stat.S_ISFIFO(os.lstat(p).st_mode):
                    os.close(os.open(p, os.O_WRONLY | os.O_NONBLOCK))

    guard = threading.Thread(target=unblock, daemon=True)
    guard.start()
    try:
        code = main(argv)
    finally:
        done.set()
        guard.join()
    assert not blocked, "the command blocked on a FIFO"
    left = [p for p in _left_behind(tmp_path, before) if p != ".cache"]
    assert not left, f"left behind: {left}"
    return code, capsys.readouterr()


HOSTILE_INPUTS = [(slot, kind) for slot, (_, is_json) in INPUT_SLOTS.items()
                  for kind in list(FILE_KINDS) + (list(JSON_CONTENT) if is_json else ["not UTF-8"])]


@pytest.mark.parametrize("slot,kind", HOSTILE_INPUTS, ids=[f"{s}-{k}" for s, k in HOSTILE_INPUTS])
def test_hostile_input_file(tmp_path, monkeypatch, capsys, slot, kind):
    argv, _ = INPUT_SLOTS[slot]
    make = FILE_KINDS[kind] if kind in FILE_KINDS else JSON_CONTENT[kind]
    path = _hostile_path(tmp_path, make)
    code, out = _call([a.replace("{}", path) for a in argv], tmp_path, monkeypatch, capsys)
    assert code == EXIT_INPUT, out.err
    _one_line(out.err, argv[0])
    assert out.out == ""


HOSTILE_TOKENIZERS = [(slot, kind) for slot in TOKENIZER_SLOTS
                      for kind in list(FILE_KINDS) + list(TOKENIZER_CONTENT)]


@pytest.mark.parametrize("slot,kind", HOSTILE_TOKENIZERS, ids=[f"{s}-{k}" for s, k in HOSTILE_TOKENIZERS])
def test_hostile_tokenizer_file(tmp_path, monkeypatch, capsys, slot, kind):
    """--tokenizer: exit 2 (a bad option) with one line; the gate, whose input
    the tokenizer is: exit 3 with one line, or, for a well-formed file whose
    values fail its checks, its report and exit 1."""
    argv = TOKENIZER_SLOTS[slot]
    make = FILE_KINDS[kind] if kind in FILE_KINDS else TOKENIZER_CONTENT[kind]
    path = _hostile_path(tmp_path, make)
    code, out = _call([a.replace("{}", path) for a in argv], tmp_path, monkeypatch, capsys)
    if slot.startswith("gate") and kind in GATE_FAILS_CHECKS:
        assert code == 1 and out.err == ""
        assert "FAIL    load" in out.out and "result: FAILED" in out.out
        return
    assert code == (EXIT_INPUT if slot.startswith("gate") else EXIT_USAGE), out.err
    _one_line(out.err, argv[0])
    assert out.out == ""


def _without_dac_override():
    """In the child, as root: drop CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH from
    the capability bounding set (kept across exec), so that file modes apply."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


ALL_SLOTS = {**{s: argv for s, (argv, _) in INPUT_SLOTS.items()}, **TOKENIZER_SLOTS}

UNREADABLE_DRIVER = r"""
import contextlib, io, json, os, sys
from qwen4exp.cli.main import main

slots, results = json.loads(sys.argv[1]), {}
for slot, argv in slots.items():
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    results[slot] = {"code": code, "out": out.getvalue(), "err": err.getvalue(), "files": sorted(os.listdir("."))}
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def unreadable_results(tmp_path_factory):
    """Every slot run on a file its reader may not read (mode 000), in one child
    process; as root the child runs without the capabilities that ignore modes."""
    base = tmp_path_factory.mktemp("unreadable")
    (base / "in.jsonl").write_text('{"text": "a"}\n')
    path = base / "secret.json"
    path.write_text('{"messages": [{"role": "user", "content": "hi"}]}')
    os.chmod(path, 0)
    slots = {slot: [a.replace("{}", str(path)) for a in argv] for slot, argv in ALL_SLOTS.items()}
    env = dict(cli_env(), QWEN4EXP_CACHE=str(base / ".cache"))
    try:
        r = subprocess.run([sys.executable, "-c", UNREADABLE_DRIVER, json.dumps(slots)], cwd=base, env=env,
                           capture_output=True, text=True, timeout=300,
                           preexec_fn=_without_dac_override if os.geteuid() == 0 else None)
    except subprocess.SubprocessError as exc:
        pytest.skip(f"cannot drop root's file capabilities here ({exc})")
    assert r.returncode == 0, r.stderr
    return slots, json.loads(r.stdout)


@pytest.mark.parametrize("slot", ALL_SLOTS)
def test_unreadable_file(unreadable_results, slot):
    slots, results = unreadable_results
    argv, res = slots[slot], results[slot]
    expected = EXIT_USAGE if "--tokenizer" in argv and argv[0] != "gate" else EXIT_INPUT
    assert res["code"] == expected, res["err"]
    assert "Permission denied" in _one_line(res["err"], argv[0])
    assert res["out"] == "" and res["files"] == ["in.jsonl", "secret.json"]


# ---------------------------------------------------------------- ids on the command line

@pytest.mark.parametrize("command", ["decode", "parse"])
@pytest.mark.parametrize("spelling", ["1_000", "\u0661\u0662", "\uff11\uff12", "+5", "-1", "0x10", "1e3",
                                      "9" * 5000])
def test_ids_are_ascii_digits(command, spelling, capsys):
    """int() takes "1_000", "+5" and other scripts' digits; a token id on the
    command line is ASCII digits only."""
    assert main([command, "12", spelling]) == EXIT_INPUT
    _one_line(capsys.readouterr().err, command)
