"""Energy arithmetic (pure, exact-number tested): counter differences, the counter's own steps, power
integration, the confidence of each, and per-sample / above-idle energy.

GPU energy comes from NVML's total-energy counter (``nvmlDeviceGetTotalEnergyConsumption``, mJ since the
driver loaded; zeus measures the same way: summing power samples misses what happens between them, and on
Hopper GPUs the "instant" power is itself refreshed only about every 100 ms). The counter advances in steps, every
update interval (about 100 ms on Hopper GPUs: ``benchmarks/energy_ticks_probe.py`` measures it, docs/results.md),
each step the exact energy of its period. Two methods, the one with the smaller uncertainty is kept
(``energy_method``):

- ``counter-difference``: the readings at the window edges. Each lags the true energy by 0..1 interval, so the
  difference is the energy of a window shifted by less than one interval: relative uncertainty
  ``update_interval / window`` (:func:`confidence`), 20 % for a 0.5 s window.
- ``counter-steps``: the steps seen inside the window (:mod:`accelbench.telemetry.ticks` records when each
  happened). The energy between two steps is exact and covers a whole number ``n`` of periods ``U``, so the mean
  power of that span is ``dE / (n U)``; the window's energy is that power times the window
  (:func:`tick_energy`). Its uncertainty adds two terms: how well ``U`` is known from the step times
  (``dU / U``, the brackets of the two steps farthest apart), and how well the span's mean power stands for the
  whole window's, from the spread of the per-period powers (``s * sqrt(1/n - 1/m)``, ``s`` their relative
  standard deviation, ``m`` the periods in the window: the standard error of a sample mean of ``n`` of ``m``
  periods, drawn without replacement). Steps within ``STEP_GUARD_START_S`` of the window start or
  ``STEP_GUARD_END_S`` of its end are not used: the counter publishes a step a little after the period it closes
  (``benchmarks/energy_ticks_probe.py``) and a few ms of set-up surround the timed steps.

The confidence is "ok" when the relative uncertainty is at most ``UNCERTAINTY_MAX``, else "low".
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

UNCERTAINTY_MAX = 0.05  # above this relative uncertainty the energy figure is flagged "low" confidence
DEFAULT_UPDATE_S = 0.1  # assumed counter update interval when no update could be observed (conservative)
MIN_INTEGRATION_SAMPLES = 20  # fewer power samples than this: an integrated energy is "low" confidence
STEP_GUARD_START_S = 0.02  # counter steps this close to the window start are not used (publication lag, set-up)
STEP_GUARD_END_S = 0.01  # ... nor this close to its end (the steps' elapsed times are read after the last one)


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


def counter_period(ticks: Sequence[Sequence[float]]) -> tuple[float, float] | None:
    """The counter's update interval ``U`` and its half-width ``dU`` (s) from the brackets ``(lo, hi, value)`` of
    its steps: over the pair of steps that pins it best, ``(mid_j - mid_i) / k`` with ``k`` the periods between
    them and ``dU = (width_i + width_j) / (2 k)``. None with fewer than two steps."""
    if len(ticks) < 2:
        return None
    mids = [(lo + hi) / 2 for lo, hi, _ in ticks]
    rough = statistics.median(b - a for a, b in zip(mids, mids[1:]))
    if rough <= 0:
        return None
    best = None
    for i in range(len(ticks)):
        for j in range(i + 1, len(ticks)):
            k = round((mids[j] - mids[i]) / rough)
            if k < 1:
                continue
            u, du = (mids[j] - mids[i]) / k, (ticks[i][1] - ticks[i][0] + ticks[j][1] - ticks[j][0]) / (2 * k)
            if best is None or du / u < best[1] / best[0]:
                best = (u, du)
    return best


def _placed(ticks: Sequence[Sequence[float]], u: float) -> list:
    """The steps whose bracket is narrow enough (at most ``u / 4``) to count the whole periods between them: a
    thread kept from running (the GIL held by a blocked kernel launch) sees a step late, with a wide bracket."""
    out: list = []
    for t in ticks:
        if t[1] - t[0] <= u / 4 and (not out or (t[0] + t[1]) / 2 - (out[-1][0] + out[-1][1]) / 2 >= u / 2):
            out.append(t)
    return out


def tick_energy(
    ticks: Sequence[Sequence[float]], window_s: float, known: Sequence[float] | None = None
) -> dict[str, float] | None:
    """The ``counter-steps`` energy of a window (module docstring).

    Args:
        ticks: the counter's steps ``(lo_s, hi_s, value_mj)``, times in s from the window start.
        window_s: the window's length (s): the measured work runs from 0 to ``window_s``.
        known: ``(U, dU)`` of the same counter from a longer run of steps (used when better than these).
    Returns:
        ``energy_j`` (J, the span's mean power times ``window_s``), ``power_w`` (W), ``span_s`` (s),
        ``periods`` (n), ``update_s`` (U, s) and ``uncertainty`` (relative); None with fewer than two whole
        periods between usable steps.
    """
    found = counter_period(ticks)
    if known is not None and (found is None or known[1] / known[0] < found[1] / found[0]):
        found = (float(known[0]), float(known[1]))
    if found is None:
        return None
    u, du = found
    inside = _placed([t for t in ticks if t[0] >= STEP_GUARD_START_S and t[1] <= window_s - STEP_GUARD_END_S], u)
    if len(inside) < 3:
        return None
    n_k = [round(((b[0] + b[1]) - (a[0] + a[1])) / 2 / u) for a, b in zip(inside, inside[1:])]
    powers = [(b[2] - a[2]) / 1000 / (k * u) for a, b, k in zip(inside, inside[1:], n_k)]
    n = sum(n_k)
    power = (inside[-1][2] - inside[0][2]) / 1000 / (n * u)
    m = max(window_s / u, n)
    spread = statistics.stdev(powers) / power if len(powers) >= 2 and power > 0 else 0.0
    rel = du / u + spread * math.sqrt(max(0.0, 1 / n - 1 / m))
    return {
        "energy_j": power * window_s,
        "power_w": power,
        "span_s": n * u,
        "periods": n,
        "update_s": u,
        "uncertainty": rel,
    }


def per_sample_columns(
    energy_j: float | None, samples: int | None, *, window_s: float | None = None, idle_power_w: float | None = None
) -> dict[str, float | None]:
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
    out: dict[str, float | None] = {
        "energy_per_sample_j": None,
        "energy_above_idle_j": None,
        "energy_above_idle_per_sample_j": None,
    }
    if energy_j is None or not samples:
        return out
    out["energy_per_sample_j"] = energy_j / samples
    if idle_power_w is not None and window_s is not None:
        above = energy_j - idle_power_w * window_s
        out["energy_above_idle_j"] = above
        out["energy_above_idle_per_sample_j"] = above / samples
    return out
