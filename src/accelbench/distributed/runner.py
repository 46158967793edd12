"""Launcher side of ``--gpus N``: plan the cases, run them under torchrun, turn failures into rows.

``run_distributed(spec, store, opts, workload)`` begins a run (or adds to one), stores ``unsupported`` rows
for cases that cannot run, and launches torchrun on the rest. When a rank fails or a case hangs, torchrun
(or the launcher, on timeout) stops every rank; the case that was running gets an error row (``oom`` or
``error``, naming the rank), larger batch sizes of a configuration that ran out of memory get
``skipped`` rows, and torchrun is started again on the cases left. Finished cases are already stored
by rank 0, so nothing finished is lost.

``run_here`` is the same for a process that a user's torchrun or Slurm started (it is one rank).

The contract of a single-process sweep holds: model names and data are checked before a run is created
(:func:`preflight`); ``resume`` continues the newest unfinished run of the same kind and spec document
(:func:`spec_digest`, the one hash of :func:`begin` and :func:`open_run`), taking its lease, and runs only
the cases without an aggregate row; Ctrl-C or SIGTERM stops every rank and marks the run ``interrupted``.
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
    """What a distributed sweep returns.

    Attributes:
        run_id: the run the cases were added to.
        rows: the aggregate rows this call stored (one per case: ``ok``, ``error``, ``oom``, ...).
        interrupted: Ctrl-C or SIGTERM stopped it (finished cases are stored).
        launches: torchrun invocations.
        skipped_done: cases of the spec that already had an aggregate row (a resumed run).
    """

    run_id: int
    rows: list[dict[str, Any]] = field(default_factory=list)
    interrupted: bool = False
    launches: int = 0
    skipped_done: int = 0


def device_kind(opts: DistOptions) -> str:
    """``cuda`` when ranks will get GPUs, else ``cpu``. Raises ConfigError for impossible requests."""
    import torch

    cuda = opts.device != "cpu" and torch.cuda.is_available()
    if opts.device == "cuda" and not cuda:
        raise ConfigError("device", "cuda", "cpu or auto (no CUDA GPU is visible)")
    if cuda and opts.gpus > torch.cuda.device_count():
        raise ConfigError("gpus", opts.gpus, f"1..{torch.cuda.device_count()} (GPUs visible)")
    return "cuda" if cuda else "cpu"


def spec_digest(spec_dict: dict[str, Any]) -> str:
    """Stable 16-hex digest of a run's spec document: stored by :func:`begin`, looked up by ``--resume``."""
    return hashlib.sha256(json.dumps(spec_dict, sort_keys=True, default=str).encode()).hexdigest()[:16]


def preflight(spec: SweepSpec) -> None:
    """Check what every rank would fail on before a run is created (a typo costs one line, not a job).

    Raises:
        UnknownModelError: a model name that resolves to nothing (:func:`accelbench.models.check_model`).
        DataError: data that cannot be read (:func:`accelbench.data.check_data`).
    """
    from accelbench.data import check_data
    from accelbench.models import check_model

    for name in spec.models:
        check_model(name)
    check_data(spec.data, spec.skip_bad_images)


def begin(store, kind: str, spec_dict: dict[str, Any], opts: DistOptions, cuda: bool | None = None) -> int:
    """Begin a run with provenance (the first GPU's, plus every visible GPU's name)."""
    import torch

    from accelbench import env as envmod

    cuda = device_kind(opts) == "cuda" if cuda is None else cuda
    env = envmod.collect(torch.device("cuda", 0) if cuda else torch.device("cpu"))
    env["distributed"] = {"world_size": opts.world_size, "nnodes": opts.nnodes, "torch_distributed": torch.__version__,
                          "gpu_names": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if cuda else []}
    return store.begin_run(kind, spec_dict, spec_digest(spec_dict), env)


