"""A rank's view of the job: process group set-up, device, barriers and the barrier-aligned timed window."""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from typing import Any, Callable

from accelbench.distributed.job import DistOptions
from accelbench.distributed.ranks import SAFE_ENV, RankInfo, torch_env
from accelbench.errors import ConfigError


@dataclass
class RankContext:
    """This rank, its device and its process groups.

    Attributes:
        info: rank, world size, local rank, node.
        device: ``cuda:<local_rank>`` (backend nccl) or ``cpu`` (backend gloo).
        backend: ``nccl`` or ``gloo``.
        opts: the launch options.
        workdir: where progress/error files go (None when no accelbench launcher listens).
        host_group: a gloo group for host-side waits that must not run GPU kernels (None on CPU jobs,
            where the default group is gloo already).
    """

    info: RankInfo
    device: Any
    backend: str
    opts: DistOptions
    workdir: str | None = None
    host_group: Any = None

    @property
    def rank(self) -> int:
        return self.info.rank

    @property
    def world(self) -> int:
        return self.info.world_size

    def per_rank_batch(self, batch_size: int) -> int:
        """Samples per rank per step: ``batch_size`` (weak scaling) or ``batch_size / world`` (global batch)."""
        return batch_size // self.world if self.opts.global_batch else batch_size

    def sync(self) -> None:
        import torch

        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def barrier(self) -> None:
        """All ranks reach this point with their device queues drained."""
        import torch.distributed as dist

        self.sync()
        if self.backend == "nccl":  # name the device: NCCL otherwise guesses it and warns
            dist.barrier(device_ids=[self.device.index])
        else:
            dist.barrier()
        self.sync()

    def host_barrier(self) -> None:
        """A barrier that runs no GPU kernel (ranks may wait here while rank 0 uses every GPU)."""
        import torch.distributed as dist

        dist.barrier(group=self.host_group) if self.host_group is not None else dist.barrier()

    def agree_max(self, value: float) -> float:
        """The largest ``value`` over all ranks (e.g. timed passes, so every rank runs the same number)."""
        import torch
        import torch.distributed as dist

        t = torch.tensor([float(value)], device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return float(t.item())


def init(info: RankInfo, opts: DistOptions, workdir: str | None = None) -> RankContext:
    """Join the process group: NCCL with one GPU per rank when GPUs are visible, else gloo on CPUs.

    Raises:
        ConfigError: ``device=cuda`` without a GPU, or fewer visible GPUs than local ranks.
    """
    for key, value in SAFE_ENV.items():
        os.environ.setdefault(key, value)
    if info.launcher == "slurm":
        os.environ.update(torch_env(info))
    import datetime

    import torch
    import torch.distributed as dist

    cuda = opts.device != "cpu" and torch.cuda.is_available()
    if opts.device == "cuda" and not cuda:
        raise ConfigError("device", "cuda", "cpu or auto (no CUDA GPU is visible)")
    if cuda and info.local_rank >= torch.cuda.device_count():
        raise ConfigError("gpus", info.local_world_size, f"1..{torch.cuda.device_count()} (GPUs visible)")
    if cuda:
        torch.cuda.set_device(info.local_rank)
    device = torch.device("cuda", info.local_rank) if cuda else torch.device("cpu")
    backend = "nccl" if cuda else "gloo"
    timeout = datetime.timedelta(seconds=opts.timeout_s)
    if not dist.is_initialized():
        dist.init_process_group(backend, timeout=timeout)
    host = dist.new_group(backend="gloo", timeout=timeout) if cuda else None
    return RankContext(info=info, device=device, backend=backend, opts=opts, workdir=workdir, host_group=host)


def device_name(device) -> str:
    """``NVIDIA H200``-style name of a CUDA device, the CPU model for ``cpu``."""
    if device.type == "cuda":
        import torch

        return torch.cuda.get_device_name(device)
    from accelbench.env import cpu_model

    return cpu_model()


def rank_fields(ctx: RankContext) -> dict[str, Any]:
    """Columns every rank row carries (``gpu_uuid`` names the physical GPU behind CUDA_VISIBLE_DEVICES)."""
    uuid = None
    if ctx.device.type == "cuda":
        from accelbench.telemetry.nvml import device_info

        uuid = device_info(ctx.device.index).get("gpu_uuid")
    return {"gpu_uuid": uuid, "rank": ctx.rank, "local_rank": ctx.info.local_rank, "node_rank": ctx.info.node_rank,
            "world_size": ctx.world, "nnodes": ctx.opts.nnodes, "backend": ctx.backend,
            "host": socket.gethostname(), "device": str(ctx.device), "device_type": ctx.device.type,
            "device_name": device_name(ctx.device), "aggregate": False}


def timed_window(ctx: RankContext, body: Callable[[], Any]) -> tuple[Any, dict[str, float | None]]:
    """Run ``body`` between two barriers; return its result and the window's clocks.

    Returns:
        ``(result, clocks)`` with ``window_start_epoch_s``/``window_end_epoch_s`` (this rank's wall clock
        just after the start barrier and after its own device finished), ``rank_window_s`` and, on rank
        0, ``barrier_window_s`` (start barrier to end barrier on one clock; used across hosts).
    """
    ctx.barrier()
    t0, start = time.perf_counter(), time.time()
    result = body()
    ctx.sync()
    end = time.time()
    ctx.barrier()
    barrier_s = time.perf_counter() - t0
    clocks = {"window_start_epoch_s": start, "window_end_epoch_s": end, "rank_window_s": end - start,
              "barrier_window_s": barrier_s if ctx.rank == 0 else None}
    return result, clocks
