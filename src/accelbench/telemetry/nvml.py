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
