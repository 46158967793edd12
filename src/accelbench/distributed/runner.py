"""Launcher side of ``--gpus N``: plan the cases, run them under torchrun, turn failures into rows.

``run_distributed(spec, store, opts, workload)`` begins a run (or adds to one), stores ``unsupported`` rows
for cases that cannot run, and launches torchrun on the rest. When a rank fails or a case hangs, torchrun
(or the launcher, on timeout) stops every rank; the case that was running gets an error row (``oom`` or
``error``, naming the rank), larger batch sizes of a configuration that ran out of memory get
``skipped`` rows, and torchrun is started again on the cases left. Finished cases are already stored
by rank 0, so nothing finished is lost.

``run_here`` is the same for a process that a user's torchrun or Slurm started (it is one rank).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from accelbench.distributed.results import add_row
from accelbench import modes, precisions
from accelbench.distributed import results
from accelbench.distributed.job import DistOptions, Job
from accelbench.distributed.ranks import RankInfo
from accelbench.errors import ConfigError
from accelbench.spec import Case, SweepSpec, expand

KINDS = {"inference": "inference-dp", "train": "train-ddp"}


@dataclass
class DistOutcome:
    """What a distributed sweep returns: the run id, the aggregate rows of this call, Ctrl-C."""

    run_id: int
    rows: list[dict[str, Any]] = field(default_factory=list)
    interrupted: bool = False
    launches: int = 0


def device_kind(opts: DistOptions) -> str:
    """``cuda`` when ranks will get GPUs, else ``cpu``. Raises ConfigError for impossible requests."""
    import torch

    cuda = opts.device != "cpu" and torch.cuda.is_available()
    if opts.device == "cuda" and not cuda:
        raise ConfigError("device", "cuda", "cpu or auto (no CUDA GPU is visible)")
    if cuda and opts.gpus > torch.cuda.device_count():
        raise ConfigError("gpus", opts.gpus, f"1..{torch.cuda.device_count()} (GPUs visible)")
    return "cuda" if cuda else "cpu"


def begin(store, kind: str, spec_dict: dict[str, Any], opts: DistOptions, cuda: bool | None = None) -> int:
    """Begin a run with provenance (the first GPU's, plus every visible GPU's name)."""
    import torch

    from accelbench import env as envmod

    cuda = device_kind(opts) == "cuda" if cuda is None else cuda
    env = envmod.collect(torch.device("cuda", 0) if cuda else torch.device("cpu"))
    env["distributed"] = {"world_size": opts.world_size, "nnodes": opts.nnodes, "torch_distributed": torch.__version__,
                          "gpu_names": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if cuda else []}
    digest = hashlib.sha256(json.dumps(spec_dict, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return store.begin_run(kind, spec_dict, digest, env)


def case_dict(case: Case) -> dict[str, Any]:
    return {**dataclasses.asdict(case), "key": case.key}


def plan(spec: SweepSpec, opts: DistOptions, workload: str, kind: str) -> tuple[list[Case], list[dict]]:
    """``(cases to run, rows for cases that cannot run)`` on ``kind`` devices (``cuda``/``cpu``)."""
    import torch

    from accelbench.distributed.ddp import unsupported_reason as train_reason

    dev = torch.device("cuda", 0) if kind == "cuda" else torch.device("cpu")
    run, rows = [], []
    for case in expand(spec, kind):
        if workload == "train":
            reason = train_reason(case.precision, case.mode, dev)
        else:
            reason = precisions.unsupported_reason(case.precision, dev) or modes.unsupported_reason(case.mode, dev)
        if opts.global_batch and case.batch_size % opts.world_size:
            reason = reason or f"global batch {case.batch_size} does not split evenly over {opts.world_size} ranks"
        if reason:
            rows.append(results.error_row(case_dict(case), KINDS[workload], opts.world_size, "unsupported", reason))
        else:
            run.append(case)
    return run, rows


def spec_doc(spec: SweepSpec, opts: DistOptions, workload: str) -> dict[str, Any]:
    return {**spec.to_dict(), "workload": workload, "distributed": opts.to_dict()}


def run_distributed(spec: SweepSpec, store, opts: DistOptions, workload: str = "inference", run_id: int | None = None,
                    visible_devices: str | None = None, echo: bool = True, prefix: str = "",
                    finish: bool = True) -> DistOutcome:
    """Run the sweep data-parallel on ``opts.gpus`` processes per node (see module docstring).

    Args:
        spec: the sweep (batch sizes are per rank unless ``opts.global_batch``).
        store: an open :class:`accelbench.store.Store`; rank 0 writes into the same file.
        workload: ``inference`` (data-parallel inference) or ``train`` (DDP training steps).
        run_id: add to this run (e.g. a scaling study) instead of beginning one.
        visible_devices: ``CUDA_VISIBLE_DEVICES`` for the ranks.
        finish: mark the run complete at the end.
    Raises:
        ConfigError: bad options (more GPUs than visible, unknown workload).
    """
    from accelbench.distributed.launch import failure, launch

    if workload not in KINDS:
        raise ConfigError("workload", workload, ", ".join(KINDS))
    cases, rows = plan(spec, opts, workload, device_kind(opts))
    if run_id is None:
        run_id = begin(store, KINDS[workload], spec_doc(spec, opts, workload), opts)
    out = DistOutcome(run_id=run_id)
    done = store.done_keys(run_id)
    for row in rows:
        if row["case_key"] not in done:
            row["case_id"] = add_row(store, run_id, row)
    todo = [c for c in cases if results.aggregate_key(c.key, opts.world_size) not in done]
    try:
        while todo:
            job = Job(workload=workload, spec=spec.to_dict(), cases=[case_dict(c) for c in todo], db=store.path, run_id=run_id)
            res = launch(job, opts, visible_devices, prefix, echo)
            out.launches += 1
            if res.ok:
                break
            todo = _after_failure(store, run_id, todo, res, failure(res), workload, opts.world_size)
    except KeyboardInterrupt:
        out.interrupted = True
    if finish or out.interrupted:
        store.finish_run(run_id, "interrupted" if out.interrupted else "complete")
    out.rows = [r for r in store.cases(run_id).to_dict("records") if r.get("aggregate") == 1 and r.get("world_size") == opts.world_size]
    return out


def _after_failure(store, run_id: int, todo: list[Case], res, why: tuple[str, str], workload: str, world: int) -> list[Case]:
    """Store the failed case's row (and ``skipped`` rows after an OOM); return the cases still to run."""
    status, reason = why
    finished = set(res.done)
    rest = [c for c in todo if c.key not in finished]
    failed = next((c for c in rest if c.key == res.current), rest[0] if rest else None)
    if failed is None:  # every case finished and the job failed while shutting down: nothing to record
        return []
    add_row(store, run_id, results.error_row(case_dict(failed), KINDS[workload], world, status, reason))
    rest = [c for c in rest if c is not failed]
    if status != "oom":
        return rest
    group = (failed.model, failed.precision, failed.mode, failed.channels_last)
    keep = []
    for c in rest:
        if (c.model, c.precision, c.mode, c.channels_last) == group and c.batch_size > failed.batch_size:
            add_row(store, run_id, results.error_row(case_dict(c), KINDS[workload], world, "skipped",
                                                     f"not run: batch size {failed.batch_size} already ran out of memory"))
        else:
            keep.append(c)
    return keep


