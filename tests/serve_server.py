"""A real OpenAI-compatible server for the serving tests: ``transformers serve`` on the bundled tiny-shakespeare
checkpoint, on 127.0.0.1 at a free port.

``transformers serve MODEL`` preloads ``MODEL`` (its positional ``FORCE_MODEL``); a local folder's path is its model
id (``ModelManager.process_model_name`` keeps an existing path as it is), and requests name that path. The server
runs in its own process group with its output in a temporary log file; ``HF_HUB_OFFLINE=1`` keeps it off the
network and ``HF_HUB_CACHE`` points at an existing empty folder (``/v1/models`` scans it and answers 500 without
it). Nothing is written into the repository.

Use the module-scoped fixture: ``from serve_server import served`` in a test module, then a test takes ``served``,
a ``(base_url, model_id)`` pair.
"""

from __future__ import annotations

import contextlib
import os
import shutil
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


def _command(port: int) -> list[str]:
    exe = shutil.which("transformers")
    if exe is None:
        pytest.skip("transformers serve is not installed (pip install 'accelbench[serve]')")
    return [exe, "serve", str(MODEL_DIR), "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]


@contextlib.contextmanager
def transformers_server(timeout_s: float = READY_TIMEOUT_S) -> Iterator[tuple[str, str]]:
    """Start ``transformers serve`` on the bundled model; yield ``(base_url, model_id)`` once ``/health`` and
    ``/v1/models`` answer; stop its process group on exit.

    Raises:
        RuntimeError: the server exited, or did not answer within ``timeout_s`` (the message carries its log's tail).
    """
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="accelbench-serve-") as tmp:
        cache = Path(tmp, "hub")
        cache.mkdir()
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(cache), "TRANSFORMERS_VERBOSITY": "error"}
        log_path = Path(tmp, "server.log")
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                _command(port), stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True, cwd=tmp
            )
        base_url = f"http://127.0.0.1:{port}"
        try:
            _wait_ready(proc, base_url, log_path, timeout_s)
            yield base_url, str(MODEL_DIR)
        finally:
            _stop(proc)


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
def served() -> Iterator[tuple[str, str]]:
    """One ``transformers serve`` for the test module: ``(base_url, model_id)``."""
    if sys.platform == "win32":
        pytest.skip("process groups are POSIX")
    with transformers_server() as pair:
        yield pair
