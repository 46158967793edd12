"""The budget of ``accelbench tune`` (:mod:`accelbench.studies.tune`): what a trial will cost, predicted from the
trials measured so far; the clock; the probe that refuses a budget too small for one trial; the deadline that
stops a trial running past what is left.

What the budget counts (``spent_s``): the wall time from the start of the tune (the command has imported torch
and opened the store) to its verdict: the probe, decoding the images, every trial (model build, compilation, the
accuracy pass, warm-up, the timed windows and the loop's own work) and the final pooling; on ``--resume`` the
trials read back count what they cost when they ran (``tune_trial_s``).

How it is kept:

- a trial starts only when its predicted cost (:meth:`CostModel.predict`) fits with what the later stages need
  at least (``Tuner.reserve``: one final round of the leading candidates, and during the screening the first
  halving rung); the final rounds are as many as fit (:func:`fit_final`); the first trial of a tune runs once
  the budget was found enough for it before the run opened (``tune_stages.check_budget``);
- every trial runs under a deadline (:func:`deadline`), the end of the budget (a search trial's leaves the
  leader's final trial): one that runs past it (a cost nothing measured predicted, a first compile slower than
  :data:`COMPILE_PRIOR_S`) is stopped and stored ``skipped``, its compile workers stopped too; the rest of the
  promised +10 % is for stopping it (the guard's cleanup: seconds) and the wrap-up.

The trials run through :class:`TrialLauncher` (the tune's launcher), which stores the stopped ones.

The cost model: a trial's wall time = fixed (model build, compilation, accuracy pass, the loop's work) + the
warm-up and timed steps x the seconds per step at its batch size. Each measured trial sets its configuration's
fixed cost (the latest: a later compile reads Inductor's on-disk cache) and its seconds per step at that batch; a
batch not measured scales the nearest measured one in proportion to its samples above it (a step of a CPU grows
about linearly with the batch, a GPU's less), and takes the nearest smaller one's time below it. A configuration
never measured takes the fixed cost of its mode in another precision, or else the largest fixed cost measured
(the probe's build before any) plus :data:`COMPILE_PRIOR_S` for a compiling backend, and the slowest step time
measured at that batch (the probe's forward, scaled, before any).
"""

from __future__ import annotations

import math
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from accelbench.core.errors import SKIPPED
from accelbench.launchers.inline import Inline

# A compiling backend's first build before any trial measured one (s): the order of a cold compile of ResNet-50 on a
# GPU or of cifar-resnet20 on a small CPU (docs/results.md, training). The first trial of that backend replaces it;
# a compile slower than this is stopped by the deadline, not trusted to this guess.
COMPILE_PRIOR_S = 30.0
# A search trial stops early enough to leave the leader's final trial this much more than its prediction: a
# trial stopped by its deadline still spends a cleanup and a stored row, and predictions err both ways.
FINAL_MARGIN = 1.25
# A training step's time over the forward the probe times: forward + backward (about twice the forward's FLOPs,
# Kaplan et al. 2020, "Scaling Laws for Neural Language Models", section 2.1) + the optimizer step.
TRAIN_STEP_FACTOR = 3.0
LOOP_OVERHEAD_S = 0.3  # the loop's own work per trial (environment, cleanup, store) on a small CPU


class BudgetCut(BaseException):
    """Raised in the main thread when a trial runs past its deadline. A BaseException: the loop turns every
    Exception inside a case into an ``error`` row, and this one must reach the tune."""


@contextmanager
def deadline(seconds: float | None) -> Iterator[None]:
    """Raise :class:`BudgetCut` in the block once ``seconds`` have passed (SIGALRM; None, a thread other than the
    main one, or a platform without ``setitimer``: no deadline)."""
    from accelbench.core.signals import handlers

    if seconds is None or threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def cut(signum, frame):
        raise BudgetCut

    with handlers(cut, (signal.SIGALRM,)):
        signal.setitimer(signal.ITIMER_REAL, max(seconds, 1e-3))
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)


STOPPED = "stopped at the tune's budget"  # the error of a trial the deadline stopped


