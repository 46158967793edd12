"""Confidence intervals over repeated timed windows (numpy and scipy; pure, tested with exact numbers).

Per-batch samples inside one timed window are autocorrelated (clocks, caches, the allocator and the host
drift together), so the *window* is the statistical unit: ``--repeats N`` times N windows per case.

- :func:`window_bootstrap`: the BCa bootstrap over windows (``scipy.stats.bootstrap(method="BCa")``;
  Efron & Tibshirani 1993, *An Introduction to the Bootstrap*, ch. 14.3: resample the N windows with
  replacement, recompute the statistic, and read the replicates' quantiles shifted for their bias and
  skew, the acceleration from the jackknife). Each window is resampled whole, so the dependence inside it
  is kept (the cluster bootstrap: Davison & Hinkley 1997, *Bootstrap Methods and their Application*,
  s. 3.8). The plain percentile interval is too narrow with few windows (E&T s. 13.3); BCa corrects it to
  second order. It needs N >= 2 and reads best from N >= 5.
- :func:`quantile_ci`: the distribution-free interval of a quantile from two order statistics
  (``scipy.stats.quantile_test(...).confidence_interval``; Le Boudec 2010, *Performance Evaluation of
  Computer and Communication Systems*, s. 2.2.1, Theorem 2.1: P(X_(j) <= q_p <= X_(k)) = B(k-1; n, p) -
  B(j-1; n, p), B the binomial CDF), with equal tails of at most alpha/2 each. Used for p99 over every
  timed batch: it assumes independent batches, which the windows do not guarantee, so it is the narrower
  of the two kinds.
- :func:`hierarchical_replicates`: the two-level bootstrap (windows, then batches within each chosen
  window; Davison & Hinkley s. 3.8 "strategy 1"; Saravanan et al. 2020, "Application of the hierarchical
  bootstrap to multi-level data in neuroscience", NBDT 3) behind ``accelbench compare``.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from math import comb

import numpy as np

LEVEL = 0.95
N_BOOT = 2000
SEED = 0
_CHUNK_CELLS = 4_000_000  # resampled batch latencies held at once (32 MB of float64)


@dataclass(frozen=True, kw_only=True, slots=True)
class Windows:
    """The timed windows of one case.

    Attributes:
        wall_s: wall time of each window (s), shape ``(W,)``.
        samples: samples processed in each window, shape ``(W,)``.
        latency_ms: per-batch latency (ms) of each window, ``W`` arrays (equal lengths in every accelbench
            measurement: each window runs the same number of steps).
    """

    wall_s: np.ndarray
    samples: np.ndarray
    latency_ms: tuple[np.ndarray, ...]

    @classmethod
    def split(cls, wall_s: Sequence[float], samples: Sequence[float], latency_ms: Sequence[float]) -> Windows:
        """Windows from the stored series: per-window walls and samples, and every batch latency in window
        order (cut into ``len(wall_s)`` equal parts).

        Raises:
            ValueError: no window, or latencies that do not divide into the windows.
        """
        w = len(wall_s)
        if w == 0 or len(samples) != w or len(latency_ms) % w or not latency_ms:
            raise ValueError(f"{len(latency_ms)} latencies do not split into {w} windows")
        lat = np.asarray(latency_ms, dtype=float).reshape(w, -1)
        return cls(
            wall_s=np.asarray(wall_s, dtype=float), samples=np.asarray(samples, dtype=float), latency_ms=tuple(lat)
        )

    @property
    def n(self) -> int:
        return len(self.wall_s)

    def throughput(self) -> float:
        """Samples per second over all windows: sum(samples) / sum(wall_s)."""
        return float(self.samples.sum() / self.wall_s.sum())

    def window_throughputs(self) -> np.ndarray:
        return self.samples / self.wall_s

    def window_quantiles(self, q: float) -> np.ndarray:
        """The ``q`` quantile (0..1, NumPy ``linear``) of each window's latencies (ms)."""
        return np.array([np.quantile(x, q) for x in self.latency_ms])


def _pct(reps: np.ndarray, level: float) -> tuple[float, float]:
    a = (1 - level) / 2
    lo, hi = np.quantile(reps, [a, 1 - a])
    return float(lo), float(hi)


