"""Every scenario's :class:`~accelbench.core.columns.metric_map.MetricMap`, and the one lookup of a row's map.

The maps are gathered from the column areas (``METRIC_MAPS`` of each module of
:data:`accelbench.core.columns.registry.AREAS`): a scenario declares its map beside its columns and is found here
without another list. A row's map is the map of its ``workload``, a column every stored row carries (the store
requires it, ``accelbench import`` refuses a row without it), so a row's meaning never depends on which of its columns
are filled; a run's map is the map of its kind (``runs.kind``). Run kinds a study opens (scale, concurrent, tune) and
detail workloads (collectives, GPU pairs, Server probes) have none.
"""

from __future__ import annotations

from typing import Any

from accelbench.core.columns.metric_map import MetricMap
from accelbench.core.columns.registry import AREAS

MAPS: dict[str, MetricMap] = {}
_BY_WORKLOAD: dict[str, MetricMap] = {}
_BY_KIND: dict[str, MetricMap] = {}


def register(m: MetricMap) -> MetricMap:
    """Add a scenario's map.

    Raises:
        ValueError: a map of that name, or another map of one of its workloads or run kinds, is registered already.
    """
    if m.name in MAPS:
        raise ValueError(f"metric map {m.name} is declared twice")
    for key, table, what in [(w, _BY_WORKLOAD, "workload") for w in m.workloads] + [
        (k, _BY_KIND, "run kind") for k in m.kinds
    ]:
        if key in table:
            raise ValueError(f"{what} {key} has two metric maps: {table[key].name} and {m.name}")
        table[key] = m
    MAPS[m.name] = m
    return m


for _area in AREAS:
    for _m in getattr(_area, "METRIC_MAPS", ()):
        register(_m)


def named(name: str) -> MetricMap | None:
    """The map called ``name`` (:attr:`MetricMap.name`), or None."""
    return MAPS.get(name)


def for_workload(workload: str | None) -> MetricMap | None:
    """The map of the rows of ``workload`` (``inference``, ``train-ddp``, ``generate``...), or None (a detail row's)."""
    return _BY_WORKLOAD.get(workload) if isinstance(workload, str) else None


def of_row(rec: dict[str, Any]) -> MetricMap | None:
    """The map of a result row: its ``workload``'s (:func:`for_workload`)."""
    return for_workload(rec.get("workload"))


def for_kind(kind: str | None) -> MetricMap | None:
    """The map that lays out a run of ``kind`` (``runs.kind``), or None (a study's run, a multi-GPU run)."""
    return _BY_KIND.get(kind) if isinstance(kind, str) else None