class TrialLauncher(Inline):
    """The inline launcher of the trials: stores a case under ``<key>|trial=<stage>`` with the tune columns, decodes
    the images once for every trial, and stops a trial at ``deadline_at`` (:func:`deadline`): a
    ``skipped`` row that says so."""

    def __init__(self):
        self.stage, self.window_s, self._inputs = "", 0.0, None
        self.t0, self.deadline_at = 0.0, None  # perf_counter seconds: the trial's start (loop.run), its deadline

    def key(self, case) -> str:
        return f"{case.key}|trial={self.stage}"

    def prepare(self, scenario, spec, device, store):
        if self._inputs is None:
            self._inputs = scenario.prepare(spec, device, store)
        return self._inputs

    def execute(self, sweep, cases: list, state) -> None:
        from accelbench.core.rank import Rank
        from accelbench.launchers.case import run_case
        from accelbench.launchers.inline import RowSink

        rank, sink = Rank(sweep.device), RowSink(sweep)
        for case in cases:
            sweep.started(case)
            start = time.perf_counter()
            try:
                with deadline(None if self.deadline_at is None else self.deadline_at - start):
                    rec, series = run_case(sweep.scenario, case, sweep.spec, state, rank, sink)
            except BudgetCut:  # the loop's guard cleaned the device up on the way out
                stop_compile_workers()
                took = time.perf_counter() - start
                rec, series = sweep.skipped(case, f"{STOPPED} after {took:.1f} s of this trial"), {}
                rec["case_wall_s"] = took
            rec.update(tune_stage=self.stage, tune_window_s=self.window_s, tune_trial_s=time.perf_counter() - self.t0)
            sweep.finished(case, rec, series)


def stop_compile_workers() -> None:
    """Kill Inductor's compile-worker processes after a trial stopped mid-compile: its compiles would run on,
    slowing the next trials, and the process's exit waits for them (tens of seconds on a small CPU). Inductor starts
    new workers at its next compile. Its pools are private API: anything unexpected there is left alone."""
    import sys

    mod = sys.modules.get("torch._inductor.async_compile")
    if mod is None:
        return
    try:
        for pool in list(getattr(mod, "_pool_set", ())):
            proc = getattr(pool, "process", None)
            if proc is not None and proc.poll() is None:
                proc.kill()
        mod.shutdown_compile_workers()
    except Exception:  # a torch without these internals: the workers finish on their own
        pass


def stopped(row: dict[str, Any]) -> bool:
    """The trial was stopped at the budget (stored ``skipped``): not measured, so neither slower nor faster."""
    return row.get("status") == SKIPPED and str(row.get("error") or "").startswith(STOPPED)


def trial_seconds(row: dict[str, Any]) -> float:
    """A stored trial's whole wall time (``tune_trial_s``; ``case_wall_s`` for trials stored before it existed)."""
    v = row.get("tune_trial_s")
    return float(v if v is not None else row.get("case_wall_s") or 0.0)


@dataclass
class Clock:
    """Seconds spent of the budget: ``prior_s`` (trials read back) plus the wall time since ``t0``."""

    budget_s: float
    prior_s: float = 0.0
    t0: float = field(default_factory=time.perf_counter)

    def spent(self) -> float:
        return self.prior_s + time.perf_counter() - self.t0

    def left(self) -> float:
        return self.budget_s - self.spent()


@dataclass(frozen=True, slots=True)
class Probe:
    """What the probe measured: ``setup_s`` (the model built, its first forward) and ``step_s`` (one forward at
    batch 1 after the first, eager fp32; x :data:`TRAIN_STEP_FACTOR` for a training step)."""

    setup_s: float
    step_s: float


