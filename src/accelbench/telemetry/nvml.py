"""NVML (nvidia-ml-py) access: device provenance and one GPU's telemetry readings.

The only module that imports ``pynvml``. Every function degrades to None / empty results when NVML
is missing or the GPU does not answer, so CPU-only machines work unchanged. The background thread
lives in :mod:`accelbench.telemetry.sampler` and the arithmetic in :mod:`accelbench.telemetry.aggregate`;
this module only reads the driver.

NVML references (nvml.h / the NVML API reference, driver r535+): ``nvmlDeviceGetFieldValues`` with
``NVML_FI_DEV_POWER_INSTANT`` (mW, instantaneous) and ``NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION`` (mJ since
driver load); ``nvmlDeviceGetPowerUsage`` (mW; a 1 s average on Ampere and newer);
``nvmlDeviceGetCurrentClocksEventReasons`` (bitmask); ``nvmlDeviceGetViolationStatus`` (ns spent
clock-limited by a policy); ``nvmlGpmMetricsGet`` (GPU Performance Monitoring, Hopper and newer).
"""

from __future__ import annotations

import os
import time
from typing import Any

from accelbench.telemetry.aggregate import counter_rate
from accelbench.telemetry.gpm import GPM_METRICS, GPM_PCIE, Gpm

_INIT = False



def _nvml():
    """Import and initialise pynvml once; return the module or None when unavailable."""
    global _INIT
    try:
        import pynvml
    except ImportError:
        return None
    if not _INIT:
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError:
            return None
        _INIT = True
    return pynvml


def _safe(fn, *args, default=None):
    try:
        return fn(*args)
    except Exception:  # NVMLError_NotSupported and friends: the field is just absent
        return default


def handle_for(torch_index: int):
    """NVML handle of the GPU torch calls ``cuda:torch_index`` (honours CUDA_VISIBLE_DEVICES via PCI bus id)."""
    nv = _nvml()
    if nv is None:
        return None
    h = _handle_by_uuid(nv, torch_index)  # torch's pci_bus_id is a bare bus number, not NVML's bus-id string
    if h is not None:
        return h
    try:
        import torch

        bus = getattr(torch.cuda.get_device_properties(torch_index), "pci_bus_id", None)
    except Exception:
        bus = None
    if bus:
        h = _safe(nv.nvmlDeviceGetHandleByPciBusId, bus.encode() if isinstance(bus, str) else bus)
        if h is not None:
            return h
    return _safe(nv.nvmlDeviceGetHandleByIndex, torch_index)


def _dec(v):
    return v.decode() if isinstance(v, bytes) else v


def _handle_by_uuid(nv, torch_index: int):
    """NVML handle by the GPU UUID torch reports (right under CUDA_VISIBLE_DEVICES), or None."""
    try:
        import torch

        uuid = str(torch.cuda.get_device_properties(torch_index).uuid)
    except Exception:
        return None
    for text in (uuid if uuid.startswith("GPU-") else f"GPU-{uuid}", uuid):
        h = _safe(nv.nvmlDeviceGetHandleByUUID, text)
        if h is not None:
            return h
    return None


def device_info(torch_index: int) -> dict[str, Any]:
    """Provenance of one GPU: name, driver, memory, power limit, max clocks, serial-free identifiers.

    Units are in the keys (bytes, W, MHz). Missing fields are None.
    """
    nv = _nvml()
    h = handle_for(torch_index)
    if nv is None or h is None:
        return {}
    mem = _safe(nv.nvmlDeviceGetMemoryInfo, h)
    limit_mw = _safe(nv.nvmlDeviceGetEnforcedPowerLimit, h)
    return {
        "gpu_name": _dec(_safe(nv.nvmlDeviceGetName, h)),
        "driver_version": _dec(_safe(nv.nvmlSystemGetDriverVersion)),
        "nvml_cuda_driver_version": _safe(nv.nvmlSystemGetCudaDriverVersion_v2),
        "gpu_uuid": _dec(_safe(nv.nvmlDeviceGetUUID, h)),
        "gpu_mem_total_bytes": mem.total if mem else None,
        "power_limit_w": limit_mw / 1000 if limit_mw else None,
        "sm_clock_max_mhz": _safe(nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_SM),
        "mem_clock_max_mhz": _safe(nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_MEM),
        "pcie_link_gen_max": _safe(nv.nvmlDeviceGetMaxPcieLinkGeneration, h),
        "pcie_link_width_max": _safe(nv.nvmlDeviceGetMaxPcieLinkWidth, h),
    }


