"""A load level's columns: latency percentiles, throughput, goodput under an SLO, and the client's own validity.

Definitions (stamps of :mod:`accelbench.scenarios.serve.load`, per request, in ms):

- TTFT = ``first_token_s - scheduled_s`` (from before the send, so client queueing counts: vLLM's
  ``benchmark_serving``).
- E2E latency = ``end_s - scheduled_s``.
- TPOT = ``(E2E - TTFT) / (output_tokens - 1)`` (MLPerf Inference's and vLLM's); none for a one-token output.
- ITL: gaps between consecutive ``token_times_s`` (a chunk of k tokens already spread over k tokens), pooled over
  the requests.
- Each as mean, p50, p90 and p99 over the successful requests (``numpy.percentile``'s linear method, as
  :mod:`accelbench.core.stats`).
- Throughput: successful requests, their output tokens and their prompt tokens over the measured window (the
  first scheduled send to the last request's end).
- Goodput (DistServe, Zhong et al., OSDI 2024): successful requests a second whose own TTFT and TPOT are within the
  SLO. ``slo_met_fraction``: those over all requests (a failed request misses).
- ``output_tokens_mismatch``: requests whose usage and tokenizer counts differ, or whose output tokens differ from a
  fixed requested length.
- ``client_limited``: the client's p99 send slip or p99 event-loop lag is over :data:`CLIENT_LIMIT_MS`: its own
  delay, not the server's, shaped the latencies.

SLO presets (MLPerf Inference v5.0, Llama-3.1-8B, "Server" and "Interactive" scenarios): p99 TTFT <= 2000 ms and
TPOT <= 100 ms; p99 TTFT <= 500 ms and TPOT <= 30 ms.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from accelbench.core.errors import ConfigError

# Over 10 ms of the client's own p99 delay (0.5 % of mlperf-server's TTFT limit, 2 % of mlperf-interactive's) is
# visible in a TTFT p99; beyond it the client, not the server, is what a level measured.
CLIENT_LIMIT_MS = 10.0
STATS = ("mean", "p50", "p90", "p99")
PERCENTILES = (50.0, 90.0, 99.0)  # the percentiles the columns carry, so the ones an SLO may use


@dataclass(frozen=True, kw_only=False, slots=True)
class Slo:
    """A service-level objective: the ``percentile`` of TTFT and of TPOT within limits (None: no limit)."""

    ttft_ms: float | None
    tpot_ms: float | None
    percentile: float = 99.0


PRESETS = {
    "mlperf-server": Slo(ttft_ms=2000.0, tpot_ms=100.0),
    "mlperf-interactive": Slo(ttft_ms=500.0, tpot_ms=30.0),
}
_SLO_FORMAT = f"a preset ({', '.join(PRESETS)}) or ttft_ms=N,tpot_ms=N[,percentile=50|90|99]"


def parse_slo(text: str) -> Slo:
    """``mlperf-server``, ``mlperf-interactive``, or ``key=value`` pairs among ``ttft_ms``, ``tpot_ms`` (> 0) and
    ``percentile`` (50, 90 or 99; default 99), at least one limit.

    Raises:
        ConfigError: anything else (one line naming the text and the accepted forms).
    """
    name = text.strip()
    if name in PRESETS:
        return PRESETS[name]
    values: dict[str, float] = {}
    try:
        for part in name.split(","):
            key, sep, value = (s.strip() for s in part.partition("="))
            if not sep or key not in ("ttft_ms", "tpot_ms", "percentile") or key in values:
                raise ValueError(part)
            values[key] = float(value)
    except ValueError:
        raise ConfigError("slo", text, _SLO_FORMAT) from None
    slo = Slo(values.get("ttft_ms"), values.get("tpot_ms"), values.get("percentile", 99.0))
    limits = [v for v in (slo.ttft_ms, slo.tpot_ms) if v is not None]
    if not limits or min(limits) <= 0 or slo.percentile not in PERCENTILES:
        raise ConfigError("slo", text, _SLO_FORMAT)
    return slo


def _stat_name(q: float) -> str:
    return f"p{q:g}"


def summary(prefix: str, values_ms: list[float]) -> dict[str, float | None]:
    """``<prefix>_{mean,p50,p90,p99}_ms`` of ``values_ms`` (None each when empty)."""
    if not values_ms:
        return {f"{prefix}_{s}_ms": None for s in STATS}
    xs = np.asarray(values_ms, dtype=float)
    cols = {f"{prefix}_mean_ms": float(xs.mean())}
    cols.update({f"{prefix}_{_stat_name(q)}_ms": float(v) for q, v in zip(PERCENTILES, np.percentile(xs, PERCENTILES))})
    return cols


def request_latencies(r: Any) -> tuple[float, float, float | None, list[float]]:
    """``(ttft_ms, e2e_ms, tpot_ms or None, itl_ms)`` of one successful request (module docstring)."""
    ttft = (r.first_token_s - r.scheduled_s) * 1e3
    e2e = (r.end_s - r.scheduled_s) * 1e3
    tpot = (e2e - ttft) / (r.output_tokens - 1) if r.output_tokens > 1 else None
    itl = [(b - a) * 1e3 for a, b in zip(r.token_times_s, r.token_times_s[1:], strict=False)]
    return ttft, e2e, tpot, itl


def within(slo: Slo, ttft_ms: float, tpot_ms: float | None) -> bool:
    """One request's TTFT and TPOT are within ``slo``'s limits (a one-token output has no TPOT to miss)."""
    ttft_ok = slo.ttft_ms is None or ttft_ms <= slo.ttft_ms
    return ttft_ok and (slo.tpot_ms is None or tpot_ms is None or tpot_ms <= slo.tpot_ms)


def mismatched(r: Any) -> bool:
    """The request's usage and tokenizer counts differ, or its output differs from the fixed length it asked."""
    counts = r.usage_tokens is not None and r.tokenizer_tokens is not None and r.usage_tokens != r.tokenizer_tokens
    return counts or (r.output_len is not None and r.output_tokens != r.output_len)


