"""``accelbench tune``: search precisions x backends x batch sizes for the best configuration, in one run of
kind ``tune`` whose rows are the trials (the search itself: :mod:`accelbench.studies.tune_search`).

Every trial is an inference case (``workload`` ``train``: a ``train_step`` case, the training step of
``accelbench train``, whose configurations add the optimizer kernels: ``(precision, mode, fused)``) through THE loop (:func:`accelbench.core.loop.run`, ``run_id`` of the tune
run), stored at once under ``<case key>|trial=<stage>`` with ``tune_stage`` and ``tune_window_s`` columns, so
``--resume`` replays the stored trials without measuring them again and takes the same decisions (the budget is
the sum of the trials' ``case_wall_s``, compilation included). The stages:

1. ``screen``: short windows. The first configuration brackets the batch size (doubling from
   :data:`BRACKET_START`, then bisection up to the boundary: :func:`tune_search.next_batch`); every other
   configuration runs at the best batch found; configurations more than :data:`DOMINANCE_MARGIN` worse at
   every batch tried are pruned; the survivors bracket on their own from there.
2. ``rung<r>``: successive halving of (configuration, best batch) with windows ``eta**r`` times as long and
   ``final_repeats`` windows each, until two are left.
3. ``final<i>``: the two finalists and the default configuration (``run``'s default precision and mode at the
   leader's batch) in interleaved rounds (A B C A B C ...); the winner is the best pooled figure, and
   :func:`accelbench.core.compare.compare_metric` (two-level bootstrap CI, Mann-Whitney) says whether it beats
   the runner-up beyond noise and what it gained over the default.

The Inductor compile cache on disk (FX graph and autotuning caches) is kept across trials: a configuration
measured again compiles from it (:func:`accelbench.core.loop.cleanup` resets Dynamo only).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable

from accelbench.launchers.inline import Inline
from accelbench.studies import tune_search as ts

SCREEN_SHARE, HALVING_SHARE = 0.55, 0.75  # budget shares the screening and the halving may use
# Bracketing starts here: a compile per batch size costs tens of seconds on a GPU, and throughput below 32
# images per batch is never the answer there; a CPU starts at 1.
BRACKET_START = {True: 32, False: 1}
DOMINANCE_MARGIN = 0.05  # screening windows are short: prune only what is more than 5 % worse everywhere


class TrialLauncher(Inline):
    """The inline launcher that stores a case under ``<key>|trial=<stage>`` with the tune columns and decodes
    the images once for every trial."""

    def __init__(self):
        self.stage, self.window_s, self._inputs = "", 0.0, None

    def key(self, case) -> str:
        return f"{case.key}|trial={self.stage}"

    def prepare(self, scenario, spec, device, store):
        if self._inputs is None:
            self._inputs = scenario.prepare(spec, device, store)
        return self._inputs

    def execute(self, sweep, cases: list, state) -> None:
        finished = sweep.finished

        def tagged(case, rec, series=None):
            if rec is not None:
                rec.update(tune_stage=self.stage, tune_window_s=self.window_s)
            finished(case, rec, series)

        sweep.finished = tagged
        super().execute(sweep, cases, state)


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
    """The state of one tune: the base inference spec, its settings, the store and run, the trials."""

    spec: Any
    settings: ts.TuneSettings
    store: Any
    run_id: int
    cuda: bool
    on_trial: Callable | None = None
    launcher: TrialLauncher = field(default_factory=TrialLauncher)
    out: TuneOutcome | None = None
    done: dict[str, dict] = field(default_factory=dict)
    top1_ref: float | None = None

    @property
    def scenario(self):
        """The scenario every trial runs: ``inference``, or ``train_step`` for ``workload`` ``train``."""
        from accelbench import scenarios

        return scenarios.get(scenario_name(self.settings.workload))

    def rows(self) -> dict[str, dict]:
        from accelbench.core.rundata import clean

        return {r["case_key"]: ts.as_trial(clean(r), self.settings.workload)
                for r in self.store.cases(self.run_id).to_dict("records")}

    def trial(self, cfg: tuple, batch: int, stage: str, repeats: int = 1, share: float = 1.0):
        """The row of ``cfg`` (precision, mode[, fused optimizer]) at ``batch`` in ``stage``: stored already, or
        measured now (None when the budget share is spent)."""
        from accelbench.core import loop

        scale = self.settings.eta ** int(stage[4:]) if stage.startswith("rung") else 1
        scale = self.settings.eta ** 3 if stage.startswith("final") else scale
        own = {"repeats": repeats, **({"fused_optimizer": cfg[2]} if len(cfg) > 2 else {})}
        spec = self.spec.replace(batch_sizes=(batch,), precisions=(cfg[0],), modes=(cfg[1],), idle_s=0,
                                 min_time_s=self.settings.screen_time_s * scale,
                                 settings=dataclasses.replace(self.spec.settings, **own))
        case = self.scenario.cases(spec, "x")[0]
        key = f"{case.key}|trial={stage}"
        if key not in self.done:
            if self.out.spent_s >= self.settings.budget_s * share:
                return None
            self.launcher.stage, self.launcher.window_s = stage, spec.min_time_s
            res = loop.run(self.scenario, spec, self.store, launcher=self.launcher, run_id=self.run_id,
                           finish=False)
            if res.interrupted:
                raise KeyboardInterrupt
            self.done = self.rows()
            self.out.statuses += [r["status"] for r in res.records]
        else:
            self.out.skipped_done += 1
        row = self.done.get(key)
        if row is None:
            return None
        self.out.spent_s += row.get("case_wall_s") or 0.0
        self.out.trials.append(row)
        if self.on_trial:
            self.on_trial(row)
        return row

    def score(self, row) -> float | None:
        if row is None or ts.violation(row, self.settings, self.top1_ref) is not None:
            return None
        return ts.score(row, self.settings.objective)


def scenario_name(workload: str) -> str:
    """The scenario of a workload's trials."""
    return "train_step" if workload == "train" else "inference"


