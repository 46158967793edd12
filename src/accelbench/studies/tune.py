"""``accelbench tune``: search precisions x backends x batch sizes for the best configuration, in one run of
kind ``tune`` whose rows are the trials (the search itself: :mod:`accelbench.studies.tune_search`).

Every trial is an inference case (``workload`` ``train``: a ``train_step`` case, the training step of
``accelbench train``, whose configurations add the optimizer kernels: ``(precision, mode, fused)``) through THE
loop (:func:`accelbench.sweep.loop.run`, ``run_id`` of the tune run, :class:`tune_budget.TrialLauncher`), stored
at once under ``<case key>|trial=<stage>`` with ``tune_stage``, ``tune_window_s`` and ``tune_trial_s`` (the
trial's whole wall time) columns, so ``--resume`` replays the stored trials without measuring them again.
The budget is wall time, planned from measured costs (:mod:`accelbench.studies.tune_budget`): a budget too small
for one trial is refused before the run opens, a trial starts only when its predicted cost fits, and one that
runs past the budget is stopped. The stages (the space and its order: :mod:`accelbench.studies.tune_space`):

1. ``screen``: short windows. The first configuration brackets the batch size (doubling from
   :data:`tune_stages.BRACKET_START`, then bisection up to the boundary: :func:`tune_search.next_batch`); every
   other configuration runs at the best batch found; configurations more than :data:`DOMINANCE_MARGIN` worse at
   every batch tried are pruned; the survivors bracket on their own from there.
   A screening trial starts only when it leaves time for the first halving rung of the candidates so far and
   one final round of the leaders.
2. ``rung<r>``: successive halving of (configuration, best batch) with windows ``eta**r`` times as long and
   ``final_repeats`` windows each, until two are left; a rung runs whole (leaving one final round) or not at all.
3. ``final<i>``: the two finalists and the default configuration (``run``'s default precision and mode at the
   leader's batch) in interleaved rounds (A B C A B C ...), as many rounds as fit the budget; the winner is the
   best pooled figure, and
   :func:`accelbench.core.compare.compare_metric` (two-level bootstrap CI, Mann-Whitney) says whether it beats
   the runner-up beyond noise and what it gained over the default.

The Inductor compile cache on disk (FX graph and autotuning caches) is kept across trials: a configuration
measured again compiles from it (:func:`accelbench.launchers.case.cleanup` resets Dynamo only).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from accelbench.core import kinds
from accelbench.core.errors import COMPLETE, INTERRUPTED
from accelbench.studies import tune_budget as tb
from accelbench.studies import tune_search as ts
from accelbench.studies.tune_space import configs, default_config, label
from accelbench.studies.tune_stages import DOMINANCE_MARGIN


@dataclass
class TuneOutcome:
    """What :func:`run_tune` returns: the run, its trial rows, the Pareto front, the final comparison."""

    run_id: int
    trials: list[dict[str, Any]] = field(default_factory=list)
    pareto: list[dict[str, Any]] = field(default_factory=list)
    winner: dict[str, Any] | None = None
    runner_up: dict[str, Any] | None = None
    baseline: dict[str, Any] | None = None
    verdict: Any = None  # MetricResult: runner-up -> winner
    gain: Any = None  # MetricResult: default -> winner
    spent_s: float = 0.0
    pruned: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    skipped_done: int = 0
    interrupted: bool = False
    statuses: list[str] = field(default_factory=list)


@dataclass
class Tuner:
    """The state of one tune: the base inference spec, its settings, the store and run, the trials, the budget's
    clock and cost model."""

    spec: Any
    settings: ts.TuneSettings
    store: Any
    run_id: int | None
    cuda: bool
    clock: tb.Clock
    costs: tb.CostModel
    base: tuple = ()  # the default configuration
    on_trial: Callable | None = None
    launcher: tb.TrialLauncher = field(default_factory=tb.TrialLauncher)
    out: TuneOutcome | None = None
    done: dict[str, dict] = field(default_factory=dict)
    top1_ref: float | None = None
    tried: list[tuple] = field(default_factory=list)  # (configuration, batch, row) of every trial

    @property
    def scenario(self):
        """The scenario every trial runs: ``inference``, or ``train_step`` for ``workload`` ``train``."""
        from accelbench import scenarios

        return scenarios.get(scenario_name(self.settings.workload))

    def rows(self) -> dict[str, dict]:
        return {r["case_key"]: ts.as_trial(r, self.settings.workload) for r in self.store.records(self.run_id)}

    def trial_spec(self, cfg: tuple, batch: int, stage: str, repeats: int = 1):
        """The spec of one trial and its stored key: ``(spec, key)``."""
        s = self.settings
        scale = s.eta ** int(stage[4:]) if stage.startswith("rung") else s.eta**3 if stage.startswith("final") else 1
        own = {"repeats": repeats, **({"fused_optimizer": cfg[2]} if len(cfg) > 2 else {})}
        spec = self.spec.replace(
            batch_sizes=(batch,),
            precisions=(cfg[0],),
            modes=(cfg[1],),
            idle_s=0,
            min_time_s=s.screen_time_s * scale,
            settings=dataclasses.replace(self.spec.settings, **own),
        )
        return spec, f"{self.scenario.cases(spec, 'x')[0].key}|trial={stage}"

    def cost(self, cfg: tuple, batch: int, stage: str, repeats: int = 1) -> float:
        """Predicted seconds of a trial (0 when it is stored already)."""
        spec, key = self.trial_spec(cfg, batch, stage, repeats)
        return 0.0 if key in self.done else self.costs.predict(cfg, batch, spec.min_time_s, repeats)

    def best(self) -> dict[tuple, tuple[int, float]]:
        """``{configuration: (batch, score)}``: each configuration's best acceptable trial so far."""
        best: dict[tuple, tuple[int, float]] = {}
        for cfg, batch, row in self.tried:
            sc = self.score(row)
            if sc is not None and (cfg not in best or sc > best[cfg][1]):
                best[cfg] = (batch, sc)
        return best

    def leaders(self) -> list[tuple]:
        """The final candidates as the trials stand: the two best (configuration, batch) and the default."""
        best = self.best()
        top = [(c, best[c][0]) for c in sorted(best, key=lambda c: best[c][1], reverse=True)[:2]]
        return list(dict.fromkeys([*top, (self.base, top[0][1])])) if top else []

    def reserve(self, stage: str) -> float:
        """Seconds the stages after ``stage`` need at least: one final round of the leaders, and during the
        screening the first halving rung of the configurations not dominated so far (when more than two)."""
        reps = self.settings.final_repeats
        need = 0.0 if stage.startswith("final") else sum(self.cost(c, b, "final0", reps) for c, b in self.leaders())
        if stage in ("screen", "reference"):
            scores: dict[tuple, dict[int, float | None]] = {}
            for cfg, batch, row in self.tried:
                scores.setdefault(cfg, {})[batch] = self.score(row)
            out = ts.dominated(scores, DOMINANCE_MARGIN)
            alive = [(c, b) for c, (b, _) in self.best().items() if c not in out]
            if len(alive) > 2:
                need += sum(self.cost(c, b, "rung1", reps) for c, b in alive)
        return need

    def affordable(self, cost: float, stage: str) -> bool:
        """Whether ``cost`` more seconds fit with :meth:`reserve` left for what follows; always for the first trial
        of a tune (the budget was checked for it before the run opened: :func:`tune_stages.check_budget`)."""
        if not self.tried:
            return True
        return self.clock.spent() + cost + self.reserve(stage) <= self.settings.budget_s

    def deadline(self, stage: str) -> float:
        """When a trial starting now must stop (perf_counter seconds): the end of the budget; a search trial's
        also leaves the leader's final trial (with :data:`tune_budget.FINAL_MARGIN`)."""
        left = self.clock.left()
        if self.tried and not stage.startswith("final"):
            lead = sum(self.cost(c, b, "final0", self.settings.final_repeats) for c, b in self.leaders()[:1])
            left = min(left, self.clock.left() - lead * tb.FINAL_MARGIN)
        return time.perf_counter() + left

    def trial(self, cfg: tuple, batch: int, stage: str, repeats: int = 1):
        """The row of ``cfg`` (precision, mode[, fused optimizer]) at ``batch`` in ``stage``: stored already, or
        measured now (None when its predicted cost does not fit, :meth:`affordable`, or it was stopped at the
        budget: :func:`tune_budget.stopped`)."""
        from accelbench.sweep import loop

        spec, key = self.trial_spec(cfg, batch, stage, repeats)
        if key not in self.done:
            if not self.affordable(self.costs.predict(cfg, batch, spec.min_time_s, repeats), stage):
                return None
            self.launcher.stage, self.launcher.window_s = stage, spec.min_time_s
            self.launcher.deadline_at, self.launcher.t0 = self.deadline(stage), time.perf_counter()
            res = loop.run(self.scenario, spec, self.store, launcher=self.launcher, run_id=self.run_id, finish=False)
            if res.interrupted:
                raise KeyboardInterrupt
            self.done = self.rows()
            self.out.statuses += [r["status"] for r in res.records]
            row = self.done.get(key)
        else:
            self.out.skipped_done += 1
            row = self.done[key]
            self.clock.prior_s += tb.trial_seconds(row)  # what it cost when it ran
        if row is None:
            return None
        self.costs.observe(cfg, batch, row, tb.trial_seconds(row))
        self.out.trials.append(row)
        self.tried.append((cfg, batch, row))
        if self.on_trial:
            self.on_trial(row)
        return None if tb.stopped(row) else row

    def score(self, row) -> float | None:
        if row is None or ts.violation(row, self.settings, self.top1_ref) is not None:
            return None
        return ts.score(row, self.settings.objective)


