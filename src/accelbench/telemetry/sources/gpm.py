"""GPU Performance Monitoring (GPM, Hopper and newer) sample pairs, on the ``pynvml`` module that
:mod:`accelbench.telemetry.sources.nvml` passes in (this module imports no driver bindings itself).
Not a registered source: the NVML source reads it.

GPM metrics are computed from two ``nvmlGpmSampleGet`` snapshots (``nvmlGpmMetricsGet``, NVML API
reference "GPM"); what they mean is in nvml.h next to each ``NVML_GPM_METRIC_*`` id.
"""

from __future__ import annotations

import time

# Per-tick GPM metrics (nvml.h NVML_GPM_METRIC_*): our column name -> metric id.
GPM_METRICS = {
    "gpm_sm_util_pct": 2,  # SM_UTIL: % of SMs busy
    "gpm_sm_occupancy_pct": 3,  # SM_OCCUPANCY: % of warps resident vs theoretical maximum
    "gpm_tensor_util_pct": 5,  # ANY_TENSOR_UTIL: % of time the SMs ran any tensor-core op
    "gpm_dram_bw_util_pct": 10,  # DRAM_BW_UTIL: % of peak DRAM bandwidth used
    "gpm_fp32_util_pct": 12,  # FP32_UTIL: % of time doing non-tensor FP32 math
    "gpm_fp16_util_pct": 13,  # FP16_UTIL: % of time doing non-tensor FP16 math
}
GPM_PCIE = {"pcie_tx_bytes_per_s": 20, "pcie_rx_bytes_per_s": 21}  # MiB/s in NVML
GPM_MIN_INTERVAL_S = 0.1  # per-tick GPM no more often than this: shorter deltas are noise


class Gpm:
    """GPM sample pairs: a per-tick pair (rolling) and the window's first sample (whole-window metrics)."""

    def __init__(self, nv, h, ids: dict[str, int]):
        self.nv, self.h, self.ids = nv, h, ids
        self.start, self.last, self.cur = (nv.nvmlGpmSampleAlloc() for _ in range(3))
        self.last_t = 0.0

    def begin(self) -> None:
        self.nv.nvmlGpmSampleGet(self.h, self.start)
        self.nv.nvmlGpmSampleGet(self.h, self.last)
        self.last_t = time.perf_counter()

    def _metrics(self, s1, s2) -> dict[str, float | None]:
        nv = self.nv
        req = nv.c_nvmlGpmMetricsGet_t()
        req.version = nv.NVML_GPM_METRICS_GET_VERSION
        req.numMetrics = len(self.ids)
        req.sample1, req.sample2 = s1, s2
        for i, mid in enumerate(self.ids.values()):
            req.metrics[i].metricId = mid
        nv.nvmlGpmMetricsGet(req)
        out = {}
        for i, name in enumerate(self.ids):
            m = req.metrics[i]
            ok = m.nvmlReturn == nv.NVML_SUCCESS and m.value == m.value
            scale = 1048576.0 if name in GPM_PCIE else 1.0  # NVML reports PCIe in MiB/s
            out[name] = float(m.value) * scale if ok else None
        return out

    def tick(self) -> dict[str, float | None]:
        """Metrics since the previous tick, or {} when less than GPM_MIN_INTERVAL_S has passed."""
        now = time.perf_counter()
        if now - self.last_t < GPM_MIN_INTERVAL_S:
            return {}
        self.nv.nvmlGpmSampleGet(self.h, self.cur)
        out = self._metrics(self.last, self.cur)
        self.last, self.cur, self.last_t = self.cur, self.last, now
        return out

    def window(self) -> dict[str, float | None]:
        self.nv.nvmlGpmSampleGet(self.h, self.cur)
        return self._metrics(self.start, self.cur)

    def close(self) -> None:
        for s in (self.start, self.last, self.cur):
            try:
                self.nv.nvmlGpmSampleFree(s)
            except Exception:  # freeing is best effort: the driver reclaims at process exit
                pass
