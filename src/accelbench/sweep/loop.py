"""THE sweep loop: every scenario, in one process or under torchrun, runs through :func:`run`.

``run`` plans the cases and checks models and data before anything is created (:func:`check`, which a command
also calls before it creates its store), resumes the newest unfinished run of the same scenario and spec
(taking its lease) or, when a complete one exists and nothing is unfinished, measures nothing and says so,
measures idle power and looks up the price once, opens the run, and hands the cases still to do to a
launcher. The launcher measures them and reports each finished case to the :class:`Sweep`, which

- stores a ``skipped`` row for a case whose configuration already ran out of memory at a smaller batch
  size (the OOM boundary is recorded, not run into again),
- adds the derived columns (energy per sample and above idle, validity, cost: :mod:`accelbench.sweep.derived`)
  to every stored row, so every scenario's rows carry them,
- stores each row at once (an interrupted sweep loses nothing finished),
- reports progress.

Ctrl-C or SIGTERM (raised as KeyboardInterrupt by the CLI), or a store that cannot be written any more
(:class:`accelbench.core.errors.StopSweep`: locked by another process past the wait, a full disk), marks the
run ``interrupted``; ``--resume`` continues it. Whatever else ends a sweep early (a bug) marks it interrupted
too before it propagates: a run is never left ``running``. A failure inside a case never escapes:
:func:`accelbench.launchers.case.guarded` turns it into an ``oom`` or ``error`` row with a one-line reason.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from accelbench.core import stage
from accelbench.core.errors import COMPLETE, INTERRUPTED, OK, OOM, SKIPPED, SettingsNote, StopSweep
from accelbench.core.spec import current_key
from accelbench.launchers.case import setup_frozen
from accelbench.sweep import requirements


@dataclass
class Outcome:
    """What a sweep returns.

    Attributes:
        run_id: the run the rows went to (with ``already_complete``: the complete run found).
        records: every case row stored by this call (not the detail rows: epochs, ranks).
        interrupted: Ctrl-C, SIGTERM or a store that cannot be written stopped it (finished cases are stored).
        skipped_done: cases already stored by an earlier call (``resume``).
        notes: one-line warnings for the user (a checkpoint refused on resume, ...).
        resumed: per batch size of a case continued mid-way (a convergence run), the epochs it had done.
        already_complete: ``resume`` found no unfinished run but a complete one of the same settings: nothing ran.
        resume_new: ``resume`` found no run of the same settings at all: a new run was started.
        stop_reason: why the sweep stopped before its end other than Ctrl-C/SIGTERM (one line), or None.
        stopped_in: where an interrupted sweep was when it stopped (:meth:`accelbench.core.stage.Where.line`:
            the running case, its stage and for how long), or None.
    """

    run_id: int
    records: list[dict[str, Any]] = field(default_factory=list)
    interrupted: bool = False
    skipped_done: int = 0
    notes: list[str] = field(default_factory=list)
    resumed: dict[int, int] = field(default_factory=dict)
    already_complete: bool = False
    resume_new: bool = False
    stop_reason: str | None = None
    stopped_in: str | None = None


@dataclass
class Sweep:
    """The state of one run while a launcher works through its cases (see the module docstring).

    Attributes:
        scenario, spec, store, run_id, device: what runs, where the rows go.
        ctx: :class:`accelbench.sweep.derived.SweepContext` (idle power, price).
        out: the :class:`Outcome` being filled.
        on_case: progress callback ``(index, total, case, record_or_None)``.
        on_row: called with each detail row a case stores as it goes (an epoch), after it is stored.
        total: cases this call runs.
        resumed: the run was reopened (``resume``), so a scenario may continue a case it began.
        key: the key a case's row is stored under (the launcher's: ``<case key>|gpus=N|all`` under torchrun).
    """

    scenario: Any
    spec: Any
    store: Any
    run_id: int
    device: Any
    ctx: Any
    out: Outcome
    on_case: Callable | None = None
    on_row: Callable | None = None
    total: int = 0
    resumed: bool = False
    key: Callable = lambda case: case.key
    oom_at: dict = field(default_factory=dict)
    _index: int = 0

    def skip_reason(self, case) -> str | None:
        """Why ``case`` is not run: a smaller batch size of its configuration ran out of memory."""
        group = self.scenario.oom_group(case)
        if group is not None and group in self.oom_at and (case.batch_size or 0) > self.oom_at[group]:
            return f"not run: batch size {self.oom_at[group]} already ran out of memory"
        return None

    def skipped(self, case, reason: str) -> dict[str, Any]:
        return {**self.scenario.base_record(case, self.device), "status": SKIPPED, "error": reason}

    def started(self, case) -> None:
        stage.start_case(self.key(case))
        if self.on_case:
            self.on_case(self._index, self.total, case, None)

    def add_row(self, rec: dict[str, Any], series: dict | None = None, derived: dict | bool | None = None) -> int:
        """Store one row (a case's, or a detail row: an epoch, a rank) with the derived columns.

        Args:
            derived: keyword arguments of :func:`accelbench.sweep.derived.derived_columns` for this row (None:
                the scenario's ``derived_keys``; False: only the device and idle-power columns).
        Returns:
            The row's ``case_id``.
        """
        from accelbench.sweep.derived import derived_columns

        if derived is False:
            rec.update(device_name=self.ctx.device_name, **self.ctx.idle)
        else:
            rec.update(derived_columns(rec, self.ctx, **(self.scenario.derived_keys if derived is None else derived)))
        extra = {k: rec.pop(k) for k in [k for k in rec if k.startswith("_")]}
        rec["case_id"] = self.store.add_case(self.run_id, {k: v for k, v in rec.items() if k != "case_id"}, series)
        self.scenario.after_store(self.store, rec["case_id"], rec, extra)
        return rec["case_id"]

    def finished(self, case, rec: dict[str, Any] | None, series: dict | None = None) -> None:
        """Store a case's row (None: the scenario stored detail rows only), note an OOM, report progress."""
        if rec is not None:
            rec["case_key"] = self.key(case)
            self.add_row(rec, series)
            if rec.get("status") == OOM:
                group = self.scenario.oom_group(case)
                if group is not None:
                    self.oom_at[group] = min(case.batch_size or 0, self.oom_at.get(group, case.batch_size or 0))
            self.out.records.append(rec)
        stage.end_case()
        self._index += 1
        if self.on_case:
            self.on_case(self._index, self.total, case, rec if rec is not None else {"status": OK})


def reopen(store, kind: str, spec_hash: str) -> int | None:
    """The newest unfinished run of ``kind`` and ``spec_hash``, its lease taken (``--resume``), or None.

    Raises:
        RunBusyError: that run is leased by another live process.
    """
    run_id = store.resumable_run(kind, spec_hash)
    if run_id is not None:
        store.reopen_run(run_id)
    return run_id


def open_run(store, kind: str, doc: dict, spec_hash: str, env: dict, label=None) -> int:
    """THE place a new run is opened (a sweep, or a study composing several launches): its spec document,
    its hash for ``--resume``, its environment (provenance) and its name and tags (``label``: a
    :class:`accelbench.core.runlabel.RunLabel`, or None)."""
    return store.begin_run(kind, doc, spec_hash, env, label=label)


def check(scenario, spec, launcher=None) -> tuple[Any, list]:
    """Everything that can refuse a sweep, checked before anything exists (no store file, no run row): the device,
    the scenario on this launcher, the cases (a case named twice is kept once, with a :class:`SettingsNote`),
    the models (resolved, not built) and the data (listed, a few images decoded).

    Returns:
        ``(device, cases)``.
    Raises:
        ConfigError: the device is not available, or the scenario cannot run on this launcher.
        UnknownModelError / MissingDependencyError / DataError: a model that resolves to nothing, a missing extra,
        data that cannot be read.
    """
    from accelbench.launchers import INLINE

    launcher = launcher or INLINE
    device = launcher.device(spec)
    requirements.check(scenario, spec, device)  # the install (torch pair, extras): one line, exit 2, before anything
    launcher.kind(scenario)
    cases: dict[str, Any] = {}
    for case in scenario.cases(spec, launcher.case_device(device)):
        if launcher.key(case) in cases:
            warnings.warn(SettingsNote(f"case {case.key} is named twice: it runs once"), stacklevel=2)
        cases.setdefault(launcher.key(case), case)
    scenario.check(spec)
    return device, list(cases.values())


def run(
    scenario,
    spec,
    store,
    *,
    launcher=None,
    resume: bool = False,
    on_case: Callable | None = None,
    on_row: Callable | None = None,
    run_id: int | None = None,
    finish: bool = True,
    label=None,
) -> Outcome:
    """Run every case of ``spec`` not yet stored, storing each as it finishes (see the module docstring).

    Args:
        scenario: a :class:`accelbench.scenarios.Scenario`.
        spec: its validated :class:`accelbench.core.spec.Spec`.
        store: an open :class:`accelbench.store.Store`.
        launcher: where the cases run: :data:`accelbench.launchers.INLINE` (default, this process) or a
            :class:`accelbench.launchers.torchrun.Torchrun` launcher.
        resume: continue the newest unfinished run of the same scenario, spec and launch; with none, report the
            newest complete one (``already_complete``, nothing measured), else start a new run (``resume_new``).
        on_case: progress callback ``(index, total, case, record_or_None)``, before (None) and after each case.
        on_row: called with each detail row (an epoch of a convergence run) once it is stored.
        run_id: add the cases to this open run (a study composing several launches) instead.
        finish: mark the run complete at the end (a study finishes its run itself).
        label: the run's name and tags (:class:`accelbench.core.runlabel.RunLabel`); a resumed run takes them too.
    Returns:
        :class:`Outcome`; ``interrupted`` after Ctrl-C/SIGTERM or a store that stopped taking rows (finished
        cases are stored).
    Raises:
        As :func:`check` (before the run is opened). RunBusyError: ``resume`` found the run leased by another
        live process.
    """
    from accelbench.launchers import INLINE

    launcher = launcher or INLINE
    stage.adopt(None)  # nothing is running yet: no earlier sweep's case in this process
    device, cases = check(scenario, spec, launcher)
    kind, spec_hash = launcher.kind(scenario), spec.spec_hash(**launcher.identity())
    if run_id is None and resume and store.resumable_run(kind, spec_hash) is None:
        done = store.complete_run(kind, spec_hash)
        if done is not None:
            return Outcome(run_id=done, already_complete=True, skipped_done=len(cases))
    state = launcher.prepare(scenario, spec, device, store)
    reopened = run_id is not None
    if run_id is None and resume:
        run_id = reopen(store, kind, spec_hash)
        reopened = run_id is not None
    out = Outcome(run_id=run_id, resume_new=resume and not reopened)  # run_id: None until the run is opened
    try:
        env, ctx = _context(spec, launcher, device)
        if out.run_id is None:
            out.run_id = open_run(
                store, kind, {**spec.to_dict(), **launcher.doc(scenario)}, spec_hash, {**env, **ctx.idle}, label=label
            )
        elif reopened and label:
            store.label_run(out.run_id, label)
        done = {current_key(k, scenario.extras_type) for k in store.done_keys(out.run_id)}  # keys stored before
        todo = [c for c in cases if launcher.key(c) not in done]
        out.skipped_done = len(cases) - len(todo)
        sweep = Sweep(
            scenario=scenario,
            spec=spec,
            store=store,
            run_id=out.run_id,
            device=device,
            ctx=ctx,
            out=out,
            on_case=on_case,
            on_row=on_row,
            total=len(todo),
            resumed=reopened,
            key=launcher.key,
        )
        _execute(launcher, sweep, todo, state)
    except BaseException:  # a bug, or Ctrl-C before the cases began: never leave the run `running`
        if out.run_id is not None:
            _end(store, out.run_id, INTERRUPTED, wait_s=0.0)
        raise
    if finish or out.interrupted:
        _end(
            store,
            out.run_id,
            INTERRUPTED if out.interrupted else COMPLETE,
            out,
            wait_s=0.0 if out.stop_reason else None,
        )
    return out


def _context(spec, launcher, device) -> tuple[dict, Any]:
    """``(environment, sweep context)``: provenance, idle power (``spec.idle_s`` of it) and the price, once."""
    from accelbench.sweep import provenance
    from accelbench.sweep.derived import sweep_context

    env = {**provenance.collect(launcher.env_device(device)), **launcher.env()}
    return env, sweep_context(
        launcher.devices(device),
        env,
        idle_s=spec.idle_s,
        price_per_hour=spec.price_per_hour,
        kwh_price=spec.kwh_price,
        telemetry_period_ms=spec.telemetry_period_ms,
    )


def _execute(launcher, sweep: Sweep, todo: list, state) -> None:
    """The launcher runs the cases; Ctrl-C/SIGTERM and StopSweep end the sweep as an interruption."""
    try:
        with setup_frozen():
            launcher.execute(sweep, todo, state)
    except KeyboardInterrupt:
        where = stage.current()
        sweep.out.interrupted, sweep.out.stopped_in = True, where.line() if where else None
    except StopSweep as exc:  # the store stopped taking rows: what is stored stays, --resume continues
        sweep.out.interrupted, sweep.out.stop_reason = True, str(exc)


def _end(store, run_id: int, status: str, out: Outcome | None = None, wait_s: float | None = None) -> None:
    """Mark the run ``status``; a store that cannot be written (the reason the sweep stopped) leaves a note
    instead: the run stays ``running`` under a lease nobody renews, which ``--resume`` takes over."""
    from accelbench.core.errors import AccelbenchError

    try:
        store.finish_run(run_id, status, wait_s=wait_s)
    except AccelbenchError as exc:
        if out is None:
            return
        out.notes.append(f"run {run_id} could not be marked {status} ({exc}); --resume still continues it")