def window_bootstrap(
    win: Windows, *, n_boot: int = N_BOOT, level: float = LEVEL, seed: int = SEED
) -> dict[str, tuple[float, float]] | None:
    """BCa bootstrap intervals over whole windows (``scipy.stats.bootstrap``, ``method="BCa"``; module docstring).

    Statistics, recomputed on each resample of the windows: throughput = sum(samples) / sum(wall_s)
    (samples/s) and the median of the pooled batch latencies (ms).

    Returns:
        ``{"throughput": (low, high), "latency_p50": (low, high)}``, or None with fewer than 2 windows.
    """
    if win.n < 2:
        return None
    lat = np.stack(win.latency_ms)  # (W, K)

    def throughput(idx: np.ndarray, axis: int = -1) -> np.ndarray:
        return win.samples[idx].sum(axis=-1) / win.wall_s[idx].sum(axis=-1)

    def median(idx: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.median(lat[idx].reshape(*idx.shape[:-1], -1), axis=-1)

    batch = max(1, _CHUNK_CELLS // lat.size)
    return {
        name: _bca(stat, win.n, n_boot=n_boot, level=level, seed=seed, batch=batch)
        for name, stat in (("throughput", throughput), ("latency_p50", median))
    }


def _bca(statistic, n: int, *, n_boot: int, level: float, seed: int, batch: int) -> tuple[float, float]:
    """The BCa interval of ``statistic`` over resamples of the indices ``0..n-1`` (scipy resamples the
    indices, so a statistic of whole windows keeps each window's batches together)."""
    from scipy.stats import DegenerateDataWarning, bootstrap

    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore", DegenerateDataWarning)  # a 0/0 acceleration: handled below
        res = bootstrap(
            (np.arange(n),),
            statistic,
            n_resamples=n_boot,
            batch=batch,
            vectorized=True,
            confidence_level=level,
            method="BCa",
            rng=seed,
        )
    lo, hi = res.confidence_interval
    if np.isnan(lo) or np.isnan(hi):  # every replicate equal (BCa's acceleration is 0/0): the point itself
        return _pct(res.bootstrap_distribution, level)
    return float(lo), float(hi)


def quantile_ci_indices(n: int, p: float, level: float = LEVEL) -> tuple[int, int, float] | None:
    """The order statistics (1-based ``j <= k``) of :func:`quantile_ci` for ``n`` samples, and the
    interval's exact coverage B(k-1; n, p) - B(j-1; n, p) (Le Boudec Theorem 2.1).

    ``j`` is the largest index with B(j-1; n, p) <= alpha/2 and ``k`` the smallest with
    B(k-1; n, p) >= 1 - alpha/2, so each tail holds at most alpha/2 (found as the interval of the values
    1..n).

    Returns:
        ``(j, k, coverage)``, or None when ``n`` is too small (no such j >= 1 or k <= n: e.g. a 95 % interval
        of p99 needs n >= 368).
    """
    from scipy.stats import binom

    found = quantile_ci(np.arange(1, n + 1), p, level)
    if found is None:
        return None
    j, k = int(found[0]), int(found[1])
    return j, k, float(binom.cdf(k - 1, n, p) - binom.cdf(j - 1, n, p))


def min_samples_for_quantile_ci(p: float, level: float = LEVEL) -> int:
    """The smallest n for which :func:`quantile_ci_indices` has an interval (p^n <= alpha/2 and
    (1-p)^n <= alpha/2)."""
    a = (1 - level) / 2
    n = 1
    while p**n > a or (1 - p) ** n > a:
        n += 1
    return n


def quantile_ci(values: Sequence[float] | np.ndarray, p: float, level: float = LEVEL) -> tuple[float, float] | None:
    """The distribution-free interval ``(X_(j), X_(k))`` of the ``p`` quantile of ``values``
    (``scipy.stats.quantile_test(...).confidence_interval``, two-sided; module docstring), or None when
    there are too few values for either bound (:func:`min_samples_for_quantile_ci`)."""
    from scipy.stats import quantile_test

    if len(values) == 0:
        return None
    low, high = quantile_test(np.asarray(values, dtype=float), p=p).confidence_interval(level)
    if np.isnan(low) or np.isnan(high):
        return None
    return float(low), float(high)


def min_attainable_p(n_a: int, n_b: int) -> float:
    """The smallest two-sided p-value an exact Mann-Whitney U test can give with ``n_a`` and ``n_b``
    samples: every sample of one side below every sample of the other, 2 / C(n_a + n_b, n_a) (capped at 1)."""
    if n_a < 1 or n_b < 1:
        return 1.0
    return min(1.0, 2 / comb(n_a + n_b, n_a))


def mann_whitney_p(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    """Two-sided Mann-Whitney U p-value (``scipy.stats.mannwhitneyu``, exact where scipy can be)."""
    from scipy.stats import mannwhitneyu

    return float(mannwhitneyu(a, b, alternative="two-sided").pvalue)


def hierarchical_replicates(win: Windows, *, n_boot: int = N_BOOT, seed: int = SEED) -> dict[str, np.ndarray]:
    """Two-level bootstrap replicates of one case (module docstring): windows resampled with replacement,
    then the batches inside each chosen window. With one window only the batches are resampled.

    Per replicate: throughput = sum(samples) / sum(wall*), where a chosen window's wall time is scaled by
    the mean of its resampled latencies over the mean of its measured ones (the wall clock holds what the
    per-batch timer misses, e.g. gaps between batches; the batches carry the variation); latency p50 and
    p99 of the pooled resampled batches.

    Returns:
        ``{"throughput": (n_boot,), "latency_p50": (n_boot,), "latency_p99": (n_boot,)}``.
    """
    rng = np.random.default_rng(seed)
    lat = np.stack(win.latency_ms)  # (W, K)
    w, k = lat.shape
    means = lat.mean(axis=1)
    out = {name: np.empty(n_boot) for name in ("throughput", "latency_p50", "latency_p99")}
    step = max(1, _CHUNK_CELLS // (w * k))
    for s in range(0, n_boot, step):
        b = min(step, n_boot - s)
        wi = rng.integers(0, w, size=(b, w)) if w > 1 else np.zeros((b, 1), dtype=int)
        bi = rng.integers(0, k, size=(b, w, k))
        res = lat[wi[..., None], bi]  # (b, W, K)
        wall = win.wall_s[wi] * res.mean(axis=2) / means[wi]
        out["throughput"][s : s + b] = win.samples[wi].sum(axis=1) / wall.sum(axis=1)
        flat = res.reshape(b, -1)
        out["latency_p50"][s : s + b] = np.median(flat, axis=1)
        out["latency_p99"][s : s + b] = np.quantile(flat, 0.99, axis=1)
    return out


def percentile_interval(reps: np.ndarray, level: float = LEVEL) -> tuple[float, float]:
    """The percentile interval of bootstrap replicates (E&T ch. 13.3)."""
    return _pct(np.asarray(reps, dtype=float), level)


def window_columns(
    windows: Sequence[tuple[Sequence[float], float]], batch_size: int, prefix: str = "latency", level: float = LEVEL
) -> tuple[dict[str, object], dict[str, list[float]]]:
    """The per-case interval columns and per-window series of ``--repeats N`` (N >= 2; one window: nothing).

    Args:
        windows: ``(per-batch latencies in ms, wall_s)`` of each timed window.
        batch_size: samples per batch (this process's).
        prefix: the latency columns' prefix (``latency``; ``step_time`` for training).
    Returns:
        ``(columns, series)``. Columns: ``windows``, ``window_batches``, ``throughput_ci95_{low,high}_samples_per_s``
        and ``<prefix>_p50_ci95_{low,high}_ms`` (bootstrap over windows), ``<prefix>_p99_ci95_{low,high}_ms``
        (order statistics over every batch; None with too few batches, ``ci95_note`` says how many it needs).
        Series: ``window_wall_s``, ``window_samples``, ``window_throughput_samples_per_s``, ``window_<prefix>_p50_ms``.
    """
    if len(windows) < 2:
        return {}, {}
    lat = [list(w[0]) for w in windows]
    win = Windows(
        wall_s=np.array([w[1] for w in windows], dtype=float),
        samples=np.array([len(x) * batch_size for x in lat], dtype=float),
        latency_ms=tuple(np.asarray(x, dtype=float) for x in lat),
    )
    boot = window_bootstrap(win, level=level)
    assert boot is not None  # two windows or more
    pooled = [v for x in lat for v in x]
    p99 = quantile_ci(pooled, 0.99, level)
    cols: dict[str, object] = {
        "windows": win.n,
        "window_batches": len(lat[0]),
        "throughput_ci95_low_samples_per_s": boot["throughput"][0],
        "throughput_ci95_high_samples_per_s": boot["throughput"][1],
        f"{prefix}_p50_ci95_low_ms": boot["latency_p50"][0],
        f"{prefix}_p50_ci95_high_ms": boot["latency_p50"][1],
        f"{prefix}_p99_ci95_low_ms": p99[0] if p99 else None,
        f"{prefix}_p99_ci95_high_ms": p99[1] if p99 else None,
    }
    if p99 is None:
        cols["ci95_note"] = (
            f"p99 interval needs >= {min_samples_for_quantile_ci(0.99, level)} timed batches (have {len(pooled)})"
        )
    series = {
        "window_wall_s": win.wall_s.tolist(),
        "window_samples": win.samples.tolist(),
        "window_throughput_samples_per_s": win.window_throughputs().tolist(),
        f"window_{prefix}_p50_ms": win.window_quantiles(0.5).tolist(),
    }
    return cols, series
