"""Energy arithmetic (pure, exact-number tested): counter differences, power integration,
confidence of a short window, and per-sample / above-idle energy.

The preferred GPU energy is the difference of NVML's total-energy counter read at the window edges
(zeus does the same; summing power samples misses what happens between them). The counter only
advances every update interval (100 ms on an H200 with driver 580, measured), so a reading lags the
true energy by 0..1 interval at each edge; the difference is the energy of a window shifted by the
difference of the two lags, which is less than one interval: the relative error of the figure is at
most about ``update_interval / window`` (at steady power).
"""

from __future__ import annotations

from typing import Sequence

UNCERTAINTY_MAX = 0.05  # above this relative uncertainty the energy figure is flagged "low" confidence
DEFAULT_UPDATE_S = 0.1  # assumed counter update interval when no update could be observed (conservative)
MIN_INTEGRATION_SAMPLES = 20  # fewer power samples than this: an integrated energy is "low" confidence


def counter_energy_j(begin_mj: float | None, end_mj: float | None) -> float | None:
    """Energy between two readings of a millijoule counter, in J; None if either is missing or it went back."""
    if begin_mj is None or end_mj is None or end_mj < begin_mj:
        return None
    return (end_mj - begin_mj) / 1000.0


def integrate_power_j(t_s: Sequence[float], power_w: Sequence[float | None]) -> float | None:
    """Trapezoidal integral of power samples over time, in J (pairs with a missing power are skipped).

    Returns None with fewer than two usable samples.
    """
    pts = [(t, p) for t, p in zip(t_s, power_w) if p is not None and t is not None]
    if len(pts) < 2:
        return None
    return sum((t1 - t0) * (p0 + p1) / 2.0 for (t0, p0), (t1, p1) in zip(pts, pts[1:]))


def counter_update_s(t_s: Sequence[float], energy_mj: Sequence[float | None]) -> float | None:
    """Mean time between observed changes of the energy counter, in s.

    Sampling faster than the counter updates gives its update interval; sampling slower gives an
    upper bound of about the sampling period. None when the counter was never seen to change.
    """
    pts = [(t, e) for t, e in zip(t_s, energy_mj) if e is not None]
    changes = sum(1 for (_, e0), (_, e1) in zip(pts, pts[1:]) if e1 != e0)
    if changes == 0:
        return None
    return (pts[-1][0] - pts[0][0]) / changes


def confidence(window_s: float | None, update_s: float | None) -> tuple[float | None, str]:
    """``(relative_uncertainty, "ok" | "low")`` of a counter-difference energy over ``window_s``.

    Uncertainty = update interval / window (the two edge lags, each 0..1 interval, differ by < 1);
    ``update_s`` None assumes ``DEFAULT_UPDATE_S``. "low" above ``UNCERTAINTY_MAX``.
    """
    if not window_s or window_s <= 0:
        return None, "low"
    frac = (update_s if update_s is not None else DEFAULT_UPDATE_S) / window_s
    return frac, "low" if frac > UNCERTAINTY_MAX else "ok"


def per_sample_columns(energy_j: float | None, samples: int | None, *, window_s: float | None = None,
                       idle_power_w: float | None = None) -> dict[str, float | None]:
    """Energy per sample and energy above idle for a window that processed ``samples`` samples.

    Args:
        energy_j: energy of the window (J); None gives None everywhere.
        samples: samples (images) processed in the window.
        window_s: length of the window (s), needed for the idle share.
        idle_power_w: idle power of the same device(s) (W), measured before the sweep.
    Returns:
        ``energy_per_sample_j`` = energy / samples; ``energy_above_idle_j`` = energy - idle power *
        window; ``energy_above_idle_per_sample_j``. Missing inputs give None, never 0.
    """
    out: dict[str, float | None] = {"energy_per_sample_j": None, "energy_above_idle_j": None,
                                    "energy_above_idle_per_sample_j": None}
    if energy_j is None or not samples:
        return out
    out["energy_per_sample_j"] = energy_j / samples
    if idle_power_w is not None and window_s is not None:
        above = energy_j - idle_power_w * window_s
        out["energy_above_idle_j"] = above
        out["energy_above_idle_per_sample_j"] = above / samples
    return out