def configs(settings: ts.TuneSettings, cuda: bool) -> list[tuple]:
    """The (precision, mode) pairs searched (``train``: (precision, mode, fused optimizer) triples, default modes
    limited to the backends that train), the default configuration first when it is in the space."""
    from accelbench import backends

    precs, modes = ts.default_space(cuda, settings.objective, settings.workload)
    if settings.workload == "train":
        modes = tuple(m for m in modes if m in backends.names(trainable=True))
    precs, modes = settings.precisions or precs, settings.modes or modes
    out = [(p, m) for p in precs for m in modes]
    if settings.workload == "train":
        out = [(p, m, f) for p, m in out for f in settings.fused_optimizers or ts.default_fused(cuda)]
    base = default_config(cuda, settings.workload)
    return sorted(out, key=lambda c: c != base)


def default_config(cuda: bool, workload: str = "inference") -> tuple:
    """The default configuration on the device: ``run``'s (amp-bf16 compiled on CUDA, fp32 eager on a CPU);
    ``train``: the plain training step, amp-bf16 eager with torch's fused optimizer on CUDA (its default there),
    fp32 eager with the default (``foreach``) optimizer on a CPU."""
    if workload == "train":
        return ("amp-bf16", "eager", True) if cuda else ("fp32", "eager", None)
    return ("amp-bf16", "compile") if cuda else ("fp32", "eager")


def label(cfg: tuple) -> str:
    """``amp-bf16 compile`` (``amp-bf16 compile fused`` / ``... foreach`` with an explicit optimizer kernel)."""
    kernels = ts.KERNEL_WORDS.get(cfg[2]) if len(cfg) > 2 else None
    return " ".join([*cfg[:2], *([kernels] if kernels else [])])


def bracket(t: Tuner, cfg, tried: dict[int, float | None], start: int, max_batch: int) -> dict[int, float | None]:
    """Bracket and bisect ``cfg``'s batch size (:func:`tune_search.next_batch`) within the screening share."""
    while (b := ts.next_batch(tried, start, max_batch)) is not None:
        row = t.trial(cfg, b, "screen", share=SCREEN_SHARE)
        if row is None:
            break
        tried[b] = t.score(row)
    return tried


def screen(t: Tuner, cfgs: list) -> dict[tuple, dict[int, float | None]]:
    """Stage 1 (module docstring): ``{configuration: {batch size: score}}`` of the screening trials."""
    s = t.settings
    max_batch = s.max_batch or (1024 if t.cuda else 256)
    fixed = s.batch_sizes or ((1,) if s.objective == "latency" else None)
    scores: dict[tuple, dict[int, float | None]] = {c: {} for c in cfgs}
    if fixed:
        for c in cfgs:
            for b in fixed:
                row = t.trial(c, b, "screen", share=SCREEN_SHARE)
                if row is not None:
                    scores[c][b] = t.score(row)
        return scores
    bracket(t, cfgs[0], scores[cfgs[0]], min(BRACKET_START[t.cuda], max_batch), max_batch)
    top = ts.best_batch(scores[cfgs[0]]) or 1
    for c in cfgs[1:]:
        row = t.trial(c, top, "screen", share=SCREEN_SHARE)
        if row is not None:
            scores[c][top] = t.score(row)
    pruned = ts.dominated(scores, DOMINANCE_MARGIN)
    t.out.pruned = [label(c) for c in cfgs if c in pruned]
    for c in cfgs[1:]:
        if c not in pruned and scores[c]:
            bracket(t, c, scores[c], top, max_batch)
    return {c: v for c, v in scores.items() if c not in pruned}


