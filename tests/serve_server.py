"""A real OpenAI-compatible server for the serving tests: ``transformers serve`` on the bundled tiny-shakespeare
checkpoint, on 127.0.0.1 at a free port.

The command is the built-in launch's (:func:`accelbench.backends.servers.transformers.transformers_command`): ``transformers
serve MODEL`` preloads ``MODEL`` (``FORCE_MODEL``, positional or ``--force-model`` as the installed CLI takes it); a
local folder's path is its model id (``ModelManager.process_model_name`` keeps an existing path as it is), and requests name that path. The server
runs in its own process group with its output in a temporary log file; ``HF_HUB_OFFLINE=1`` keeps it off the
network and ``HF_HUB_CACHE`` points at an existing empty folder (``/v1/models`` scans it and answers 500 without
it). Nothing is written into the repository.

:data:`STUB` is a stand-in OpenAI-compatible server of the standard library (and ``prometheus_client``) that starts in a
fraction of a second, for what ``transformers serve`` cannot be made to do on purpose: die mid-run, fail requests,
send a stream accelbench does not understand or a character split across chunks (:func:`write_stub`,
:func:`stub_server`).

Use the module-scoped fixture: ``from serve_server import served, server_process`` in a test module, then a test
takes ``served``, a ``(base_url, model_id)`` pair (``server_process`` is what it waits for).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from accelbench.launchers.server import free_port

MODEL_DIR = Path(__file__).resolve().parents[1] / "src" / "accelbench" / "assets" / "llm" / "tiny-shakespeare"
READY_TIMEOUT_S = 120.0


def _answers(url: str) -> bool:
    with contextlib.suppress(OSError):
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    return False


def _command(port: int, preload: bool = True) -> str:
    """The built-in launch's command (:func:`accelbench.backends.servers.transformers.transformers_command`: the model positional
    or ``--force-model``, as the installed CLI takes it; ``exec``, so the server leads its process group); without
    ``preload``, ``transformers serve`` as a user starts it: no model (it loads one on the first request naming it)."""
    pytest.importorskip("fastapi", reason="transformers serve needs the serve extra: pip install 'accelbench[serve]'")
    from accelbench.backends.servers.transformers import _transformers_cli, transformers_command

    if not preload:
        return f"exec {_transformers_cli()} serve --host 127.0.0.1 --port {port}"
    return transformers_command(MODEL_DIR, port, None, False)


class ServerProcess:
    """``transformers serve`` on the bundled model, started at construction (it loads while the caller does other
    work); :meth:`wait_ready` waits for it, :meth:`stop` ends its process group and removes its folder."""

    def __init__(self, preload: bool = True) -> None:
        port = free_port()
        self._tmp = tempfile.TemporaryDirectory(prefix="accelbench-serve-")
        cache = Path(self._tmp.name, "hub")
        cache.mkdir()
        # one intra-op thread: the tiny model's matmuls gain nothing from more, and on a shared 2-core machine a
        # thread pool per core turned 16 tokens from 0.3 s into several seconds
        env = {
            **os.environ,
            "HF_HUB_OFFLINE": "1",
            "HF_HUB_CACHE": str(cache),
            "TRANSFORMERS_VERBOSITY": "error",
            "OMP_NUM_THREADS": "1",
        }
        self.log_path = Path(self._tmp.name, "server.log")
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                _command(port, preload),
                shell=True,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                cwd=self._tmp.name,
            )
        self.base_url, self.model_id = f"http://127.0.0.1:{port}", str(MODEL_DIR)

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> tuple[str, str]:
        """``(base_url, model_id)`` once ``/health`` and ``/v1/models`` answer.

        Raises:
            RuntimeError: the server exited, or did not answer within ``timeout_s`` (with its log's tail).
        """
        _wait_ready(self.proc, self.base_url, self.log_path, timeout_s)
        return self.base_url, self.model_id

    def stop(self) -> None:
        _stop(self.proc)
        self._tmp.cleanup()


@contextlib.contextmanager
def transformers_server(timeout_s: float = READY_TIMEOUT_S) -> Iterator[tuple[str, str]]:
    """Start ``transformers serve`` on the bundled model; yield ``(base_url, model_id)`` once it answers; stop its
    process group on exit.

    Raises:
        RuntimeError: the server exited, or did not answer within ``timeout_s`` (the message carries its log's tail).
    """
    server = ServerProcess()
    try:
        yield server.wait_ready(timeout_s)
    finally:
        server.stop()


def _wait_ready(proc: subprocess.Popen, base_url: str, log_path: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"transformers serve exited ({proc.returncode}): {_tail(log_path)}")
        if _answers(f"{base_url}/health") and _answers(f"{base_url}/v1/models"):
            return
        time.sleep(0.1)  # a poll interval between checks of the state, not a wait for it
    raise RuntimeError(f"transformers serve did not answer in {timeout_s:.0f} s: {_tail(log_path)}")


def _tail(path: Path) -> str:
    return " | ".join(path.read_text(errors="replace").strip().splitlines()[-5:])


def _stop(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=15)


@pytest.fixture(scope="module")
def server_process(request) -> Iterator[ServerProcess]:
    """The module's ``transformers serve``, started but not waited for: a module that lists it first
    (``pytestmark = pytest.mark.usefixtures("server_process")``) lets the server load while its other tests run. A
    module whose ``SERVER_PRELOADS`` is False gets it as a user starts it: no model, until a request names one."""
    if sys.platform == "win32":
        pytest.skip("process groups are POSIX")
    server = ServerProcess(getattr(request.module, "SERVER_PRELOADS", True))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def served(server_process: ServerProcess) -> tuple[str, str]:
    """One ``transformers serve`` for the test module, answering: ``(base_url, model_id)``."""
    return server_process.wait_ready()


# A stand-in OpenAI-compatible server: ``python stub.py PORT MODE [DIE_AFTER]``. It lists one model, ``stub``, streams
# max_tokens one-token chunks, then usage, counts the completions it was asked for on its Prometheus /metrics, and
# exits after answering DIE_AFTER completions (a server dying mid-run). MODE ``ok`` serves; ``http500`` answers every
# completion HTTP 500 with an error object; ``html`` answers 200 with an HTML page (a stream accelbench does not
# understand); ``cut`` sends one chunk and closes the connection in the middle of the response; ``split`` sends each
# token's text as a two-byte character (U+00E9) whose two bytes travel in two chunks; ``half`` fails every other
# completion with HTTP 500; ``empty`` lists no model and ``nolist`` answers /v1/models HTTP 500 (as ``transformers
# serve`` started without a model), both serving any model a request names.
STUB = r"""
import json, os, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from prometheus_client import Counter, Gauge, generate_latest

port, mode = int(sys.argv[1]), sys.argv[2]
die_after, served = int(sys.argv[3]) if len(sys.argv) > 3 else 1 << 30, [0]
asked = Counter("stub_completions", "completions asked")
running = Gauge("vllm:num_requests_running", "completions streaming now")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, status, body, kind="application/json"):
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        listed = [] if mode == "empty" else [{"id": "stub", "object": "model"}]
        body = json.dumps({"object": "list", "data": listed}).encode()
        if self.path == "/metrics":
            body = generate_latest()
        if mode == "nolist" and self.path.startswith("/v1/models"):
            return self.send(500, b"Internal Server Error", "text/plain")
        self.send(200 if self.path.startswith(("/v1/models", "/metrics")) else 404, body)

    def chunk(self, data):
        line = b"data: " + data + b"\n\n"
        self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
        self.wfile.flush()

    def do_POST(self):
        served[0] += 1
        asked.inc()
        if served[0] > die_after:
            os._exit(3)
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if not req.get("stream"):  # a probe's check
            return self.send(200, json.dumps({"choices": [{"index": 0, "text": " to"}]}).encode())
        if mode == "http500" or (mode == "half" and served[0] % 2 == 0):
            return self.send(500, json.dumps({"error": {"message": "the stub failed on purpose"}}).encode())
        if mode == "html":
            return self.send(200, b"<html><body>" + b"not a stream " * 40 + b"</body></html>", "text/html")
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        n = int(req.get("max_tokens") or 4)
        text = {"choices": [{"index": 0, "text": " to", "finish_reason": None}]}
        with running.track_inprogress():
            if mode == "cut":
                self.chunk(json.dumps(text).encode())
                self.wfile.write(b"ff\r\ndata: {")  # a chunk promised 255 bytes, then the connection closes
                self.wfile.flush()
                self.close_connection = True
                return
            for _ in range(n):
                if mode == "split":
                    for part in (b"\xc3", b"\xa9"):  # U+00E9, one byte a chunk
                        self.chunk(b'{"choices": [{"index": 0, "text": "' + part + b'", "finish_reason": null}]}')
                else:
                    self.chunk(json.dumps(text).encode())
            self.chunk(json.dumps({"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": n}}).encode())
            self.chunk(b"[DONE]")
        self.wfile.write(b"0\r\n\r\n")


ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
"""


def write_stub(folder: Path) -> Path:
    """:data:`STUB` written into ``folder``: its path."""
    path = folder / "stub_server.py"
    path.write_text(STUB)
    return path


@contextlib.contextmanager
def stub_server(
    folder: Path, mode: str = "ok", die_after: int | None = None, port: int | None = None
) -> Iterator[tuple[str, subprocess.Popen]]:
    """:data:`STUB` running in ``mode`` in its own process group: ``(base_url, process)`` once it answers; its group
    ended on exit."""
    port = port or free_port()
    args = [sys.executable, str(write_stub(folder)), str(port), mode, *([str(die_after)] if die_after else [])]
    proc = subprocess.Popen(args, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while not _answers(f"{url}/metrics"):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the stub server did not start (exit {proc.poll()})")
            time.sleep(0.05)  # a poll interval between checks of the state
        yield url, proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=15)
