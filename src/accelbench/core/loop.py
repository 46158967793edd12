"""THE sweep loop: every scenario, in one process or under torchrun, runs through :func:`run`.

``run`` plans the cases, checks models and data before anything is created, resumes the newest unfinished
run of the same scenario and spec (taking its lease), measures idle power and looks up the price once,
opens the run, and hands the cases still to do to a launcher. The launcher measures them and reports
each finished case to the :class:`Sweep`, which

- stores a ``skipped`` row for a case whose configuration already ran out of memory at a smaller batch
  size (the OOM boundary is recorded, not run into again),
- adds the derived columns (energy per sample and above idle, validity, cost: :mod:`accelbench.core.derived`)
  to every stored row, so every scenario's rows carry them,
- stores each row at once (an interrupted sweep loses nothing finished),
- reports progress.

Ctrl-C or SIGTERM (raised as KeyboardInterrupt by the CLI) marks the run ``interrupted``; ``--resume``
continues it. A failure inside a case never escapes: :func:`guarded` turns it into an ``oom`` or ``error``
row with a one-line reason, and the device is cleaned up before the next case.
"""

from __future__ import annotations

import gc
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable

from accelbench.core import requirements
from accelbench.core.env import sync_if_context
from accelbench.core.errors import ERROR, OK, OOM, SKIPPED, UNSUPPORTED, Unsupported, is_oom, one_line


@dataclass
class Outcome:
    """What a sweep returns.

    Attributes:
        run_id: the run the rows went to.
        records: every case row stored by this call (not the detail rows: epochs, ranks).
        interrupted: Ctrl-C or SIGTERM stopped it (finished cases are stored).
        skipped_done: cases already stored by an earlier call (``resume``).
        notes: one-line messages for the user (a checkpoint refused on resume, ...).
        resumed: per batch size of a case continued mid-way (a convergence run), the epochs it had done.
    """

    run_id: int
    records: list[dict[str, Any]] = field(default_factory=list)
    interrupted: bool = False
    skipped_done: int = 0
    notes: list[str] = field(default_factory=list)
    resumed: dict[int, int] = field(default_factory=dict)


def cleanup(device) -> None:
    """Free what a finished or failed case left: Python garbage, the CUDA cache, compiled graphs."""
    import torch

    gc.collect()
    if "torch._dynamo" in sys.modules:  # only a compiled case needs it; importing dynamo costs seconds
        try:
            torch._dynamo.reset()
        except Exception:  # a reset that fails leaves nothing worse than before
            pass
    if sync_if_context(device):  # the torchrun parent holds no CUDA context and must not create one
        torch.cuda.empty_cache()


@contextmanager
def setup_frozen():
    """Keep what is alive before the first case (imported modules, the decoded images, the store) out of the full
    collection :func:`cleanup` runs after every case: ``gc.freeze()`` (Python docs, "gc.freeze"), undone at the
    end. Each collection then walks only what the cases made (with torch imported, ~0.17 s less per case on a
    2-core CPU); what it frees is the same, but for reference cycles among the frozen objects themselves, which
    wait for the end of the sweep. Nested (a study's sweeps): the outermost freezes."""
    if gc.get_freeze_count():
        yield
        return
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def guarded(rec: dict[str, Any], measure: Callable[[], tuple[dict, dict]], device) -> tuple[dict, dict]:
    """Run ``measure() -> (metrics, series)`` for a case whose identity columns are ``rec``.

    Every failure becomes data: ``status`` ``oom`` (an allocation failure, also wrapped) or ``error`` with a
    one-line reason (``unsupported`` with its columns for :class:`accelbench.core.errors.Unsupported`); the
    device is cleaned up either way so later cases are not poisoned. Only
    KeyboardInterrupt propagates. Adds ``case_wall_s``.

    Returns:
        ``(record, raw_series)``.
    """
    t0 = time.perf_counter()
    try:
        measured, series = measure()
        rec.update(measured or {}, status=OK, error=None)
    except KeyboardInterrupt:
        raise
    except Unsupported as exc:  # found unable to run once built; what it measured anyway stays in the row
        rec.update(exc.columns, status=UNSUPPORTED, error=exc.reason)
        series = {}
    except Exception as exc:  # every failure is data: a row with a one-line reason
        rec.update(status=OOM if is_oom(exc) else ERROR, error=one_line(exc))
        series = {}
        del exc
    finally:
        cleanup(device)
    rec["case_wall_s"] = time.perf_counter() - t0
    return rec, series