def _field_value(nv, fv):
    """The number inside one ``c_nvmlFieldValue_t``, or None when NVML returned an error for it."""
    if fv.nvmlReturn != nv.NVML_SUCCESS:
        return None
    attr = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}.get(fv.valueType)
    return getattr(fv.value, attr) if attr else None


class GpuReader:
    """Telemetry source for one GPU (see :mod:`accelbench.telemetry.sampler` for the protocol).

    ``read()`` returns one sample: ``gpu_util_pct``, ``mem_util_pct`` (NVML utilization rates, %),
    ``mem_used_bytes``, ``power_w``, ``temp_c``, ``sm_clock_mhz``, ``mem_clock_mhz``,
    ``clocks_event_reasons`` (bitmask), ``energy_mj`` (counter reading), ``pcie_tx_bytes_per_s`` /
    ``pcie_rx_bytes_per_s`` and, every >= 100 ms on Hopper+, the ``gpm_*`` metrics. ``begin()`` and
    ``end()`` read the counters that bound the window (energy, violation time, whole-window GPM,
    compute processes). Signals the GPU lacks are None, and the ``*_source`` / ``gpm_status`` keys
    of ``end()`` say so.
    """

    def __init__(self, torch_index: int, period_s: float = 0.1, name: str = "gpu0"):
        self.name, self.period_s = name, period_s
        self.nv = _nvml()
        self.h = handle_for(torch_index) if self.nv is not None else None
        self.available = self.h is not None
        self.gpm, self.gpm_status, self._prev_pcie = None, "not available: NVML missing", None
        if self.available:
            self._probe()

    # probing ------------------------------------------------------------------------------------
    def _fields(self, ids):
        vals = _safe(self.nv.nvmlDeviceGetFieldValues, self.h, list(ids))
        return [(_field_value(self.nv, v) if vals is not None else None) for v in (vals or [None] * len(ids))]

    def _probe(self) -> None:
        nv = self.nv
        want = [nv.NVML_FI_DEV_POWER_INSTANT, nv.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION,
                nv.NVML_FI_DEV_PCIE_COUNT_TX_BYTES, nv.NVML_FI_DEV_PCIE_COUNT_RX_BYTES]
        got = self._fields(want)
        self.field_ids = [f for f, v in zip(want, got) if v is not None]
        have = dict(zip(want, got))
        if have[nv.NVML_FI_DEV_POWER_INSTANT] is not None:
            self.power_source = "instant"
        elif _safe(nv.nvmlDeviceGetPowerUsage, self.h) is not None:
            self.power_source = "average"
        else:
            self.power_source = "not available"
        self.energy_counter = _safe(nv.nvmlDeviceGetTotalEnergyConsumption, self.h) is not None
        self._gpm_setup()
        # GPM first: NVML computes the rate itself (the byte counters are 32-bit and wrap every 4 GiB).
        if self.gpm is not None:
            self.pcie_source = "gpm"
        elif have[nv.NVML_FI_DEV_PCIE_COUNT_TX_BYTES] is not None:
            self.pcie_source = "nvml-pcie-byte-counters"
        elif self.period_s >= 0.1 and _safe(nv.nvmlDeviceGetPcieThroughput, self.h, nv.NVML_PCIE_UTIL_TX_BYTES) is not None:
            self.pcie_source = "nvml-pcie-throughput-20ms"  # blocks ~20 ms a call: only at >= 100 ms periods
        else:
            self.pcie_source = "not available"
        if self.pcie_source != "nvml-pcie-byte-counters":  # do not read counters nobody uses
            pcie = (nv.NVML_FI_DEV_PCIE_COUNT_TX_BYTES, nv.NVML_FI_DEV_PCIE_COUNT_RX_BYTES)
            self.field_ids = [f for f in self.field_ids if f not in pcie]

    def _gpm_setup(self) -> None:
        nv = self.nv
        if not hasattr(nv, "nvmlGpmQueryDeviceSupport"):
            self.gpm_status = "not available: nvidia-ml-py without GPM"
            return
        try:
            if not nv.nvmlGpmQueryDeviceSupport(self.h).isSupportedDevice:
                self.gpm_status = "not available: GPU has no GPM (needs Hopper or newer)"
                return
            self.gpm = Gpm(nv, self.h, {**GPM_METRICS, **GPM_PCIE})
            self.gpm.begin()
            self.gpm.window()  # fails here (not mid-run) if the driver refuses
            self.gpm_status = "ok"
        except Exception as exc:  # NVMLError: in use by another profiler, no permission, ...
            if self.gpm is not None:
                self.gpm.close()
            self.gpm, self.gpm_status = None, f"not available: {type(exc).__name__}: {exc}"

    # reading ------------------------------------------------------------------------------------
    def _pcie(self, fields: dict) -> dict[str, float | None]:
        nv = self.nv
        if self.pcie_source == "nvml-pcie-byte-counters":
            now = (time.perf_counter(), fields.get(nv.NVML_FI_DEV_PCIE_COUNT_TX_BYTES),
                   fields.get(nv.NVML_FI_DEV_PCIE_COUNT_RX_BYTES))
            prev, self._prev_pcie = self._prev_pcie, now
            if prev is None or None in now or None in prev or now[0] <= prev[0]:
                return {"pcie_tx_bytes_per_s": None, "pcie_rx_bytes_per_s": None}
            dt = now[0] - prev[0]
            return {"pcie_tx_bytes_per_s": counter_rate(prev[1], now[1], dt), "pcie_rx_bytes_per_s": counter_rate(prev[2], now[2], dt)}
        if self.pcie_source == "nvml-pcie-throughput-20ms":
            tx = _safe(nv.nvmlDeviceGetPcieThroughput, self.h, nv.NVML_PCIE_UTIL_TX_BYTES)
            rx = _safe(nv.nvmlDeviceGetPcieThroughput, self.h, nv.NVML_PCIE_UTIL_RX_BYTES)
            return {"pcie_tx_bytes_per_s": tx * 1024.0 if tx is not None else None,  # NVML: KB/s
                    "pcie_rx_bytes_per_s": rx * 1024.0 if rx is not None else None}
        return {}

    def read(self) -> dict[str, Any]:
        nv, h = self.nv, self.h
        fields = dict(zip(self.field_ids, self._fields(self.field_ids))) if self.field_ids else {}
        util = _safe(nv.nvmlDeviceGetUtilizationRates, h)
        mem = _safe(nv.nvmlDeviceGetMemoryInfo, h)
        if self.power_source == "instant":
            power_mw = fields.get(nv.NVML_FI_DEV_POWER_INSTANT)
        else:
            power_mw = _safe(nv.nvmlDeviceGetPowerUsage, h)
        energy = fields.get(nv.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION)
        if energy is None and self.energy_counter:
            energy = _safe(nv.nvmlDeviceGetTotalEnergyConsumption, h)
        row = {
            "gpu_util_pct": float(util.gpu) if util else None,
            "mem_util_pct": float(util.memory) if util else None,
            "mem_used_bytes": float(mem.used) if mem else None,
            "power_w": power_mw / 1000.0 if power_mw is not None else None,
            "temp_c": _safe(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU),
            "sm_clock_mhz": _safe(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM),
            "mem_clock_mhz": _safe(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_MEM),
            "clocks_event_reasons": self._reasons(),
            "energy_mj": energy,
        }
        row.update(self._pcie(fields))
        if self.gpm is not None:
            g = _safe(self.gpm.tick, default={})
            if self.pcie_source != "gpm":
                g = {k: v for k, v in g.items() if k not in GPM_PCIE}
            row.update(g)
        return row

    def _reasons(self) -> int | None:
        # The "event" name is the r535+ spelling; older drivers only export the "throttle" one.
        for fname in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"):
            v = _safe(getattr(self.nv, fname, None) or (lambda h: None), self.h)
            if v is not None:
                return int(v)
        return None

    def _violation_ns(self, policy: int) -> int | None:
        v = _safe(self.nv.nvmlDeviceGetViolationStatus, self.h, policy)
        return int(v.violationTime) if v is not None else None

    def processes(self) -> list[int] | None:
        """PIDs of compute processes on this GPU (host PID namespace), None when NVML cannot tell."""
        procs = _safe(self.nv.nvmlDeviceGetComputeRunningProcesses, self.h)
        return None if procs is None else sorted({int(p.pid) for p in procs})

    def counters(self) -> dict[str, Any]:
        """Counters read at a window edge: time, energy (mJ), violation time (ns), compute processes."""
        nv = self.nv
        return {
            "t": time.perf_counter(),
            "energy_mj": _safe(nv.nvmlDeviceGetTotalEnergyConsumption, self.h) if self.energy_counter else None,
            "violation_power_ns": self._violation_ns(nv.NVML_PERF_POLICY_POWER),
            "violation_thermal_ns": self._violation_ns(nv.NVML_PERF_POLICY_THERMAL),
            "processes": self.processes(),
        }

    def begin(self) -> dict[str, Any]:
        if self.gpm is not None:
            _safe(self.gpm.begin)
        self._prev_pcie = None
        return self.counters()

    def end(self) -> dict[str, Any]:
        out = self.counters()
        out["gpm_window"] = _safe(self.gpm.window, default={}) if self.gpm is not None else {}
        return out

    def info(self) -> dict[str, Any]:
        """What this GPU offers: power/PCIe sources, energy counter, GPM status, our PID."""
        return {"power_source": self.power_source, "pcie_source": self.pcie_source,
                "energy_counter": self.energy_counter, "gpm_status": self.gpm_status, "own_pid": os.getpid()}

    def close(self) -> None:
        if self.gpm is not None:
            self.gpm.close()
            self.gpm = None


