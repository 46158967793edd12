"""The NVML source (nvidia-ml-py): each CUDA GPU in use; and GPU provenance (:func:`device_info`).

The only module that imports ``pynvml`` (:mod:`.gpm` and :mod:`.topology` use the handle it gives).
Every function degrades to None / empty results when NVML is missing or the GPU does not answer, so
CPU-only machines work unchanged. The arithmetic is in :mod:`accelbench.telemetry.aggregate`.

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

from accelbench.telemetry.aggregate import combine, counter_rate, gpu_record
from accelbench.telemetry.sources.base import Source, Unavailable, columns
from accelbench.telemetry.sources.gpm import GPM_METRICS, GPM_PCIE, Gpm
from accelbench.telemetry.ticks import CounterWatch, step_counters

_INIT = False
# The columns of a case on CUDA devices none of which NVML answers for.
NOT_AVAILABLE = {
    "energy_j": None,
    "energy_source": "not available",
    "power_source": "not available",
    "gpm_status": "not available: NVML did not answer",
}


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


def handle_for(torch_index: int, uuid: str | None = None):
    """NVML handle of GPU ``cuda:torch_index`` (CUDA_VISIBLE_DEVICES honoured), or ``uuid``'s (:func:`torch_uuid`)."""
    nv = _nvml()
    if nv is None:
        return None
    h = _by_uuid(nv, uuid or torch_uuid(torch_index))  # torch's pci_bus_id is a bare bus number, not NVML's
    if h is not None or uuid is not None:
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


def free_bytes(torch_index: int) -> int | None:
    """Free memory of GPU ``cuda:torch_index`` in bytes as NVML reports it (``nvmlDeviceGetMemoryInfo``: its total
    less what every process and the driver hold), read without a CUDA context in this process
    (``torch.cuda.mem_get_info`` creates one, which then stays on the GPU for the life of the process); None where
    NVML cannot tell."""
    nv = _nvml()
    h = handle_for(torch_index) if nv is not None else None
    info = _safe(nv.nvmlDeviceGetMemoryInfo, h) if h is not None else None
    return None if info is None else int(info.free)


def _dec(v):
    return v.decode() if isinstance(v, bytes) else v


def torch_uuid(torch_index: int) -> str | None:
    """The UUID torch reports for ``cuda:torch_index`` (right under CUDA_VISIBLE_DEVICES), or None."""
    try:
        import torch

        return str(torch.cuda.get_device_properties(torch_index).uuid)
    except Exception:
        return None


def _by_uuid(nv, uuid: str | None):
    """NVML handle of the GPU with this UUID (with or without NVML's ``GPU-`` prefix), or None."""
    for text in (uuid if uuid.startswith("GPU-") else f"GPU-{uuid}", uuid) if uuid else ():
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


