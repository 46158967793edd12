"""History across runs (``accelbench report --history``, as asv's history view): each matched case's figure in
every run, in time order, with its 95 % interval, and each step between consecutive runs judged as ``compare``
judges it. Pure apart from numpy/scipy (through :mod:`accelbench.core.compare`).

Per case (the match key of :func:`accelbench.core.compare.match_key`) and metric (those the case's scenario tracks,
:attr:`accelbench.core.columns.MetricMap.tracked`: its throughput, in the scenario's unit (images/s; a generate case's
decode tokens/s), and for a generate case its time per output token p50):

- **point**: the stored figure of the run's row, its interval the percentile interval of the two-level bootstrap of
  the row's windows (:func:`accelbench.core.ci.hierarchical_replicates`, the replicates ``compare`` draws for side
  A: seed :data:`accelbench.core.ci.SEED`); no interval without per-batch samples.
- **step**: the verdict of :func:`accelbench.core.compare.compare_case` with the previous run as A and this run as
  B, so a step is ``slower`` exactly when ``accelbench compare PREV THIS`` says so for that case.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from accelbench.core.ci import N_BOOT, SEED, hierarchical_replicates, percentile_interval
from accelbench.core.compare import MARGIN, MATCH_FIELDS, METRICS, case_label, compare_case, map_of, match_key
from accelbench.core.errors import AccelbenchError
from accelbench.core.rundata import Measured, RunData


@dataclass(frozen=True, kw_only=True, slots=True)
class Point:
    """One run's figure of a case: ``run_id``, ``label`` (``run 3 'nightly'``), ``created_at`` (s since the epoch),
    ``commit`` (the project's git commit, None when unknown), ``value`` (the stored figure, in the column's unit),
    ``ci_low``/``ci_high`` (95 %, None without windows), and ``verdict``/``ratio`` of the step from the previous
    point (None for the first)."""

    run_id: int
    label: str
    created_at: float
    commit: str | None
    value: float
    ci_low: float | None = None
    ci_high: float | None = None
    verdict: str | None = None
    ratio: float | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Series:
    """A case's metric over the runs: ``key`` (the match key as a dict), ``label`` (``cifar-resnet20 bs=2 fp32
    eager``), ``metric`` (compare's name), ``column`` (the row's column), ``title`` and the points in time order."""

    key: dict[str, Any]
    label: str
    metric: str
    column: str
    title: str
    points: list[Point] = field(default_factory=list)


def parse_filter(text: str) -> dict[str, str]:
    """``model=cifar-resnet20,batch_size=8`` as ``{"model": "cifar-resnet20", "batch_size": "8"}``.

    Raises:
        AccelbenchError: an entry without ``=`` or a field that is not a match field (one line, exit 2).
    """
    out = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        name, eq, value = part.partition("=")
        if not eq or name.strip() not in MATCH_FIELDS:
            raise AccelbenchError(
                f"invalid --case {text!r}: allowed field=value pairs, comma-separated, of the "
                f"fields {', '.join(MATCH_FIELDS)}"
            )
        out[name.strip()] = value.strip()
    return out


def matches(key: tuple, filters: Sequence[dict[str, str]]) -> bool:
    """The case key matches one of ``filters`` (every field of it, compared as text; no filter: every case)."""
    d = {f: "" if v is None else str(v) for f, v in key}
    return not filters or any(all(d.get(f) == v for f, v in flt.items()) for flt in filters)


def _metrics(rec: dict[str, Any]) -> list[tuple[str, str, str, str | None]]:
    """``(compare's metric, the replicate series of its interval, what a chart calls it, the row's column)`` of each
    metric the row's scenario tracks."""
    m = map_of(rec)
    reps = {x.name: x.rep for x in METRICS}
    titles = {"throughput": f"throughput ({m.throughput_unit})"}
    return [
        (name, reps[name] or name, titles.get(name, f"{m.label(name)} (ms)"), m.column(name))
        for name in m.tracked
        if m.column(name) is not None
    ]


def _point(run: RunData, m: Measured, metric: tuple, column: str, reps: dict | None) -> Point:
    low = high = None
    if reps is not None:
        low, high = percentile_interval(reps[metric[1]])
    return Point(
        run_id=int(run.run["run_id"]),
        label=run.label,
        created_at=float(run.run["created_at"]),
        commit=run.run["env"].get("git_commit"),
        value=float(m.record[column]),
        ci_low=low,
        ci_high=high,
    )


def history(
    runs: list[RunData], filters: Sequence[dict[str, str]] = (), *, margin: float = MARGIN, n_boot: int = N_BOOT
) -> list[Series]:
    """The series of every case of ``runs`` that matches ``filters`` (:func:`matches`), runs sorted by start time
    (then id); a run without the case leaves no point, and the next step is judged against the last point before.

    Returns:
        One :class:`Series` per case and metric, in the order the cases first appear.
    """
    ordered = sorted(runs, key=lambda r: (r.run["created_at"], r.run["run_id"]))
    series: dict[tuple, Series] = {}
    last: dict[tuple, Measured] = {}
    for run in ordered:
        seen: dict[tuple, Measured] = {}
        for m in run.cases:  # a key seen twice in a run keeps its first case, as compare does
            seen.setdefault(match_key(m.record), m)
        for key, m in seen.items():
            if not matches(key, list(filters)):
                continue
            reps = hierarchical_replicates(m.windows, n_boot=n_boot, seed=SEED) if m.windows else None
            step = compare_case(last[key], m, key, margin=margin, n_boot=n_boot) if key in last else None
            for metric in _metrics(m.record):
                column = metric[3]
                if m.record.get(column) is None:
                    continue
                s = series.setdefault(
                    (key, metric[0]),
                    Series(key=dict(key), label=case_label(key), metric=metric[0], column=column, title=metric[2]),
                )
                p = _point(run, m, metric, column, reps)
                if step is not None and metric[0] in step.metrics:
                    res = step.metrics[metric[0]]
                    p = dataclasses.replace(p, verdict=res.verdict, ratio=res.ratio)
                s.points.append(p)
            last[key] = m
    return list(series.values())
