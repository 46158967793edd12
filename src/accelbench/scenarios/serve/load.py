"""One load level against a server: requests sent closed-loop (N always in flight) or open-loop (arrivals on an
absolute schedule), each streamed and stamped, and the client measuring itself.

Definitions (the columns of :mod:`accelbench.scenarios.serve.metrics` are computed from these stamps):

- Times are seconds from the level's start (``time.perf_counter()``), taken as each chunk is read.
- ``scheduled_s``: when the request was due: its arrival time (open loop; vLLM's ``benchmark_serving`` stamps
  before the POST too, so time queued in the client counts in TTFT and E2E), or the moment a closed-loop worker
  took it (closed loop).
- ``sent_s``: when the POST started (after a ``max_concurrency`` slot freed).
- ``first_token_s``: the first chunk that carries output (:attr:`accelbench.backends.engine.StreamEvent.output`:
  a choice with text, even empty). ``end_s``: the last chunk.
- ``token_times_s``: one time per output token: a chunk of k tokens spreads the gap since the previous chunk evenly
  over its k tokens (MLPerf Inference's per-token accounting); tokens of the first chunk all arrive at
  ``first_token_s`` (the time before them is the prefill, not inter-token time).
- Output tokens: ``usage.completion_tokens`` when the server sends it, else the tokenizer's count of the streamed
  text (both kept: :mod:`~accelbench.scenarios.serve.metrics` counts a disagreement).
- Send slip: when the dispatcher woke for an arrival minus when it was due (open loop). Event-loop lag: how late a
  10 ms ticker's sleeps end. Client CPU: the process's CPU seconds over the level's wall seconds (100 = one core).

Open-loop arrivals are :func:`send_times`, absolute times from the level's start: the dispatcher sleeps until each
one, never for a relative gap (relative sleeps drift: vLLM's reached 183.5 of 200 requested requests/s).
"""

from __future__ import annotations

import asyncio
import gc
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from accelbench.backends.openai_api import RequestError
from accelbench.core.errors import ConfigError
from accelbench.scenarios.serve.loads import ARRIVALS, Load, send_times  # noqa: F401  (the load of a level)

TICK_S = 0.010  # the event-loop ticker's period


@dataclass
class RequestResult:
    """One request's stamps (seconds from the level's start; see the module docstring) and counts.

    Attributes:
        error: None when ``ok``; else a short reason (``http 422``, ``timeout``, ``connection``, ``malformed sse``,
            ``server error``, ``no output``, ``client error``: anything else the stream raised) counted by reason.
        detail: the server's words for the error, when it gave any.
        output_len: the output length the request asked for (None: not fixed).
    """

    index: int
    scheduled_s: float
    sent_s: float | None = None
    first_token_s: float | None = None
    token_times_s: list[float] = field(default_factory=list)
    end_s: float | None = None
    output_tokens: int = 0
    usage_tokens: int | None = None
    tokenizer_tokens: int | None = None
    prompt_tokens: int = 0
    ok: bool = False
    error: str | None = None
    detail: str | None = None
    output_len: int | None = None


@dataclass
class LevelResult:
    """One level: its measured requests (warm-up requests ran before the level's start and are not among them).

    Attributes:
        warmup: warm-up requests run before the level (excluded from every figure).
        wall_s: the level's start to its last request's end.
        started_at: ``time.time()`` at the level's start (aligns GPU telemetry with the stamps).
        loop_lag_p99_ms, send_slip_p50_ms, send_slip_p99_ms: the client's own delays (None when not measured:
            no open-loop sends, no tick).
        client_cpu_percent: the client process's CPU over the level (100 = one core busy).
    """

    results: list[RequestResult]
    warmup: int
    wall_s: float
    started_at: float
    loop_lag_p99_ms: float | None = None
    send_slip_p50_ms: float | None = None
    send_slip_p99_ms: float | None = None
    client_cpu_percent: float | None = None


