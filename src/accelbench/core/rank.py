"""A scenario's view of where it runs: one process (:class:`Rank`), or one rank of a torchrun job
(:class:`accelbench.launchers.torchrun.context.RankContext`, the same interface over torch.distributed).

A scenario's ``measure`` is written once against this interface: it shards its data, agrees on the number
of timed steps, wraps its model (DDP under torchrun) and times a barrier-aligned window; in one process
every one of those is the identity, so the single-process and the data-parallel measurements are the
same code.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import torch


class Recording(Protocol):
    """A telemetry monitor as a case row reads it (:class:`accelbench.telemetry.monitor.Monitor` is one)."""

    def record(self) -> dict[str, Any]: ...


class Rank:
    """The single process: rank 0 of 1.

    Attributes:
        device: the torch.device the case runs on.
        rank, world: this process's rank and the number of processes.
        global_batch: batch sizes are global, split over the ranks (strong scaling).
        comm_share: measure the exposed communication of DDP steps (under torchrun only).
    """

    distributed = False
    comm_share = False
    global_batch = False

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.rank, self.world = 0, 1

    def per_rank_batch(self, batch_size: int) -> int:
        """Samples per rank per step: ``batch_size`` (weak scaling) or ``batch_size / world`` (global batch)."""
        return batch_size // self.world if self.global_batch else batch_size

    def shard(self, x: torch.Tensor, labels: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """This rank's share of ``x`` (and ``labels``): every ``world``-th sample from ``rank`` on."""
        return x, labels

    def agree_max(self, value: float) -> float:
        """The largest ``value`` over the ranks (every rank then runs the same number of timed steps)."""
        return value

    def sync(self) -> None:
        from accelbench.core.timing import sync

        sync(self.device)

    def barrier(self) -> None:
        self.sync()

    def wrap(self, module: torch.nn.Module) -> torch.nn.Module:
        """The module a training step calls: DistributedDataParallel under torchrun, itself here."""
        return module

    def pids(self) -> tuple[int, ...]:
        """Other processes of this job on this host (their CPU time is the job's, not contention)."""
        return ()

    def fields(self) -> dict[str, Any]:
        """Columns a rank row carries (none in one process)."""
        return {}

    def timed_window(self, body: Callable[[], Any]) -> tuple[Any, dict[str, float | None]]:
        """Run ``body`` between two barriers; return its result and the window's clocks.

        Returns:
            ``(result, clocks)``: ``window_start_epoch_s`` / ``window_end_epoch_s`` (this rank's wall clock
            after the start barrier and after its device finished), ``rank_window_s``, and on rank 0
            ``barrier_window_s`` (start barrier to end barrier on one clock; used across hosts).
        """
        self.barrier()
        t0, start = time.perf_counter(), time.time()
        result = body()
        self.sync()
        end = time.time()
        self.barrier()
        clocks = {
            "window_start_epoch_s": start,
            "window_end_epoch_s": end,
            "rank_window_s": end - start,
            "barrier_window_s": time.perf_counter() - t0 if self.rank == 0 else None,
        }
        return result, clocks


def add_telemetry(rec: dict[str, Any], mon: Recording, device: torch.device) -> None:
    """Add the monitor's columns and the memory columns to a case record (a torchrun launcher combines the
    ranks' columns by their declared rules: :func:`accelbench.core.columns.combine`)."""
    rec.update(mon.record(), **memory_fields(device))


def memory_fields(device: torch.device) -> dict[str, Any]:
    """Peak allocator memory on a GPU; the process RSS on a CPU (torch keeps no CPU allocator statistics)."""
    import torch

    if device.type == "cuda":
        return {
            "peak_mem_bytes": torch.cuda.max_memory_allocated(device),
            "peak_mem_reserved_bytes": torch.cuda.max_memory_reserved(device),
        }
    import psutil

    return {"peak_mem_bytes": None, "process_rss_bytes": psutil.Process(os.getpid()).memory_info().rss}
