"""Concurrent jobs (``accelbench concurrent``): K jobs at once on disjoint GPU sets (``CUDA_VISIBLE_DEVICES``
per job), then the same jobs one after another, and the comparison (the "two models on four GPUs"
experiment). Each job's launcher writes a store of its own (no two processes write one SQLite file); the
study merges them into its run as each phase ends.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelbench.core import kinds
from accelbench.core.errors import COMPLETE, INTERRUPTED, OK, ConfigError
from accelbench.core.parallel import overlap_fraction
from accelbench.studies.scale import StudyOutcome


@dataclass(frozen=True, kw_only=True, slots=True)
class ConcurrentJob:
    """One job of a concurrent study: a scenario's sweep (usually one case) and its GPU count."""

    scenario: Any
    spec: Any
    gpus: int = 1


def gpu_sets(counts: list[int]) -> list[str]:
    """Disjoint ``CUDA_VISIBLE_DEVICES`` strings for jobs of ``counts`` GPUs: [2, 2] -> ["0,1", "2,3"]."""
    out, start = [], 0
    for n in counts:
        out.append(",".join(str(i) for i in range(start, start + n)))
        start += n
    return out


SCHEDULES = ("concurrent", "sequential")


def _run_job(
    job: ConcurrentJob,
    k: int,
    schedule: str,
    gpus: int,
    visible: str | None,
    tmp: str,
    opts,
    echo: bool,
    stop: threading.Event | None = None,
) -> dict[str, Any]:
    from accelbench.launchers.torchrun import Torchrun
    from accelbench.store import Store
    from accelbench.sweep import loop

    db = str(Path(tmp) / f"job{k}-{schedule}.db")
    t0 = time.monotonic()
    launcher = Torchrun(dataclasses.replace(opts, gpus=gpus), visible, echo, f"[job {k} {schedule}] ", stop)
    with Store(db) as st:
        out = loop.run(job.scenario, job.spec, st, launcher=launcher)
    return {
        "db": db,
        "run_id": out.run_id,
        "wall_s": time.monotonic() - t0,
        "interrupted": out.interrupted,
        "stopped_in": out.stopped_in,  # this job's case and stage (core.stage: one thread's, so the job's own)
    }


