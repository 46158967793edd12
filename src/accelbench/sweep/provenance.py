"""Provenance: the machine and software a run was measured on (pytest-benchmark's machine_info idea), stored with
every run the sweep opens. accelbench's own revision is its version, the commit of the repository that tracks its
source files (never that of a repository that merely contains them: a user's project around a virtualenv) and a hash
of those files; the working directory's repository, the user's project, is a separate key."""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import socket
import subprocess
from pathlib import Path
from typing import Any

from accelbench.core.device import cpu_model
from accelbench.core.version import __version__

PACKAGE = Path(__file__).resolve().parents[1]  # accelbench's own folder (src/accelbench in a checkout)
# git's variables that point it at another repository than the one holding the folder it runs in
_GIT_VARS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_CEILING_DIRECTORIES", "GIT_COMMON_DIR")


def _git(args: list[str], cwd: Path) -> str | None:
    """``git ARGS`` in ``cwd`` (git's repository variables cleared): its stdout stripped, or None on any failure."""
    env = {k: v for k, v in os.environ.items() if k not in _GIT_VARS}
    try:
        p = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=5, env=env)
    except (OSError, subprocess.SubprocessError):
        return None
    return p.stdout.strip() if p.returncode == 0 else None


def git_commit(package: Path = PACKAGE) -> str | None:
    """accelbench's own git commit: the commit of the repository that tracks the package's source files (its
    ``__init__.py``, in a repository whose top level holds the package folder), with ``-dirty`` when the package's
    tracked files differ from it; None when no repository tracks them (an installed wheel; a virtualenv, or a copy of
    the tree, inside a repository of another project: that project's commit is not accelbench's).

    ``$ACCELBENCH_GIT_COMMIT``, when set, wins (a copy of a checkout on a machine without its ``.git``).
    """
    if os.environ.get("ACCELBENCH_GIT_COMMIT"):
        return os.environ["ACCELBENCH_GIT_COMMIT"]
    top = _git(["rev-parse", "--show-toplevel"], package)
    if top is None or not package.resolve().is_relative_to(Path(top).resolve()):
        return None
    if _git(["ls-files", "--error-unmatch", "--", "__init__.py"], package) is None:
        return None  # the repository around the package does not track it
    sha = _git(["rev-parse", "HEAD"], package)
    if not sha:
        return None
    dirty = _git(["status", "--porcelain", "--untracked-files=no", "--", "."], package)
    return sha + ("-dirty" if dirty else "")


@functools.cache
def source_sha256(package: Path = PACKAGE) -> str:
    """The SHA-256 of the package's files (each relative path and its bytes, in sorted order; ``__pycache__`` left
    out): the same hash is the same accelbench code, with or without git (a copy of the tree, a wheel, a dirty
    checkout). Computed once a process (about 0.1 s: a few hundred files)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def cwd_git_commit(cwd: Path | None = None) -> str | None:
    """The commit of the git repository holding the working directory (the user's project, not accelbench's), or None
    outside one; no dirty check (``git status`` of a large project is not cheap)."""
    return _git(["rev-parse", "HEAD"], Path(cwd or os.getcwd()))


def revision() -> dict[str, Any]:
    """accelbench's own revision for a run's environment: ``accelbench`` (the version), ``git_commit``
    (:func:`git_commit`), ``accelbench_source_sha256`` (:func:`source_sha256`), and, in a separate key,
    ``cwd_git_commit`` (:func:`cwd_git_commit`)."""
    return {
        "accelbench": __version__,
        "git_commit": git_commit(),
        "accelbench_source_sha256": source_sha256(),
        "cwd_git_commit": cwd_git_commit(),
    }


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
        **revision(),
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
