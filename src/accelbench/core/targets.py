"""The cheapest case that meets a quality target against a reference: one search for every quality metric.

An image model's top-1 must stay at least 99 % of its fp32 reference (higher is better); a language model's
perplexity at most 1 % above its widest-float reference (lower is better). Both are the same question asked of a
model's rows: which reference, which rows meet ``ratio`` times it in the metric's direction, and which of those is
cheapest. The callers (:mod:`accelbench.quant.accuracy`, :mod:`accelbench.scenarios.generate.quality`) give the
metric, its direction and their reference rule; the targets themselves, and their sources, are theirs.

Pure: rows are plain dicts (typed store rows: missing is None).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

COST = "cost_per_1000_samples_usd"


def _always(_row: dict) -> bool:
    return True


@dataclass(frozen=True, kw_only=True, slots=True)
class Target:
    """A quality target against a reference.

    Attributes:
        metric: the column judged (``top1``, ``perplexity``).
        higher_is_better: the metric's direction: met is ``value >= ratio x ref`` when True, ``<=`` when False.
        ratio: the target as a multiple of the reference (0.99 for top-1, 1.01 for perplexity).
        reference: the reference rule: a model's rows -> ``(what the reference is, its metric value)``, or None when
            the model has no reference (then no claim is made for it).
        speed: the column ranked (highest first) where no candidate has a cost.
        include: which rows of a model take part at all (the reference, the candidates and the misses).
        candidate: which of them may be picked (timed, real numerics); the target alone is not enough.
        verdict: a column holding a row's own met/missed verdict, used before the rule where the row has it.
    """

    metric: str
    higher_is_better: bool
    ratio: float
    reference: Callable[[list[dict]], tuple[str, float] | None]
    speed: str
    include: Callable[[dict], bool] = field(default=_always)
    candidate: Callable[[dict], bool] = field(default=_always)
    verdict: str | None = None

    def met(self, row: dict, ref: float) -> bool:
        """Whether ``row`` meets the target against the reference value ``ref``."""
        own = row.get(self.verdict) if self.verdict else None
        if own is not None:
            return bool(own)
        value = row[self.metric]
        return value >= self.ratio * ref if self.higher_is_better else value <= self.ratio * ref


@dataclass(frozen=True, kw_only=True, slots=True)
class Cheapest:
    """One model's answer: its reference, the cheapest row meeting the target (None: none does), the column it was
    ranked by and its value there, and the precisions of the rows that miss the target (sorted)."""

    model: str
    reference: str
    reference_value: float
    best: dict | None
    by: str
    value: float | None
    missed: list[str]


def cheapest_meeting(records: Iterable[dict], target: Target) -> list[Cheapest]:
    """Per model (rows grouped by ``model``, in first-seen order), the cheapest row meeting ``target``.

    Cheapest: the lowest ``cost_per_1000_samples_usd`` among the candidates meeting the target that have one, else
    (no price) the highest ``target.speed``. Rows without the metric are left out; a model without a reference
    gives no answer.
    """
    by_model: dict[str, list[dict]] = {}
    for r in records:
        if r.get(target.metric) is not None and target.include(r):
            by_model.setdefault(str(r.get("model")), []).append(r)
    out = []
    for model, rows in by_model.items():
        found = target.reference(rows)
        if found is None:
            continue
        name, ref = found
        good = [r for r in rows if target.candidate(r) and target.met(r, ref)]
        costed = [r for r in good if r.get(COST) is not None]
        key = COST if costed else target.speed
        pool = costed or [r for r in good if r.get(key) is not None]
        best = (min(pool, key=lambda r: r[key]) if costed else max(pool, key=lambda r: r[key])) if pool else None
        out.append(
            Cheapest(
                model=model,
                reference=name,
                reference_value=ref,
                best=best,
                by=key,
                value=None if best is None else best[key],
                missed=sorted({str(r.get("precision")) for r in rows if not target.met(r, ref)}),
            )
        )
    return out
