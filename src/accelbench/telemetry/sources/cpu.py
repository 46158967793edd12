"""Host CPU telemetry (psutil): process and system CPU utilisation, CPU time of other processes, RSS.

CPU package energy is its own source (:mod:`accelbench.telemetry.sources.rapl`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from accelbench.telemetry.sources.base import Source
from accelbench.telemetry.sources.rapl import rapl_record


class CpuSource(Source):
    """The host CPU as seen from this process.

    ``read()`` gives ``process_cpu_pct`` (this process, % of one core, as ``top``),
    ``system_cpu_pct`` (all cores, %), ``rss_bytes``. ``begin()``/``end()`` give ``t`` (s), process
    CPU seconds, the CPU seconds of the process tree (this process, its finished children, its live
    children: DataLoader workers belong to the measured work) and system busy/total CPU seconds.

    Args:
        pids: further processes that belong to the measured work (e.g. the other ranks of a job on this
            host); their CPU time does not count as contention.
    """

    name = "cpu"

    def __init__(self, pids: Sequence[int] = ()):
        self.pids = [p for p in pids if p]
        try:
            import psutil
        except ImportError:  # psutil is a dependency; a broken install still measures
            psutil = None
        self.ps = psutil
        self.proc = psutil.Process() if psutil else None
        self.available = psutil is not None

    def watch(self, pid: int) -> None:
        """Read process ``pid`` (the measured one, from the sampler process); its children, the sampler
        process among them, stay the measured work's."""
        super().watch(pid)
        if self.ps is not None:
            self.proc = self.ps.Process(pid)

    def counters(self) -> dict[str, Any]:
        out: dict[str, Any] = {"t": time.perf_counter()}
        if self.ps is not None:
            pt = self.proc.cpu_times()
            st = self.ps.cpu_times()
            idle = st.idle + getattr(st, "iowait", 0.0)
            total = sum(st)
            out.update(
                process_cpu_s=pt.user + pt.system,
                system_busy_s=total - idle,
                system_total_s=total,
                tree_cpu_s=self._tree_cpu_s(pt),
            )
        return out

    def _tree_cpu_s(self, pt) -> float:
        """CPU seconds of this process, its waited-for children and every live descendant (and ``pids``)."""
        total = pt.user + pt.system + getattr(pt, "children_user", 0.0) + getattr(pt, "children_system", 0.0)
        others = list(self.proc.children(recursive=True))
        for pid in self.pids:
            try:
                others.append(self.ps.Process(pid))
            except self.ps.Error:
                pass
        for child in others:
            try:
                ct = child.cpu_times()
                total += ct.user + ct.system
            except self.ps.Error:  # it ended between the listing and the read
                pass
        return total

    def begin(self) -> dict[str, Any]:
        if self.ps is not None:
            self.proc.cpu_percent(None)  # the first call only primes psutil's interval
            self.ps.cpu_percent(None)
        return self.counters()

    def read(self) -> dict[str, Any]:
        if self.ps is None:
            return {}
        return {
            "process_cpu_pct": self.proc.cpu_percent(None),
            "system_cpu_pct": self.ps.cpu_percent(None),
            "rss_bytes": float(self.proc.memory_info().rss),
        }

    def end(self) -> dict[str, Any]:
        out = self.counters()
        if self.ps is not None:
            out["rss_bytes"] = float(self.proc.memory_info().rss)
        return out

    def record(self, samples, begin, end, window_s) -> dict[str, Any]:
        return cpu_record(samples, begin, end)


def cpu_sources(devices: list, period_s: float, pids: tuple) -> list[Source]:
    """The host CPU, on every run (``pids``: the job's other processes here, see :class:`CpuSource`)."""
    return [CpuSource(pids)]


def cpu_record(samples: Sequence[dict], begin: dict, end: dict) -> dict[str, Any]:
    """Per-case CPU columns from the window-edge counters (exact means) and the samples (RSS peak).

    Returns:
        ``process_cpu_util_pct`` (CPU seconds of this process / wall seconds * 100: % of one core),
        ``system_cpu_util_pct`` (busy / total CPU time of all cores * 100), ``cpu_other_util_pct`` (CPU
        time of every process outside the measured process tree / total CPU time of all cores * 100: the
        share of the host that other work took during the window), ``process_rss_max_bytes``; and
        when the counters carry RAPL readings (``rapl``: captures from before RAPL was its own source)
        the columns of :func:`accelbench.telemetry.sources.rapl.rapl_record`.
    """
    wall = end.get("t", 0) - begin.get("t", 0)
    rec: dict[str, Any] = {"process_cpu_util_pct": None, "system_cpu_util_pct": None, "cpu_other_util_pct": None}
    if wall > 0 and "process_cpu_s" in begin and "process_cpu_s" in end:
        rec["process_cpu_util_pct"] = 100.0 * (end["process_cpu_s"] - begin["process_cpu_s"]) / wall
        dt = end["system_total_s"] - begin["system_total_s"]
        busy = end["system_busy_s"] - begin["system_busy_s"]
        # busy is a sum of psutil's per-state times and dt their total: a fully busy host can read 1e-9 % over 100
        rec["system_cpu_util_pct"] = 100.0 * min(busy, dt) / dt if dt > 0 else None
        if dt > 0 and "tree_cpu_s" in begin and "tree_cpu_s" in end:
            other = busy - (end["tree_cpu_s"] - begin["tree_cpu_s"])
            rec["cpu_other_util_pct"] = max(0.0, 100.0 * other / dt)
    rss = [s["rss_bytes"] for s in samples if s.get("rss_bytes") is not None]
    if end.get("rss_bytes") is not None:
        rss.append(end["rss_bytes"])
    rec["process_rss_max_bytes"] = max(rss) if rss else None
    if "rapl" in begin or "rapl" in end:
        rec.update(rapl_record(begin, end))
    return rec
