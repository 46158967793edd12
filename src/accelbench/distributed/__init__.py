"""Data-parallel scaling over GPUs and nodes through torchrun and torch.distributed.

| module | what |
| --- | --- |
| ``ranks`` | rank detection (torchrun / Slurm environment), child environments (NVLS off) |
| ``job`` | the job file a launcher hands its ranks, progress and error files |
| ``launch`` | starts ``python -m torch.distributed.run`` and watches it (timeouts, kills, Ctrl-C) |
| ``tether`` | starts torchrun tied to accelbench's life (it gets SIGTERM when accelbench dies) |
| ``worker`` | the rank entry point: measure, gather to rank 0, rank 0 stores |
| ``context`` | process group set-up, barriers, the barrier-aligned timed window |
| ``infer`` / ``ddp`` | data-parallel inference / DistributedDataParallel training on one rank |
| ``collectives`` / ``interconnect`` | NCCL/gloo collectives, GPU pair copies, link topology |
| ``runner`` | ``run_distributed`` (``--gpus N``, ``--resume``), ``run_here`` (launched by a user's torchrun) |
| ``study`` | ``run_scale`` (scaling study), ``run_concurrent`` (K jobs on disjoint GPU sets) |
| ``maths`` / ``results`` | pure maths: aggregate rows, speed-up, scaling efficiency, bus bandwidth |

No process pool or socket protocol of our own: torchrun starts and stops the ranks, torch.distributed
moves the results (``gather_object`` to rank 0, the only process that writes the store).
"""

__all__ = ["run_distributed", "run_here", "run_scale", "run_concurrent", "run_interconnect"]


def __getattr__(name: str):
    if name in ("run_distributed", "run_here"):
        from accelbench.distributed import runner

        return getattr(runner, name)
    if name in ("run_scale", "run_concurrent"):
        from accelbench.distributed import study

        return getattr(study, name)
    if name == "run_interconnect":
        from accelbench.distributed.interconnect import run_interconnect

        return run_interconnect
    raise AttributeError(name)