def run_concurrent(
    jobs: list[ConcurrentJob], store, opts, sequential_gpus: int | None = None, echo: bool = True, resume: bool = False
) -> StudyOutcome:
    """Run ``jobs`` at once on disjoint GPU sets, then one after another; store both and the comparison.

    Each phase's rows and its summary row are stored as soon as the phase ends, so a study stopped in
    the sequential phase keeps the concurrent one; a phase stopped half-way is dropped (its jobs ran at
    the same time, so half a phase measures nothing) and ``resume`` runs it again.

    Args:
        sequential_gpus: GPUs each job gets when run alone (default: its own count; give the total to ask
            "one job on all GPUs at a time, or one job per GPU set at once?").
        resume: continue the newest unfinished ``concurrent`` run of the same jobs, from its first phase
            without a summary row.
    Raises:
        ConfigError: fewer than 2 jobs, or more GPUs than visible.
        UnknownModelError / DataError: a model or data source that cannot be used (before any run exists).
        RunBusyError: ``resume`` found the run being run by another live process.
    """
    from accelbench.core.spec import digest
    from accelbench.launchers.torchrun import Torchrun, device_kind
    from accelbench.launchers.torchrun.launch import sigterm_as_interrupt
    from accelbench.sweep import loop, provenance

    if len(jobs) < 2:
        raise ConfigError("jobs", len(jobs), "two or more jobs")
    total = sum(j.gpus for j in jobs)
    cuda = device_kind(dataclasses.replace(opts, gpus=max(total, sequential_gpus or 1))) == "cuda"
    for job in jobs:
        job.scenario.check(job.spec)
    doc = {"jobs": [{**j.spec.to_dict(), "gpus": j.gpus} for j in jobs], "sequential_gpus": sequential_gpus}
    spec_hash = digest({**doc, "nnodes": opts.nnodes})
    run_id = loop.reopen(store, "concurrent", spec_hash) if resume else None
    if run_id is None:
        launcher = Torchrun(dataclasses.replace(opts, gpus=total))
        device = launcher.device(jobs[0].spec)
        run_id = loop.open_run(
            store,
            kinds.CONCURRENT,
            {**doc, **launcher.doc(jobs[0].scenario)},
            spec_hash,
            {**provenance.collect(device), **launcher.env()},
        )
    tmp, out = tempfile.mkdtemp(prefix="accelbench-concurrent-"), StudyOutcome(run_id=run_id)
    summary = _stored_summaries(store, run_id)
    out.skipped_done = len(summary)
    with sigterm_as_interrupt():  # stop every job's ranks if we are stopped
        found: dict[int, dict] = {}
        try:
            for schedule in (s for s in SCHEDULES if s not in summary):
                _drop_phase(store, run_id, schedule)
                found = {}
                wall = _phase(schedule, jobs, cuda, sequential_gpus, tmp, opts, echo, found)
                per_job = {
                    k: merge(v["db"], v["run_id"], store, run_id, job=k, schedule=schedule) for k, v in found.items()
                }
                out.statuses += [r["status"] for rows in per_job.values() for r in rows]
                summary[schedule] = summary_row(schedule, jobs, per_job, wall)
                store.add_case(run_id, summary[schedule])
        except KeyboardInterrupt:
            out.interrupted = True
            where = [f"job {k}: {v['stopped_in']}" for k, v in sorted(found.items()) if v.get("stopped_in")]
            out.stopped_in = "; ".join(where) or None
        finally:  # the jobs' own stores were merged phase by phase; nothing in tmp is needed any more
            shutil.rmtree(tmp, ignore_errors=True)
    if len(summary) == 2 and "summary|comparison" not in store.done_keys(run_id):
        store.add_case(run_id, comparison_row(summary["concurrent"], summary["sequential"]))
    store.finish_run(run_id, INTERRUPTED if out.interrupted else COMPLETE)
    out.rows = store.records(run_id)
    return out


def _stored_summaries(store, run_id: int) -> dict[str, dict[str, Any]]:
    """The summary rows of the phases a resumed run finished, by schedule (empty values dropped)."""
    rows = store.records(run_id, workload=kinds.CONCURRENT_SUMMARY)
    return {
        r["schedule"]: {k: v for k, v in r.items() if v is not None} for r in rows if r.get("schedule") in SCHEDULES
    }


def _drop_phase(store, run_id: int, schedule: str) -> None:
    """Remove rows merged by a phase that was stopped before its summary row (it runs again, whole)."""
    store.delete_cases(
        run_id, [k for k in store.done_keys(run_id) if k.startswith("job") and k.split("|")[1] == schedule]
    )


def _phase(
    schedule: str,
    jobs: list[ConcurrentJob],
    cuda: bool,
    sequential_gpus: int | None,
    tmp: str,
    opts,
    echo: bool,
    found: dict[int, dict],
) -> float:
    """Run every job (at once on disjoint sets, or one after another), filling ``found`` (``{job: store info}``, each
    job as it ends: an interrupted phase keeps where its jobs were); the wall time, s.

    Raises:
        KeyboardInterrupt: Ctrl-C or SIGTERM; every job's ranks are stopped first.
    """
    t0 = time.monotonic()
    if schedule == "concurrent":
        _at_once(jobs, cuda, tmp, opts, echo, found)
    else:
        for k, job in enumerate(jobs):
            g = sequential_gpus or job.gpus
            found[k] = _run_job(job, k, schedule, g, gpu_sets([g])[0] if cuda else None, tmp, opts, echo)
            if found[k]["interrupted"]:
                raise KeyboardInterrupt
    return time.monotonic() - t0


