"""The serving client's own capacity: the highest request rate ``accelbench serve``'s client sustains on this machine.

    python benchmarks/serve_client_capacity.py --out benchmarks/results/serve-client/capacity-cpu-2core.json \
        [--rates 50,100,200,500,1000,1500,2000] [--max-concurrency none,64] [--duration-s 3] [--chunks 8] [--pool-reps 3]

The load target is a real HTTP/1.1 server written here with the standard library's ``asyncio`` streams, run in its
own process: ``GET /v1/models`` answers one model, and ``POST /v1/completions`` answers at once with ``--chunks``
server-sent-event chunks of one token each, a last chunk with ``usage``, and ``data: [DONE]``, chunked and kept
alive. It is a load target, not a mock of a measured system: it does no work, so whatever limits the rate is the
client (:mod:`accelbench.scenarios.serve.load` through :class:`accelbench.backends.openai_api.OpenAICompatible`, the
code ``accelbench serve`` runs) or the machine's cores, which the JSON's load averages and the target's own CPU show.

Each rate is one open-loop level (Poisson arrivals on absolute send times) lasting ``--duration-s``, swept once for
each ``--max-concurrency`` (``none``: no limit on the requests in flight); per rate the JSON holds the requested rate, the drawn schedule's own rate, the achieved rates (sends over
the send span; successful requests over the measured window), the send slip p50/p99 and the event-loop lag p99 (ms), the client's and the
target's CPU (% of one core), TTFT p50/p99, failures and the ``client_limited`` flag, with the machine's
description and the load averages around each level. Then ``pools``: the client's CPU a request in closed-loop
levels at 8 and 64 in flight, with the client's connection pools of
:data:`accelbench.backends.openai_api.POOL_CONNECTIONS` against one pool of every connection, interleaved.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import subprocess
import sys
import time
from pathlib import Path

MODEL = "load-target"


# --- the load target ---------------------------------------------------------------------------------------------


def _sse_body(chunks: int) -> bytes:
    """The chunked-encoded SSE stream of one completion: ``chunks`` one-token chunks, a usage chunk, ``[DONE]``."""
    events = [
        {"id": "c", "object": "text_completion", "model": MODEL, "choices": [{"index": 0, "text": f" t{i}"}]}
        for i in range(chunks)
    ]
    events.append(
        {
            "id": "c",
            "object": "text_completion",
            "model": MODEL,
            "choices": [{"index": 0, "text": "", "finish_reason": "length"}],
            "usage": {"prompt_tokens": 16, "completion_tokens": chunks, "total_tokens": 16 + chunks},
        }
    )
    out = b""
    for data in [json.dumps(e) for e in events] + ["[DONE]"]:
        payload = f"data: {data}\n\n".encode()
        out += f"{len(payload):x}\r\n".encode() + payload + b"\r\n"
    return out + b"0\r\n\r\n"


def _responses(chunks: int) -> dict[str, bytes]:
    models = json.dumps({"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "local"}]}).encode()
    return {
        "models": b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
        + str(len(models)).encode()
        + b"\r\n\r\n"
        + models,
        "stream": b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
        + _sse_body(chunks),
        "missing": b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}",
    }


async def _serve_connection(reader, writer, responses: dict[str, bytes]) -> None:
    try:
        while True:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
            method, path = head[0].split(" ")[:2]
            length = next((int(h.split(":", 1)[1]) for h in head[1:] if h.lower().startswith("content-length:")), 0)
            if length:
                await reader.readexactly(length)
            if method == "POST" and path == "/v1/completions":
                writer.write(responses["stream"])
            elif method == "GET" and path == "/v1/models":
                writer.write(responses["models"])
            else:
                writer.write(responses["missing"])
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
        pass
    finally:
        writer.close()


def run_target(port: int, chunks: int) -> None:
    """Serve on 127.0.0.1:``port`` until killed (the ``target`` subcommand)."""
    responses = _responses(chunks)

    async def main() -> None:
        server = await asyncio.start_server(
            lambda r, w: _serve_connection(r, w, responses), "127.0.0.1", port, backlog=4096
        )
        async with server:
            await server.serve_forever()

    asyncio.run(main())


# --- the client's levels -----------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_target(chunks: int) -> tuple[subprocess.Popen, str]:
    """The load target in its own process, once ``/v1/models`` answers (a state, polled)."""
    import urllib.request

    port = _free_port()
    proc = subprocess.Popen([sys.executable, __file__, "target", "--port", str(port), "--chunks", str(chunks)])
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/v1/models", timeout=1) as r:
                if r.status == 200:
                    return proc, url
        except OSError:
            time.sleep(0.05)  # poll interval between two checks of the port
    proc.kill()
    raise RuntimeError("the load target did not answer in 30 s")


def _rate(times: list[float]) -> float | None:
    """Events a second between the first and the last of ``times`` (s)."""
    span = max(times) - min(times) if len(times) > 1 else 0.0
    return (len(times) - 1) / span if span > 0 else None


def measure(url: str, rate: float, duration_s: float, seed: int, target_pid: int, max_concurrency=None) -> dict:
    """One open-loop level at ``rate`` requests/s against the target: the figures of the module docstring."""
    import psutil

    from accelbench.backends.openai_api import OpenAICompatible
    from accelbench.scenarios.serve.load import run_level
    from accelbench.scenarios.serve.metrics import level_columns
    from accelbench.scenarios.serve.workloads import Request

    engine = OpenAICompatible(url, MODEL)
    engine.probe(5.0)
    requests = [Request(prompt=f"prompt {i} " * 4, prompt_tokens=16, output_len=None) for i in range(64)]
    target = psutil.Process(target_pid)
    target_cpu0, load_before = target.cpu_times(), os.getloadavg()
    level = run_level(
        engine,
        requests,
        request_rate=rate,
        duration_s=duration_s,
        timeout_s=30.0,
        seed=seed,
        max_concurrency=max_concurrency,
    )
    target_cpu1 = target.cpu_times()
    cols, _ = level_columns(level, None)
    sent = sorted(r.sent_s for r in level.results if r.sent_s is not None)
    due = [r.scheduled_s for r in level.results]
    target_cpu_s = (target_cpu1.user + target_cpu1.system) - (target_cpu0.user + target_cpu0.system)
    return {
        "request_rate_per_s": rate,
        "max_concurrency": max_concurrency,
        "requests": cols["requests"],
        "requests_failed": cols["requests_failed"],
        "errors_json": cols["errors_json"],
        "scheduled_rate_per_s": _rate(due),  # the Poisson draw's own rate: what the sends are compared with
        "achieved_send_rate_per_s": _rate(sent),
        "achieved_request_rate_per_s": cols["request_throughput_per_s"],
        "send_slip_p50_ms": cols["send_slip_p50_ms"],
        "send_slip_p99_ms": cols["send_slip_p99_ms"],
        "loop_lag_p99_ms": cols["loop_lag_p99_ms"],
        "client_cpu_percent": cols["client_cpu_percent"],
        "client_cpu_ms_per_request": cols["client_cpu_percent"] * 10.0 * level.wall_s / max(1, cols["requests"]),
        "target_cpu_percent": 100.0 * target_cpu_s / level.wall_s if level.wall_s > 0 else None,
        "ttft_p50_ms": cols["ttft_p50_ms"],
        "ttft_p99_ms": cols["ttft_p99_ms"],
        "client_limited": cols["client_limited"],
        "measured_wall_s": cols["measured_wall_s"],
        "load_average_before": load_before[0],
        "load_average_after": os.getloadavg()[0],
    }


def machine() -> dict:
    """What ran it: CPU model and cores, OS, Python and the client's libraries, the project's commit."""
    import httpx

    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=Path(__file__).parent
    ).stdout.strip()
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "os": platform.platform(),
        "python": platform.python_version(),
        "httpx": httpx.__version__,
        "commit": commit or None,
        "shared": "a 2-core machine other jobs share: the load averages beside each level say how busy it was",
    }


def pools_ab(url: str, reps: int, requests_per_level: int = 1280) -> list[dict]:
    """Client CPU a request, closed loop at 8 and 64 in flight, with pools of
    :data:`~accelbench.backends.openai_api.POOL_CONNECTIONS` connections against one pool holding them all
    (the setting interleaved in every repetition, so the machine's load falls on both alike)."""
    from accelbench.backends import openai_api
    from accelbench.scenarios.serve.load import run_level
    from accelbench.scenarios.serve.workloads import Request

    requests = [Request(prompt=f"prompt {i} " * 4, prompt_tokens=16, output_len=None) for i in range(64)]
    per_pool, out = openai_api.POOL_CONNECTIONS, []
    try:
        for rep in range(reps):
            for pool in (per_pool, 10**6):  # 10**6: one pool for every connection
                for concurrency in (8, 64):
                    openai_api.POOL_CONNECTIONS = pool
                    engine = openai_api.OpenAICompatible(url, MODEL)
                    engine.probe(5.0)
                    n = requests_per_level
                    cpu0, load = time.process_time(), os.getloadavg()[0]
                    level = run_level(engine, requests * (n // len(requests)), concurrency=concurrency)
                    cpu_s = time.process_time() - cpu0
                    out.append(
                        {
                            "rep": rep,
                            "connections_per_pool": pool if pool == per_pool else "one pool",
                            "concurrency": concurrency,
                            "requests": len(level.results),
                            "failed": sum(not r.ok for r in level.results),
                            "client_cpu_ms_per_request": 1e3 * cpu_s / len(level.results),
                            "request_rate_per_s": len(level.results) / level.wall_s,
                            "load_average_before": load,
                        }
                    )
                    print(json.dumps(out[-1]), flush=True)
    finally:
        openai_api.POOL_CONNECTIONS = per_pool
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", nargs="?", default="sweep", choices=("sweep", "target"))
    ap.add_argument("--out", type=Path)
    ap.add_argument("--rates", default="50,100,200,500,1000,1500,2000")
    ap.add_argument("--duration-s", type=float, default=3.0)
    ap.add_argument("--chunks", type=int, default=8)
    ap.add_argument("--port", type=int)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-concurrency", default="none,64", help="sweeps, each its in-flight limit (none: no limit)")
    ap.add_argument("--pool-reps", type=int, default=3, help="repetitions of the pool comparison (0: none)")
    args = ap.parse_args(argv)
    if args.mode == "target":
        return run_target(args.port, args.chunks)
    limits = [None if v.strip() == "none" else int(v) for v in args.max_concurrency.split(",")]
    proc, url = start_target(args.chunks)
    try:
        levels = []
        for limit in limits:
            for rate in (float(r) for r in args.rates.split(",")):
                levels.append(measure(url, rate, args.duration_s, args.seed, proc.pid, limit))
                print(json.dumps(levels[-1]), flush=True)
        pools = pools_ab(url, args.pool_reps) if args.pool_reps else []
    finally:
        proc.kill()
        proc.wait()
    out = {
        "script": "benchmarks/serve_client_capacity.py",
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "settings": {"duration_s": args.duration_s, "chunks": args.chunks, "arrival": "poisson", "seed": args.seed},
        "machine": machine(),
        "levels": levels,
        "pools": pools,
    }
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
