"""Is a measured case trustworthy? Pure checks on a case record, tested with exact numbers.

Each check runs only when its inputs exist (``validity_checks`` lists those that ran). Thresholds:

- ``latency-spread``: IQR / median of the per-batch latency above 5 % (``stats.SPREAD_WARN``; the
  spread ``torch.utils.benchmark`` warns on).
- ``throttled``: clocks pulled down by power cap, thermal slowdown, HW slowdown or power brake
  (NVML clocks-event reasons) for more than 1 % of the window, taking the larger of the fraction of
  samples with such a reason and NVML's violation time / window (capped at 1: the violation counter
  advances in coarse steps, so over a window of a second or two its delta can exceed the window). 1 % because a
  sub-percent dip changes throughput by less than the run-to-run noise we resolve, while a sustained cap does not.
- ``clock-variation``: SM clock (p95 - p5) / median over the non-idle samples above 5 %. GPU Boost
  moves the clock in ~15 MHz steps (< 1 % of a ~2 GHz clock) as load and temperature change; a 5 %
  swing changes the speed of compute-bound kernels by up to 5 %, the same size as the latency spread
  we already call noisy. p5/p95 rather than min/max so one odd reading does not flag a case.
- ``other-process``: another compute process was on the GPU at the start or end of the window
  (``nvmlDeviceGetComputeRunningProcesses``).
- ``cpu-contention``: processes outside the measured one (and its children) used more than 10 % of the
  host's CPU time (all cores) during the window (``cpu_other_util_pct``, from the psutil/procfs counters
  read at the window edges). A CPU case competes with them for cores directly, and a GPU case's launch
  thread waits for a core; 10 % is an order above an idle host's background (about 1 % here) and the
  size at which a case that uses every core loses a comparable share of its time. One job sharing the
  2 cores of a small machine shows as 50 % or more.
- ``failed-requests``: a serve level where requests failed (``requests_failed``; their reasons in ``errors_json``).
- ``client-limited``: a serve level whose load generator's p99 send slip or event-loop lag passed its threshold
  (``client_limited``, :mod:`accelbench.scenarios.serve.metrics`): the requests left late, so the level measures the
  client as much as the server.
- ``non-finite-output``: an inference case's model outputs held NaN or inf (``outputs_finite`` false, from the
  untimed accuracy pass or first step): the speed is measured, but of broken numerics (an fp16 overflow), and the
  row has no accuracy (``accuracy_note`` says why).
- ``non-finite-loss``: a training step's last loss was NaN or inf (``loss_finite`` false): the step diverged (a
  learning rate far too large, an fp16 overflow without loss scaling), so its time is that of a broken run.
"""

from __future__ import annotations

from typing import Any

from accelbench.core import columns
from accelbench.core.stats import SPREAD_WARN

VALID = "ok"  # the validity of a row no check flagged
CLOCK_VARIATION_MAX = 0.05
THROTTLE_FRAC_MAX = 0.01
CPU_OTHER_MAX_PCT = 10.0
# (column, check, flag, reason) of the numerics checks: a false column flags the row
_FINITE = (
    (
        "outputs_finite",
        "outputs",
        "non-finite-output",
        lambda r: "model outputs hold NaN or inf: the numerics are broken (no accuracy), the speed is of broken maths",
    ),
    (
        "loss_finite",
        "loss",
        "non-finite-loss",
        lambda r: f"training loss is not finite (last loss {r.get('loss_last')}): the step diverged",
    ),
)
_THROTTLE_NAMES = (
    "sw_power_cap",
    "hw_slowdown",
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
)


def _value(rec: dict, key: str) -> Any:
    """The row's value as its column declares it; a NaN or inf measurement counts as missing (the check skips)."""
    return columns.typed(key, rec.get(key))


def _throttle_frac(rec: dict) -> float | None:
    window = _value(rec, "telemetry_window_s") or _value(rec, "energy_window_s")
    fracs = [_value(rec, "throttle_sample_frac")]
    for kind in ("power", "thermal"):
        t = _value(rec, f"throttle_{kind}_s")
        fracs.append(min(t / window, 1.0) if t is not None and window else None)
    fracs = [f for f in fracs if f is not None]
    return max(fracs) if fracs else None