def run_here(spec: SweepSpec, db: str | None, info: RankInfo, workload: str = "inference",
             opts: DistOptions | None = None, echo=print) -> int | None:
    """Run the sweep as one rank of a job someone else launched (torchrun, srun). Rank 0 stores; returns its run id."""
    from accelbench.distributed.worker import run_job
    from accelbench.store import Store

    nnodes = max(1, info.world_size // max(info.local_world_size, 1))
    base = dataclasses.asdict(opts) if opts else {}
    opts = DistOptions(**{**base, "gpus": info.local_world_size, "nnodes": nnodes, "node_rank": info.node_rank,
                          "rdzv_endpoint": base.get("rdzv_endpoint") or ("env" if nnodes > 1 else None)})
    kind = "cuda" if opts.device != "cpu" and _cuda() else "cpu"
    cases, rows = plan(spec, opts, workload, kind)
    run_id = None
    if info.rank == 0 and db:
        with Store(db) as store:
            run_id = begin(store, KINDS[workload], spec_doc(spec, opts, workload), opts, kind == "cuda")
            for row in rows:
                add_row(store, run_id, row)
    job = Job(workload=workload, spec=spec.to_dict(), cases=[case_dict(c) for c in cases], options=opts.to_dict(),
              db=db if info.rank == 0 else None, run_id=run_id)
    run_job(job, info, echo=echo if info.rank == 0 else (lambda *_: None))
    if info.rank == 0 and db:
        with Store(db) as store:
            store.finish_run(run_id, "complete")
    return run_id


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()
