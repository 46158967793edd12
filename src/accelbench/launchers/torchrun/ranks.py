"""Who am I in a distributed job: rank detection from the launcher's environment, and child environments.

Pure code (no torch import). A process belongs to a distributed job when it was started by torchrun
(``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``GROUP_RANK``, ``MASTER_ADDR``/``PORT``:
torchrun docs, "Environment Variables") or by Slurm's ``srun`` with the user's script exporting
``MASTER_ADDR``/``MASTER_PORT`` (``SLURM_PROCID``, ``SLURM_NTASKS``, ``SLURM_LOCALID``, ``SLURM_NODEID``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

# NVLink SHARP / multicast stay off: on a shared multi-GPU host a program using them can take the host's GPUs out of
# service. They are set in every child accelbench starts and, when missing, in every rank before the process group
# exists.
SAFE_ENV: dict[str, str] = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}


@dataclass(frozen=True, kw_only=True, slots=True)
class RankInfo:
    """This process's place in the job.

    Attributes:
        rank: global rank, 0..world_size-1.
        world_size: number of processes in the job.
        local_rank: index of this process on its node (selects ``cuda:<local_rank>``).
        local_world_size: processes on this node.
        node_rank: index of this node (torchrun's ``GROUP_RANK``, Slurm's ``SLURM_NODEID``).
        launcher: ``torchrun`` or ``slurm``.
    """

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    node_rank: int
    launcher: str


def _int(env: Mapping[str, str], key: str, default: int | None = None) -> int | None:
    value = env.get(key)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        return default


def rank_info(env: Mapping[str, str] | None = None) -> RankInfo | None:
    """The :class:`RankInfo` described by ``env`` (default ``os.environ``), or None outside a job.

    torchrun's variables win over Slurm's. A Slurm task counts only when ``MASTER_ADDR`` and
    ``MASTER_PORT`` are set too (``init_process_group`` needs them) and ``SLURM_NTASKS`` > 1.
    """
    env = os.environ if env is None else env
    rank, world = _int(env, "RANK"), _int(env, "WORLD_SIZE")
    if rank is not None and world is not None:
        local = _int(env, "LOCAL_RANK", 0)
        return RankInfo(
            rank=rank,
            world_size=world,
            local_rank=local,
            local_world_size=_int(env, "LOCAL_WORLD_SIZE", world),
            node_rank=_int(env, "GROUP_RANK", 0),
            launcher="torchrun",
        )
    rank, world = _int(env, "SLURM_PROCID"), _int(env, "SLURM_NTASKS")
    if rank is not None and world and world > 1 and env.get("MASTER_ADDR") and env.get("MASTER_PORT"):
        return RankInfo(
            rank=rank,
            world_size=world,
            local_rank=_int(env, "SLURM_LOCALID", 0),
            local_world_size=_int(env, "SLURM_NTASKS_PER_NODE", world),
            node_rank=_int(env, "SLURM_NODEID", 0),
            launcher="slurm",
        )
    return None


def torch_env(info: RankInfo) -> dict[str, str]:
    """The torch.distributed ``env://`` variables for ``info`` (what a Slurm task lacks)."""
    return {
        "RANK": str(info.rank),
        "WORLD_SIZE": str(info.world_size),
        "LOCAL_RANK": str(info.local_rank),
        "LOCAL_WORLD_SIZE": str(info.local_world_size),
        "GROUP_RANK": str(info.node_rank),
    }


def child_env(
    base: Mapping[str, str] | None = None, visible_devices: str | None = None, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Environment for a child process: ``base`` (default ``os.environ``) + :data:`SAFE_ENV` (always).

    Args:
        visible_devices: when given, ``CUDA_VISIBLE_DEVICES`` (e.g. ``"2,3"``) for a job pinned to GPUs.
        extra: further variables (win over everything else).
    Rank variables of an enclosing job are removed so a child torchrun starts its own job.
    """
    env = dict(os.environ if base is None else base)
    for key in (
        "RANK",
        "WORLD_SIZE",
        "LOCAL_RANK",
        "LOCAL_WORLD_SIZE",
        "GROUP_RANK",
        "ROLE_RANK",
        "TORCHELASTIC_RUN_ID",
        "MASTER_ADDR",
        "MASTER_PORT",
    ):
        env.pop(key, None)
    env.update(SAFE_ENV)
    if visible_devices is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible_devices
    env.update(extra or {})
    return env
