"""Telemetry around a measured region. Only :mod:`accelbench.telemetry.nvml` imports ``pynvml``.

Every workload uses the same API, so each stored case carries the same telemetry columns::

    with monitor(device, period_s=0.1) as mon:
        ...  # the timed region
    record.update(mon.record())      # flat metrics, unit in each name
    series.update(mon.series())      # raw samples, stored in the ``samples`` table

``device`` is a ``torch.device`` or a list of them (one job on several GPUs). A background thread
samples every GPU in use (NVML) and the host CPU (psutil) every ``period_s`` (default 0.1 s, down to
~0.01 s; 0 = no thread, only the counters at the window edges: energy, CPU time).
"""

from __future__ import annotations

import time
from typing import Any

from accelbench.telemetry.sampler import Sampler

DEFAULT_PERIOD_S = 0.1


def _devices(device) -> list:
    return list(device) if isinstance(device, (list, tuple)) else [device]


class Monitor:
    """Samples the GPU(s) behind ``device`` and the host CPU while active (see the module docstring)."""

    def __init__(self, device, period_s: float | None = DEFAULT_PERIOD_S, pids: tuple[int, ...] = ()):
        from accelbench.telemetry.cpu import CpuReader

        devs = _devices(device)
        self.device = devs[0]
        self.period_s = float(period_s or 0.0)
        self.cuda = [d for d in devs if getattr(d, "type", None) == "cuda"]
        self.gpus = []
        if self.cuda:
            from accelbench.telemetry.nvml import GpuReader

            readers = [GpuReader(d.index or 0, self.period_s, name=f"gpu{i}") for i, d in enumerate(self.cuda)]
            self.gpus = [r for r in readers if r.available]
        self.cpu = CpuReader(pids)
        self.sampler = Sampler([*self.gpus, self.cpu], self.period_s)

    def __enter__(self) -> "Monitor":
        self.sampler.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.sampler.__exit__(*exc)
        for g in self.gpus:
            g.close()

    def _gpu_record(self) -> dict[str, Any]:
        from accelbench.telemetry.aggregate import combine, gpu_record

        if not self.gpus:
            return {"energy_j": None, "energy_source": "not available", "power_source": "not available",
                    "gpm_status": "not available: NVML did not answer"}
        s = self.sampler
        per = [gpu_record(s.samples[g.name], s.counters[g.name]["begin"], s.counters[g.name]["end"], g.info(),
                          s.window_s) for g in self.gpus]
        return combine(per)

    def record(self) -> dict[str, Any]:
        """Per-case columns (units in the names): ``telemetry_*``, per-GPU signal min/mean/max
        (:func:`accelbench.telemetry.aggregate.gpu_record`), ``energy_j`` and its source/confidence,
        CPU columns (:func:`accelbench.telemetry.cpu.cpu_record`). On a CPU device ``energy_j`` is the
        RAPL package energy, or None with ``energy_source`` "not available"."""
        from accelbench.telemetry.cpu import cpu_record

        s = self.sampler
        rec: dict[str, Any] = {"telemetry_period_ms": 1000 * self.period_s, "telemetry_window_s": s.window_s,
                               "telemetry_samples": len(s.samples[self.cpu.name]),
                               "telemetry_busy_pct": 100 * s.busy_s / s.window_s if s.window_s else None}
        if self.cuda:
            rec.update(self._gpu_record())
        rec.update(cpu_record(s.samples[self.cpu.name], s.counters[self.cpu.name]["begin"], s.counters[self.cpu.name]["end"]))
        if not self.cuda:
            e = rec["cpu_energy_j"]
            rec.update(energy_j=e, energy_source=rec["cpu_energy_source"], energy_window_s=s.window_s,
                       energy_confidence=None if e is None else "ok")  # RAPL updates every ~1 ms
        if s.errors:
            rec["telemetry_errors"] = "; ".join(f"{k}: {v}" for k, v in s.errors.items())
        return rec

    def series(self) -> dict[str, list[float]]:
        """Raw samples: ``nvml_<signal>`` (``nvml<i>_`` with several GPUs) with times ``nvml_t_s``, and
        ``cpu_<signal>`` with ``cpu_t_s``. Signals never read are left out."""
        out: dict[str, list] = {}
        for g in self.gpus:
            prefix = "nvml_" if len(self.gpus) == 1 else f"nvml{g.name[3:]}_"
            out.update(_columns(self.sampler.samples[g.name], prefix))
        out.update(_columns(self.sampler.samples[self.cpu.name], "cpu_"))
        return out

    def raw(self) -> dict[str, Any]:
        """Everything the sampler read, JSON-serialisable: what the replay tests feed to the aggregation."""
        s = self.sampler
        return {"period_s": self.period_s, "window_s": s.window_s, "samples": s.samples, "counters": s.counters,
                "info": {g.name: g.info() for g in self.gpus}, "errors": s.errors}


def _columns(rows: list[dict], prefix: str) -> dict[str, list]:
    keys = list(dict.fromkeys(k for r in rows for k in r))
    cols = {f"{prefix}{k}": [r.get(k) for r in rows] for k in keys}
    return {k: v for k, v in cols.items() if any(x is not None for x in v)}


def monitor(device, period_s: float | None = DEFAULT_PERIOD_S, pids: tuple[int, ...] = ()) -> Monitor:
    """A :class:`Monitor` for ``device``; use it as a context manager around the timed region.

    Args:
        period_s: sampling period (s); 0 or None: no sampler thread.
        pids: other processes of the measured job on this host (e.g. the other ranks): their CPU time is
            the job's, not contention (``cpu_other_util_pct``).
    """
    return Monitor(device, period_s, pids)


def measure_idle(device, seconds: float = 3.0, period_s: float = DEFAULT_PERIOD_S) -> dict[str, Any]:
    """Idle power of ``device`` (or the sum over a list of GPUs): sample ``seconds`` with nothing running.

    Returns:
        ``idle_power_w`` (energy-counter difference / time where available, else the mean of the power
        samples), ``idle_power_source``, ``idle_window_s``, ``idle_temp_c``, ``idle_sm_clock_mhz``,
        ``idle_gpu_util_pct`` and ``idle_other_gpu_processes`` (a busy "idle" GPU is visible). On a CPU
        device the RAPL package power; ``{"idle_power_w": None, ...}`` when nothing can be measured.
    """
    from accelbench.telemetry.cpu import rapl_zones

    devs = _devices(device)
    cuda = [d for d in devs if getattr(d, "type", None) == "cuda"]
    none = {"idle_power_w": None, "idle_power_source": "not available"}
    if seconds <= 0 or (not cuda and not rapl_zones()):
        return none
    if cuda:
        import torch

        for d in cuda:
            torch.cuda.synchronize(d)
    with Monitor(devs, period_s) as mon:
        time.sleep(seconds)
    rec = mon.record()
    if rec.get("energy_j") is not None and rec.get("energy_window_s"):
        power, source = rec["energy_j"] / rec["energy_window_s"], rec["energy_source"]
    elif rec.get("power_mean_w") is not None:
        power, source = rec["power_mean_w"], f"mean of {rec.get('power_source')} power samples"
    else:
        return none
    return {"idle_power_w": power, "idle_power_source": source, "idle_window_s": rec.get("telemetry_window_s"),
            "idle_temp_c": rec.get("temp_mean_c"), "idle_sm_clock_mhz": rec.get("sm_clock_mean_mhz"),
            "idle_gpu_util_pct": rec.get("gpu_util_mean_pct"), "idle_other_gpu_processes": rec.get("other_gpu_processes")}
