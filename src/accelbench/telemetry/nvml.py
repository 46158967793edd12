"""NVML (nvidia-ml-py) access: device provenance and a background sampler.

The only module that imports ``pynvml``. Every function degrades to None / empty results when NVML
is missing or the GPU does not answer, so CPU-only machines work unchanged.
"""

from __future__ import annotations

import threading
import time
from typing import Any

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

        bus = torch.cuda.get_device_properties(torch_index).pci_bus_id if hasattr(
            torch.cuda.get_device_properties(torch_index), "pci_bus_id") else None
    except Exception:
        bus = None
    if bus:
        h = _safe(nv.nvmlDeviceGetHandleByPciBusId, bus.encode() if isinstance(bus, str) else bus)
        if h is not None:
            return h
    return _safe(nv.nvmlDeviceGetHandleByIndex, torch_index)


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
    def dec(v):
        return v.decode() if isinstance(v, bytes) else v
    mem = _safe(nv.nvmlDeviceGetMemoryInfo, h)
    limit_mw = _safe(nv.nvmlDeviceGetEnforcedPowerLimit, h)
    return {
        "gpu_name": dec(_safe(nv.nvmlDeviceGetName, h)),
        "driver_version": dec(_safe(nv.nvmlSystemGetDriverVersion)),
        "nvml_cuda_driver_version": _safe(nv.nvmlSystemGetCudaDriverVersion_v2),
        "gpu_uuid": dec(_safe(nv.nvmlDeviceGetUUID, h)),
        "gpu_mem_total_bytes": mem.total if mem else None,
        "power_limit_w": limit_mw / 1000 if limit_mw else None,
        "sm_clock_max_mhz": _safe(nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_SM),
        "mem_clock_max_mhz": _safe(nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_MEM),
        "pcie_link_gen_max": _safe(nv.nvmlDeviceGetMaxPcieLinkGeneration, h),
        "pcie_link_width_max": _safe(nv.nvmlDeviceGetMaxPcieLinkWidth, h),
    }


def read_basic(h) -> dict[str, float | None]:
    """One sample of GPU utilisation (%) and device memory used (bytes)."""
    nv = _nvml()
    util = _safe(nv.nvmlDeviceGetUtilizationRates, h)
    mem = _safe(nv.nvmlDeviceGetMemoryInfo, h)
    return {
        "gpu_util_pct": float(util.gpu) if util else None,
        "mem_util_pct": float(util.memory) if util else None,
        "mem_used_bytes": float(mem.used) if mem else None,
    }


class Sampler:
    """Background thread sampling NVML every ``period_s`` seconds for one GPU.

    Use as a context manager around the measured region; ``samples`` is a list of dicts with a
    ``t_s`` key (seconds since start) and the signal keys of :func:`read_basic`.
    """

    def __init__(self, torch_index: int, period_s: float = 0.1):
        self.period_s = period_s
        self.handle = handle_for(torch_index)
        self.samples: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def available(self) -> bool:
        return self.handle is not None

    def _loop(self) -> None:
        t0 = time.perf_counter()
        while True:
            row = read_basic(self.handle)
            row["t_s"] = time.perf_counter() - t0
            self.samples.append(row)
            if self._stop.wait(self.period_s):
                break

    def __enter__(self) -> "Sampler":
        if self.available:
            self._thread = threading.Thread(target=self._loop, name="accelbench-nvml", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def mean(self, key: str) -> float | None:
        vals = [s[key] for s in self.samples if s.get(key) is not None]
        return sum(vals) / len(vals) if vals else None

    def max(self, key: str) -> float | None:
        vals = [s[key] for s in self.samples if s.get(key) is not None]
        return max(vals) if vals else None


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
