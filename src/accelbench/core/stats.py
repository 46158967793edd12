"""Latency statistics (pure, exact and testable).

Percentiles are ``numpy.percentile``'s default ``linear`` method (linear interpolation between closest
ranks, Hyndman & Fan 1996 definition 7). Spread is IQR / median, the robust relative spread that
``torch.utils.benchmark.Measurement`` warns on.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

SPREAD_WARN = 0.05  # IQR/median above this gets a warning (the brief's 5 %)
_QUANTILES = (25, 50, 75, 90, 99)


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
    """Summarise per-batch latencies (ms); percentiles by ``numpy.percentile`` (``linear``).

    Raises:
        ValueError: an empty sequence.
    """
    if not len(latencies_ms):
        raise ValueError("no latencies to summarise")
    xs = np.asarray(latencies_ms, dtype=float)
    p25, p50, p75, p90, p99 = (float(v) for v in np.percentile(xs, _QUANTILES))
    iqr = p75 - p25
    spread = iqr / p50 if p50 > 0 else math.inf
    return LatencyStats(
        n=len(xs),
        latency_mean_ms=float(xs.mean()),
        latency_min_ms=float(xs.min()),
        latency_p50_ms=p50,
        latency_p90_ms=p90,
        latency_p99_ms=p99,
        latency_max_ms=float(xs.max()),
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


def topk_correct(logits: torch.Tensor, labels: torch.Tensor, ks: tuple[int, ...] = (1, 5)) -> dict[int, int]:
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
