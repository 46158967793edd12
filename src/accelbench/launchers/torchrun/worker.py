"""What every rank runs: ``python -m accelbench.launchers.torchrun.worker JOB.json`` (started by torchrun).

Per case: local rank 0 notes the start, and each stage the case enters (:mod:`accelbench.core.stage`); every
rank runs the case as one process does (:func:`accelbench.launchers.case.run_case`: the same row, settings,
cleanup and statuses; the scenario's ``measure`` on the rank's share); a rank whose case fails writes its one-line
reason to the job's work directory and re-raises (torchrun then stops the others); every rank's record and raw
series go to global rank 0 by ``gather_object``, and rank 0 hands them on (:func:`run_cases`'s ``on_result``: a
``result-<N>.json`` file the launcher stores, or the loop itself under a user's torchrun).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from accelbench.core import stage
from accelbench.core.errors import OOM, one_line
from accelbench.launchers.torchrun.job import Job, note_error, note_progress, write_result
from accelbench.launchers.torchrun.ranks import RankInfo, rank_info


class RankSink:
    """A scenario's detail rows on this rank (the interconnect's per-size rows), handed on with the case."""

    resumed = False
    run_id = None

    def __init__(self):
        self.rows: list[dict[str, Any]] = []

    def add(self, rec: dict[str, Any], series: dict | None = None, derived=None) -> None:
        self.rows.append({"record": rec, "series": series or {}})

    def take(self) -> list[dict[str, Any]]:
        rows, self.rows = self.rows, []
        return rows

    def note(self, text: str) -> None:
        """Notes are for the user; ranks have none to give."""


def measure_case(ctx, scenario, case, spec, state, sink) -> dict[str, Any]:
    """This rank's result of one case: ``{"record", "series", "rows"}``, run as in one process
    (:func:`accelbench.launchers.case.run_case`). A failure is noted for the launcher (the rank, the one-line
    reason, whether it ran out of memory), then raised: torchrun stops the other ranks."""
    from accelbench.launchers.case import run_case

    if ctx.info.local_rank == 0:
        note_progress(ctx.workdir, "start", case.key)
    stage.start_case(case.key)
    rec, series = run_case(
        scenario,
        case,
        spec,
        state,
        ctx,
        sink,
        failed=lambda row: note_error(ctx.workdir, ctx.rank, case.key, row["error"], row["status"] == OOM),
    )
    return {"record": rec, "series": series, "rows": sink.take()}


def run_cases(ctx, scenario, spec, cases: list, on_result: Callable[[int, Any, list], None] | None) -> None:
    """Run ``cases`` in order on this rank; rank 0 calls ``on_result(index, case, gathered)`` after each."""
    with _stages_noted(ctx):
        state = scenario.prepare(spec, ctx.device, None)
        sink = RankSink()
        for i, case in enumerate(cases):
            mine = measure_case(ctx, scenario, case, spec, state, sink)
            gathered = ctx.gather(mine)
            if ctx.rank == 0 and on_result is not None:
                on_result(i, case, gathered)
            if ctx.info.local_rank == 0:
                note_progress(ctx.workdir, "done", case.key)
            stage.end_case()
            ctx.host_barrier()


def _stages_noted(ctx):
    """On local rank 0 of a launched job, a context in which each stage entered is a progress event for the
    launcher (of the running case, or of the start-up); elsewhere one that does nothing."""
    import contextlib

    if ctx.info.local_rank != 0 or not ctx.workdir:
        return contextlib.nullcontext()

    def note(where: stage.Where) -> None:
        note_progress(ctx.workdir, "stage", where.case, where.stage)

    return stage.listening(note)


def run_job(job: Job, info: RankInfo) -> None:
    """Join the group, run the job's cases, leave the group (:meth:`~accelbench.launchers.torchrun.context
    .RankContext.leave`: the compiled steps and their CUDA graphs first). A rank whose group is still closing after
    the wait ends at once (``os._exit``: 0 when its cases ran, 1 when one failed), its results already written."""
    import os
    import traceback

    from accelbench import scenarios
    from accelbench.core.spec import case_from_dict, spec_from_dict
    from accelbench.launchers.torchrun.context import init

    try:
        ctx = init(info, job.dist_options(), job.workdir)
    except Exception as exc:
        note_error(job.workdir, info.rank, None, one_line(exc), False)
        raise
    failed = True
    try:
        scenario = scenarios.get(job.scenario)
        spec = spec_from_dict(scenario, job.spec)
        cases = [case_from_dict(scenario, c) for c in job.cases]
        run_cases(
            ctx,
            scenario,
            spec,
            cases,
            lambda i, case, gathered: write_result(job.workdir, i, {"key": case.key, "ranks": gathered}),
        )
        failed = False
    except BaseException as exc:
        traceback.clear_frames(exc.__traceback__)  # the failed case's model and graphs, freed before leaving
        raise
    finally:
        if not ctx.leave():
            sys.stderr.flush()
            os._exit(1 if failed else 0)


def main(argv: list[str] | None = None) -> int:
    """Entry point of one rank. Raises on failure (non-zero exit, torchrun stops the others); 1 at once when the
    torchrun that started it has already ended."""
    from accelbench.core import quiet
    from accelbench.launchers.torchrun.tether import tie_to_agent

    if not tie_to_agent():  # this rank ends with torchrun, however torchrun ends
        return 1

    quiet.install(lambda text: print(f"note: {text}", file=sys.stderr))  # the same filtered noise as the launcher
    argv = sys.argv[1:] if argv is None else argv
    job = Job.load(argv[0])
    info = rank_info() or RankInfo(
        rank=0, world_size=1, local_rank=0, local_world_size=1, node_rank=0, launcher="torchrun"
    )
    run_job(job, info)
    return 0


if __name__ == "__main__":
    sys.exit(main())
