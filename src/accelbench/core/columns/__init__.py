"""Every column a result row can carry, declared once.

A column (:class:`Column`) has its name (the unit in it), its type, its label and display format, the rule that
combines it over the ranks of a ``--gpus`` case and over the GPUs one process watches, and the scenarios that
fill it. The declarations live by pipeline area (``case``, ``measure``, ``telemetry``, ``derived``, ``train``,
``profile``, ``loadgen``, ``multi``) and :data:`COLUMNS` gathers them. Everything asks this table:

- the store's typed read (``Store.records``: :func:`typed`, missing is None, never NaN);
- the report's tables (labels and formats: ``accelbench.report.views``), the HTML report, the exports
  (:func:`exported`) and their JSON Schema (:func:`json_schema`, ``accelbench schema``);
- the aggregate row of a ``--gpus`` case and the telemetry of several GPUs (:func:`combine`).

To add a column: one ``col(...)`` line in the area module that fills it (``views=`` puts it in a report table).

What a scenario's numbers mean (its throughput, latency, sample, tables, report section) is its
:class:`MetricMap`, declared as ``METRIC_MAPS`` in the same area module (:mod:`accelbench.core.columns.metric_map`);
readers find a row's map with :func:`of_row` (by its workload) and a run's with :func:`for_kind`.
Pure: no torch, no pandas, no store.
"""

from accelbench.core.columns.column import (
    ANY,
    BOOL,
    FIRST,
    FLOAT,
    INT,
    JOIN,
    JSON,
    MAX,
    MEAN,
    MIN,
    RANK,
    RULES,
    STR,
    SUM,
    TYPES,
    Column,
    col,
    default_label,
    fold,
)
from accelbench.core.columns.maps import MAPS, for_kind, for_workload, named, of_row
from accelbench.core.columns.metric_map import MetricMap
from accelbench.core.columns.registry import COLUMNS, combine, declare, exported, get, in_view, rule, typed, typed_row
from accelbench.core.columns.schema import json_schema, schema_text

__all__ = [
    "MetricMap",
    "MAPS",
    "for_kind",
    "for_workload",
    "named",
    "of_row",
    "Column",
    "COLUMNS",
    "col",
    "declare",
    "get",
    "rule",
    "typed",
    "typed_row",
    "exported",
    "combine",
    "fold",
    "in_view",
    "json_schema",
    "schema_text",
    "default_label",
    "TYPES",
    "RULES",
    "INT",
    "FLOAT",
    "STR",
    "BOOL",
    "JSON",
    "SUM",
    "MEAN",
    "MAX",
    "MIN",
    "FIRST",
    "ANY",
    "JOIN",
    "RANK",
]
