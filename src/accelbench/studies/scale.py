"""The scaling study (``accelbench scale``): the same sweep on 1, 2, 4, ... processes, in one run of kind
``scale``; every aggregate row carries its speed-up and scaling efficiency against the smallest process
count (:mod:`accelbench.launchers.torchrun.results`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from accelbench.core import kinds
from accelbench.core.errors import COMPLETE, INTERRUPTED, ConfigError


@dataclass
class StudyOutcome:
    """What a study returns.

    Attributes:
        run_id: the study's run.
        rows: the run's rows for its table (aggregate rows of a scaling study, every process count; merged and
            summary rows of a concurrent one).
        statuses: the ``status`` of each case row this call stored (what the exit code is made of).
        interrupted: Ctrl-C or SIGTERM stopped it (finished cases are stored).
        skipped_done: cases (or phases) already stored by the run this call resumed.
        stopped_in: where an interrupted study was when it stopped (a ``concurrent`` one: each job's running case
            and stage, :meth:`accelbench.core.stage.Where.line`), or None (a ``scale`` study runs in the calling
            thread: :func:`accelbench.core.stage.current` has it).
    """

    run_id: int
    rows: list[dict[str, Any]] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)
    interrupted: bool = False
    skipped_done: int = 0
    stopped_in: str | None = None


def run_scale(
    scenario, spec, store, opts, counts: list[int], *, resume: bool = False, echo: bool = True, on_case=None
) -> StudyOutcome:
    """Run ``spec`` on each process count in ``counts`` (ascending) in one run of kind ``scale``.

    Args:
        scenario: ``inference`` or ``train_step`` (:mod:`accelbench.scenarios`).
        opts: :class:`accelbench.launchers.torchrun.job.DistOptions` (``gpus`` is replaced by each count).
        resume: continue the newest unfinished ``scale`` run of the same spec and counts: counts whose cases
            all have rows are passed over, the first with missing cases goes on.
    Raises:
        ConfigError: empty counts, a count < 1, more GPUs than visible, or a scenario torchrun cannot run.
        UnknownModelError / DataError: found before the run is opened. RunBusyError: ``resume`` found the run
            leased by another live process.
    """
    from accelbench.launchers.torchrun import Torchrun
    from accelbench.sweep import loop, provenance

    counts = sorted(set(counts))
    if not counts or counts[0] < 1:
        raise ConfigError("gpus", counts, "process counts >= 1, e.g. 1,2,4")
    top = Torchrun(dataclasses.replace(opts, gpus=counts[-1]), echo=echo)
    device = top.device(spec)
    top.kind(scenario)
    scenario.check(spec)
    spec_hash = spec.spec_hash(**top.identity(), gpus=counts, scenario_kind=top.kind(scenario))
    run_id = loop.reopen(store, "scale", spec_hash) if resume else None
    if run_id is None:
        doc = {**spec.to_dict(), **top.doc(scenario), "gpus": counts}
        run_id = loop.open_run(store, kinds.SCALE, doc, spec_hash, {**provenance.collect(device), **top.env()})
    out, before = StudyOutcome(run_id=run_id), store.done_keys(run_id)
    try:
        for n in counts:
            res = loop.run(
                scenario,
                spec,
                store,
                launcher=Torchrun(dataclasses.replace(opts, gpus=n), echo=echo),
                run_id=run_id,
                finish=False,
                on_case=on_case,
            )
            out.skipped_done += res.skipped_done
            if res.interrupted:
                raise KeyboardInterrupt
    except KeyboardInterrupt:  # a signal between two process counts lands here
        out.interrupted = True
    store.finish_run(run_id, INTERRUPTED if out.interrupted else COMPLETE)
    out.rows = aggregate_rows(store, run_id)
    out.statuses = [r["status"] for r in out.rows if r["case_key"] not in before]
    return out


def aggregate_rows(store, run_id: int) -> list[dict[str, Any]]:
    """The run's aggregate rows ordered by case, then process count."""
    rows = [r for r in store.records(run_id) if r.get("aggregate")]
    return sorted(rows, key=lambda r: (r["case_key"].rsplit("|gpus=", 1)[0], r.get("world_size") or 0))
