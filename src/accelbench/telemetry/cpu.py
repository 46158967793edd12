"""CPU-side telemetry: process and system CPU utilisation, RSS (psutil) and CPU package energy (RAPL).

RAPL energy comes from the Linux powercap interface: ``/sys/class/powercap/intel-rapl:<N>/energy_uj``
(one zone per CPU package; AMD Zen uses the same interface), a microjoule counter that wraps at
``max_energy_range_uj`` (kernel Documentation/power/powercap/powercap.rst). Since Linux 5.10 it is
readable by root only (CVE-2020-8694); elsewhere the energy columns say "not available".
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Sequence

POWERCAP = Path("/sys/class/powercap")


def rapl_zones(root: Path = POWERCAP) -> list[Path]:
    """Readable package-level RAPL zones (``intel-rapl:N``, not sub-zones ``intel-rapl:N:M``)."""
    zones = []
    for z in sorted(root.glob("intel-rapl:*")) if root.is_dir() else []:
        if z.name.count(":") != 1:
            continue
        try:
            int((z / "energy_uj").read_text())
            if (z / "name").read_text().strip().startswith("package"):
                zones.append(z)
        except (OSError, ValueError):
            continue
    return zones


def _read_uj(zone: Path) -> tuple[int, int] | None:
    try:
        return int((zone / "energy_uj").read_text()), int((zone / "max_energy_range_uj").read_text())
    except (OSError, ValueError):
        return None


def rapl_delta_j(begin: Sequence[tuple[int, int] | None], end: Sequence[tuple[int, int] | None]) -> float | None:
    """Energy between two readings of each zone's ``(energy_uj, max_energy_range_uj)``, summed, in J.

    A counter that went down wrapped once: delta = end + range + 1 - begin. None if any zone is missing.
    """
    if not begin or len(begin) != len(end) or any(x is None for x in (*begin, *end)):
        return None
    total_uj = 0
    for (b, rng), (e, _) in zip(begin, end):
        total_uj += e - b if e >= b else e + rng + 1 - b
    return total_uj / 1e6


class CpuReader:
    """Telemetry source for the host CPU (protocol of :mod:`accelbench.telemetry.sampler`).

    ``read()`` gives ``process_cpu_pct`` (this process, % of one core, as ``top``),
    ``system_cpu_pct`` (all cores, %), ``rss_bytes``. ``begin()``/``end()`` give ``t`` (s), process
    CPU seconds, the CPU seconds of the process tree (this process, its finished children, its live
    children: DataLoader workers belong to the measured work), system busy/total CPU seconds and the RAPL
    zone readings.

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
        self.zones = rapl_zones()
        self.available = psutil is not None

    def counters(self) -> dict[str, Any]:
        out: dict[str, Any] = {"t": time.perf_counter(), "rapl": [_read_uj(z) for z in self.zones]}
        if self.ps is not None:
            pt = self.proc.cpu_times()
            st = self.ps.cpu_times()
            idle = st.idle + getattr(st, "iowait", 0.0)
            total = sum(st)
            out.update(process_cpu_s=pt.user + pt.system, system_busy_s=total - idle, system_total_s=total,
                       tree_cpu_s=self._tree_cpu_s(pt))
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
        return {"process_cpu_pct": self.proc.cpu_percent(None), "system_cpu_pct": self.ps.cpu_percent(None),
                "rss_bytes": float(self.proc.memory_info().rss)}

    def end(self) -> dict[str, Any]:
        out = self.counters()
        if self.ps is not None:
            out["rss_bytes"] = float(self.proc.memory_info().rss)
        return out


def cpu_record(samples: Sequence[dict], begin: dict, end: dict) -> dict[str, Any]:
    """Per-case CPU columns from the window-edge counters (exact means) and the samples (RSS peak).

    Returns:
        ``process_cpu_util_pct`` (CPU seconds of this process / wall seconds * 100: % of one core),
        ``system_cpu_util_pct`` (busy / total CPU time of all cores * 100), ``cpu_other_util_pct`` (CPU
        time of every process outside the measured process tree / total CPU time of all cores * 100: the
        share of the host that other work took during the window), ``process_rss_max_bytes``,
        ``cpu_energy_j`` / ``cpu_power_mean_w`` (RAPL packages) and ``cpu_energy_source``.
    """
    wall = end.get("t", 0) - begin.get("t", 0)
    rec: dict[str, Any] = {"process_cpu_util_pct": None, "system_cpu_util_pct": None, "cpu_other_util_pct": None}
    if wall > 0 and "process_cpu_s" in begin and "process_cpu_s" in end:
        rec["process_cpu_util_pct"] = 100.0 * (end["process_cpu_s"] - begin["process_cpu_s"]) / wall
        dt = end["system_total_s"] - begin["system_total_s"]
        busy = end["system_busy_s"] - begin["system_busy_s"]
        rec["system_cpu_util_pct"] = 100.0 * busy / dt if dt > 0 else None
        if dt > 0 and "tree_cpu_s" in begin and "tree_cpu_s" in end:
            other = busy - (end["tree_cpu_s"] - begin["tree_cpu_s"])
            rec["cpu_other_util_pct"] = max(0.0, 100.0 * other / dt)
    rss = [s["rss_bytes"] for s in samples if s.get("rss_bytes") is not None]
    if end.get("rss_bytes") is not None:
        rss.append(end["rss_bytes"])
    rec["process_rss_max_bytes"] = max(rss) if rss else None
    e_j = rapl_delta_j(begin.get("rapl") or [], end.get("rapl") or [])
    rec["cpu_energy_j"] = e_j
    rec["cpu_power_mean_w"] = e_j / wall if e_j is not None and wall > 0 else None
    rec["cpu_energy_source"] = "rapl" if e_j is not None else "not available"
    return rec

