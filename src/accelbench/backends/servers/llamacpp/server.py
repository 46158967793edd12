"""llama.cpp's ``llama-server``: where its binary is, its version, the command that starts it, and how it is asked
and read (the facts a server-kind table needs; read from ``tools/server/`` of the vendored llama.cpp source,
b10573-14-g3f545bec, and checked against that build's ``--help`` and answers).

- **fixed output length**: ``ignore_eos: true`` and ``max_tokens`` (alias ``n_predict``); there is no ``min_tokens``.
- **stream**: a chunk a token whose text is whole UTF-8 (the bytes of a split character wait for the rest); the last
  chunk has empty text, ``finish_reason`` (``length``), ``usage`` (with ``stream_options.include_usage``) and
  llama.cpp's ``timings``; then ``data: [DONE]``. A failure mid-stream is a chunk ``{"error": {...}}``.
- **readiness**: ``GET /health`` answers 200 once the model is loaded, 503 while it loads.
- **version**: ``GET /props``' ``build_info`` (``b<number>-<commit>``), or the binary's ``--version``.
- **metrics**: ``GET /metrics`` (Prometheus text, with ``--metrics`` only): :data:`METRICS`.
- **model id**: ``/v1/models`` lists the ``--alias`` (else the file's path).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from accelbench.core.errors import AccelbenchError

SERVER_ENV = "ACCELBENCH_LLAMA_SERVER"  # the binary's path, when --server-bin is not given
BINARY = "llama-server"
BUILD_HINT = (
    "build it from llama.cpp's source with benchmarks/build_llama_server.sh [SOURCE.tar.xz] [BUILD_DIR] "
    "(CUDA when nvcc is found: -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=<compute capability>), then pass "
    f"--server-bin BUILD_DIR/build/bin/llama-server or set {SERVER_ENV}"
)

READY_PATH = "/health"  # 200 once the model is loaded; 503 {"error": {"message": "Loading model", ...}} before
PROPS_PATH = "/props"  # {"build_info": "b<number>-<commit>", "total_slots": N, "default_generation_settings": ...}
METRICS_PATH = "/metrics"  # Prometheus text; 501 "This server does not support metrics endpoint" without --metrics
TOKENIZE_PATH = "/tokenize"  # POST {"content": text} -> {"tokens": [ids]} (no BOS unless "add_special": true)
SLOTS_PATH = "/slots"  # per slot: n_ctx, is_processing, n_prompt_tokens, next_token[0].n_decoded

# /metrics series (tools/server/server-task.cpp, server_task_result_metrics::to_metrics; all prefixed llamacpp:).
# The KV cache's use has no series in this version: /slots (n_prompt_tokens + n_decoded of each slot over its n_ctx)
# is the nearest reading.
METRICS = {
    "requests_running": "llamacpp:requests_processing",  # gauge: slots processing a request
    "requests_waiting": "llamacpp:requests_deferred",  # gauge: requests waiting for a free slot
    "prompt_tokens": "llamacpp:prompt_tokens_total",  # counter: prompt tokens processed, cached ones left out
    "prompt_tokens_cached": "llamacpp:prompt_tokens_cached_total",  # counter: prompt tokens reused from the cache
    "output_tokens": "llamacpp:tokens_predicted_total",  # counter: tokens generated
    "prompt_seconds": "llamacpp:prompt_seconds_total",  # counter: time processing prompts
    "output_seconds": "llamacpp:tokens_predicted_seconds_total",  # counter: time generating
    "decode_calls": "llamacpp:n_decode_total",  # counter: llama_decode() calls
    "busy_slots_per_decode": "llamacpp:n_busy_slots_per_decode",  # gauge: mean batch of a decode call
}
TIMELINE = ("llamacpp:requests_processing", "llamacpp:requests_deferred")  # the queue gauges worth drawing over time

# ``--version`` on stderr: "version: 0.2.0-dev (build 10587, commit 3f545bec)" (common/build-info.cpp.in); older
# builds: "version: 10587 (3f545bec)"
_VERSION = re.compile(r"version:\s*(?:\S+\s*\(build\s*(\d+),\s*commit\s*(\w+)\)|(\d+)\s*\((\w+)\))")


class ServerNotFound(AccelbenchError):
    """No ``llama-server`` binary: where it was looked for and how to build it, in one line (exit 2)."""


def find_server(server_bin: str | None = None) -> Path:
    """The ``llama-server`` binary: ``server_bin`` (``--server-bin``) if given, else ``$ACCELBENCH_LLAMA_SERVER``,
    else ``llama-server`` on ``PATH``.

    Raises:
        ServerNotFound: the given path is not an executable file, or none is found (the message says how to build
            one).
    """
    for given, origin in ((server_bin, "--server-bin"), (os.environ.get(SERVER_ENV), SERVER_ENV)):
        if given:
            path = Path(given).expanduser()
            if path.is_file() and os.access(path, os.X_OK):
                return path.resolve()
            raise ServerNotFound(f"{origin} {given} is not an executable file: {BUILD_HINT}")
    found = shutil.which(BINARY)
    if found is None:
        raise ServerNotFound(f"no {BINARY} on PATH: {BUILD_HINT}")
    return Path(found).resolve()


def server_version(server_bin: str | Path, timeout_s: float = 30.0) -> str | None:
    """The build ``llama-server --version`` reports (``b<number>-<commit>``, the form of ``/props``' ``build_info``),
    or None when it cannot say (a build from a source without git history reports ``0 (unknown)`` unless its build
    number and commit were given to CMake: ``benchmarks/build_llama_server.sh`` gives them)."""
    try:
        done = subprocess.run(
            [str(server_bin), "--version"], capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = _VERSION.search(done.stderr + done.stdout)
    if m is None:
        return None
    number, commit = (m.group(1), m.group(2)) if m.group(1) is not None else (m.group(3), m.group(4))
    return None if number == "0" and commit == "unknown" else f"b{number}-{commit}"


def server_command(
    server_bin: str | Path,
    gguf: str | Path,
    port: int,
    *,
    parallel: int,
    ctx_per_slot: int,
    gpu: bool,
    alias: str | None = None,
    extra: Sequence[str] = (),
) -> str:
    """The shell command that starts ``llama-server`` on ``127.0.0.1:port`` for a load of at most ``parallel``
    requests in flight, each of at most ``ctx_per_slot`` tokens (prompt and output).

    ``-np parallel`` slots, ``-c parallel * ctx_per_slot`` (each slot gets ``-c / -np`` tokens: the KV cache is per slot
    when ``-np`` is given, ``--kv-unified`` being on only for ``-np -1``), continuous batching (its default),
    ``--metrics``, ``--alias`` (the id ``/v1/models`` lists; default the file's stem), every layer on the GPU
    (``-ngl 99``) or none (``-ngl 0``: a CUDA build otherwise offloads by default), then ``extra`` as given. Tokens
    to ban are banned in each request (:func:`banned_body`): the command line's ``-l ID-inf`` is deprecated when
    repeated, and its parser takes no comma list.
    ``exec``: the server is its process group's leader, so its exit is seen at once.
    """
    if parallel < 1 or ctx_per_slot < 1:
        raise ValueError(f"parallel and ctx_per_slot must be at least 1, got {parallel} and {ctx_per_slot}")
    args = [str(server_bin), "-m", str(gguf), "--host", "127.0.0.1", "--port", str(port)]
    args += ["-np", str(parallel), "-c", str(parallel * ctx_per_slot), "--metrics"]
    args += ["--alias", alias or Path(gguf).stem, "-ngl", "99" if gpu else "0"]
    args += list(extra)
    return "exec " + shlex.join(args)


def fixed_length(output_len: int) -> dict[str, Any]:
    """The body fields that ask ``llama-server`` for exactly ``output_len`` tokens: end-of-generation tokens are
    banned (``ignore_eos``) and generation stops at ``max_tokens``."""
    return {"ignore_eos": True, "max_tokens": output_len}


def banned_body(banned_ids: Sequence[int]) -> dict[str, Any]:
    """The body field that bans ``banned_ids`` in one request (``logit_bias`` pairs ``[id, false]``; ``ignore_eos``
    still adds its own)."""
    return {"logit_bias": [[int(i), False] for i in banned_ids]} if banned_ids else {}


def build_info(props: dict[str, Any]) -> str | None:
    """The version in a ``/props`` answer (``build_info``), None when absent or unknown (``b0-unknown``)."""
    info = props.get("build_info")
    return info if isinstance(info, str) and info and "unknown" not in info else None
