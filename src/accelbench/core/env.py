"""Provenance: the machine and software a run was measured on (pytest-benchmark's machine_info idea)."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
from pathlib import Path
from typing import Any

import accelbench
from accelbench.core.errors import ConfigError


def resolve_device(name: str):
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


def sync_if_context(device) -> bool:
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


def git_commit() -> str | None:
    """The project's git commit (with ``-dirty`` when the tree has changes).

    Outside a checkout (e.g. a copy of the tree on a GPU machine), ``$ACCELBENCH_GIT_COMMIT`` if set, else None.
    """
    src = Path(accelbench.__file__).resolve().parent
    if os.environ.get("ACCELBENCH_GIT_COMMIT"):
        return os.environ["ACCELBENCH_GIT_COMMIT"]
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=src, capture_output=True, text=True, timeout=5)
        if sha.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=src,
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return sha.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def _version(mod: str) -> str | None:
    try:
        from importlib.metadata import version

        return version(mod)
    except Exception:
        return None


def collect(device) -> dict[str, Any]:
    """Environment of a run on ``device`` (torch.device): host, CPU, software versions, GPU provenance."""
    import torch

    env: dict[str, Any] = {
        "host": socket.gethostname(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "accelbench": accelbench.__version__,
        "git_commit": git_commit(),
        "torch": torch.__version__,
        "torchvision": _version("torchvision"),
        "timm": _version("timm"),
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "device": str(device),
    }
    try:
        import psutil

        env["mem_total_bytes"] = psutil.virtual_memory().total
    except ImportError:
        pass
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        env.update(
            device_name=props.name,
            compute_capability=f"{props.major}.{props.minor}",
            sm_count=props.multi_processor_count,
        )
        from accelbench.telemetry.sources.nvml import device_info

        env.update(device_info(device.index or 0))
    else:
        env["device_name"] = env["cpu_model"]
    return env