def scenario_name(workload: str) -> str:
    """The scenario of a workload's trials."""
    return "train_step" if workload == "train" else "inference"


def run_tune(
    spec, settings: ts.TuneSettings, store, *, resume: bool = False, on_trial: Callable | None = None, named=None
) -> TuneOutcome:
    """Tune ``spec``'s model (an inference spec: data, images, device, timing; a ``train_step`` spec for
    ``settings.workload`` ``train``, whose optimizer settings every trial keeps) over ``settings``' space, within
    ``settings.budget_s`` seconds of wall time (:mod:`accelbench.studies.tune_budget`: ``spent_s`` at most 10 %
    over it).

    Args:
        resume: continue the newest unfinished ``tune`` run of the same spec and settings: stored trials are
            read back, not measured again (their cost counts as it was measured).
        on_trial: called with each trial row (stored or read back).
        named: the run's name and tags (:class:`accelbench.core.runlabel.RunLabel`, or None).
    Returns:
        :class:`TuneOutcome` (``interrupted`` after Ctrl-C/SIGTERM: the trials so far are stored).
    Raises:
        ConfigError: an unknown precision or mode, more than one model, or a budget too small for one trial here
        (the message gives the minimum). UnknownModelError / DataError: before the run is opened. RunBusyError:
        ``resume`` found the run leased by another live process.
    """
    from accelbench import backends, precisions, scenarios
    from accelbench.core.config import check_choices
    from accelbench.core.device import resolve_device
    from accelbench.core.errors import ConfigError
    from accelbench.launchers.case import setup_frozen
    from accelbench.studies.tune_final import final, front
    from accelbench.studies.tune_stages import check_budget, halving, probe, reference_top1, screen
    from accelbench.sweep import loop, provenance

    clock = tb.Clock(settings.budget_s)
    if len(spec.models) != 1:
        raise ConfigError("model", ",".join(spec.models), "one model per tune")
    name = scenario_name(settings.workload)
    if spec.scenario != name:
        raise ConfigError("scenario", spec.scenario, f"{name} for workload {settings.workload}")
    device = resolve_device(spec.device)
    cuda, train = device.type == "cuda", settings.workload == "train"
    cfgs = configs(settings, cuda)
    check_choices("precision", tuple(c[0] for c in cfgs), precisions.names(trainable=train))
    check_choices("mode", tuple(c[1] for c in cfgs), backends.names(settings.workload))
    scenarios.get(name).check(spec)
    t = Tuner(
        spec=spec,
        settings=settings,
        store=store,
        run_id=None,
        cuda=cuda,
        clock=clock,
        on_trial=on_trial,
        costs=tb.CostModel(
            warmup=spec.warmup_batches, min_steps=spec.min_timed_batches, images=spec.images, whole_passes=train
        ),
        base=default_config(cuda, settings.workload),
    )
    state = t.launcher.prepare(t.scenario, spec, device, store)  # the images, decoded once for every trial
    t.costs.probe = probe(spec, device, train, state)
    check_budget(t, cfgs)
    spec_hash = spec.spec_hash(tune=settings.to_dict())
    t.run_id = loop.reopen(store, "tune", spec_hash) if resume else None
    if t.run_id is None:
        t.run_id = loop.open_run(
            store,
            kinds.TUNE,
            {**spec.to_dict(), "tune": settings.to_dict()},
            spec_hash,
            provenance.collect(device),
            label=named,
        )
    else:
        store.label_run(t.run_id, named)
    t.out, t.done = TuneOutcome(run_id=t.run_id), t.rows()
    try:
        with setup_frozen():  # once for every trial, not a full collection in each
            if settings.min_top1_ratio is not None:
                reference_top1(t, cfgs)
            final(t, halving(t, screen(t, cfgs)), t.base)
    except KeyboardInterrupt:
        t.out.interrupted = True
    store.finish_run(t.run_id, INTERRUPTED if t.out.interrupted else COMPLETE)
    t.out.pareto = front(t.out.trials, t)
    untried = [label(c) for c in cfgs if c not in {cfg for cfg, _, _ in t.tried}]
    if untried and not t.out.interrupted:
        t.out.notes.append("not tried within the budget: " + ", ".join(untried))
    t.out.spent_s = clock.spent()
    return t.out
