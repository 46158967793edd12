"""Telemetry around a measured region. Only :mod:`accelbench.telemetry.nvml` imports ``pynvml``.

Every workload uses the same API, so each stored case carries the same telemetry columns::

    with monitor(device, period_s=0.1) as mon:
        ...  # the timed region
    record.update(mon.record())      # flat metrics, unit in each name
    series.update(mon.series())      # raw samples, stored in the ``samples`` table
"""

from __future__ import annotations

from typing import Any


class Monitor:
    """Samples the GPU behind ``device`` (torch.device) in a background thread while active.

    On a CPU device it records nothing (``record()`` returns ``{}``).
    """

    def __init__(self, device, period_s: float = 0.1):
        self.device = device
        self.period_s = period_s
        self._sampler = None
        if device.type == "cuda":
            from accelbench.telemetry.nvml import Sampler

            self._sampler = Sampler(device.index or 0, period_s)

    def __enter__(self) -> "Monitor":
        if self._sampler is not None:
            self._sampler.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self._sampler is not None:
            self._sampler.__exit__(*exc)

    def record(self) -> dict[str, Any]:
        """Per-case aggregates: ``gpu_util_mean_pct`` (NVML utilization.gpu), ``device_mem_used_bytes`` (max)."""
        s = self._sampler
        if s is None or not s.available:
            return {}
        return {"gpu_util_mean_pct": s.mean("gpu_util_pct"), "device_mem_used_bytes": s.max("mem_used_bytes")}

    def series(self) -> dict[str, list[float]]:
        """Raw samples by signal name (``nvml_<signal>``) plus their times ``nvml_t_s``."""
        s = self._sampler
        if s is None or not s.samples:
            return {}
        keys = [k for k in s.samples[0] if s.samples[0][k] is not None]
        return {f"nvml_{k}": [row.get(k) for row in s.samples] for k in keys}


def monitor(device, period_s: float = 0.1) -> Monitor:
    """A :class:`Monitor` for ``device``; use it as a context manager around the timed region."""
    return Monitor(device, period_s)
