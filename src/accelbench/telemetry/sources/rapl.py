"""CPU package energy (RAPL) from the Linux powercap interface.

``/sys/class/powercap/intel-rapl:<N>/energy_uj`` (one zone per CPU package; AMD Zen uses the same
interface) is a microjoule counter that wraps at ``max_energy_range_uj`` (kernel
Documentation/power/powercap/powercap.rst). Since Linux 5.10 it is readable by root only
(CVE-2020-8694); elsewhere the energy columns say "not available".
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from accelbench.telemetry.sources.base import Source

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


def read_zones(zones: Sequence[Path]) -> list[tuple[int, int] | None]:
    """``(energy_uj, max_energy_range_uj)`` of each zone, None for a zone that could not be read."""
    out: list[tuple[int, int] | None] = []
    for zone in zones:
        try:
            out.append((int((zone / "energy_uj").read_text()), int((zone / "max_energy_range_uj").read_text())))
        except (OSError, ValueError):
            out.append(None)
    return out


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


def rapl_record(begin: dict, end: dict) -> dict[str, Any]:
    """RAPL columns from window-edge counters holding ``t`` (s) and ``rapl`` (the zone readings).

    Returns:
        ``cpu_energy_j`` (J, all packages), ``cpu_power_mean_w`` (that energy / the counters' window, W)
        and ``cpu_energy_source`` ("rapl", or "not available" without a complete pair of readings).
    """
    wall = end.get("t", 0) - begin.get("t", 0)
    e_j = rapl_delta_j(begin.get("rapl") or [], end.get("rapl") or [])
    return {
        "cpu_energy_j": e_j,
        "cpu_power_mean_w": e_j / wall if e_j is not None and wall > 0 else None,
        "cpu_energy_source": "rapl" if e_j is not None else "not available",
    }


class RaplSource(Source):
    """The host's RAPL package zones, read at the window edges only (the counter is the measurement).

    Args:
        zones: readable package zones (:func:`rapl_zones`); none gives "not available" columns.
        meters_device: the watched device is the CPU, so the package energy is also the case's
            ``energy_j`` (with ``energy_source``, ``energy_window_s``, ``energy_confidence``).
    """

    name = "rapl"
    sampled = False

    def __init__(self, zones: Sequence[Path], meters_device: bool = False):
        self.zones, self.meters_device = list(zones), meters_device

    def _counters(self) -> dict[str, Any]:
        return {"t": time.perf_counter(), "rapl": read_zones(self.zones)}

    def begin(self) -> dict[str, Any]:
        return self._counters()

    def end(self) -> dict[str, Any]:
        return self._counters()

    def record(self, samples, begin, end, window_s) -> dict[str, Any]:
        rec = rapl_record(begin, end)
        if self.meters_device:
            e = rec["cpu_energy_j"]
            rec.update(
                energy_j=e,
                energy_source=rec["cpu_energy_source"],
                energy_window_s=window_s,
                energy_confidence=None if e is None else "ok",
            )  # RAPL updates every ~1 ms
        return rec

    def series(self, samples) -> dict[str, list]:
        return {}


def rapl_sources(devices: list, period_s: float, pids: tuple) -> list[Source]:
    """The host's RAPL source, always (its columns say "not available" without a readable zone); it
    meters the case's energy when no CUDA device is watched (a CPU run)."""
    cpu_run = not any(getattr(d, "type", None) == "cuda" for d in devices)
    return [RaplSource(rapl_zones(), meters_device=cpu_run)]
