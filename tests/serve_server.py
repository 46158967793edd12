"""A real OpenAI-compatible server for the serving tests: ``transformers serve`` on the bundled tiny-shakespeare
checkpoint, on 127.0.0.1 at a free port.

The command is the built-in launch's (:func:`accelbench.launchers.server.transformers_command`): ``transformers
serve MODEL`` preloads ``MODEL`` (``FORCE_MODEL``, positional or ``--force-model`` as the installed CLI takes it); a
local folder's path is its model id (``ModelManager.process_model_name`` keeps an existing path as it is), and requests name that path. The server
runs in its own process group with its output in a temporary log file; ``HF_HUB_OFFLINE=1`` keeps it off the
network and ``HF_HUB_CACHE`` points at an existing empty folder (``/v1/models`` scans it and answers 500 without
it). Nothing is written into the repository.

Use the module-scoped fixture: ``from serve_server import served, server_process`` in a test module, then a test
takes ``served``, a ``(base_url, model_id)`` pair (``server_process`` is what it waits for).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

MODEL_DIR = Path(__file__).resolve().parents[1] / "src" / "accelbench" / "assets" / "llm" / "tiny-shakespeare"
READY_TIMEOUT_S = 120.0


def free_port() -> int:
    """A TCP port of 127.0.0.1 nobody listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _answers(url: str) -> bool:
    with contextlib.suppress(OSError):
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    return False


def _command(port: int) -> str:
    """The built-in launch's command (:func:`accelbench.launchers.server.transformers_command`: the model positional
    or ``--force-model``, as the installed CLI takes it; ``exec``, so the server leads its process group)."""
    pytest.importorskip("fastapi", reason="transformers serve needs the serve extra: pip install 'accelbench[serve]'")
    from accelbench.launchers.server import transformers_command

    return transformers_command(MODEL_DIR, port, None, False)


class ServerProcess:
    """``transformers serve`` on the bundled model, started at construction (it loads while the caller does other
    work); :meth:`wait_ready` waits for it, :meth:`stop` ends its process group and removes its folder."""

    def __init__(self) -> None:
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
                _command(port),
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
def server_process() -> Iterator[ServerProcess]:
    """The module's ``transformers serve``, started but not waited for: a module that lists it first
    (``pytestmark = pytest.mark.usefixtures("server_process")``) lets the server load while its other tests run."""
    if sys.platform == "win32":
        pytest.skip("process groups are POSIX")
    server = ServerProcess()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def served(server_process: ServerProcess) -> tuple[str, str]:
    """One ``transformers serve`` for the test module, answering: ``(base_url, model_id)``."""
    return server_process.wait_ready()
