"""The sweep loop every workload shares: run, resume, OOM boundary, failures as rows, Ctrl-C.

``run_cases`` resolves the device, collects the environment and the once-per-sweep context (idle
power, price), opens or resumes the run, then runs each case not yet stored. After an OOM at batch
size B, larger batch sizes of the same (model, precision, mode, layout) are stored as ``skipped``
rather than run into the same wall. Every finished case is committed at once, with the derived
columns of :mod:`accelbench.derived` (energy per sample, validity, cost).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from accelbench.measure import OOM, SKIPPED, resolve_device


@dataclass
class SweepOutcome:
    """What a sweep returns: the run id, every record stored by this call, and whether Ctrl-C stopped it."""

    run_id: int
    records: list[dict[str, Any]] = field(default_factory=list)
    interrupted: bool = False
    skipped_done: int = 0


@dataclass(frozen=True, slots=True)
class Workload:
    """How one workload plugs into :func:`run_cases`.

    Attributes:
        kind: the run kind stored in ``runs.kind`` (``inference``, ``training``...).
        expand: ``(spec, device_str) -> list[case]``; cases have ``key``, ``model``, ``batch_size``,
            ``precision``, ``mode`` and ``channels_last``.
        base_record: ``(case, device) -> dict``: identity columns of a case's row.
        run_case: ``(case, device, state) -> (record, series)``; never raises but KeyboardInterrupt.
        derived_keys: keyword arguments for :func:`accelbench.derived.derived_columns`.
        preflight: ``(state) -> None``, run before the run is created: loads what every case needs (the
            images), so a bad data source is a one-line error with nothing stored.
    """

    kind: str
    expand: Callable
    base_record: Callable
    run_case: Callable
    derived_keys: dict = field(default_factory=dict)
    preflight: Callable | None = None


def _oom_group(case) -> tuple:
    return (case.model, case.precision, case.mode, case.channels_last)


def run_cases(work: Workload, spec, store, state: Any = None, resume: bool = False,
              on_case: Callable | None = None) -> SweepOutcome:
    """Run every case of ``spec`` not yet stored, storing each as it finishes.

    Args:
        work: the workload's plug-in functions.
        spec: a validated spec with ``device``, ``spec_hash()``, ``to_dict()`` and optionally
            ``idle_s``, ``price_per_hour``, ``kwh_price``.
        store: an open :class:`accelbench.store.Store`.
        state: ``(spec, device) -> object`` handed to every ``run_case`` (caches), or None.
        resume: continue the newest unfinished run of the same kind and spec.
        on_case: progress callback ``(index, total, case, record_or_None)``.
    Returns:
        :class:`SweepOutcome`; ``interrupted`` is True after Ctrl-C (finished cases are stored).
    Raises:
        ConfigError: the device is not available. UnknownModelError / DataError: a model name that
            resolves to nothing, data that cannot be read (checked before the run is created).
        RunBusyError: ``resume`` found the run leased by another live process.
    """
    from accelbench import env as envmod
    from accelbench.derived import derived_columns, sweep_context
    from accelbench.models import check_model

    device = resolve_device(spec.device)
    cases = work.expand(spec, str(device))
    for name in dict.fromkeys(c.model for c in cases):
        check_model(name)
    shared = state(spec, device) if state else None
    if work.preflight is not None:
        work.preflight(shared)
    run_id = store.resumable_run(work.kind, spec.spec_hash()) if resume else None
    if run_id is not None:
        store.reopen_run(run_id)  # takes the lease, or raises RunBusyError
    env = envmod.collect(device)
    ctx = sweep_context(device, env, idle_s=getattr(spec, "idle_s", 3.0),
                        price_per_hour=getattr(spec, "price_per_hour", None), kwh_price=getattr(spec, "kwh_price", None))
    if run_id is None:
        run_id = store.begin_run(work.kind, spec.to_dict(), spec.spec_hash(), {**env, **ctx.idle})
    done = store.done_keys(run_id)
    out = SweepOutcome(run_id=run_id, skipped_done=sum(c.key in done for c in cases))
    oom_at: dict[tuple, int] = {}
    todo = [c for c in cases if c.key not in done]
    try:
        for i, case in enumerate(todo):
            if on_case:
                on_case(i, len(todo), case, None)
            group = _oom_group(case)
            if group in oom_at and case.batch_size > oom_at[group]:
                rec, series = work.base_record(case, device), {}
                rec.update(status=SKIPPED, error=f"not run: batch size {oom_at[group]} already ran out of memory")
            else:
                rec, series = work.run_case(case, device, shared)
            rec.update(derived_columns(rec, ctx, **work.derived_keys))
            if rec["status"] == OOM:
                oom_at[group] = min(case.batch_size, oom_at.get(group, case.batch_size))
            rec["case_id"] = store.add_case(run_id, rec, series)
            out.records.append(rec)
            if on_case:
                on_case(i + 1, len(todo), case, rec)
    except KeyboardInterrupt:
        out.interrupted = True
        store.finish_run(run_id, "interrupted")
        return out
    store.finish_run(run_id, "complete")
    return out