def open_run(store, kind: str, spec_dict: dict[str, Any], opts: DistOptions, cuda: bool | None = None,
             resume: bool = False) -> int:
    """The run to add cases to: with ``resume`` the newest unfinished run of ``kind`` and this spec document
    (its lease taken), else (or when there is none) a new one from :func:`begin`.

    Raises:
        RunBusyError: the run to resume is leased by another live process (it is running now).
    """
    run_id = store.resumable_run(kind, spec_digest(spec_dict)) if resume else None
    if run_id is None:
        return begin(store, kind, spec_dict, opts, cuda)
    store.reopen_run(run_id)
    return run_id


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
                    finish: bool = True, resume: bool = False, stop=None) -> DistOutcome:
    """Run the sweep data-parallel on ``opts.gpus`` processes per node (see module docstring).

    Args:
        spec: the sweep (batch sizes are per rank unless ``opts.global_batch``).
        store: an open :class:`accelbench.store.Store`; rank 0 writes into the same file.
        workload: ``inference`` (data-parallel inference) or ``train`` (DDP training steps).
        run_id: add to this run (e.g. a scaling study) instead of beginning one; its lease is the caller's.
        visible_devices: ``CUDA_VISIBLE_DEVICES`` for the ranks.
        finish: mark the run ``complete`` (or ``interrupted``) at the end; False leaves that to the caller.
        resume: continue the newest unfinished run of the same workload and spec (ignored with ``run_id``).
        stop: a ``threading.Event`` another thread sets to stop this sweep like Ctrl-C.
    Returns:
        :class:`DistOutcome`; ``interrupted`` after Ctrl-C or SIGTERM (every rank stopped first).
    Raises:
        ConfigError: bad options (more GPUs than visible, unknown workload).
        UnknownModelError / DataError: a model or data source that cannot be used (before any run exists).
        RunBusyError: ``resume`` found the run being run by another live process.
    """
    if workload not in KINDS:
        raise ConfigError("workload", workload, ", ".join(KINDS))
    kind = device_kind(opts)
    preflight(spec)
    cases, rows = plan(spec, opts, workload, kind)
    if run_id is None:
        run_id = open_run(store, KINDS[workload], spec_doc(spec, opts, workload), opts, kind == "cuda", resume)
    out, done = DistOutcome(run_id=run_id), set()
    try:  # from here on a signal ends the run as interrupted, wherever it lands
        done = store.done_keys(run_id)
        planned = [results.aggregate_key(c.key, opts.world_size) for c in cases] + [r["case_key"] for r in rows]
        out.skipped_done = sum(k in done for k in planned)
        for row in rows:
            if row["case_key"] not in done:
                row["case_id"] = add_row(store, run_id, row)
        todo = [c for c in cases if results.aggregate_key(c.key, opts.world_size) not in done]
        out.launches = _launch_until_done(store, run_id, spec, todo, opts, workload, visible_devices, echo, prefix, stop)
    except KeyboardInterrupt:
        out.interrupted = True
    if finish:
        store.finish_run(run_id, "interrupted" if out.interrupted else "complete")
    out.rows = [r for r in store.cases(run_id).to_dict("records")
                if r.get("aggregate") == 1 and r.get("world_size") == opts.world_size and r["case_key"] not in done]
    return out


def _launch_until_done(store, run_id: int, spec: SweepSpec, todo: list[Case], opts: DistOptions, workload: str,
                       visible_devices: str | None, echo: bool, prefix: str, stop) -> int:
    """Launch torchrun on ``todo`` until every case has its aggregate row; returns the launches.

    Raises:
        KeyboardInterrupt: Ctrl-C, SIGTERM or ``stop`` (the ranks are stopped already).
    """
    from accelbench.distributed.launch import failure, launch

    launches = 0
    while todo:
        _drop_partial(store, run_id, todo, opts.world_size)
        job = Job(workload=workload, spec=spec.to_dict(), cases=[case_dict(c) for c in todo], db=store.path, run_id=run_id)
        res = launch(job, opts, visible_devices, prefix, echo, stop=stop)
        launches += 1
        if res.ok:
            break
        todo = _after_failure(store, run_id, todo, res, failure(res), workload, opts.world_size)
    return launches


def _drop_partial(store, run_id: int, todo: list[Case], world: int) -> None:
    """Remove rank rows of cases about to run: a job stopped between rank 0 storing a case's rank rows and
    its aggregate row leaves them behind, and the case's rerun would collide with them (one row per key)."""
    store.delete_cases(run_id, [results.rank_key(c.key, world, r) for c in todo for r in range(world)])


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
    preflight(spec)
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
