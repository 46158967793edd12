"""A sweep run by the user's own torchrun or ``srun`` (``accelbench run`` sees the rank variables): this process is
one rank of a job someone else launched. Rank 0 runs the loop with the :class:`~accelbench.launchers.torchrun.here.Here`
launcher and stores every row; the other ranks run the cases rank 0 broadcasts."""

from __future__ import annotations

from accelbench.core.spec import case_from_dict
from accelbench.launchers.torchrun.here import Here, options_for
from accelbench.launchers.torchrun.job import DistOptions
from accelbench.launchers.torchrun.ranks import RankInfo
from accelbench.launchers.torchrun.worker import run_cases
from accelbench.store import Store
from accelbench.sweep import loop


def run_here(scenario, spec, db: str | None, info: RankInfo, opts: DistOptions | None = None, on_case=None, label=None):
    """Run ``spec`` as one rank of a job someone else launched; rank 0 stores. Returns rank 0's
    :class:`accelbench.sweep.loop.Outcome` (None on the other ranks)."""
    import torch.distributed as dist

    from accelbench.launchers.torchrun.context import init

    opts = options_for(info, opts)
    ctx = init(info, opts)
    try:
        if ctx.rank == 0:
            with Store(db or ":memory:") as store:
                return loop.run(scenario, spec, store, launcher=Here(ctx, opts), on_case=on_case, label=label)
        box = [None]
        dist.broadcast_object_list(box, src=0)
        run_cases(ctx, scenario, spec, [case_from_dict(scenario, c) for c in box[0]], None)
        return None
    finally:
        ctx.leave()
