"""Link topology between GPUs, as ``nvidia-smi topo -m`` shows it, through the NVML handle of
:mod:`accelbench.telemetry.sources.nvml` (GPU provenance for the interconnect scenario; not a source).

NVML references: ``nvmlDeviceGetNvLinkState`` / ``nvmlDeviceGetNvLinkRemotePciInfo`` (per link),
``nvmlDeviceGetP2PStatus`` with ``NVML_P2P_CAPS_INDEX_NVLINK``, ``nvmlDeviceGetTopologyCommonAncestor``
(``nvmlGpuTopologyLevel_t``).
"""

from __future__ import annotations

from typing import Any

from accelbench.telemetry.sources.nvml import _nvml, _safe, handle_for

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
            status = _safe(
                nv.nvmlDeviceGetP2PStatus, handles[i], handles[j], getattr(nv, "NVML_P2P_CAPS_INDEX_NVLINK", 2)
            )
            level = _safe(nv.nvmlDeviceGetTopologyCommonAncestor, handles[i], handles[j])
            p2p = status == getattr(nv, "NVML_P2P_STATUS_OK", 0)
            out[(i, j)] = {
                "link": link_label(direct, p2p, active, level),
                "nvlink_links": direct or (active if p2p else 0),
                "nvlink_p2p": p2p,
                "pcie_path": PCIE_LEVELS.get(level, "?") if level is not None else "?",
            }
    return out