# Link topology --------------------------------------------------------------------------------------
# nvidia-smi topo -m's names for the PCIe path between two GPUs (nvmlGpuTopologyLevel_t, NVML API docs).
PCIE_LEVELS = {0: "X", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}


def link_label(direct_links: int, nvlink_p2p: bool, active_links: int, pcie_level: int | None) -> str:
    """nvidia-smi ``topo -m`` style label of the link between two GPUs.

    Args:
        direct_links: NVLinks of the first GPU whose remote end is the second GPU (direct wiring).
        nvlink_p2p: NVML reports peer-to-peer over NVLink between them (``NVML_P2P_CAPS_INDEX_NVLINK``).
        active_links: active NVLinks of the first GPU; through an NVSwitch every one reaches every peer.
        pcie_level: ``nvmlDeviceGetTopologyCommonAncestor`` level, for GPUs without NVLink between them.
    Returns:
        ``NV<k>`` for NVLink (k links), else ``PIX``/``PXB``/``PHB``/``NODE``/``SYS``, or ``?``.
    """
    if direct_links:
        return f"NV{direct_links}"
    if nvlink_p2p and active_links:
        return f"NV{active_links}"
    return PCIE_LEVELS.get(pcie_level, "?") if pcie_level is not None else "?"


def _bus_id(nv, h) -> str | None:
    pci = _safe(nv.nvmlDeviceGetPciInfo, h)
    if pci is None:
        return None
    bus = pci.busId.decode() if isinstance(pci.busId, bytes) else pci.busId
    return bus.upper()[-12:]  # "0000:18:00.0": NVML pads the domain to 4 or 8 digits by API version


