"""Provenance: the machine and software a run was measured on (pytest-benchmark's machine_info idea), stored with
every run the sweep opens."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
from pathlib import Path
from typing import Any

from accelbench.core.device import cpu_model
from accelbench.core.version import __version__


def git_commit() -> str | None:
    """The project's git commit (with ``-dirty`` when the tree has changes).

    Outside a checkout (e.g. a copy of the tree on a GPU machine), ``$ACCELBENCH_GIT_COMMIT`` if set, else None.
    """
    src = Path(__file__).resolve().parents[1]  # the package's folder
    if os.environ.get("ACCELBENCH_GIT_COMMIT"):
        return os.environ["ACCELBENCH_GIT_COMMIT"]
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=src, capture_output=True, text=True, timeout=5)
        if sha.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=src, capture_output=True, text=True, timeout=5
        ).stdout.strip()
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
        "accelbench": __version__,
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