def _client(level: Any) -> dict[str, Any]:
    delays = [v for v in (level.send_slip_p99_ms, level.loop_lag_p99_ms) if v is not None]
    return {
        "loop_lag_p99_ms": level.loop_lag_p99_ms,
        "send_slip_p50_ms": level.send_slip_p50_ms,
        "send_slip_p99_ms": level.send_slip_p99_ms,
        "client_cpu_percent": level.client_cpu_percent,
        "client_limited": any(v > CLIENT_LIMIT_MS for v in delays),
    }


def level_columns(level: Any, slo: Slo | None) -> tuple[dict[str, Any], dict[str, list[float]]]:
    """A level's row columns and its per-request series (module docstring).

    Args:
        level: a :class:`~accelbench.scenarios.serve.load.LevelResult`.
        slo: the SLO goodput is counted under; None: ``goodput_requests_per_s`` and ``slo_met_fraction`` are None.

    Returns:
        ``(columns, series)``; series ``ttft_ms``, ``tpot_ms``, ``e2e_latency_ms`` (one a successful request;
        ``tpot_ms`` skips one-token outputs), ``itl_ms`` (one a token gap), and the windows of
        :func:`request_windows` where the level has them (``windows`` is then their count).
    """
    rs = level.results
    good = [r for r in rs if r.ok]
    lat = [request_latencies(r) for r in good]
    series = {
        "ttft_ms": [t for t, _, _, _ in lat],
        "tpot_ms": [p for _, _, p, _ in lat if p is not None],
        "itl_ms": [g for *_, itl in lat for g in itl],
        "e2e_latency_ms": [e for _, e, _, _ in lat],
    }
    ends = [r.end_s for r in rs if r.end_s is not None]
    window = max(ends) - min(r.scheduled_s for r in rs) if ends else 0.0
    per_s = (lambda x: x / window) if window > 0 else (lambda x: None)
    met = sum(within(slo, t, p) for t, _, p, _ in lat) if slo is not None else None
    cols: dict[str, Any] = {
        "requests": len(rs),
        "requests_ok": len(good),
        "requests_failed": len(rs) - len(good),
        "errors_json": json.dumps(dict(sorted(Counter(r.error for r in rs if not r.ok).items()))),
    }
    for prefix, key in (("ttft", "ttft_ms"), ("tpot", "tpot_ms"), ("itl", "itl_ms"), ("e2e_latency", "e2e_latency_ms")):
        cols.update(summary(prefix, series[key]))
    cols.update(
        request_throughput_per_s=per_s(len(good)),
        output_tokens_per_s=per_s(sum(r.output_tokens for r in good)),
        input_tokens_per_s=per_s(sum(r.prompt_tokens for r in good)),
        goodput_requests_per_s=None if met is None else per_s(met),
        slo_met_fraction=None if met is None or not rs else met / len(rs),
        output_tokens_mismatch=sum(mismatched(r) for r in good),
        **_client(level),
        measured_wall_s=window,
        output_tokens_timed=sum(len(r.token_times_s) for r in good),
    )
    windows = request_windows(good, min(r.scheduled_s for r in rs)) if rs else None
    if windows is not None:
        series.update(windows)
        cols["windows"] = WINDOWS
    return cols, series