def halving(t: Tuner, scores: dict) -> list[tuple]:
    """Stage 2: (configuration, batch) candidates halved on longer repeated windows until two remain."""
    cands = [(c, ts.best_batch(v)) for c, v in scores.items() if ts.best_batch(v) is not None]
    cands = sorted(cands, key=lambda cb: scores[cb[0]][cb[1]], reverse=True)
    rung = 1
    while len(cands) > 2:
        got = {cb: t.score(t.trial(cb[0], cb[1], f"rung{rung}", t.settings.final_repeats, HALVING_SHARE))
               for cb in cands}
        if all(v is None for v in got.values()):
            break  # the budget share is spent: the screening order stands
        cands, rung = ts.halve(got, t.settings.eta, keep_min=2), rung + 1
    return cands[:2]


def reference_top1(t: Tuner, cfgs: list) -> None:
    """The fp32 top-1 the ``min_top1_ratio`` constraint divides by: an fp32 trial of the space, or a
    ``reference`` trial (fp32, eager) when the space has none; a note when the model reports no accuracy."""
    from accelbench import precisions

    ref = next((c for c in cfgs if precisions.is_reference(c[0])),
               (next(n for n in precisions.names() if precisions.is_reference(n)), "eager"))
    row = t.trial(ref, (t.settings.batch_sizes or (8,))[0], "reference", share=float("inf"))
    t.top1_ref = row.get("top1") if row else None
    if not t.top1_ref:
        t.out.notes.append("no fp32 top-1 (random weights or no labels): --min-top1-ratio not applied")


def run_tune(spec, settings: ts.TuneSettings, store, *, resume: bool = False,
             on_trial: Callable | None = None) -> TuneOutcome:
    """Tune ``spec``'s model (an inference spec: data, images, device, timing; a ``train_step`` spec for
    ``settings.workload`` ``train``, whose optimizer settings every trial keeps) over ``settings``' space.

    Args:
        resume: continue the newest unfinished ``tune`` run of the same spec and settings: stored trials are
            read back, not measured again.
        on_trial: called with each trial row (stored or read back).
    Returns:
        :class:`TuneOutcome` (``interrupted`` after Ctrl-C/SIGTERM: the trials so far are stored).
    Raises:
        ConfigError: an unknown precision or mode, or more than one model. UnknownModelError / DataError: before
        the run is opened. RunBusyError: ``resume`` found the run leased by another live process.
    """
    from accelbench import backends, precisions, scenarios
    from accelbench.core import env as envmod
    from accelbench.core import loop
    from accelbench.core.config import check_choices
    from accelbench.core.errors import ConfigError
    from accelbench.studies.tune_final import final, front

    if len(spec.models) != 1:
        raise ConfigError("model", ",".join(spec.models), "one model per tune")
    name = scenario_name(settings.workload)
    if spec.scenario != name:
        raise ConfigError("scenario", spec.scenario, f"{name} for workload {settings.workload}")
    device = envmod.resolve_device(spec.device)
    cuda = device.type == "cuda"
    cfgs = configs(settings, cuda)
    train = settings.workload == "train"
    check_choices("precision", tuple(c[0] for c in cfgs), precisions.names(trainable=train))
    check_choices("mode", tuple(c[1] for c in cfgs), backends.names(trainable=train))
    scenarios.get(name).check(spec)
    spec_hash = spec.spec_hash(tune=settings.to_dict())
    run_id = loop.reopen(store, "tune", spec_hash) if resume else None
    if run_id is None:
        run_id = loop.open_run(store, "tune", {**spec.to_dict(), "tune": settings.to_dict()}, spec_hash,
                               envmod.collect(device))
    t = Tuner(spec=spec, settings=settings, store=store, run_id=run_id, cuda=cuda, on_trial=on_trial)
    t.out, t.done = TuneOutcome(run_id=run_id), t.rows()
    try:
        if settings.min_top1_ratio is not None:
            reference_top1(t, cfgs)
        finalists = halving(t, screen(t, cfgs))
        final(t, finalists, default_config(cuda, settings.workload))
    except KeyboardInterrupt:
        t.out.interrupted = True
    store.finish_run(run_id, "interrupted" if t.out.interrupted else "complete")
    t.out.pareto = front(t.out.trials, t)
    return t.out
