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
MEDIAN_TABLE = {6: (1, 6, 0.969), 9: (2, 8, 0.961), 10: (2, 9, 0.979), 12: (3, 10, 0.961), 15: (4, 12, 0.965),
                17: (5, 13, 0.951), 20: (6, 15, 0.959), 30: (10, 21, 0.957)}


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


def test_window_bootstrap_two_windows_enumerated():
    # Two windows of 100 samples in 1 s and 3 s: resamples {1,1} (p 1/4) -> 100/s, {1,3} (1/2) -> 50/s, {3,3} (1/4) ->
    # 33.3/s; the 2.5 % and 97.5 % quantiles of the replicates are the two extremes.
    w = ci.Windows(wall_s=np.array([1.0, 3.0]), samples=np.array([100.0, 100.0]),
                   latency_ms=(np.array([1.0, 2.0]), np.array([3.0, 4.0])))
    out = ci.window_bootstrap(w)
    assert out["throughput"] == pytest.approx((100 / 3, 100.0))
    assert out["latency_p50"] == pytest.approx((1.5, 3.5))  # medians of {1,2,1,2}, {1,2,3,4}, {3,4,3,4}


def test_window_bootstrap_fixed_seed():
    w = ci.Windows(wall_s=np.array([1.0, 1.1, 0.9, 1.2, 1.0]), samples=np.full(5, 100.0),
                   latency_ms=tuple(np.array([10.0, 11, 12, 13]) + i for i in range(5)))
    out = ci.window_bootstrap(w, seed=0)
    assert out["throughput"] == pytest.approx((500 / 5.6, 500 / 4.8))
    assert out["latency_p50"] == (12.0, 15.0)
    assert ci.window_bootstrap(ci.Windows.split([1.0], [100], [1.0, 2.0])) is None


def test_hierarchical_replicates():
    const = ci.Windows.split([2.0, 2.0, 2.0], [50, 50, 50], [4.0] * 30)
    r = ci.hierarchical_replicates(const, n_boot=300)
    assert np.all(r["throughput"] == 25.0) and np.all(r["latency_p50"] == 4.0) and np.all(r["latency_p99"] == 4.0)
    w = ci.Windows(wall_s=np.array([1.0, 1.1, 0.9, 1.2, 1.0]), samples=np.full(5, 100.0),
                   latency_ms=tuple(np.array([10.0, 11, 12, 13]) + i for i in range(5)))
    r = ci.hierarchical_replicates(w, seed=0)
    assert ci.percentile_interval(r["latency_p50"]) == (12.0, 15.0)
    lo, hi = ci.percentile_interval(r["throughput"])
    assert lo == pytest.approx(87.96537938503266) and hi == pytest.approx(105.38792233169312)
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