WINDOWS = 5  # batch means: the windows a level's requests are cut into for compare's confidence intervals


def request_windows(good: list, start_s: float, k: int = WINDOWS) -> dict[str, list[float]] | None:
    """A level's successful requests as ``k`` windows for ``accelbench compare`` (the batch-means method of
    steady-state output analysis: Law, "Simulation Modeling and Analysis", 5th ed., section 9.5.3): the requests in
    completion order cut into ``k`` consecutive groups of equal count (the last ``len % k`` dropped); a window's wall
    runs from the previous group's last completion (the first from ``start_s``, the level's first scheduled send) to
    its own, its samples are its requests' output tokens, its latencies their TPOTs.

    Returns:
        Series ``window_wall_s``, ``window_samples`` (``k`` each) and ``window_tpot_ms`` (``k x group``, window
        order), or None: fewer than two requests a window, a one-token output (no TPOT), or a window of no wall.
    """
    done = sorted(good, key=lambda r: r.end_s)
    size = len(done) // k
    if size < 2:
        return None
    walls, samples, tpots, prev = [], [], [], start_s
    for i in range(k):
        group = done[i * size : (i + 1) * size]
        walls.append(group[-1].end_s - prev)
        prev = group[-1].end_s
        samples.append(float(sum(len(r.token_times_s) for r in group)))
        tpots += [request_latencies(r)[2] for r in group]
    if min(walls) <= 0 or any(t is None for t in tpots):
        return None
    return {"window_wall_s": walls, "window_samples": samples, "window_tpot_ms": tpots}


def meets(columns: dict[str, Any], slo: Slo) -> bool:
    """A level meets ``slo``: no failed request, and its ``slo.percentile`` of TTFT and of TPOT within the limits
    (the SLO search's test). A limit whose column is None (no successful request, no multi-token output) is not
    met, except TPOT when no request had more than one output token."""
    if columns.get("requests_failed") or not columns.get("requests_ok"):
        return False
    stat = _stat_name(slo.percentile)
    ttft, tpot = columns.get(f"ttft_{stat}_ms"), columns.get(f"tpot_{stat}_ms")
    if slo.ttft_ms is not None and (ttft is None or ttft > slo.ttft_ms):
        return False
    return slo.tpot_ms is None or tpot is None or tpot <= slo.tpot_ms
