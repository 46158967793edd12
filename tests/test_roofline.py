"""Roofline maths with exact numbers (pure functions)."""

import math

import pytest

from accelbench.core import roofline as rl


def test_ridge_point_and_attainable():
    # H200-like: 800 TFLOP/s bf16, 4 TB/s -> ridge at 200 FLOP/byte
    assert rl.ridge_point(800e12, 4e12) == 200.0
    assert rl.attainable_flops_per_s(50.0, 800e12, 4e12) == 200e12  # on the slope: 50 * 4e12
    assert rl.attainable_flops_per_s(200.0, 800e12, 4e12) == 800e12  # at the ridge
    assert rl.attainable_flops_per_s(1000.0, 800e12, 4e12) == 800e12  # under the flat roof
    assert rl.attainable_flops_per_s(None, 800e12, 4e12) == 800e12  # no DRAM traffic: the flat roof
    assert rl.attainable_flops_per_s(0.0, 800e12, 4e12) == 0.0


@pytest.mark.parametrize(
    "flops, nbytes, expect",
    [
        (199.0, 1.0, "memory"),
        (200.0, 1.0, "compute"),
        (201.0, 1.0, "compute"),
        (0.0, 4096.0, "memory"),  # a copy kernel
        (1e9, 0.0, "compute"),  # arithmetic without DRAM traffic
        (0.0, 0.0, None),  # nothing at all
    ],
)
def test_bound_classification(flops, nbytes, expect):
    assert rl.bound(flops, nbytes, 200.0) == expect


def test_intensity_ratio_and_times_never_divide_by_zero():
    assert rl.arithmetic_intensity(262e9, 131e6) == 2000.0
    assert rl.arithmetic_intensity(1.0, 0.0) is None
    assert rl.ratio(3.0, 0.0) is None and rl.ratio(None, 2.0) is None and rl.ratio(3.0, 2.0) == 1.5
    assert rl.relative_error(258.0, 262.0) == pytest.approx(-4 / 262)
    assert rl.relative_error(1.0, 0.0) is None
    # compute-bound: 262 GFLOP at 800 TFLOP/s = 0.3275 ms > 100 MB at 4 TB/s = 0.025 ms
    assert rl.theoretical_time_s(262e9, 100e6, 800e12, 4e12) == pytest.approx(262e9 / 800e12)
    assert rl.theoretical_time_s(1e9, 1e9, 800e12, 4e12) == pytest.approx(1e9 / 4e12)
    assert rl.theoretical_time_s(0, 0, 800e12, 4e12) == 0.0
    # half the attainable rate at intensity 50 (attainable 200 TFLOP/s)
    assert rl.roof_fraction(100e12, 50.0, 800e12, 4e12) == 0.5
    assert rl.roof_fraction(100e12, 0.0, 800e12, 4e12) is None  # attainable 0: undefined, not inf
    assert rl.roof_fraction(None, 50.0, 800e12, 4e12) is None


@pytest.mark.parametrize("peak, bw", [(0.0, 1e12), (1e12, 0.0), (-1.0, 1e12), (math.inf, 1e12), (1e12, math.nan)])
def test_bad_ceilings_raise(peak, bw):
    with pytest.raises(ValueError):
        rl.ridge_point(peak, bw)
    with pytest.raises(ValueError):
        rl.theoretical_time_s(1.0, 1.0, peak, bw)
