"""A rank's view of the job: process group set-up, device, barriers, and the :class:`accelbench.core.rank.Rank`
interface over torch.distributed (sharding, agreed pass counts, DDP, the barrier-aligned timed window)."""

from __future__ import annotations

import os
import socket
from typing import Any

from accelbench.core.errors import ConfigError
from accelbench.core.rank import Rank
from accelbench.launchers.torchrun.job import DistOptions
from accelbench.launchers.torchrun.ranks import SAFE_ENV, RankInfo, torch_env


class RankContext(Rank):
    """This rank, its device and its process groups.

    Attributes:
        info: rank, world size, local rank, node.
        device: ``cuda:<local_rank>`` (backend nccl) or ``cpu`` (backend gloo).
        backend: ``nccl`` or ``gloo``.
        opts: the launch options.
        workdir: where progress/error/result files go (None when no accelbench launcher listens).
        host_group: a gloo group for host-side waits that must not run GPU kernels (None on CPU jobs,
            where the default group is gloo already).
    """

    distributed = True

    def __init__(
        self,
        info: RankInfo,
        device,
        backend: str,
        opts: DistOptions,
        workdir: str | None = None,
        host_group: Any = None,
    ):
        super().__init__(device)
        self.info, self.backend, self.opts, self.workdir, self.host_group = info, backend, opts, workdir, host_group
        self.rank, self.world = info.rank, info.world_size
        self.global_batch, self.comm_share = opts.global_batch, opts.comm_share
        self._pids: tuple[int, ...] | None = None
        self._ddp = None

    def shard(self, x, labels):
        """Every ``world``-th sample from ``rank`` on (the ``DistributedSampler`` split).

        Raises:
            ConfigError: fewer samples than ranks.
        """
        if x.shape[0] < self.world:
            raise ConfigError("images", x.shape[0], f"at least one image per rank ({self.world})")
        return x[self.rank :: self.world], (labels[self.rank :: self.world] if labels is not None else None)

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
        import torch
        import torch.distributed as dist

        t = torch.tensor([float(value)], device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return float(t.item())

    def gather(self, obj: Any) -> list | None:
        """``obj`` of every rank, in rank order, on rank 0 (None elsewhere)."""
        import torch.distributed as dist

        out = [None] * self.world if self.rank == 0 else None
        dist.gather_object(obj, out, dst=0)
        return out

    def wrap(self, module):
        """``DistributedDataParallel`` around the module (gradients all-reduced in buckets during backward)."""
        from torch.nn.parallel import DistributedDataParallel as DDP

        self._ddp = DDP(module, device_ids=[self.device.index] if self.device.type == "cuda" else None)
        return self._ddp

    def nosync_step_ms(self, step, items, n: int, mode: str) -> float | None:
        """Mean step time (ms) of ``n`` (3..30) steps with DDP's gradient all-reduce switched off (``no_sync``):
        against the normal step, the communication the backward pass did not hide. None where it is not measured:
        the job does not ask for it (``comm_share``), or ``mode`` compiles or captures the step (``no_sync`` around
        a compiled or captured step would time another program). The caller's step must be wrapped by :meth:`wrap`
        (DDP)."""
        from accelbench import backends
        from accelbench.core.timing import time_passes

        if not self.comm_share or backends.get(mode).compiles:
            return None
        n = max(3, min(n, 30))
        self.barrier()
        with self._ddp.no_sync():
            step(items[0])
            lat_ms, _ = time_passes(step, [items[i % len(items)] for i in range(n)], 1, self.device)
        self.barrier()
        return sum(lat_ms) / len(lat_ms)

    def pids(self) -> tuple[int, ...]:
        """The other ranks' pids on this host (gathered once): their CPU time is the job's, not contention."""
        if self._pids is None:
            import torch.distributed as dist

            mine = (socket.gethostname(), os.getpid())
            every = [None] * self.world
            dist.all_gather_object(every, mine)
            self._pids = tuple(pid for host, pid in every if host == mine[0] and pid != mine[1])
        return self._pids

    def leave(self, timeout_s: float = 30.0) -> bool:
        """Leave the process group, first handing back every CUDA graph of the process.

        NCCL's communicator destroy waits until every CUDA graph that captured one of its collectives is destroyed
        (NCCL ``commDestroySync`` polls the communicator's persistent references; pytorch/pytorch#115388): a split
        step compiled with CUDA graphs (``static-compile*``) or a captured training step, still alive at
        ``destroy_process_group``, hangs the rank after its last case (on two H200s a split ``generate`` was still
        running ~290 s after storing its row, until its timeout stopped it). So the wrapped model is dropped,
        garbage collected and every compiled graph reset (:func:`accelbench.launchers.case.cleanup`: Dynamo's reset,
        which resets the backends it cached, Inductor's CUDA graph trees among them) before the group is destroyed;
        the destroy then runs in a daemon thread, waited on for ``timeout_s`` seconds, so a graph held elsewhere still
        cannot keep the rank from ending.

        Returns:
            True when the group was destroyed; False when it was still closing after ``timeout_s`` (a one-line note
            on stderr says so; the caller ends the process without waiting for it).
        """
        import sys
        import threading

        import torch.distributed as dist

        from accelbench.launchers.case import cleanup

        self._ddp = None
        cleanup(self.device)
        closing = threading.Thread(target=dist.destroy_process_group, name="destroy_process_group", daemon=True)
        closing.start()
        closing.join(timeout_s)
        if closing.is_alive():
            print(
                f"note: rank {self.rank}: the process group was still closing after {timeout_s:g} s (a CUDA graph "
                "still holds a communicator); the rank ends without it",
                file=sys.stderr,
                flush=True,
            )
            return False
        return True

    def fields(self) -> dict[str, Any]:
        """Columns every rank row carries (``gpu_uuid`` names the physical GPU behind CUDA_VISIBLE_DEVICES)."""
        uuid = None
        if self.device.type == "cuda":
            from accelbench.telemetry.sources.nvml import device_info

            uuid = device_info(self.device.index).get("gpu_uuid")
        return {
            "gpu_uuid": uuid,
            "rank": self.rank,
            "local_rank": self.info.local_rank,
            "node_rank": self.info.node_rank,
            "world_size": self.world,
            "nnodes": self.opts.nnodes,
            "backend": self.backend,
            "host": socket.gethostname(),
            "device": str(self.device),
            "device_type": self.device.type,
            "device_name": device_name(self.device),
            "aggregate": False,
            "scaling_mode": "strong" if self.global_batch else "weak",
        }


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
    return RankContext(info, device, backend, opts, workdir, host)


def device_name(device) -> str:
    """``NVIDIA H200``-style name of a CUDA device, the CPU model for ``cpu``."""
    if device.type == "cuda":
        import torch

        return torch.cuda.get_device_name(device)
    from accelbench.core.device import cpu_model

    return cpu_model()
