"""Confidence intervals over timed windows (accelbench.core.ci): exact numbers."""

from fractions import Fraction
from math import comb

import numpy as np
import pytest

from accelbench.core import ci


def _coverage(n: int, j: int, k: int) -> float:
    """P(X_(j) <= median <= X_(k)) = sum_{i=j}^{k-1} C(n, i) / 2^n, exactly (Le Boudec Theorem 2.1 at p = 1/2)."""
    return float(Fraction(sum(comb(n, i) for i in range(j, k)), 2**n))


# The standard table of distribution-free 95 % intervals of the median (order statistics and coverage), e.g. n = 10:
# [x(2), x(9)] 97.9 %, n = 20: [x(6), x(15)] 95.9 %, n = 30: x(10) and x(21).
MEDIAN_TABLE = {
    6: (1, 6, 0.969),
    9: (2, 8, 0.961),
    10: (2, 9, 0.979),
    12: (3, 10, 0.961),
    15: (4, 12, 0.965),
    17: (5, 13, 0.951),
    20: (6, 15, 0.959),
    30: (10, 21, 0.957),
}


@pytest.mark.parametrize("n", sorted(MEDIAN_TABLE))
def test_median_interval_indices_match_the_textbook_table(n):
    j, k, cov = MEDIAN_TABLE[n]
    got = ci.quantile_ci_indices(n, 0.5)
    assert got[:2] == (j, k)
    assert got[2] == pytest.approx(_coverage(n, j, k), abs=1e-12) and round(got[2], 3) == cov


def test_five_samples_have_no_95_percent_median_interval():
    assert ci.quantile_ci_indices(5, 0.5) is None  # [x(1), x(5)] covers only 93.75 %


def test_p99_interval_needs_368_samples():
    # the upper order statistic exists once 0.99^n <= 0.025: 0.99^367 = 0.02503, 0.99^368 = 0.02478
    assert ci.min_samples_for_quantile_ci(0.99) == 368
    assert ci.quantile_ci_indices(367, 0.99) is None
    assert ci.quantile_ci_indices(368, 0.99)[:2] == (360, 368)
    j, k, cov = ci.quantile_ci_indices(1000, 0.99)
    # Le Boudec's normal approximation gives j = floor(990 - 1.96 sqrt(9.9)) = 983, k ~ 997-998
    assert (j, k) == (983, 997) and 0.95 <= cov < 0.98
    assert ci.quantile_ci(list(range(1000, 0, -1)), 0.99) == (983.0, 997.0)  # values 1..1000, unsorted


def test_quantile_interval_is_scipys_quantile_test():
    x = np.exp(np.arange(0, 1.01, 0.01))  # scipy.stats.quantile_test's documented example
    assert ci.quantile_ci(x, 0.75, 0.9) == pytest.approx((1.9542373206359396, 2.293318740264183))
    assert ci.quantile_ci([], 0.5) is None and ci.quantile_ci([1.0, 2.0], 0.5) is None


def test_window_bootstrap_two_windows_enumerated():
    # Two windows of 100 samples in 1 s and 3 s: resamples {1,1} (p 1/4) -> 100/s, {1,3} (1/2) -> 50/s, {3,3} (1/4) ->
    # 33.3/s; the 2.5 % and 97.5 % quantiles of the replicates are the two extremes.
    w = ci.Windows(
        wall_s=np.array([1.0, 3.0]),
        samples=np.array([100.0, 100.0]),
        latency_ms=(np.array([1.0, 2.0]), np.array([3.0, 4.0])),
    )
    out = ci.window_bootstrap(w)
    assert out["throughput"] == pytest.approx((100 / 3, 100.0))
    assert out["latency_p50"] == pytest.approx((1.5, 3.5))  # medians of {1,2,1,2}, {1,2,3,4}, {3,4,3,4}


def _windows(rng, w: int, k: int = 8) -> ci.Windows:
    """``w`` simulated windows of 100 samples: wall times gamma-distributed with mean 1 s (skewed, as a
    contended host makes them), latencies normal around 10 ms."""
    return ci.Windows(
        wall_s=rng.gamma(16, 1 / 16, w),
        samples=np.full(w, 100.0),
        latency_ms=tuple(rng.normal(10, 1, k) for _ in range(w)),
    )


def test_window_bootstrap_interval_contains_the_estimate_and_narrows_with_more_windows():
    rng = np.random.default_rng(8)
    mean_width = []
    for w in (4, 16, 64):
        widths = []
        for _ in range(20):
            win = _windows(rng, w)
            out = ci.window_bootstrap(win, n_boot=1000)
            lo, hi = out["throughput"]
            assert lo <= win.throughput() <= hi and lo < hi
            assert min(win.window_throughputs()) <= lo and hi <= max(win.window_throughputs())
            lo50, hi50 = out["latency_p50"]
            assert lo50 <= np.median(np.concatenate(win.latency_ms)) <= hi50
            widths.append(hi - lo)
        mean_width.append(np.mean(widths))
    assert mean_width[0] > mean_width[1] > 1.5 * mean_width[2]  # about 1/sqrt(windows): 2x per 4x
    assert ci.window_bootstrap(ci.Windows.split([1.0], [100], [1.0, 2.0])) is None
    const = ci.Windows.split([2.0, 2.0, 2.0], [50, 50, 50], [4.0] * 30)  # every replicate equal: the point
    assert ci.window_bootstrap(const) == {"throughput": (25.0, 25.0), "latency_p50": (4.0, 4.0)}


