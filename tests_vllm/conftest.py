"""Fixtures of the vLLM plugin tests (run with the vLLM venv: docs/RUNTIMES.md).

These tests need vLLM installed next to qwen4exp, so they live outside tests/
and the default `python3 -m pytest` does not collect them; `.ci/run` creates
the venv and runs `pytest tests_vllm` with it.

* `folder(vocabulary)`: a tiny model folder per vocabulary (tests/_model_folders.py),
  in the format listed in SERVED_FORMAT;
* `server`: one real vLLM OpenAI server per vocabulary (module scope), started
  with the plugin's flags on 127.0.0.1, dummy weights, CPU;
* `engine_config(vocabulary)`: a VllmConfig of the same folder, for the
  in-process tests of the renderer and the parsers (no model is loaded).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests"))

import qwen4exp  # noqa: E402

#: The format each vocabulary's test model folder is written in: qwen3 has
#: enable_thinking; qwen3.8 adds preserve_thinking and reasoning_effort.
SERVED_FORMAT = {"qwen3": "qwen3", "qwen3.6": "qwen3.8"}
VOCABULARIES = tuple(SERVED_FORMAT)
#: The plugin's flags, as the README gives them, and --trust-request-chat-template:
#: vLLM then lets a request's template through, for the renderer to refuse.
PLUGIN_FLAGS = ["--tokenizer-mode", "qwen4exp", "--enable-auto-tool-choice",
                "--tool-call-parser", "qwen4exp", "--reasoning-parser", "qwen4exp",
                "--trust-request-chat-template"]
STARTUP_SECONDS = 900  # two CPUs shared with other jobs: vLLM's start takes 1-4 minutes


#: The interpreter that writes the model folders: the repository's test
#: environment (`pip install ".[test]"`), whose pinned tokenizers and
#: transformers build the Qwen3.5/3.6 reference tokenizer.json (the vLLM venv
#: has other versions of both).
REFERENCE_PYTHON = os.environ.get("QWEN4EXP_REFERENCE_PYTHON", "python3")


def write_model_folders(root, formats: dict) -> dict:
    """{name: folder} of tiny model folders, one per {name: chat format}, under `root`."""
    script = ("import sys; from _model_folders import model_folder; "
              "[model_folder(d, f) for d, f in zip(sys.argv[1::2], sys.argv[2::2])]")
    args = [a for name, fmt in formats.items() for a in (str(root / name), fmt)]
    subprocess.run([REFERENCE_PYTHON, "-c", script, *args], check=True, cwd=os.path.join(REPO, "tests"))
    return {name: str(root / name) for name in formats}


@pytest.fixture(scope="session")
def folders(tmp_path_factory) -> dict:
    return write_model_folders(tmp_path_factory.mktemp("models"), SERVED_FORMAT)


@pytest.fixture(scope="session")
def qwen_tokenizers(folders) -> dict:
    """qwen4exp's own tokenizer of each folder: the reference for every id."""
    return {v: qwen4exp.Tokenizer.from_pretrained(path) for v, path in folders.items()}


#: Ports to serve on, "FIRST-LAST" (a machine shared with other servers); unset: any free one.
PORT_RANGE_ENV = "QWEN4EXP_VLLM_PORTS"


def _free_port() -> int:
    first, _, last = os.environ.get(PORT_RANGE_ENV, "0-0").partition("-")
    for port in range(int(first), int(last or first) + 1):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return s.getsockname()[1]
    raise RuntimeError(f"no free port in ${PORT_RANGE_ENV}={os.environ[PORT_RANGE_ENV]}")


class Server:
    """A running vLLM OpenAI server and a small JSON client for it."""

    def __init__(self, folder: str, vocabulary: str, log_path: str, flags: list[str] = PLUGIN_FLAGS) -> None:
        import requests

        self.vocabulary = vocabulary
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1", VLLM_LOGGING_LEVEL="WARNING")
        cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", folder,
               "--served-model-name", "m", "--load-format", "dummy", "--max-model-len", "4096",
               "--host", "127.0.0.1", "--port", str(self.port), "--dtype", "bfloat16",
               "--enforce-eager", "--seed", "0", *flags]
        self._log = open(log_path, "wb")
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)
        self.http = requests.Session()
        deadline = time.monotonic() + STARTUP_SECONDS
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"vLLM exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                if self.http.get(self.url + "/health", timeout=5).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"vLLM did not answer /health in {STARTUP_SECONDS} s:\n{self.log_tail()}")
            time.sleep(2)

    def log_tail(self, n: int = 4000) -> str:
        with open(self.log_path, "rb") as f:
            return f.read()[-n:].decode("utf-8", "replace")

    def post(self, path: str, body: dict) -> tuple[int, dict]:
        r = self.http.post(self.url + path, json={"model": "m", **body}, timeout=300)
        return r.status_code, r.json()

    def alive(self) -> bool:
        """Whether the server still answers GET /health with 200."""
        import requests

        try:
            return self.proc.poll() is None and self.http.get(self.url + "/health", timeout=30).status_code == 200
        except requests.RequestException:
            return False

    def events(self, path: str, body: dict) -> tuple[int, list[dict]]:
        """(status, the JSON data lines) of a streamed request to `path`; the
        error body as the one item when the status is not 200."""
        r = self.http.post(self.url + path, timeout=300, stream=True,
                           json={"model": "m", "stream": True, **body})
        if r.status_code != 200:
            return r.status_code, [r.json()]
        items = []
        for line in r.iter_lines():
            if line.startswith(b"data: ") and line != b"data: [DONE]":
                items.append(json.loads(line[len(b"data: "):]))
        return 200, items

    def chat(self, body: dict) -> dict:
        status, reply = self.post("/v1/chat/completions", {"return_token_ids": True, **body})
        assert status == 200, reply
        return reply

    def stream(self, body: dict) -> list[dict]:
        """The chunks of a streamed chat completion, in order."""
        r = self.http.post(self.url + "/v1/chat/completions", timeout=300, stream=True,
                           json={"model": "m", "return_token_ids": True, "stream": True, **body})
        assert r.status_code == 200, r.text
        chunks = []
        for line in r.iter_lines():
            if not line.startswith(b"data: "):
                continue
            data = line[len(b"data: "):]
            if data == b"[DONE]":
                break
            chunks.append(json.loads(data))
        return chunks

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # the server and its engine processes
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(30)
        self._log.close()


@pytest.fixture(scope="session", params=VOCABULARIES)
def server(request, folders, tmp_path_factory):
    """One server per vocabulary for the whole run (a start takes minutes):
    pytest groups the tests of every module by vocabulary, and stops one
    server before it starts the next."""
    vocabulary = request.param
    log = tmp_path_factory.mktemp("logs") / f"vllm-{vocabulary}.log"
    srv = Server(folders[vocabulary], vocabulary, str(log))
    yield srv
    srv.stop()
