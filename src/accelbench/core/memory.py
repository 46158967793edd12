"""Memory a run can use, and the refusal of a case estimated not to fit: shared by every scenario that estimates a
case's memory before building it (``accelbench generate``'s preflight, a language model's training step).
"""

from __future__ import annotations

GB = 1e9  # decimal gigabytes, as the estimates print them


class EstimatedOutOfMemory(MemoryError):
    """A case whose estimated memory exceeds the device's: the case runner makes it an ``oom`` row, not built."""


def gb(n: float) -> str:
    """``n`` bytes as decimal gigabytes: two decimals below 10 GB, one above."""
    return f"{n / GB:.2f} GB" if n < 10 * GB else f"{n / GB:.1f} GB"


def available_bytes(device) -> int | None:
    """Memory a run can use on ``device`` (a torch.device): available RAM on a CPU
    (``psutil.virtual_memory().available``), free memory on a CUDA GPU (``torch.cuda.mem_get_info``); None elsewhere
    (not checked)."""
    if device.type == "cpu":
        import psutil

        return int(psutil.virtual_memory().available)
    if device.type == "cuda":
        import torch

        return int(torch.cuda.mem_get_info(device)[0])
    return None
