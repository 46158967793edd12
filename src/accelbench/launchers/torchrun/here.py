"""A run launched by the user's own torchrun or ``srun`` (``accelbench run`` sees the rank variables): this
process is one rank. Rank 0 runs the loop (:func:`accelbench.sweep.loop.run`) and stores every row; it
tells the other ranks which cases to run (``broadcast_object_list``), and every rank then runs the same
cases through the same code as a job accelbench launched itself (:func:`worker.run_cases`).

For several nodes the results land in the store of the node that hosts global rank 0.
"""

from __future__ import annotations

from accelbench.launchers.torchrun import Torchrun
from accelbench.launchers.torchrun.job import DistOptions
from accelbench.launchers.torchrun.ranks import RankInfo


class Here(Torchrun):
    """The launcher rank 0 hands the loop: the cases run in this job's ranks, nothing is started."""

    def __init__(self, ctx, opts: DistOptions):
        super().__init__(opts, echo=False)
        self.ctx = ctx

    def execute(self, sweep, cases: list, state) -> None:
        from accelbench.launchers.torchrun.worker import run_cases

        todo = self._runnable(sweep, cases)
        self.ctx_broadcast([c.to_dict() for c in todo])
        seen: set[str] = set()
        run_cases(
            self.ctx,
            sweep.scenario,
            sweep.spec,
            todo,
            lambda i, case, gathered: self._store(sweep, todo, {"key": case.key, "ranks": gathered}, seen),
        )

    def ctx_broadcast(self, obj):
        import torch.distributed as dist

        box = [obj]
        dist.broadcast_object_list(box, src=0)
        return box[0]


def options_for(info: RankInfo, opts: DistOptions | None) -> DistOptions:
    """The launch options of a job someone else started, from its rank variables."""
    import dataclasses

    nnodes = max(1, info.world_size // max(info.local_world_size, 1))
    base = dataclasses.asdict(opts) if opts else {}
    return DistOptions(
        **{
            **base,
            "gpus": info.local_world_size,
            "nnodes": nnodes,
            "node_rank": info.node_rank,
            "rdzv_endpoint": base.get("rdzv_endpoint") or ("env" if nnodes > 1 else None),
        }
    )
