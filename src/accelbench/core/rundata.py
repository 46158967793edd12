"""A stored run as ``accelbench compare`` and ``accelbench report`` read it: its provenance and its measured
cases, each with the timed windows it stored (:class:`accelbench.core.ci.Windows`).

Only the store's public API is used (``run``, ``records``, ``series``). A run measured with ``--repeats N``
(N >= 2) stored per-window series (``window_wall_s``, ``window_samples``) beside every batch latency; a run
measured with one window (or before ``--repeats`` existed) is read as one window: its ``timed_wall_s``,
``samples_timed`` and batch latencies. Which series holds a case's latencies, how its windows are read and which
column is its throughput is its scenario's :class:`~accelbench.core.columns.MetricMap` (found by the row's
``workload``, which every stored and every imported row carries), never guessed from the columns a row fills.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Protocol

from accelbench.core.ci import Windows
from accelbench.core.columns import MetricMap, of_row
from accelbench.core.columns.metric_map import GENERATIONS
from accelbench.core.errors import OK

DETAIL_ROW_TYPES = ("epoch", "server-probe")  # rows beside a case's own: an epoch, a Server search probe


class RunStore(Protocol):
    """The part of the store a run is read through (:class:`accelbench.store.Store` is one)."""

    def run(self, run_id: int | None = None) -> dict[str, Any]: ...

    def records(self, run_id: int | None = None, workload: str | None = None) -> list[dict[str, Any]]: ...

    def series(self, case_id: int, name: str) -> list[float]: ...


def is_detail(r: dict) -> bool:
    """A rank row of a multi-process case (``aggregate`` 0) or a detail row (``row_type`` in
    :data:`DETAIL_ROW_TYPES`): not one of a run's cases."""
    return r.get("aggregate") == 0 or r.get("row_type") in DETAIL_ROW_TYPES


@dataclass(frozen=True, kw_only=True, slots=True)
class Measured:
    """One measured case: its typed row (missing values None) and its windows (None: no per-batch series stored);
    a generate case also its time to first token a window (``ttft_ms``, ms; None otherwise)."""

    record: dict[str, Any]
    windows: Windows | None
    ttft_ms: tuple[float, ...] | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class RunData:
    """A run: ``run`` (the store's run dict: ``run_id``, ``kind``, ``spec``, ``env``...), ``label`` (how the
    user named it) and its measured cases (rows with a throughput: not epochs, ranks or profiles)."""

    run: dict[str, Any]
    label: str
    cases: list[Measured] = field(default_factory=list)


def _generation_windows(store: RunStore, rec: dict[str, Any], itl: list[float]) -> Windows | None:
    """A generate case's windows: one a timed generation, its decode steps (wall: the sum of its inter-token
    latencies; samples: batch x decode steps), so a window's throughput is its decode tokens/s."""
    means = store.series(rec["case_id"], "tpot_window_ms")
    if not means or len(itl) % len(means):
        return None
    steps = len(itl) // len(means)
    try:
        return Windows.split([m * steps / 1e3 for m in means], [rec["batch_size"] * steps] * len(means), itl)
    except ValueError:
        return None


def windows_of(store: RunStore, rec: dict[str, Any]) -> Windows | None:
    """The stored windows of one case row, or None without per-batch latencies (or a scenario that stores none:
    its :class:`~accelbench.core.columns.MetricMap` names the series and how windows are read)."""
    m = of_row(rec)
    if m is None or m.latency_series is None:
        return None
    lat = store.series(rec["case_id"], m.latency_series)
    if not lat:
        return None
    if m.windows == GENERATIONS:
        return _generation_windows(store, rec, lat)
    if (rec.get("windows") or 1) >= 2:
        walls, samples = store.series(rec["case_id"], "window_wall_s"), store.series(rec["case_id"], "window_samples")
        try:
            return Windows.split(walls, samples, lat)
        except ValueError:
            return None
    wall, n = rec.get("timed_wall_s"), rec.get("samples_timed")
    if not wall or not n:
        return None
    return Windows.split([wall], [n], lat)


def measured(rec: dict[str, Any], m: MetricMap | None = None) -> bool:
    """A row ``compare`` can use: ``ok``, with its scenario's throughput (``m``: the row's map, default
    :func:`accelbench.core.columns.of_row`), not a detail row (a rank of a multi-GPU case, an epoch, a Server search
    probe)."""
    m = m or of_row(rec)
    return (
        rec.get("status") == OK
        and m is not None
        and m.throughput is not None
        and rec.get(m.throughput) is not None
        and not is_detail(rec)
    )


def load_run(store: RunStore, run_id: int, label: str | None = None) -> RunData:
    """Run ``run_id`` of ``store`` with its measured cases and their windows.

    Raises:
        KeyError: no such run.
    """
    run = store.run(run_id)
    rows = store.records(run_id)
    cases = [
        Measured(
            record=r,
            windows=windows_of(store, r),
            ttft_ms=tuple(store.series(r["case_id"], "ttft_ms")) or None if "ttft_p50" in of_row(r).extra else None,
        )
        for r in rows
        if measured(r)
    ]
    return RunData(run=run, label=label or f"run {run_id}", cases=cases)


_REF = re.compile(r"^(?:(?P<path>.+):)?(?P<run>\d+)$")


def parse_ref(ref: str) -> tuple[str | None, int]:
    """``"12"`` -> ``(None, 12)`` (a run in ``--db``); ``"other.db:3"`` -> ``("other.db", 3)``.

    Raises:
        ValueError: neither form.
    """
    m = _REF.match(ref.strip())
    if not m:
        raise ValueError(f"invalid run {ref!r}: give a run id (12) or a store and a run id (other.db:12)")
    return m.group("path"), int(m.group("run"))
