"""What every rank runs: ``python -m accelbench.distributed.worker JOB.json`` (started by torchrun).

Per case: local rank 0 notes the start; every rank measures its share; rank errors are written to the
job's work directory and re-raised (torchrun then stops the other ranks); results go to global rank 0 by
``gather_object``, and rank 0 alone writes the rank rows and the aggregate row to the store.
"""

from __future__ import annotations

import sys
from typing import Any

from accelbench.distributed.results import add_row
from accelbench.distributed import results
from accelbench.distributed.context import RankContext, init
from accelbench.distributed.job import Job, note_error, note_progress
from accelbench.distributed.ranks import RankInfo, rank_info
from accelbench.measure import is_oom, one_line
from accelbench.spec import Case, SweepSpec


def spec_from_dict(d: dict[str, Any]) -> SweepSpec:
    """Rebuild a :class:`SweepSpec` from ``to_dict()`` output (JSON turns tuples into lists)."""
    return SweepSpec(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})


def case_from_dict(d: dict[str, Any]) -> Case:
    return Case(**{k: v for k, v in d.items() if k != "key"})


def _measure_fn(workload: str):
    if workload == "inference":
        from accelbench.distributed.infer import measure
    else:
        from accelbench.distributed.ddp import measure
    return measure


def run_cases(ctx: RankContext, job: Job, store=None, run_id: int | None = None, echo=print) -> list[dict]:
    """Run the job's cases in order on this rank; rank 0 stores them and returns the aggregate rows."""
    import torch.distributed as dist

    from accelbench.measure import Inputs

    spec = spec_from_dict(job.spec)
    inputs, measure, out = Inputs(spec, ctx.device), _measure_fn(job.workload), []
    for cd in job.cases:
        case = case_from_dict(cd)
        if ctx.info.local_rank == 0:
            note_progress(ctx.workdir, "start", cd["key"])
        try:
            res = measure(ctx, case, spec, inputs)
        except Exception as exc:
            note_error(ctx.workdir, ctx.rank, cd["key"], one_line(exc), is_oom(exc))
            raise
        finally:
            cleanup(ctx.device)
        gathered = [None] * ctx.world if ctx.rank == 0 else None
        dist.gather_object(res, gathered, dst=0)
        if ctx.rank == 0:
            agg = store_case(store, run_id, cd["key"], gathered)
            out.append(agg)
            echo(summary_line(agg))
        if ctx.info.local_rank == 0:
            note_progress(ctx.workdir, "done", cd["key"])
        ctx.host_barrier()
    return out


def cleanup(device) -> None:
    """Free a case's memory; reset torch.compile's caches only when it was used (importing dynamo costs seconds)."""
    import gc

    import torch

    gc.collect()
    if "torch._dynamo" in sys.modules:
        torch._dynamo.reset()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()


def store_case(store, run_id: int | None, key: str, gathered: list[dict]) -> dict:
    """Rank 0: add the rank rows and the aggregate row (with scaling against the baseline) to the store."""
    recs = [g["record"] for g in gathered]
    keys = sorted({k for g in gathered for k in g["telemetry_keys"]})
    agg = results.aggregate(recs, keys, barrier_window_s=recs[0].get("barrier_window_s"))
    agg["case_key"] = results.aggregate_key(key, len(recs))
    base = agg if len(recs) == 1 else find_baseline(store, run_id, agg["workload"], key, agg.get("device_name"))
    agg = results.with_scaling(agg, base)
    if store is not None:
        for g in gathered:
            rec = {**g["record"], "case_key": results.rank_key(key, len(recs), g["record"]["rank"]),
                   "status": "ok", "error": None}
            add_row(store, run_id, rec, g["series"])
        agg["case_id"] = add_row(store, run_id, agg)
    return agg


def find_baseline(store, run_id: int | None, workload: str, key: str, device_name: str | None) -> dict | None:
    """The aggregate row this case's speed-up is measured against.

    Preference: the smallest world size of the same case in the same run (the 1-GPU point of a scaling
    study), else the newest 1-process row of the same case on the same device model in any run.
    """
    import sqlite3

    if store is None:
        return None
    pattern = key.replace("%", r"\%").replace("_", r"\_") + "|gpus=%|all"
    try:
        rows = store.conn.execute(
            "SELECT * FROM cases WHERE case_key LIKE ? ESCAPE '\\' AND workload=? AND status='ok' "
            "ORDER BY case_id DESC", (pattern, workload)).fetchall()
    except sqlite3.OperationalError:  # a fresh store without the distributed columns yet
        return None
    rows = [dict(r) for r in rows if device_name is None or dict(r).get("device_name") == device_name]
    same_run = [r for r in rows if r["run_id"] == run_id]
    if same_run:
        return min(same_run, key=lambda r: (r["world_size"], -r["case_id"]))
    return next((r for r in rows if r["world_size"] == 1), None)


def summary_line(agg: dict) -> str:
    eff = agg.get("scaling_efficiency")
    tail = f", speed-up {agg['speedup']:.2f}x, efficiency {100 * eff:.1f}%" if eff is not None else ""
    return (f"{agg['workload']} {agg['model']} bs={agg['batch_size']}/rank {agg['precision']} {agg['mode']} on "
            f"{agg['world_size']} ranks: {agg['throughput_samples_per_s']:,.1f} samples/s "
            f"({agg['throughput_per_gpu_samples_per_s']:,.1f} per rank){tail}")


def main(argv: list[str] | None = None) -> int:
    """Entry point of one rank. Raises on failure (non-zero exit, torchrun stops the others)."""
    argv = sys.argv[1:] if argv is None else argv
    job = Job.load(argv[0])
    info = rank_info()
    if info is None:
        info = RankInfo(rank=0, world_size=1, local_rank=0, local_world_size=1, node_rank=0, launcher="torchrun")
    run_job(job, info)
    return 0


def run_job(job: Job, info: RankInfo, echo=print) -> list[dict]:
    """Join the group, run the job's workload, leave the group. Rank 0 returns its rows."""
    import torch.distributed as dist

    from accelbench.store import Store

    try:
        ctx = init(info, job.dist_options(), job.workdir)
    except Exception as exc:
        note_error(job.workdir, info.rank, None, one_line(exc), False)
        raise
    store = Store(job.db) if ctx.rank == 0 and job.db else None
    try:
        if job.workload == "interconnect":
            from accelbench.distributed.interconnect import run_ranks

            return run_ranks(ctx, job, store, job.run_id, echo)
        return run_cases(ctx, job, store, job.run_id, echo)
    finally:
        if store is not None:
            store.close()
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
