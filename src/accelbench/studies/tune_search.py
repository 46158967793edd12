"""The search of ``accelbench tune``, as pure functions of the trials measured so far (no torch, no store).

- :class:`TuneSettings`: the objective, the constraints, the search space and the budget.
- :func:`score`: one figure per trial row, higher is better; :func:`violation`: why a row is not acceptable.
- :func:`next_batch`: batch size by bracketing (doubling) and then bisection up to the boundary (an ``oom``
  row, an ``error``, or a broken constraint), not a grid.
- :func:`dominated`: configurations worse than another at every batch size both tried (pruned).
- :func:`halve`: successive halving (Jamieson & Talwalkar 2016, "Non-stochastic Best Arm Identification and
  Hyperparameter Optimization", AISTATS): keep the best ``1/eta`` of the candidates for longer windows.
- :func:`pareto_front`: the trials no other beats on throughput, p99 latency and (when measured) energy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from accelbench.core.config import check_int, check_number, is_number
from accelbench.core.errors import OK, ConfigError

# objective -> (row column, higher is better); cost and energy fall back to throughput when not measured
OBJECTIVES: dict[str, tuple[str, bool]] = {
    "throughput": ("throughput_samples_per_s", True),
    "latency": ("latency_p50_ms", False),
    "cost": ("cost_per_1000_samples_usd", False),
    "energy": ("energy_per_sample_j", False),
}
# the compare metric (accelbench.core.compare.METRICS) that gives the final verdict of each objective
VERDICT_METRIC = {
    "throughput": "throughput",
    "latency": "latency_p50",
    "cost": "cost_per_1000",
    "energy": "energy_per_sample",
}
WORKLOADS = ("inference", "train")  # what a trial measures: an inference case or a training step (train_step)
# A training step's "latency" is its step time: train rows get these aliases (:func:`as_trial`), so the score,
# the constraints, the Pareto front and the final pooling read one set of column names.
STEP_TIME_ALIASES = {"latency_p50_ms": "step_time_p50_ms", "latency_p99_ms": "step_time_p99_ms"}
KERNEL_WORDS = {True: "fused", False: "foreach"}  # a train trial's optimizer kernels as labels show them
PLATEAU_GAIN = 0.02  # doubling stops once two doublings in a row gained less than this over the best
BISECT_TOLERANCE = 8  # bisection stops when the bracket is narrower than lo / this


@dataclass(frozen=True, kw_only=True, slots=True)
class TuneSettings:
    """What ``accelbench tune`` searches and how.

    Attributes:
        objective: ``throughput`` (samples/s, higher), ``latency`` (p50 ms, lower), ``cost`` (USD per 1,000
            samples, lower) or ``energy`` (J per sample, lower).
        budget_s: seconds of trials (each trial's ``case_wall_s``: model build, compilation, accuracy pass,
            warm-up and timing), > 0.
        max_latency_p99_ms, max_memory_bytes, min_top1_ratio: constraints (None: none). Memory is the CUDA
            peak (``peak_mem_bytes``), on a CPU the process RSS; top-1 is against the fp32 top-1 of the model.
        precisions, modes: the space (None: the device's defaults,
            :func:`accelbench.studies.tune_space.default_space`).
        batch_sizes: batch sizes to try (None: bracketing and bisection; ``latency``: batch 1).
        max_batch: the largest batch bracketing tries (None: 1024 on CUDA, 256 on a CPU).
        eta: successive halving's factor (keep 1/eta per rung), >= 2.
        screen_time_s: the shortest window (the first rung's ``min_time_s``); rung r times ``eta**r`` as long.
        final_rounds, final_repeats: the final candidates are measured in ``final_rounds`` interleaved rounds
            (A B C A B C ...) of ``final_repeats`` windows each.
        workload: ``inference`` (each trial an inference case) or ``train`` (a training step, ``accelbench
            train``'s ``train_step`` case: objective ``latency`` is the step time p50, no ``min_top1_ratio``).
        fused_optimizers: ``train``: the optimizer kernels searched (True fused, False ``foreach``, None the
            device's default; None: :func:`accelbench.studies.tune_space.default_fused`).
    """

    objective: str = "throughput"
    budget_s: float = 600.0
    max_latency_p99_ms: float | None = None
    max_memory_bytes: int | None = None
    min_top1_ratio: float | None = None
    precisions: tuple[str, ...] | None = None
    modes: tuple[str, ...] | None = None
    batch_sizes: tuple[int, ...] | None = None
    max_batch: int | None = None
    eta: int = 2
    screen_time_s: float = 0.3
    final_rounds: int = 2
    final_repeats: int = 3
    workload: str = "inference"
    fused_optimizers: tuple[bool | None, ...] | None = None

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise ConfigError("objective", self.objective, ", ".join(OBJECTIVES))
        if self.workload not in WORKLOADS:
            raise ConfigError("workload", self.workload, ", ".join(WORKLOADS))
        if self.workload == "train" and self.min_top1_ratio is not None:
            raise ConfigError(
                "min_top1_ratio",
                self.min_top1_ratio,
                "only with --workload inference (a training step measures no accuracy)",
            )
        if self.workload != "train" and self.fused_optimizers is not None:
            raise ConfigError("fused_optimizers", self.fused_optimizers, "only with --workload train")
        if not is_number(self.budget_s) or self.budget_s <= 0:
            raise ConfigError("budget_s", self.budget_s, "a number of seconds > 0")
        for name in ("max_latency_p99_ms", "min_top1_ratio"):
            v = getattr(self, name)
            if v is not None and (not is_number(v) or v <= 0):
                raise ConfigError(name, v, "a number > 0")
        if self.max_memory_bytes is not None:
            check_int("max_memory_bytes", self.max_memory_bytes, 1)
        if self.max_batch is not None:
            check_int("max_batch", self.max_batch, 1)
        check_int("eta", self.eta, 2)
        check_int("final_rounds", self.final_rounds, 1)
        check_int("final_repeats", self.final_repeats, 1)
        check_number("screen_time_s", self.screen_time_s)

    def to_dict(self) -> dict[str, Any]:
        """The settings as JSON values (tuples as lists)."""
        import dataclasses

        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}


def as_trial(row: dict[str, Any], workload: str) -> dict[str, Any]:
    """``row`` as the search reads it: a training step's step-time columns also as ``latency_*``
    (:data:`STEP_TIME_ALIASES`)."""
    if workload != "train":
        return row
    return {**row, **{k: row.get(v) for k, v in STEP_TIME_ALIASES.items()}}


def score(row: dict[str, Any], objective: str) -> float | None:
    """The row's figure for ``objective``, signed so that higher is better; None for a row that did not measure.
    Cost and energy fall back to throughput when the row has no such column (no price, no energy counter:
    with one price, cost per sample is price / throughput)."""
    if row.get("status") != OK or not row.get("throughput_samples_per_s"):
        return None
    column, higher = OBJECTIVES[objective]
    v = row.get(column)
    if v is None:
        if objective in ("cost", "energy"):
            return float(row["throughput_samples_per_s"])
        return None
    return float(v) if higher else -float(v)


def violation(row: dict[str, Any], settings: TuneSettings, top1_ref: float | None = None) -> str | None:
    """Why ``row`` is not an acceptable configuration (its status, a broken constraint), or None."""
    if row.get("status") != OK:
        return f"{row.get('status')}: {row.get('error') or ''}".rstrip(": ")
    for col, what in (("outputs_finite", "outputs"), ("loss_finite", "loss")):
        v = row.get(col)
        if v is not None and not v:
            return f"{what} not finite (NaN or inf): broken numerics"
    p99, bound = row.get("latency_p99_ms"), settings.max_latency_p99_ms
    if bound is not None and p99 is not None and p99 > bound:
        return f"latency p99 {p99:.3g} ms > {bound:g} ms"
    mem = row.get("peak_mem_bytes") or row.get("process_rss_bytes")
    if settings.max_memory_bytes is not None and mem is not None and mem > settings.max_memory_bytes:
        return f"memory {int(mem)} bytes > {settings.max_memory_bytes}"
    top1, ratio = row.get("top1"), settings.min_top1_ratio
    if ratio is not None and top1 is None and top1_ref and isinstance(row.get("accuracy_note"), str):
        return f"no top-1 to hold to --min-top1-ratio: {row['accuracy_note']}"
    if ratio is not None and top1 is not None and top1_ref:
        if top1 / top1_ref < ratio:
            return f"top-1 {top1:.4f} is {top1 / top1_ref:.3f} of fp32's {top1_ref:.4f} < {ratio:g}"
    return None


def next_batch(tried: dict[int, float | None], start: int, max_batch: int) -> int | None:
    """The next batch size to try for one configuration, or None when its search is done.

    Args:
        tried: ``{batch size: score}`` so far, None for a batch that failed or broke a constraint.
        start: the first batch size; max_batch: bracketing never goes above it.
    Doubling from ``start`` while nothing failed and the score still grows (it stops once two doublings in a row
    gained less than :data:`PLATEAU_GAIN` over the best); after a failure at ``hi`` above the largest good batch
    ``lo``, bisection while ``lo`` is the best batch and ``hi - lo > max(1, lo / BISECT_TOLERANCE)``. A failing
    first batch halves down to 1. When that upward search is done and the best batch is the smallest tried, halving
    downwards while the score grows (a compiled training step can peak below the batch an eager one peaks at, as
    ResNet-50's does on Hopper GPUs: docs/results.md, auto-tuning).
    """
    up = _next_up(tried, start, max_batch)
    if up is not None or not tried:
        return up
    good = sorted(b for b, s in tried.items() if s is not None)
    if good and max(good, key=lambda b: tried[b]) == good[0] and good[0] > 1 and good[0] // 2 not in tried:
        return good[0] // 2
    return None


def _next_up(tried: dict[int, float | None], start: int, max_batch: int) -> int | None:
    """:func:`next_batch`'s bracketing and bisection upwards from ``start``."""
    if not tried:
        return start
    good = sorted(b for b, s in tried.items() if s is not None)
    if not good:
        low = min(tried)
        return low // 2 if low > 1 else None
    lo = good[-1]
    above = [b for b, s in tried.items() if s is None and b > lo]
    best = max(good, key=lambda b: tried[b])
    if above:
        hi = min(above)
        if best == lo and hi - lo > max(1, lo // BISECT_TOLERANCE):
            mid = (lo + hi) // 2
            return mid if mid not in tried else None
        return None
    if 2 * lo > max_batch:
        return None
    if _flat_doublings(good, tried) >= 2:
        return None
    return 2 * lo if 2 * lo not in tried else None


def _flat_doublings(good: list[int], tried: dict[int, float | None]) -> int:
    """How many of the last good batch sizes in a row improved on the best before them by less than
    :data:`PLATEAU_GAIN` (scores may be negative: the margin is on their magnitude)."""
    run, best = 0, None
    for b in good:
        s = tried[b]
        run = 0 if best is None or s > best + abs(best) * PLATEAU_GAIN else run + 1
        best = s if best is None else max(best, s)
    return run


def best_batch(tried: dict[int, float | None]) -> int | None:
    """The batch size with the highest score, or None when none succeeded."""
    good = {b: s for b, s in tried.items() if s is not None}
    return max(good, key=lambda b: (good[b], -b)) if good else None


def dominated(scores: dict[Any, dict[int, float | None]], margin: float = 0.0) -> set:
    """Configurations beaten by another at every batch size both tried (``scores``: configuration ->
    ``{batch size: score or None}``), by more than ``margin`` (a fraction of the score's magnitude: short
    screening windows are noisy). A failed batch (None) loses to any score; ties do not dominate."""
    out = set()
    for a, sa in scores.items():
        for b, sb in scores.items():
            common = set(sa) & set(sb)
            if a == b or not common:
                continue
            if all(sb[k] is not None and (sa[k] is None or sb[k] > sa[k] + abs(sa[k]) * margin) for k in common):
                out.add(a)
                break
    return out


def halve(scores: dict[Any, float | None], eta: int, keep_min: int = 1) -> list:
    """The best ``ceil(n / eta)`` candidates (at least ``keep_min``), best first; failed ones (None) are dropped."""
    ranked = sorted((k for k, s in scores.items() if s is not None), key=lambda k: scores[k], reverse=True)
    return ranked[: max(keep_min, math.ceil(len(scores) / eta))]


def pareto_front(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows no other row beats on every figure: higher ``throughput_samples_per_s``, lower
    ``latency_p99_ms`` and, when every row has it, lower ``energy_per_sample_j``; by throughput, highest first."""
    use_energy = bool(rows) and all(r.get("energy_per_sample_j") is not None for r in rows)

    def figures(r):
        f = [r["throughput_samples_per_s"], -r["latency_p99_ms"]]
        return f + [-r["energy_per_sample_j"]] if use_energy else f

    def beats(x, y):
        fx, fy = figures(x), figures(y)
        return all(a >= b for a, b in zip(fx, fy)) and any(a > b for a, b in zip(fx, fy))

    front = [r for r in rows if not any(beats(o, r) for o in rows if o is not r)]
    return sorted(front, key=lambda r: -r["throughput_samples_per_s"])


def latest_front(rows: list[dict[str, Any]], acceptable) -> list[dict[str, Any]]:
    """:func:`pareto_front` of the rows ``acceptable(row)`` keeps that have a p99 latency, the latest row of each
    configuration (precision, mode, batch size, optimizer kernels): a later stage's longer windows replace a
    screening figure."""
    last = {}
    for r in rows:
        if acceptable(r) and r.get("latency_p99_ms") is not None:
            last[(r["precision"], r["mode"], r["batch_size"], r.get("fused_optimizer"))] = r
    return pareto_front(list(last.values()))


def explain_axes(workload: str) -> tuple[str, ...]:
    """The axes :func:`explain` compares: precision, mode, batch size; a ``train`` tune adds the optimizer kernels."""
    return ("precision", "mode", "batch_size") + (("fused_optimizer",) if workload == "train" else ())


def explain(
    rows: list[dict[str, Any]],
    winner: dict[str, Any],
    objective: str,
    axes: tuple[str, ...] = ("precision", "mode", "batch_size"),
) -> list[str]:
    """What got the winner there: per axis (precision, mode, batch size; a train tune adds ``fused_optimizer``),
    the winner's figure over the best trial that differs from it on that axis only, in the same stage (same
    window length). Lines such as ``mode compile-freeze vs compile: x1.17 (screen)``; none where no such pair was
    measured."""
    out = []
    for axis in axes:
        pairs = []
        for stage in dict.fromkeys(r.get("tune_stage") for r in rows):
            same = [r for r in rows if r.get("tune_stage") == stage and score(r, objective) is not None]
            mine = next((r for r in same if all(r.get(a) == winner.get(a) for a in axes)), None)
            others = [
                r
                for r in same
                if r.get(axis) != winner.get(axis) and all(r.get(a) == winner.get(a) for a in axes if a != axis)
            ]
            if mine is not None and others:
                best = max(others, key=lambda r: score(r, objective))
                pairs.append((stage, best, _ratio(mine, best, objective)))
        if pairs:
            stage, best, ratio = pairs[-1]  # the longest windows that have such a pair
            out.append(f"{axis} {winner[axis]} vs {best[axis]}: x{ratio:.3f} {OBJECTIVES[objective][0]} ({stage})")
    return out


def _ratio(a: dict[str, Any], b: dict[str, Any], objective: str) -> float:
    """``a`` over ``b`` on the objective's figure, > 1 when ``a`` is better. :func:`score` signs a lower-is-better
    figure negative, and gives throughput (positive) where the row has no cost or energy column: the sign, not the
    objective, says which way to divide."""
    sa, sb = score(a, objective), score(b, objective)
    return sa / sb if sa >= 0 else sb / sa
