"""Telemetry around a measured region. Only :mod:`accelbench.telemetry.sources.nvml` imports ``pynvml``.

Every workload uses the same API, so each stored case carries the same telemetry columns::

    with monitor(device, period_s=0.1) as mon:
        ...  # the timed region
    record.update(mon.record())      # flat metrics, unit in each name
    series.update(mon.series())      # raw samples, stored in the ``samples`` table

``device`` is a ``torch.device`` or a list of them (one job on several GPUs). A background thread
(:mod:`.sampler`; with ``isolation="process"`` in a sampler process, :mod:`.process`, so that the measured
process keeps its GIL) reads every source that applies to the devices every ``period_s`` (default 0.1 s,
down to ~0.01 s; 0 = no thread, only the counters at the window edges: energy, CPU time). The sources
(each GPU in use through NVML, the host CPU through psutil, the CPU packages' RAPL energy) are one
file each in :mod:`.sources`, behind its ``SOURCES`` registry.
"""

from __future__ import annotations

import time
from typing import Any

from accelbench.core.spec import TELEMETRY_ISOLATIONS
from accelbench.telemetry.monitor import DEFAULT_PERIOD_S, Monitor, _devices
from accelbench.telemetry.process import ProcessMonitor
from accelbench.telemetry.sources import columns
from accelbench.telemetry.sources.rapl import rapl_zones

_columns = columns  # samples -> stored series; the replay tests store captured samples with it


def isolation_for(setting: str, host_bound: bool) -> str:
    """Where a case's sampler runs: ``thread`` or ``process`` (:mod:`accelbench.telemetry.process`).

    Args:
        setting: the spec's ``telemetry_isolation``: ``thread``, ``process``, or ``auto``: ``process`` for a
            host-bound backend, ``thread`` otherwise.
        host_bound: the case's backend is bound by its Python work per step
            (:attr:`accelbench.backends.base.Backend.host_bound`): a thread of the measured process would take
            its GIL and slow what it measures.

    Raises:
        ValueError: ``setting`` is none of :data:`accelbench.core.spec.TELEMETRY_ISOLATIONS`.
    """
    if setting not in TELEMETRY_ISOLATIONS:
        raise ValueError(f"telemetry_isolation {setting!r}: one of {', '.join(TELEMETRY_ISOLATIONS)}")
    if setting == "auto":
        return "process" if host_bound else "thread"
    return setting


def monitor(
    device, period_s: float | None = DEFAULT_PERIOD_S, pids: tuple[int, ...] = (), isolation: str = "thread"
) -> Monitor | ProcessMonitor:
    """A monitor for ``device``; use it as a context manager around the timed region.

    Args:
        period_s: sampling period (s); 0 or None: no sampler thread.
        pids: other processes of the measured job on this host (e.g. the other ranks): their CPU time is
            the job's, not contention (``cpu_other_util_pct``).
        isolation: ``thread``: the sampler is a thread of this process (:class:`Monitor`); ``process``: it runs
            in the sampler process (:class:`~accelbench.telemetry.process.ProcessMonitor`), so the measured loop
            keeps its GIL; the same columns either way, and ``telemetry_isolation`` says which.
    """
    if isolation == "process":
        return ProcessMonitor(device, period_s, pids)
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
    return {
        "idle_power_w": power,
        "idle_power_source": source,
        "idle_window_s": rec.get("telemetry_window_s"),
        "idle_temp_c": rec.get("temp_mean_c"),
        "idle_sm_clock_mhz": rec.get("sm_clock_mean_mhz"),
        "idle_gpu_util_pct": rec.get("gpu_util_mean_pct"),
        "idle_other_gpu_processes": rec.get("other_gpu_processes"),
    }