def test_window_bootstrap_covers_the_true_throughput_about_95_percent_of_the_time():
    # 100 samples per window over walls of mean 1 s: the true throughput is 100 samples/s. Nominal 95 %; any
    # bootstrap undercovers by a few points at 10 windows (E&T ch. 14), but not by much.
    rng = np.random.default_rng(11)
    sims = 300
    covered = 0
    for i in range(sims):
        lo, hi = ci.window_bootstrap(_windows(rng, 10, k=4), n_boot=1000, seed=i)["throughput"]
        covered += lo <= 100.0 <= hi
    assert 0.85 <= covered / sims <= 0.99


def test_hierarchical_replicates():
    const = ci.Windows.split([2.0, 2.0, 2.0], [50, 50, 50], [4.0] * 30)
    r = ci.hierarchical_replicates(const, n_boot=300)
    assert np.all(r["throughput"] == 25.0) and np.all(r["latency_p50"] == 4.0) and np.all(r["latency_p99"] == 4.0)
    w = ci.Windows(
        wall_s=np.array([1.0, 1.1, 0.9, 1.2, 1.0]),
        samples=np.full(5, 100.0),
        latency_ms=tuple(np.array([10.0, 11, 12, 13]) + i for i in range(5)),
    )
    r = ci.hierarchical_replicates(w, seed=0)
    assert ci.percentile_interval(r["latency_p50"]) == (12.0, 15.0)
    lo, hi = ci.percentile_interval(r["throughput"])
    # contains the estimate, and lies inside the slowest and fastest conceivable resamples: every window the
    # one whose wall time, scaled by its fastest (slowest) possible batch mean over its measured mean, is least
    # (greatest)
    means = np.array([x.mean() for x in w.latency_ms])
    fastest = w.wall_s * np.array([x.min() for x in w.latency_ms]) / means
    slowest = w.wall_s * np.array([x.max() for x in w.latency_ms]) / means
    assert lo < w.throughput() < hi and 100 / slowest.max() <= lo and hi <= 100 / fastest.min()
    assert ci.hierarchical_replicates(w, seed=0)["throughput"].tolist() == r["throughput"].tolist()  # seeded
    wide = ci.Windows(wall_s=w.wall_s, samples=w.samples, latency_ms=tuple(3 * x - 20 for x in w.latency_ms))
    lo3, hi3 = ci.percentile_interval(ci.hierarchical_replicates(wide, seed=0)["latency_p50"])
    assert (lo3, hi3) == pytest.approx((3 * 12.0 - 20, 3 * 15.0 - 20))  # the median moves with the latencies
    one = ci.Windows.split([1.0], [40], [1.0, 1.0, 3.0, 3.0])  # one window: only batches vary
    r1 = ci.hierarchical_replicates(one, n_boot=500)
    assert set(np.unique(r1["latency_p50"])) <= {1.0, 2.0, 3.0} and r1["throughput"].max() <= 40 / 0.5


def test_mann_whitney_and_attainable_p():
    assert ci.min_attainable_p(5, 5) == pytest.approx(2 / 252)
    assert ci.min_attainable_p(4, 4) == pytest.approx(2 / 70)
    assert ci.min_attainable_p(3, 3) == pytest.approx(0.1)
    assert ci.min_attainable_p(1, 1) == 1.0
    assert ci.mann_whitney_p([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]) == pytest.approx(2 / 252)  # exact, all separated
    assert ci.mann_whitney_p([1, 3, 5, 7, 9], [2, 4, 6, 8, 10]) > 0.5


def test_window_columns():
    assert ci.window_columns([([1.0, 2.0], 0.5)], 4) == ({}, {})  # one window: nothing new
    wins = [(list(np.linspace(10, 12, 150) + i), 1.6 + 0.1 * i) for i in range(2)]
    cols, series = ci.window_columns(wins, 8, "step_time")
    assert cols["windows"] == 2 and cols["window_batches"] == 150
    assert cols["throughput_ci95_low_samples_per_s"] == pytest.approx(1200 / 1.7)
    assert cols["throughput_ci95_high_samples_per_s"] == pytest.approx(1200 / 1.6)
    assert cols["step_time_p99_ci95_low_ms"] is None and "needs >= 368 timed batches (have 300)" in cols["ci95_note"]
    assert series["window_samples"] == [1200.0, 1200.0] and series["window_wall_s"] == pytest.approx([1.6, 1.7])
    assert series["window_step_time_p50_ms"] == pytest.approx([11.0, 12.0])
    cols, _ = ci.window_columns([(list(range(200)), 1.0), (list(range(200)), 1.0)], 1)
    # 400 batches: order statistics 392 and 400 of 0,0,1,1,...,199,199
    assert (cols["latency_p99_ci95_low_ms"], cols["latency_p99_ci95_high_ms"]) == (195.0, 199.0)