def chunk_tokens(total: int, chunks: int, hints: list[int] | None = None) -> list[int]:
    """Output tokens each of ``chunks`` text chunks carries, summing to ``total``: ``hints`` (the server's or the
    tokenizer's per-chunk counts) when they sum to ``total``, else ``total`` spread evenly (the first chunks get the
    remainder; with fewer tokens than chunks, token ``j`` goes to chunk ``floor(j * chunks / total)``)."""
    if chunks <= 0 or total <= 0:
        return [0] * max(chunks, 0)
    if hints is not None and len(hints) == chunks and sum(hints) == total and min(hints) >= 0:
        return list(hints)
    out = [0] * chunks
    if total >= chunks:
        base, extra = divmod(total, chunks)
        return [base + (i < extra) for i in range(chunks)]
    for j in range(total):
        out[j * chunks // total] += 1
    return out


def token_times(chunk_times: list[float], counts: list[int]) -> list[float]:
    """One time a token: chunk ``i`` (arriving at ``chunk_times[i]``) with ``k`` tokens spreads the gap since the
    previous chunk evenly over them (``prev + gap * j / k``, ``j = 1..k``); the first chunk's tokens all arrive at
    its time."""
    out: list[float] = []
    for i, (t, k) in enumerate(zip(chunk_times, counts, strict=True)):
        if i == 0 or k <= 1:
            out += [t] * k
            continue
        prev = chunk_times[i - 1]
        out += [prev + (t - prev) * j / k for j in range(1, k + 1)]
    return out


@dataclass
class _Stream:
    """What one request's stream left, turned into its :class:`RequestResult` after the level (the tokenizer runs
    outside the measured window)."""

    times: list[float] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    tokens: list[int | None] = field(default_factory=list)
    usage: dict[str, Any] | None = None


def finish(res: RequestResult, st: _Stream, tokenizer: Any = None) -> RequestResult:
    """Fill ``res``'s counts and token times from its stream ``st`` (see the module docstring)."""
    if st.usage is not None and isinstance(st.usage.get("completion_tokens"), int):
        res.usage_tokens = st.usage["completion_tokens"]
    if tokenizer is not None:
        res.tokenizer_tokens = len(tokenizer.encode("".join(st.texts), add_special_tokens=False))
    res.output_tokens = next((c for c in (res.usage_tokens, res.tokenizer_tokens) if c is not None), len(st.texts))
    hints: list[int] | None = None
    if st.tokens and all(k is not None for k in st.tokens):
        hints = [int(k) for k in st.tokens]  # type: ignore[arg-type]
    elif tokenizer is not None:
        hints = [len(tokenizer.encode(t, add_special_tokens=False)) for t in st.texts]
    res.token_times_s = token_times(st.times, chunk_tokens(res.output_tokens, len(st.times), hints))
    if res.ok and not st.times:
        res.ok, res.error = False, "no output"
    return res


def _pct_ms(values: list[float], q: float) -> float | None:
    return float(np.percentile(values, q)) * 1e3 if values else None


class _Level:
    """The asyncio side of :func:`run_level` (one instance a level)."""

    def __init__(self, engine: Any, bodies: list[dict], requests: list[Any], timeout_s: float):
        self.engine, self.bodies, self.requests, self.timeout_s = engine, bodies, requests, timeout_s
        self.t0 = time.perf_counter()
        self.results: list[RequestResult] = []
        self.streams: list[_Stream] = []
        self.slips: list[float] = []
        self.lags: list[float] = []

    def now(self) -> float:
        return time.perf_counter() - self.t0

    def restart(self) -> None:
        self.t0 = time.perf_counter()
        self.results, self.streams, self.slips, self.lags = [], [], [], []

    async def one(self, i: int, scheduled_s: float) -> None:
        req = self.requests[i % len(self.requests)]
        res = RequestResult(
            index=i, scheduled_s=scheduled_s, prompt_tokens=req.prompt_tokens, output_len=req.output_len
        )
        st = _Stream()
        self.results.append(res)
        self.streams.append(st)
        res.sent_s = self.now()
        await self._consume(self.bodies[i % len(self.bodies)], res, st)

    async def _consume(self, body: dict, res: RequestResult, st: _Stream) -> None:
        try:
            async with asyncio.timeout(self.timeout_s):
                async for ev in self.engine.stream(body):
                    t = self.now()
                    if ev.output:
                        st.times.append(t)
                        st.texts.append(ev.text)
                        st.tokens.append(ev.tokens)
                        if res.first_token_s is None:
                            res.first_token_s = t
                    if ev.usage is not None:
                        st.usage = ev.usage
                    res.end_s = t
            res.ok = True
        except TimeoutError:
            res.error = "timeout"
        except RequestError as exc:
            res.error, res.detail = exc.reason, exc.detail
        except Exception as exc:  # one request's failure is its own error; the level goes on
            res.error, res.detail = "client error", f"{type(exc).__name__}: {exc}"[:300]
        if res.end_s is None or not res.ok:
            res.end_s = self.now()

    async def ticker(self, stop: asyncio.Event) -> None:
        due = self.now() + TICK_S
        while not stop.is_set():
            await asyncio.sleep(max(0.0, due - self.now()))
            self.lags.append(max(0.0, self.now() - due))
            due = max(due + TICK_S, self.now())

    async def closed(self, n: int, concurrency: int, duration_s: float | None) -> None:
        counter = iter(range(n if duration_s is None else 1 << 62))

        async def worker() -> None:
            for i in counter:
                if duration_s is not None and self.now() >= duration_s:
                    return
                await self.one(i, self.now())

        async with asyncio.TaskGroup() as tg:
            for _ in range(concurrency):
                tg.create_task(worker())

    async def open(self, times: list[float], max_concurrency: int | None) -> None:
        """Each arrival a task when nothing limits the requests in flight; else ``max_concurrency`` workers take the
        arrivals from a FIFO queue (thousands of tasks waiting on one ``asyncio.Semaphore`` cost O(waiters) an
        acquire in Python 3.11: the client's own queue would slow it)."""
        queue: asyncio.Queue = asyncio.Queue()

        async def worker() -> None:
            while (item := await queue.get()) is not None:
                await self.one(*item)

        async with asyncio.TaskGroup() as tg:
            for _ in range(max_concurrency or 0):
                tg.create_task(worker())
            for i, due in enumerate(times):
                wait = due - self.now()
                if wait > 0:
                    await asyncio.sleep(wait)
                self.slips.append(max(0.0, self.now() - due))
                if max_concurrency:
                    queue.put_nowait((i, due))
                else:
                    tg.create_task(self.one(i, due))
            for _ in range(max_concurrency or 0):
                queue.put_nowait(None)


async def _drive(level: _Level, warmup: int, limit: int | None, start_load) -> tuple[float, float, float]:
    """Warm-up, then the measured level through one connection pool; ``(started_at, wall_s, cpu_s)``."""
    async with level.engine.connections(limit, level.timeout_s):
        if warmup:
            await level.closed(warmup, min(warmup, limit or warmup), None)
        level.restart()
        started_at, cpu0 = time.time(), time.process_time()
        stop = asyncio.Event()
        tick = asyncio.create_task(level.ticker(stop))
        try:
            await start_load()
        finally:
            stop.set()
            tick.cancel()
        return started_at, level.now(), time.process_time() - cpu0


def run_level(
    engine: Any,
    requests: list[Any],
    load: Load | None = None,
    *,
    warmup: int = 0,
    duration_s: float | None = None,
    timeout_s: float = 600.0,
    seed: int = 0,
    tokenizer: Any = None,
    concurrency: int | None = None,
    request_rate: float | None = None,
) -> LevelResult:
    """Run one load level against ``engine`` (an :class:`~accelbench.backends.openai_api.OpenAICompatible`, probed)
    and return its stamps (module docstring). Synchronous: it runs its own asyncio loop (call it from no running
    loop). Ctrl-C or a cancellation cancels the requests in flight and re-raises.

    Args:
        requests: :class:`~accelbench.scenarios.serve.workloads.Request` s, sent in order (cycled when the level
            lasts ``duration_s``); warm-up requests reuse the first ones.
        load: the :class:`Load`: closed loop (requests always in flight) or open loop (arrivals at a rate,
            :func:`send_times`; later arrivals than its cap allows queue in the client, and that time counts).
        warmup: requests run before the level's start, closed-loop at the load's limit of requests in flight,
            excluded.
        duration_s: the level sends for this long (closed loop: workers start no request after it; open loop:
            arrivals before it) instead of sending each request once.
        timeout_s: one request's limit (its error is ``timeout``).
        tokenizer: counts output tokens when the server sends no ``usage``, and checks it when it does.
        concurrency, request_rate: instead of ``load``, :meth:`Load.closed` or a Poisson :meth:`Load.open` of no cap.

    Raises:
        ConfigError: no requests, both or neither of a closed and an open load, a bad value.
    """
    if not requests:
        raise ConfigError("requests", 0, "at least one request")
    if load is None:
        load = Load(concurrency=concurrency, rate_per_s=request_rate)
    elif concurrency is not None or request_rate is not None:
        raise ConfigError("load", (concurrency, request_rate), "a Load, or a concurrency or a request rate, not both")
    if duration_s is not None and not duration_s > 0:
        raise ConfigError("duration", duration_s, "seconds > 0")
    load.check_duration(duration_s)
    bodies = [engine.body(r.prompt, r.output_len) for r in requests]
    level = _Level(engine, bodies, requests, timeout_s)
    start_load = load.sender(level, len(requests), seed, duration_s)
    # the cyclic garbage an earlier level left (httpx's and asyncio's objects, a few dozen a request) is collected
    # now, not by a pause of the event loop among this level's requests (timeit keeps the collector out of its timings)
    gc.collect()
    started_at, wall_s, cpu_s = asyncio.run(_drive(level, warmup, load.limit, start_load))
    results = sorted(
        (finish(r, s, tokenizer) for r, s in zip(level.results, level.streams, strict=True)), key=lambda r: r.index
    )
    return LevelResult(
        results=results,
        warmup=warmup,
        wall_s=wall_s,
        started_at=started_at,
        loop_lag_p99_ms=_pct_ms(level.lags, 99),
        send_slip_p50_ms=_pct_ms(level.slips, 50),
        send_slip_p99_ms=_pct_ms(level.slips, 99),
        client_cpu_percent=100.0 * cpu_s / wall_s if wall_s > 0 else None,
    )