@dataclass
class CostModel:
    """Predicted seconds of a trial (module docstring), from the trials measured so far.

    Attributes:
        warmup, min_steps: the spec's ``warmup_batches`` and ``min_timed_batches``.
        images: images a pass holds; whole_passes: timed windows are whole passes (a training step).
        probe: the probe's figures (None: not probed).
    """

    warmup: int
    min_steps: int
    images: int
    whole_passes: bool = False
    probe: Probe | None = None
    fixed: dict[tuple, float] = field(default_factory=dict)
    steps: dict[tuple, dict[int, float]] = field(default_factory=dict)

    def observe(self, cfg: tuple, batch: int, row: dict[str, Any], trial_s: float) -> None:
        """Learn from one finished trial of ``cfg`` at ``batch`` that took ``trial_s`` seconds in all."""
        timed = row.get("timed_wall_s")
        n = row.get("batches_timed") or row.get("steps_timed")
        step = timed / n if timed and n else None
        warm = self.warmup * step if step else 0.0
        self.fixed[cfg] = max(0.0, trial_s - (timed or 0.0) - warm)
        if step:
            self.steps.setdefault(cfg, {})[batch] = step

    def step_s(self, cfg: tuple, batch: int) -> float:
        """Seconds per step of ``cfg`` at ``batch`` (module docstring); 0 when nothing measured any."""
        known = self.steps.get(cfg) or {}
        if not known:
            at = [_scaled(v, batch) for v in self.steps.values() if v]
            if at:
                return max(at)
            return self.probe.step_s * batch if self.probe else 0.0
        return _scaled(known, batch)

    def fixed_s(self, cfg: tuple) -> float:
        """The fixed seconds of a trial of ``cfg`` (module docstring)."""
        if cfg in self.fixed:
            return self.fixed[cfg]
        same_mode = [v for c, v in self.fixed.items() if c[1] == cfg[1]]
        if same_mode:
            return max(same_mode)
        base = max(self.fixed.values(), default=(self.probe.setup_s + LOOP_OVERHEAD_S) if self.probe else 0.0)
        from accelbench import backends

        return base + (COMPILE_PRIOR_S if backends.get(cfg[1]).compiles else 0.0)  # a backend that builds nothing: 0

    def predict(self, cfg: tuple, batch: int, window_s: float, repeats: int, labelled: bool = True) -> float:
        """Seconds a trial of ``cfg`` at ``batch`` with ``repeats`` windows of ``window_s`` will take.

        Args:
            labelled: before any trial: count an accuracy pass over every image (the conservative guess).
        """
        step = self.step_s(cfg, batch)
        fixed = self.fixed_s(cfg)
        if not self.fixed and labelled:  # nothing measured: the accuracy pass is not in a fixed cost yet
            fixed += math.ceil(self.images / batch) * step
        n_min = max(self.min_steps, math.ceil(self.images / batch) if self.whole_passes else 1)
        window = max(window_s, n_min * step)
        return fixed + self.warmup * step + repeats * window


def _scaled(known: dict[int, float], batch: int) -> float:
    """Seconds per step at ``batch`` from ``{batch: seconds}``: the measured one, the nearest smaller one scaled by
    the samples above it, or the nearest larger one's (an upper bound)."""
    if batch in known:
        return known[batch]
    below = [b for b in known if b < batch]
    if below:
        b = max(below)
        return known[b] * batch / b
    return known[min(known)]


def fit_final(cands: list, cost: Callable[[Any], float], left_s: float, rounds: int) -> tuple[list, int]:
    """The final candidates and rounds that fit ``left_s`` seconds: every candidate with as many rounds (up to
    ``rounds``) as fit, else without the last candidate (the default configuration, then the runner-up), ...;
    ``([], 0)`` when not even one trial of the leader fits. ``cost(candidate)``: predicted seconds of one trial."""
    for n in range(len(cands), 0, -1):
        per_round = sum(cost(c) for c in cands[:n])
        fit = min(rounds, int(left_s // per_round)) if per_round > 0 else rounds
        if fit >= 1:
            return cands[:n], fit
    return [], 0


def probe(model: str, image_size: int | None, device, train: bool, inputs, settings) -> Probe:
    """Build ``model`` on ``device``, make its inputs from the decoded images as a trial does (which also imports
    what every trial imports: torchvision's transforms), and time one forward at batch 1 after a first one.

    Args:
        inputs: the sweep's :class:`accelbench.data.batches.Inputs`; settings: the scenario's (label space,
            normalisation, resize: :func:`accelbench.data.evaluation.eval_inputs`).
    Raises:
        whatever building or running the model raises (the caller goes on without a probe).
    """
    import torch

    from accelbench.core.timing import sync
    from accelbench.data.evaluation import eval_inputs
    from accelbench.models import create_model

    t0 = time.perf_counter()
    loaded = create_model(model)
    module = loaded.module.to(device)
    build_s = time.perf_counter() - t0
    x = eval_inputs(loaded.info, settings, inputs, image_size or loaded.info.image_size).x_all[:1].to(device)
    with torch.no_grad():
        t0 = time.perf_counter()
        module(x)
        sync(device)
        t1 = time.perf_counter()
        module(x)
        sync(device)
    step = time.perf_counter() - t1
    return Probe(setup_s=build_s + t1 - t0, step_s=step * (TRAIN_STEP_FACTOR if train else 1.0))