def _nvlinks(nv, h) -> tuple[int, list[str]]:
    """Active NVLinks of a GPU and each link's remote PCI bus id."""
    active, remotes = 0, []
    for link in range(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18)):
        if _safe(nv.nvmlDeviceGetNvLinkState, h, link) != getattr(nv, "NVML_FEATURE_ENABLED", 1):
            continue
        active += 1
        pci = _safe(nv.nvmlDeviceGetNvLinkRemotePciInfo, h, link)
        if pci is not None:
            bus = pci.busId.decode() if isinstance(pci.busId, bytes) else pci.busId
            remotes.append(bus.upper()[-12:])
    return active, remotes


def link_topology(torch_indices: list[int]) -> dict[tuple[int, int], dict[str, Any]]:
    """Link between every ordered pair of GPUs (torch indices), as ``nvidia-smi topo -m`` shows it.

    Returns:
        ``{(i, j): {"link": "NV18"|"PIX"|..., "nvlink_links": int, "nvlink_p2p": bool, "pcie_path": str}}``;
        empty without NVML.
    """
    nv = _nvml()
    if nv is None:
        return {}
    handles = {i: handle_for(i) for i in torch_indices}
    info = {i: (_nvlinks(nv, h), _bus_id(nv, h)) for i, h in handles.items() if h is not None}
    out: dict[tuple[int, int], dict[str, Any]] = {}
    for i, (link_i, _) in info.items():
        for j, (_, bus_j) in info.items():
            if i == j:
                continue
            active, remotes = link_i
            direct = sum(r == bus_j for r in remotes) if bus_j else 0
            status = _safe(nv.nvmlDeviceGetP2PStatus, handles[i], handles[j], getattr(nv, "NVML_P2P_CAPS_INDEX_NVLINK", 2))
            level = _safe(nv.nvmlDeviceGetTopologyCommonAncestor, handles[i], handles[j])
            p2p = status == getattr(nv, "NVML_P2P_STATUS_OK", 0)
            out[(i, j)] = {"link": link_label(direct, p2p, active, level), "nvlink_links": direct or (active if p2p else 0),
                           "nvlink_p2p": p2p, "pcie_path": PCIE_LEVELS.get(level, "?") if level is not None else "?"}
    return out
