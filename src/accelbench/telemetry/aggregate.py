"""Turn raw GPU telemetry (samples + window-edge counters) into per-case columns. Pure code.

Input is what :class:`accelbench.telemetry.sources.nvml.NvmlSource` produced (or a recorded copy of it, which
is how the tests replay captured H200 data): ``samples`` (dicts with ``t_s`` and signal keys),
``begin`` / ``end`` counters and ``info``. Output keys carry their unit; signals the GPU did not give
are None and the ``*_source`` / ``gpm_status`` columns say why.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from accelbench.core import columns
from accelbench.telemetry import energy as en
from accelbench.telemetry.sources.gpm import GPM_METRICS

# nvml.h nvmlClocksEventReason* bits (the older name: nvmlClocksThrottleReason*).
REASON_BITS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
# Reasons that mean the clocks were pulled down by power or heat (what makes a measurement suspect).
THROTTLE_MASK = 0x4 | 0x8 | 0x20 | 0x40 | 0x80

# (sample key, column prefix, unit suffix) for min/mean/max columns.
SIGNALS = [
    ("gpu_util_pct", "gpu_util", "pct"),
    ("mem_util_pct", "mem_util", "pct"),
    ("power_w", "power", "w"),
    ("temp_c", "temp", "c"),
    ("sm_clock_mhz", "sm_clock", "mhz"),
    ("mem_clock_mhz", "mem_clock", "mhz"),
    ("pcie_tx_bytes_per_s", "pcie_tx", "bytes_per_s"),
    ("pcie_rx_bytes_per_s", "pcie_rx", "bytes_per_s"),
]


def decode_reasons(mask: int | None) -> list[str]:
    """Names of the set bits of a clocks-event-reason bitmask (unknown bits as ``bit_0x...``)."""
    if not mask:
        return []
    names = [name for bit, name in REASON_BITS.items() if mask & bit]
    rest = mask & ~sum(REASON_BITS)
    return names + [f"bit_{1 << i:#x}" for i in range(64) if rest >> i & 1]


def counter_rate(prev: float | None, now: float | None, dt_s: float, modulus: int = 2**32) -> float | None:
    """Rate of a wrapping counter between two readings (units of the counter per s).

    NVML's PCIe byte counters are 32-bit on the H200 (driver 580): a reading below the previous one
    wrapped once, so ``modulus`` is added. More than one wrap per interval (> 4 GiB between two
    samples) cannot be told apart, which is why GPM's PCIe rates are preferred where they exist.
    """
    if prev is None or now is None or dt_s <= 0:
        return None
    d = now - prev
    return (d + modulus if d < 0 else d) / dt_s


def _vals(samples: Iterable[dict], key: str) -> list[float]:
    return [s[key] for s in samples if s.get(key) is not None]


def min_mean_max(values: Sequence[float]) -> tuple[float | None, float | None, float | None]:
    """``(min, mean, max)`` of the values, or three Nones for an empty sequence."""
    if not values:
        return None, None, None
    return min(values), sum(values) / len(values), max(values)


def clock_variation(samples: Sequence[dict]) -> float | None:
    """Relative SM clock variation: (p95 - p5) / median of the SM clock over the samples in which the
    GPU was not idle (idle samples run at idle clocks by design). None with fewer than 2 samples."""
    clocks = [
        s["sm_clock_mhz"]
        for s in samples
        if s.get("sm_clock_mhz") is not None and not (s.get("clocks_event_reasons") or 0) & 0x1
    ]
    if len(clocks) < 2:
        return None
    med = statistics.median(clocks)
    p5, p95 = np.percentile(clocks, [5, 95])
    return float(p95 - p5) / med if med > 0 else None


def _throttle(samples: Sequence[dict], begin: dict, end: dict) -> dict[str, Any]:
    masks = [s["clocks_event_reasons"] for s in samples if s.get("clocks_event_reasons") is not None]
    seen = 0
    for m in masks:
        seen |= m
    out: dict[str, Any] = {
        "clocks_event_reasons": ",".join(decode_reasons(seen)) or ("none" if masks else None),
        "throttle_samples": sum(1 for m in masks if m & THROTTLE_MASK) if masks else None,
        "throttle_sample_frac": sum(1 for m in masks if m & THROTTLE_MASK) / len(masks) if masks else None,
    }
    for kind in ("power", "thermal"):
        b, e = begin.get(f"violation_{kind}_ns"), end.get(f"violation_{kind}_ns")
        out[f"throttle_{kind}_s"] = (e - b) / 1e9 if b is not None and e is not None and e >= b else None
    return out


def _processes(begin: dict, end: dict, own_pid: int | None, job_pids: tuple[int, ...] = ()) -> dict[str, Any]:
    """Processes holding a context on the GPU, and how many of them are not the measured job's: neither this
    process nor ``job_pids`` (its other ranks, the server it launched)."""
    lists = [x.get("processes") for x in (begin, end)]
    if any(p is None for p in lists):
        return {"gpu_processes": None, "other_gpu_processes": None}
    pids = set(lists[0]) | set(lists[1])
    if not pids:  # we hold a context, so an empty list means NVML cannot see our PID namespace
        return {"gpu_processes": 0, "other_gpu_processes": None}
    if own_pid in pids:
        others = len(pids - {own_pid} - set(job_pids))
    else:  # in a container NVML reports host PIDs: one of them is us, and up to len(job_pids) the job's
        others = max(0, len(pids) - 1 - len(job_pids))
    return {"gpu_processes": len(pids), "other_gpu_processes": others}


def _steps(end: dict) -> dict[str, float] | None:
    """The ``counter-steps`` energy (:func:`accelbench.telemetry.energy.tick_energy`) of the measured block: the
    counter's steps (``end["energy_ticks"]``) inside the block the monitor wrapped (``end["body_t"]``), with the
    best-known update interval (``end["energy_update"]``)."""
    body, ticks = end.get("body_t"), end.get("energy_ticks")
    if not body or not ticks:
        return None
    start, stop = body
    return en.tick_energy([(lo - start, hi - start, v) for lo, hi, v in ticks], stop - start, end.get("energy_update"))


def _energy(samples: Sequence[dict], begin: dict, end: dict, window_s: float | None) -> dict[str, Any]:
    t = [s["t_s"] for s in samples]
    e_j = en.counter_energy_j(begin.get("energy_mj"), end.get("energy_mj"))
    if e_j is not None:
        win = end["t"] - begin["t"] if end.get("t") is not None and begin.get("t") is not None else window_s
        steps = _steps(end)
        update = steps["update_s"] if steps else en.counter_update_s(t, [s.get("energy_mj") for s in samples])
        frac, conf = en.confidence(win, update)
        if steps is not None and (frac is None or steps["uncertainty"] < frac):
            rel = steps["uncertainty"]
            return {
                "energy_j": steps["energy_j"],
                "energy_source": "nvml-counter",
                "energy_method": "counter-steps",
                "energy_window_s": end["body_t"][1] - end["body_t"][0],
                "energy_uncertainty_pct": 100 * rel,
                "energy_confidence": "low" if rel > en.UNCERTAINTY_MAX else "ok",
                "energy_counter_update_s": update,
            }
        return {
            "energy_j": e_j,
            "energy_source": "nvml-counter",
            "energy_method": "counter-difference",
            "energy_window_s": win,
            "energy_uncertainty_pct": 100 * frac if frac is not None else None,
            "energy_confidence": conf,
            "energy_counter_update_s": update,
        }
    e_j = en.integrate_power_j(t, [s.get("power_w") for s in samples])
    if e_j is not None:
        n = len(_vals(samples, "power_w"))
        conf = "ok" if n >= en.MIN_INTEGRATION_SAMPLES else "low"
        return {
            "energy_j": e_j,
            "energy_source": "power-integration",
            "energy_method": "power-integration",
            "energy_window_s": t[-1] - t[0],
            "energy_uncertainty_pct": None,
            "energy_confidence": conf,
        }
    return {
        "energy_j": None,
        "energy_source": "not available",
        "energy_method": None,
        "energy_window_s": None,
        "energy_uncertainty_pct": None,
        "energy_confidence": None,
    }


def gpu_record(
    samples: Sequence[dict], begin: dict, end: dict, info: dict, window_s: float | None = None
) -> dict[str, Any]:
    """Per-case columns for one GPU.

    Args:
        samples: raw samples in time order (``t_s`` in s from the window start).
        begin / end: counters at the window edges (``t`` s, ``energy_mj``, ``violation_*_ns``,
            ``processes``; ``end["gpm_window"]`` whole-window GPM metrics).
        info: ``power_source``, ``pcie_source``, ``gpm_status``, ``own_pid``, ``job_pids`` (the measured job's
            other processes: not counted in ``other_gpu_processes``).
        window_s: window length (s), used when the counters carry no time.
    Returns:
        ``<signal>_{min,mean,max}_<unit>`` for each of ``SIGNALS``, ``device_mem_used_bytes`` (max),
        ``sm_clock_variation``, throttle columns, ``gpm_*_pct`` (whole window), energy columns,
        ``gpu_processes`` / ``other_gpu_processes``.
    """
    rec: dict[str, Any] = {}
    for key, prefix, unit in SIGNALS:
        rec[f"{prefix}_min_{unit}"], rec[f"{prefix}_mean_{unit}"], rec[f"{prefix}_max_{unit}"] = min_mean_max(
            _vals(samples, key)
        )
    used = _vals(samples, "mem_used_bytes")
    rec["device_mem_used_bytes"] = max(used) if used else None
    rec["device_mem_used_mean_bytes"] = sum(used) / len(used) if used else None
    rec["power_source"] = info.get("power_source") if rec["power_mean_w"] is not None else "not available"
    rec["pcie_source"] = info.get("pcie_source") if rec["pcie_tx_mean_bytes_per_s"] is not None else "not available"
    rec["sm_clock_variation"] = clock_variation(samples)
    rec.update(_throttle(samples, begin, end))
    gpm = end.get("gpm_window") or {}
    for name in GPM_METRICS:
        rec[name] = gpm.get(name)
    gpm_status = info.get("gpm_status") or "not available"
    if gpm_status == "ok" and all(rec[n] is None for n in GPM_METRICS):
        gpm_status = "not available: no GPM values for this window"
    rec["gpm_status"] = gpm_status
    rec.update(_energy(samples, begin, end, window_s))
    rec.update(_processes(begin, end, info.get("own_pid"), tuple(info.get("job_pids") or ())))
    return rec


def combine(records: Sequence[dict]) -> dict[str, Any]:
    """Columns for several GPUs of one case from their per-GPU columns, each by the rule its declaration gives
    (:func:`accelbench.core.columns.combine`, the same rules that combine the ranks of a ``--gpus`` case).

    Power, energy and PCIe traffic are summed (the whole job's draw; ``power_min_w``/``power_max_w``
    become the sum of per-GPU extremes, a bound; None unless every GPU gave the value); utilisation,
    temperature and clock means are averaged; minima take the min and maxima, variations, the throttled share,
    throttle times and memory used the max (one throttled GPU makes the case throttled); text columns join
    their distinct values; the energy confidence is the lowest. Adds ``gpus_monitored``.
    """
    if not records:
        return {}
    return {**columns.combine(records), "gpus_monitored": len(records)}
