"""Telemetry around a measured region. Only :mod:`accelbench.telemetry.sources.nvml` imports ``pynvml``.

Every workload uses the same API, so each stored case carries the same telemetry columns::

    with monitor(device, period_s=0.1) as mon:
        ...  # the timed region
    record.update(mon.record())      # flat metrics, unit in each name
    series.update(mon.series())      # raw samples, stored in the ``samples`` table

``device`` is a ``torch.device`` or a list of them (one job on several GPUs). A background thread
(:mod:`.sampler`) reads every source that applies to the devices every ``period_s`` (default 0.1 s,
down to ~0.01 s; 0 = no thread, only the counters at the window edges: energy, CPU time). The sources
(each GPU in use through NVML, the host CPU through psutil, the CPU packages' RAPL energy) are one
file each in :mod:`.sources`, behind its ``SOURCES`` registry.
"""

from __future__ import annotations

import time
from typing import Any

from accelbench.telemetry.sampler import Sampler
from accelbench.telemetry.sources import SOURCES, Source, columns
from accelbench.telemetry.sources.rapl import rapl_zones

DEFAULT_PERIOD_S = 0.1
_columns = columns  # samples -> stored series; the replay tests store captured samples with it


def _devices(device) -> list:
    return list(device) if isinstance(device, (list, tuple)) else [device]


class Monitor:
    """Samples every registered source that applies to ``device`` while active (see the module docstring).

    Attributes:
        groups: registry name -> the sources its factory returned for these devices (in registry order).
        sources: all of them, as the sampler reads them.
    """

    def __init__(self, device, period_s: float | None = DEFAULT_PERIOD_S, pids: tuple[int, ...] = ()):
        devs = _devices(device)
        self.device = devs[0]
        self.period_s = float(period_s or 0.0)
        self.groups: dict[str, list[Source]] = {name: list(factory(devs, self.period_s, tuple(pids)))
                                                for name, factory in SOURCES.items()}
        self.sources = [src for group in self.groups.values() for src in group]
        names = [src.name for src in self.sources]
        if len(set(names)) != len(names):
            raise ValueError(f"telemetry sources share a name: {names}")
        self.sampler = Sampler(self.sources, self.period_s)

    def __enter__(self) -> "Monitor":
        self.sampler.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.sampler.__exit__(*exc)
        for src in self.sources:
            src.close()

    def _record(self, src: Source) -> dict[str, Any]:
        s = self.sampler
        edges = s.counters[src.name]
        return src.record(s.samples[src.name], edges.get("begin", {}), edges.get("end", {}), s.window_s)

    def record(self) -> dict[str, Any]:
        """Per-case columns (units in the names): ``telemetry_*``, then per registry entry the records
        of its sources, combined (:meth:`accelbench.telemetry.sources.Source.combine`): per-GPU signal
        min/mean/max, ``energy_j`` and its source/confidence summed over GPUs
        (:func:`accelbench.telemetry.aggregate.gpu_record`, :func:`~accelbench.telemetry.aggregate.combine`),
        CPU columns (:func:`accelbench.telemetry.sources.cpu.cpu_record`), RAPL columns
        (:func:`accelbench.telemetry.sources.rapl.rapl_record`). On a CPU device ``energy_j`` is the
        RAPL package energy (the RAPL source meters it), or None with ``energy_source`` "not available"."""
        s = self.sampler
        rec: dict[str, Any] = {"telemetry_period_ms": 1000 * self.period_s, "telemetry_window_s": s.window_s,
                               "telemetry_samples": max(map(len, s.samples.values()), default=0),
                               "telemetry_busy_pct": 100 * s.busy_s / s.window_s if s.window_s else None}
        for group in self.groups.values():
            if group:
                rec.update(group[0].combine([self._record(src) for src in group]))
        if s.errors:
            rec["telemetry_errors"] = "; ".join(f"{k}: {v}" for k, v in s.errors.items())
        return rec

    def series(self) -> dict[str, list[float]]:
        """Raw samples of every source, named by it: ``nvml_<signal>`` (``nvml<i>_`` with several GPUs)
        with times ``nvml_t_s``, and ``cpu_<signal>`` with ``cpu_t_s``. Signals never read are left out."""
        out: dict[str, list] = {}
        for src in self.sources:
            out.update(src.series(self.sampler.samples[src.name]))
        return out

    def raw(self) -> dict[str, Any]:
        """Everything the sampler read, JSON-serialisable: what the replay tests feed to the aggregation."""
        s = self.sampler
        info = {src.name: src.info() for src in self.sources}
        return {"period_s": self.period_s, "window_s": s.window_s, "samples": s.samples, "counters": s.counters,
                "info": {k: v for k, v in info.items() if v}, "errors": s.errors}


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
    devs = _devices(device)
    cuda = [d for d in devs if getattr(d, "type", None) == "cuda"]
    none = {"idle_power_w": None, "idle_power_source": "not available"}
    if seconds <= 0 or (not cuda and not rapl_zones()):
        return none
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
