"""The monitor of the thread mode: a :class:`~accelbench.telemetry.sampler.Sampler` thread over every registered
source, in the measured process (the sampler process, :mod:`accelbench.telemetry.process`, runs one of these too)."""

from __future__ import annotations

from typing import Any

from accelbench.telemetry.sampler import Sampler
from accelbench.telemetry.sources import SOURCES, Source, SourceFactory

DEFAULT_PERIOD_S = 0.1


def _devices(device) -> list:
    return list(device) if isinstance(device, (list, tuple)) else [device]


class Monitor:
    """Samples every registered source that applies to ``device`` while active (see :mod:`accelbench.telemetry`).

    Attributes:
        groups: registry name -> the sources its factory returned for these devices (in registry order).
        sources: all of them, as the sampler reads them.
    """

    isolation = "thread"

    def __init__(
        self,
        device,
        period_s: float | None = DEFAULT_PERIOD_S,
        pids: tuple[int, ...] = (),
        factories: dict[str, SourceFactory] | None = None,
        watch: int | None = None,
    ):
        """``factories``: the source registry to ask (default :data:`SOURCES`); ``watch``: the pid the sources
        read for (default this process; the sampler process gives the measured one's, :meth:`Source.watch`)."""
        devs = _devices(device)
        self.device = devs[0]
        self.period_s = float(period_s or 0.0)
        self.groups: dict[str, list[Source]] = {
            name: list(factory(devs, self.period_s, tuple(pids)))
            for name, factory in (SOURCES if factories is None else factories).items()
        }
        self.sources = [src for group in self.groups.values() for src in group]
        names = [src.name for src in self.sources]
        if len(set(names)) != len(names):
            raise ValueError(f"telemetry sources share a name: {names}")
        if watch is not None:
            for src in self.sources:
                src.watch(watch)
        self.sampler = Sampler(self.sources, self.period_s)

    def __enter__(self) -> Monitor:
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
        rec: dict[str, Any] = {
            "telemetry_period_ms": 1000 * self.period_s,
            "telemetry_isolation": self.isolation,
            "telemetry_window_s": s.window_s,
            "telemetry_samples": max(map(len, s.samples.values()), default=0),
            "telemetry_busy_pct": 100 * s.busy_s / s.window_s if s.window_s else None,
        }
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
        return {
            "period_s": self.period_s,
            "window_s": s.window_s,
            "busy_s": s.busy_s,
            "samples": s.samples,
            "counters": s.counters,
            "info": {k: v for k, v in info.items() if v},
            "errors": s.errors,
        }
