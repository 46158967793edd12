"""Latency statistics (pure Python, exact and testable).

Percentiles use linear interpolation between closest ranks (NumPy's default ``linear`` method,
Hyndman & Fan 1996 definition 7). Spread is IQR / median, the robust relative spread that
``torch.utils.benchmark.Measurement`` warns on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

SPREAD_WARN = 0.05  # IQR/median above this gets a warning (the brief's 5 %)


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) of ``values`` by linear interpolation (NumPy ``linear``).

    Raises:
        ValueError: empty input or q outside 0..100.
    """
    if not values:
        raise ValueError("percentile of an empty sequence")
    if not 0 <= q <= 100:
        raise ValueError(f"q must be in 0..100, got {q}")
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


@dataclass(frozen=True, kw_only=True, slots=True)
class LatencyStats:
    """Summary of per-batch latencies, in milliseconds.

    ``spread`` is IQR / median (dimensionless); ``noisy`` is True above ``SPREAD_WARN``.
    """

    n: int
    latency_mean_ms: float
    latency_min_ms: float
    latency_p50_ms: float
    latency_p90_ms: float
    latency_p99_ms: float
    latency_max_ms: float
    latency_iqr_ms: float
    spread: float
    noisy: bool


def summarize(latencies_ms: Sequence[float]) -> LatencyStats:
    """Summarise per-batch latencies (ms). Raises ValueError on an empty sequence."""
    p25, p50, p75 = (percentile(latencies_ms, q) for q in (25, 50, 75))
    iqr = p75 - p25
    spread = iqr / p50 if p50 > 0 else math.inf
    return LatencyStats(
        n=len(latencies_ms),
        latency_mean_ms=sum(latencies_ms) / len(latencies_ms),
        latency_min_ms=min(latencies_ms),
        latency_p50_ms=p50,
        latency_p90_ms=percentile(latencies_ms, 90),
        latency_p99_ms=percentile(latencies_ms, 99),
        latency_max_ms=max(latencies_ms),
        latency_iqr_ms=iqr,
        spread=spread,
        noisy=spread > SPREAD_WARN,
    )


def stat_columns(st: LatencyStats, prefix: str = "latency") -> dict[str, float | bool]:
    """``<prefix>_{mean,min,p50,p90,p99,max}_ms``, ``<prefix>_spread`` and ``<prefix>_noisy`` of ``st``."""
    cols: dict[str, float | bool] = {
        f"{prefix}_{k}_ms": getattr(st, f"latency_{k}_ms") for k in ("mean", "min", "p50", "p90", "p99", "max")
    }
    cols.update({f"{prefix}_spread": st.spread, f"{prefix}_noisy": st.noisy})
    return cols


def topk_correct(logits, labels, ks: tuple[int, ...] = (1, 5)) -> dict[int, int]:
    """Count samples whose label is among the top-k logits, for each k (k capped at the class count).

    Args:
        logits: float tensor ``(N, C)``; labels: int64 tensor ``(N,)`` on the same device.
    Returns:
        ``{k: correct_count}``.
    """
    maxk = min(max(ks), logits.shape[1])
    top = logits.float().topk(maxk, dim=1).indices
    hits = top.eq(labels.view(-1, 1))
    return {k: int(hits[:, : min(k, maxk)].any(dim=1).sum().item()) for k in ks}