def _by_reason(rec: dict[str, Any]) -> str:
    """`` (http 500: 3, connection: 1)`` from a serve row's ``errors_json``, or ``""``."""
    import json

    try:
        counts = json.loads(rec.get("errors_json") or "{}")
    except (TypeError, ValueError):
        return ""
    return f" ({', '.join(f'{k}: {v}' for k, v in counts.items())})" if counts else ""


def assess(rec: dict[str, Any], spread_key: str = "latency_spread") -> dict[str, Any]:
    """Validity columns of one case record.

    Args:
        rec: the case's columns (``latency_spread``, ``throttle_*``, ``clocks_event_reasons``,
            ``sm_clock_variation``, ``other_gpu_processes``, ``telemetry_window_s``, ``cpu_other_util_pct``,
            ``outputs_finite``, ``loss_finite``).
        spread_key: the column holding IQR/median of the timed iterations.
    Returns:
        ``validity`` ("ok" or comma-separated flags), ``validity_reason`` (None when ok) and
        ``validity_checks`` (the checks that could run, or "none").
    """
    flags, reasons, checks = [], [], []
    spread = _value(rec, spread_key)
    if spread is not None:
        checks.append("spread")
        if spread > SPREAD_WARN:
            flags.append("latency-spread")
            reasons.append(f"latency spread (IQR/median) {100 * spread:.1f}% > {100 * SPREAD_WARN:.0f}%")
    frac = _throttle_frac(rec)
    if frac is not None:
        checks.append("throttle")
        if frac > THROTTLE_FRAC_MAX:
            seen = [n for n in str(_value(rec, "clocks_event_reasons") or "").split(",") if n in _THROTTLE_NAMES]
            why = ", ".join(seen) or "power/thermal violation counters"
            flags.append("throttled")
            reasons.append(
                f"clocks limited ({why}) for {100 * frac:.1f}% of the window > {100 * THROTTLE_FRAC_MAX:.0f}%"
            )
    var = _value(rec, "sm_clock_variation")
    if var is not None:
        checks.append("clocks")
        if var > CLOCK_VARIATION_MAX:
            flags.append("clock-variation")
            reasons.append(f"SM clock varied {100 * var:.1f}% (p95-p5)/median > {100 * CLOCK_VARIATION_MAX:.0f}%")
    others = _value(rec, "other_gpu_processes")
    if others is not None:
        checks.append("processes")
        if others > 0:
            flags.append("other-process")
            reasons.append(f"{int(others)} other compute process(es) on the GPU")
    busy = _value(rec, "cpu_other_util_pct")
    if busy is not None:
        checks.append("cpu")
        if busy > CPU_OTHER_MAX_PCT:
            flags.append("cpu-contention")
            reasons.append(f"other processes used {busy:.0f}% of the host's CPU time > {CPU_OTHER_MAX_PCT:.0f}%")
    if _value(rec, "client_limited") is not None:  # a serve level: the load generator's own delays
        checks.append("client")
        if _value(rec, "client_limited"):
            flags.append("client-limited")
            delays = {"send slip": _value(rec, "send_slip_p99_ms"), "loop lag": _value(rec, "loop_lag_p99_ms")}
            seen = {k: v for k, v in delays.items() if v is not None}
            worst = f" by {max(seen.values()):.1f} ms" if seen else ""  # the figure the flag's note shows first
            which = ", ".join(f"{k} p99 {v:.1f} ms" for k, v in seen.items())
            reasons.append(f"the client fell behind{worst} ({which}): the client, not the server, limited the level")
    failed = _value(rec, "requests_failed")
    if failed is not None:  # a serve level: requests that failed (MLPerf LoadGen invalidates a run with errors)
        checks.append("requests")
        if failed > 0:
            flags.append("failed-requests")
            reasons.append(f"{int(failed)} of {int(_value(rec, 'requests') or 0)} requests failed{_by_reason(rec)}")
    for key, check, flag, what in _FINITE:
        v = _value(rec, key)
        if v is not None:
            checks.append(check)
            if not v:
                flags.append(flag)
                reasons.append(what(rec))
    return {
        "validity": ",".join(flags) or VALID,
        "validity_reason": "; ".join(reasons) or None,
        "validity_checks": ",".join(checks) or "none",
    }
