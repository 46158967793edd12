"""Roofline maths: pure functions, no torch, never a division by zero.

The roofline model (Williams, Waterman & Patterson, "Roofline: an insightful visual performance model
for multicore architectures", CACM 52(4), 2009): a kernel of arithmetic intensity ``I`` (FLOP per DRAM
byte) on a machine with compute ceiling ``P`` (FLOP/s) and memory bandwidth ``B`` (byte/s) can attain at
most ``min(P, I * B)`` FLOP/s. The ridge point ``P / B`` (FLOP/byte) separates memory-bound kernels
(``I < P / B``) from compute-bound ones (``I >= P / B``).

Conventions: ``None`` stands for "undefined" (an intensity with no DRAM traffic, a ratio against
zero). A kernel that moved no DRAM bytes but did arithmetic has unbounded intensity and is classed
compute-bound; one that did neither has no bound.
"""

from __future__ import annotations

import math

MEMORY, COMPUTE = "memory", "compute"


def _check_ceiling(name: str, value: float) -> None:
    if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")


def ridge_point(peak_flops_per_s: float, bandwidth_bytes_per_s: float) -> float:
    """The intensity (FLOP/byte) where the memory slope meets the compute ceiling: ``P / B``.

    Raises:
        ValueError: a ceiling is zero, negative or not finite.
    """
    _check_ceiling("peak_flops_per_s", peak_flops_per_s)
    _check_ceiling("bandwidth_bytes_per_s", bandwidth_bytes_per_s)
    return peak_flops_per_s / bandwidth_bytes_per_s


def arithmetic_intensity(flops: float, dram_bytes: float) -> float | None:
    """FLOP per DRAM byte; None when no bytes moved (unbounded or undefined intensity)."""
    if dram_bytes is None or flops is None or dram_bytes <= 0:
        return None
    return flops / dram_bytes


def attainable_flops_per_s(intensity: float | None, peak_flops_per_s: float, bandwidth_bytes_per_s: float) -> float:
    """Roofline bound ``min(P, I * B)`` in FLOP/s; ``I = None`` (no DRAM traffic) gives ``P``.

    Raises:
        ValueError: a ceiling is not a positive finite number, or the intensity is negative.
    """
    _check_ceiling("peak_flops_per_s", peak_flops_per_s)
    _check_ceiling("bandwidth_bytes_per_s", bandwidth_bytes_per_s)
    if intensity is None:
        return float(peak_flops_per_s)
    if intensity < 0:
        raise ValueError(f"intensity must be >= 0, got {intensity}")
    return min(float(peak_flops_per_s), intensity * bandwidth_bytes_per_s)


def bound(flops: float, dram_bytes: float, ridge_flop_per_byte: float) -> str | None:
    """``"memory"`` when intensity < ridge point, ``"compute"`` when >= it, None with no work at all.

    No DRAM bytes with some FLOPs: unbounded intensity, so ``"compute"``. FLOPs of zero with DRAM
    bytes: intensity 0, so ``"memory"`` (a copy kernel).
    """
    flops, dram_bytes = flops or 0, dram_bytes or 0
    if flops <= 0 and dram_bytes <= 0:
        return None
    if dram_bytes <= 0:
        return COMPUTE
    return COMPUTE if flops / dram_bytes >= ridge_flop_per_byte else MEMORY


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """``numerator / denominator``, None when either is missing or the denominator is 0."""
    if numerator is None or denominator is None or denominator == 0:
        return None
    return numerator / denominator


def roof_fraction(
    achieved_flops_per_s: float | None, intensity: float | None, peak_flops_per_s: float, bandwidth_bytes_per_s: float
) -> float | None:
    """Achieved FLOP/s as a fraction of the attainable roofline at that intensity (1.0 = on the roof)."""
    if achieved_flops_per_s is None:
        return None
    return ratio(achieved_flops_per_s, attainable_flops_per_s(intensity, peak_flops_per_s, bandwidth_bytes_per_s))


def theoretical_time_s(flops: float, dram_bytes: float, peak_flops_per_s: float, bandwidth_bytes_per_s: float) -> float:
    """Lower bound on run time: ``max(FLOPs / P, bytes / B)`` seconds (the roofline in time form).

    Raises:
        ValueError: a ceiling is not a positive finite number.
    """
    _check_ceiling("peak_flops_per_s", peak_flops_per_s)
    _check_ceiling("bandwidth_bytes_per_s", bandwidth_bytes_per_s)
    return max((flops or 0) / peak_flops_per_s, (dram_bytes or 0) / bandwidth_bytes_per_s)


def relative_error(measured: float | None, reference: float | None) -> float | None:
    """``measured / reference - 1`` (e.g. -0.015 = 1.5 % below); None when the reference is 0 or missing."""
    r = ratio(measured, reference)
    return None if r is None else r - 1.0