class NvmlSource(Source):
    """One GPU, through NVML.

    ``read()`` returns one sample: ``gpu_util_pct``, ``mem_util_pct`` (NVML utilization rates, %),
    ``mem_used_bytes``, ``power_w``, ``temp_c``, ``sm_clock_mhz``, ``mem_clock_mhz``,
    ``clocks_event_reasons`` (bitmask), ``energy_mj`` (counter reading), ``pcie_tx_bytes_per_s`` /
    ``pcie_rx_bytes_per_s`` and, every >= 100 ms on Hopper+, the ``gpm_*`` metrics. ``begin()`` and
    ``end()`` read the counters that bound the window (energy, violation time, whole-window GPM,
    compute processes). Signals the GPU lacks are None, and :meth:`info` says which sources it has.
    ``record()`` is :func:`accelbench.telemetry.aggregate.gpu_record`, several GPUs ``combine``d
    (:func:`accelbench.telemetry.aggregate.combine`); ``series()`` are prefixed ``prefix``.
    """

    combine = staticmethod(combine)

    def __init__(
        self,
        torch_index: int,
        period_s: float = 0.1,
        name: str = "gpu0",
        prefix: str = "nvml_",
        uuid=None,
        job_pids: tuple[int, ...] = (),
    ):
        self.name, self.period_s, self.prefix, self.key = name, period_s, prefix, ("nvml", torch_index)
        self.job_pids = tuple(job_pids)  # the job's other processes (ranks, a launched server): not "other processes"
        self.nv = _nvml()
        self.h = handle_for(torch_index, uuid) if self.nv is not None else None
        self.available = self.h is not None
        self.gpm, self.gpm_status, self._prev_pcie = None, "not available: NVML missing", None
        self._watch: CounterWatch | None = None
        if self.available:
            self._probe()

    # probing ------------------------------------------------------------------------------------
    def _fields(self, ids):
        vals = _safe(self.nv.nvmlDeviceGetFieldValues, self.h, list(ids))
        return [(_field_value(self.nv, v) if vals is not None else None) for v in (vals or [None] * len(ids))]

    def _probe(self) -> None:
        nv = self.nv
        want = [
            nv.NVML_FI_DEV_POWER_INSTANT,
            nv.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION,
            nv.NVML_FI_DEV_PCIE_COUNT_TX_BYTES,
            nv.NVML_FI_DEV_PCIE_COUNT_RX_BYTES,
        ]
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
        elif (
            self.period_s >= 0.1
            and _safe(nv.nvmlDeviceGetPcieThroughput, self.h, nv.NVML_PCIE_UTIL_TX_BYTES) is not None
        ):
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
            now = (
                time.perf_counter(),
                fields.get(nv.NVML_FI_DEV_PCIE_COUNT_TX_BYTES),
                fields.get(nv.NVML_FI_DEV_PCIE_COUNT_RX_BYTES),
            )
            prev, self._prev_pcie = self._prev_pcie, now
            if prev is None or None in now or None in prev or now[0] <= prev[0]:
                return {"pcie_tx_bytes_per_s": None, "pcie_rx_bytes_per_s": None}
            dt = now[0] - prev[0]
            return {
                "pcie_tx_bytes_per_s": counter_rate(prev[1], now[1], dt),
                "pcie_rx_bytes_per_s": counter_rate(prev[2], now[2], dt),
            }
        if self.pcie_source == "nvml-pcie-throughput-20ms":
            tx = _safe(nv.nvmlDeviceGetPcieThroughput, self.h, nv.NVML_PCIE_UTIL_TX_BYTES)
            rx = _safe(nv.nvmlDeviceGetPcieThroughput, self.h, nv.NVML_PCIE_UTIL_RX_BYTES)
            return {
                "pcie_tx_bytes_per_s": tx * 1024.0 if tx is not None else None,  # NVML: KB/s
                "pcie_rx_bytes_per_s": rx * 1024.0 if rx is not None else None,
            }
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
        out = self.counters()
        if self.energy_counter and self.period_s > 0:  # the counter's steps (period 0: edges only, no thread)
            self._watch = CounterWatch(lambda: _safe(self.nv.nvmlDeviceGetTotalEnergyConsumption, self.h)).start()
        return out

    def end(self) -> dict[str, Any]:
        ticks, self._watch = (self._watch.stop() if self._watch is not None else []), None
        out = self.counters()
        out["gpm_window"] = _safe(self.gpm.window, default={}) if self.gpm is not None else {}
        return {**out, **step_counters(ticks, self.key)}

    def info(self) -> dict[str, Any]:
        """What this GPU offers: power/PCIe sources, energy counter, GPM status, our PID and the job's other PIDs."""
        return {
            "power_source": self.power_source,
            "pcie_source": self.pcie_source,
            "energy_counter": self.energy_counter,
            "gpm_status": self.gpm_status,
            "own_pid": self.pid or os.getpid(),
            "job_pids": self.job_pids,
        }

    def record(self, samples, begin, end, window_s) -> dict[str, Any]:
        return gpu_record(samples, begin, end, self.info(), window_s)

    def series(self, samples) -> dict[str, list]:
        return columns(samples, self.prefix)

    def close(self) -> None:
        if self._watch is not None:
            self._watch.stop()
            self._watch = None
        if self.gpm is not None:
            self.gpm.close()
            self.gpm = None


def gpu_sources(devices: list, period_s: float, pids: tuple) -> list[Source]:
    """A source per CUDA device in ``devices`` that NVML answers for, named ``gpu<i>`` (i: its place
    among the CUDA devices), series ``nvml_*`` for one GPU and ``nvml<i>_*`` for several; [] without
    CUDA devices; a stand-in with :data:`NOT_AVAILABLE` columns when NVML answers for none."""
    cuda = [d for d in devices if getattr(d, "type", None) == "cuda"]
    if not cuda:
        return []
    gpus = [
        NvmlSource(d.index or 0, period_s, f"gpu{i}", uuid=getattr(d, "uuid", None), job_pids=pids)
        for i, d in enumerate(cuda)
    ]
    gpus = [g for g in gpus if g.available]
    for g in gpus:
        g.prefix = "nvml_" if len(gpus) == 1 else f"nvml{g.name[3:]}_"
    return gpus or [Unavailable("gpu", NOT_AVAILABLE)]
