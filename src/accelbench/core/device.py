"""The device a run uses: a device name resolved and checked, queued work waited for without creating a CUDA
context, cuDNN's autotuning set for a case, the CPU's model name."""

from __future__ import annotations

import platform
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from accelbench.core.errors import ConfigError

if TYPE_CHECKING:
    import torch


def resolve_device(name: str) -> torch.device:
    """``auto`` -> ``cuda:<current>`` when a GPU is visible else ``cpu``; validate explicit choices.

    Raises:
        ConfigError: not a device name accelbench runs on, or a CUDA device that is not available.
    """
    import torch

    from accelbench.core.spec import DEVICE_RE

    if not isinstance(name, str) or not DEVICE_RE.match(name):
        raise ConfigError("device", name, "auto, cpu, cuda, cuda:N")
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(name)
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError("device", name, "cpu (no CUDA GPU is visible)")
        if dev.index is None:
            dev = torch.device("cuda", torch.cuda.current_device())
        if dev.index >= torch.cuda.device_count():
            raise ConfigError("device", name, f"cuda:0..cuda:{torch.cuda.device_count() - 1}")
    return dev


def sync_if_context(device: torch.device) -> bool:
    """Wait for this process's queued work on ``device`` without ever creating a CUDA context.

    A process that never ran work on the GPU (the torchrun launcher's parent, which measures idle power
    and cleans up between cases) has nothing to wait for, and a context created by
    ``torch.cuda.synchronize`` would hold ~0.5 GB and show to the ranks as another compute process on
    their GPU (NVML's process list). ``torch.cuda.is_initialized`` is not enough: reading device
    properties initialises torch's CUDA state without a context.

    Returns:
        True when this process holds a context on ``device`` (and it was synchronised), else False.
    """
    import torch

    if device.type != "cuda" or not torch.cuda.is_initialized():
        return False
    index = device.index if device.index is not None else torch.cuda.current_device()
    has_context = getattr(torch._C, "_cuda_hasPrimaryContext", None)  # private; present since torch 1.x
    if has_context is not None and not has_context(index):
        return False
    torch.cuda.synchronize(device)
    return True


def cpu_model() -> str:
    """CPU model name from /proc/cpuinfo, else ``platform.processor()``."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@contextmanager
def cudnn_benchmark(value: bool | None) -> Iterator[bool]:
    """``torch.backends.cudnn.benchmark`` set to ``value`` for a case (None: left as it is), restored after;
    yields the value in force (cuDNN times its convolution algorithms per shape and keeps the fastest:
    PyTorch docs, "torch.backends.cudnn.benchmark")."""
    import torch

    before = torch.backends.cudnn.benchmark
    if value is not None:
        torch.backends.cudnn.benchmark = value
    try:
        yield bool(torch.backends.cudnn.benchmark)
    finally:
        torch.backends.cudnn.benchmark = before