@dataclass
class Sweep:
    """The state of one run while a launcher works through its cases (see the module docstring).

    Attributes:
        scenario, spec, store, run_id, device: what runs, where the rows go.
        ctx: :class:`accelbench.core.derived.SweepContext` (idle power, price).
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
        if self.on_case:
            self.on_case(self._index, self.total, case, None)

    def add_row(self, rec: dict[str, Any], series: dict | None = None, derived: dict | bool | None = None) -> int:
        """Store one row (a case's, or a detail row: an epoch, a rank) with the derived columns.

        Args:
            derived: keyword arguments of :func:`accelbench.core.derived.derived_columns` for this row (None:
                the scenario's ``derived_keys``; False: only the device and idle-power columns).
        Returns:
            The row's ``case_id``.
        """
        from accelbench.core.derived import derived_columns

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
        self._index += 1
        if self.on_case:
            self.on_case(self._index, self.total, case, rec if rec is not None else {"status": OK})


def run_case(scenario, case, spec, state, rank, sink) -> tuple[dict, dict]:
    """One case in this process: an ``unsupported`` row, or the scenario's measurement guarded.

    Never raises except KeyboardInterrupt.
    """
    rec = scenario.base_record(case, rank.device)
    reason = scenario.unsupported_reason(case, rank.device)
    if reason:
        return {**rec, "status": UNSUPPORTED, "error": reason}, {}
    with cudnn_benchmark(getattr(spec, "cudnn_benchmark", None)) as on:
        rec["cudnn_benchmark"] = on
        return guarded(rec, lambda: scenario.measure(case, spec, state, rank, sink), rank.device)


@contextmanager
def cudnn_benchmark(value: bool | None):
    """``torch.backends.cudnn.benchmark`` set to ``value`` for a case (None: left as it is), restored after;
    yields the value in force (cuDNN times its convolution algorithms per shape and keeps the fastest:
    PyTorch docs, "torch.backends.cudnn.benchmark")."""
    import torch

    before = torch.backends.cudnn.benchmark
    if value is not None:
        torch.backends.cudnn.benchmark = value
    try:
        yield bool(torch.backends.cudnn.benchmark)
    finally:
        torch.backends.cudnn.benchmark = before


def reopen(store, kind: str, spec_hash: str) -> int | None:
    """The newest unfinished run of ``kind`` and ``spec_hash``, its lease taken (``--resume``), or None.

    Raises:
        RunBusyError: that run is leased by another live process.
    """
    run_id = store.resumable_run(kind, spec_hash)
    if run_id is not None:
        store.reopen_run(run_id)
    return run_id


def open_run(store, kind: str, doc: dict, spec_hash: str, env: dict) -> int:
    """THE place a new run is opened (a sweep, or a study composing several launches): its spec document,
    its hash for ``--resume``, and its environment (provenance)."""
    return store.begin_run(kind, doc, spec_hash, env)


def run(scenario, spec, store, *, launcher=None, resume: bool = False, on_case: Callable | None = None,
        on_row: Callable | None = None, run_id: int | None = None, finish: bool = True) -> Outcome:
    """Run every case of ``spec`` not yet stored, storing each as it finishes (see the module docstring).

    Args:
        scenario: a :class:`accelbench.scenarios.Scenario`.
        spec: its validated :class:`accelbench.core.spec.Spec`.
        store: an open :class:`accelbench.store.Store`.
        launcher: where the cases run: :data:`accelbench.launchers.INLINE` (default, this process) or a
            :class:`accelbench.launchers.torchrun.Torchrun` launcher.
        resume: continue the newest unfinished run of the same scenario, spec and launch.
        on_case: progress callback ``(index, total, case, record_or_None)``, before (None) and after each case.
        on_row: called with each detail row (an epoch of a convergence run) once it is stored.
        run_id: add the cases to this open run (a study composing several launches) instead.
        finish: mark the run complete at the end (a study finishes its run itself).
    Returns:
        :class:`Outcome`; ``interrupted`` after Ctrl-C/SIGTERM (finished cases are stored).
    Raises:
        ConfigError: the device is not available. UnknownModelError / DataError: a model name that resolves to
        nothing or data that cannot be read (both found before the run is opened). RunBusyError: ``resume``
        found the run leased by another live process.
    """
    from accelbench.core import env as envmod
    from accelbench.core.derived import sweep_context
    from accelbench.launchers import INLINE

    launcher = launcher or INLINE
    device = launcher.device(spec)
    requirements.check(scenario, spec, device)  # the install (torch pair, extras): one line, exit 2, before anything
    cases = scenario.cases(spec, launcher.case_device(device))
    scenario.check(spec)
    state = launcher.prepare(scenario, spec, device, store)
    kind, spec_hash = launcher.kind(scenario), spec.spec_hash(**launcher.identity())
    reopened = run_id is not None
    if run_id is None and resume:
        run_id = reopen(store, kind, spec_hash)
        reopened = run_id is not None
    env = {**envmod.collect(launcher.env_device(device)), **launcher.env()}
    ctx = sweep_context(launcher.devices(device), env, idle_s=spec.idle_s, price_per_hour=spec.price_per_hour,
                        kwh_price=spec.kwh_price, telemetry_period_ms=spec.telemetry_period_ms)
    if run_id is None:
        run_id = open_run(store, kind, {**spec.to_dict(), **launcher.doc(scenario)}, spec_hash, {**env, **ctx.idle})
    done = store.done_keys(run_id)
    todo = [c for c in cases if launcher.key(c) not in done]
    out = Outcome(run_id=run_id, skipped_done=len(cases) - len(todo))
    sweep = Sweep(scenario=scenario, spec=spec, store=store, run_id=run_id, device=device, ctx=ctx, out=out,
                  on_case=on_case, on_row=on_row, total=len(todo), resumed=reopened, key=launcher.key)
    try:
        with setup_frozen():
            launcher.execute(sweep, todo, state)
    except KeyboardInterrupt:
        out.interrupted = True
    if finish or out.interrupted:
        store.finish_run(run_id, "interrupted" if out.interrupted else "complete")
    return out