def _at_once(jobs: list[ConcurrentJob], cuda: bool, tmp: str, opts, echo: bool, found: dict) -> None:
    """Run the jobs in threads, one torchrun each; a signal (main thread only) stops them all through ``stop``.

    The main thread waits on an event each job sets as it ends, not on ``Thread.join``: a join interrupted by
    Ctrl-C can mark a thread that is still running as stopped (CPython 3.11's bpo-45274 handling releases the lock the
    running thread holds), and the study would then go on while a job still stops its ranks."""
    from accelbench.launchers.torchrun.launch import shielded

    sets = gpu_sets([j.gpus for j in jobs]) if cuda else [None] * len(jobs)
    stop = threading.Event()
    ended = [threading.Event() for _ in jobs]

    def worker(k: int, job: ConcurrentJob) -> None:
        try:
            found[k] = _run_job(job, k, "concurrent", job.gpus, sets[k], tmp, opts, echo, stop)
        finally:
            ended[k].set()

    threads = [threading.Thread(target=worker, args=(k, j)) for k, j in enumerate(jobs)]
    for t in threads:
        t.start()
    try:
        for e in ended:
            e.wait()
    except KeyboardInterrupt:
        stop.set()
        with shielded():  # each thread stops its own job's ranks; wait for all of them
            for e in ended:
                e.wait()
            for t in threads:
                t.join()
        raise
    for t in threads:
        t.join()
    if any(v["interrupted"] for v in found.values()):
        raise KeyboardInterrupt


def comparison_row(conc: dict[str, Any], seq: dict[str, Any]) -> dict[str, Any]:
    """Sequential over concurrent: wall makespan ratio and work-time ratio (> 1: running at once wins)."""
    row = {
        "case_key": "summary|comparison",
        "workload": kinds.CONCURRENT_SUMMARY,
        "status": OK,
        "error": None,
        "schedule": "comparison",
        "jobs": conc["jobs"],
        "makespan_speedup": seq["makespan_s"] / conc["makespan_s"],
    }
    if conc.get("work_time_s") and seq.get("work_time_s"):
        row["work_speedup"] = seq["work_time_s"] / conc["work_time_s"]
    return row


def merge(src_db: str, src_run: int, store, run_id: int, **extra) -> list[dict[str, Any]]:
    """Copy a job store's cases (and their raw series) into ``store``'s run, with ``extra`` columns.

    Returns the copied aggregate rows.
    """
    from accelbench.store import Store

    aggs = []
    with Store(src_db) as src:
        for row in src.records(src_run):
            rec = {k: v for k, v in row.items() if k not in ("case_id", "run_id") and v is not None}
            rec.update(extra, case_key=f"job{extra.get('job')}|{extra.get('schedule')}|{rec['case_key']}")
            store.add_case(run_id, rec, src.all_series(row["case_id"]))
            if rec.get("aggregate") == 1:
                aggs.append(rec)
    return aggs


def job_work_s(rows: list[dict[str, Any]]) -> float | None:
    """Seconds one job needs for its images at its measured throughput, summed over its cases."""
    ok = [r for r in rows if r.get("status") == OK and r.get("throughput_samples_per_s")]
    if not ok or len(ok) < len(rows):
        return None
    return sum(r["images"] / r["throughput_samples_per_s"] for r in ok)


def summary_row(schedule: str, jobs: list[ConcurrentJob], per_job: dict[int, list], wall_s: float) -> dict[str, Any]:
    """One row per schedule: wall makespan, the work-based time, and (concurrent) the window overlap."""
    rows = {k: per_job.get(k, []) for k in range(len(jobs))}
    work = [job_work_s(r) for r in rows.values()]
    row: dict[str, Any] = {
        "case_key": f"summary|{schedule}",
        "workload": kinds.CONCURRENT_SUMMARY,
        "status": OK,
        "error": None,
        "schedule": schedule,
        "jobs": len(jobs),
        "makespan_s": wall_s,
        "job_models": ",".join(",".join(j.spec.models) for j in jobs),
        "job_workloads": ",".join(j.scenario.dist_kind for j in jobs),
    }
    if all(w is not None for w in work):
        row["work_time_s"] = max(work) if schedule == "concurrent" else sum(work)
    windows = [
        (min(r["window_start_epoch_s"] for r in rs), max(r["window_end_epoch_s"] for r in rs))
        for rs in rows.values()
        if rs and all(r.get("window_start_epoch_s") for r in rs)
    ]
    if schedule == "concurrent" and len(windows) == len(jobs):
        row["overlap_fraction"] = overlap_fraction(windows)
    return row
